"""Judge backends: a prompt and images in, text (or a score) out; nothing recorded here.

`simulated*` (deterministic judges, raters and labelers from versioned profiles), `hf`
(transformers), `openai_compat` (any OpenAI-compatible endpoint), `clip` (open_clip scorer);
`base` holds the protocols a backend fulfils. torch and transformers are imported only here.
"""
