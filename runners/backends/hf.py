"""Selector backend for any image-text-to-text model through transformers.

Loads `AutoProcessor` and `AutoModelForImageTextToText` (model id or local
directory, optional revision), on the auto-selected device (cuda, mps, cpu) in
bfloat16 where the device supports it. Each request becomes one user turn of
the model's chat template with text and images interleaved: the instruction,
then "Image A:" <image>, "Image B:" <image>, …, then the closing text. Images
are shrunk to fit a `max_edge` bounding box (aspect kept) before the
processor sees them. Idefics3-style processors (SmolVLM, SmolVLM2) run with
image splitting off, so each image is encoded once at the model's native
size. Decoding is greedy with at most `max_new_tokens` new tokens.

`generate_batch` answers several requests with one generate(): each request's
turn is rendered as above (any number of images each), the token sequences
are padded on the left (so every reply starts at the same position and the
attention mask hides the padding), and each row is cut at its first
end-of-sequence token. Greedy replies are the same as one request at a time
(tests/runners/backends/test_hf_batching.py checks it on tiny Qwen3-VL and SmolVLM2 models in
float32 on CPU; bfloat16 kernels on a GPU are not guaranteed to be batch
invariant, so `benchmarks.bench_inference` counts the replies that differ).

Label probabilities (`reply_batch`, which the engines prefer): for a selector
request, a logits processor that returns the scores unchanged (so greedy replies
are the same) keeps, at every step, the softmax over the whole vocabulary of the
scores greedy decoding chooses from (the model's logits after its own processors,
e.g. a repetition penalty; none by default), restricted to the label tokens. A
label's tokens are its spellings (`runners.backends.base.LABEL_SPELLINGS`: the
label alone, after a space, after a quote, after both) that the tokenizer encodes
as one token; their probabilities add. Every generated token that is a label token of
an offered label becomes a `LabelStep` with the probabilities of the offered
labels at that step, which therefore sum to at most 1; the recorder keeps the
step where the parsed choice was generated.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import AutoModelForImageTextToText, AutoProcessor, LogitsProcessor, LogitsProcessorList

from runners.backends.base import LabelStep, Reply, label_spellings
from runners.backends.images import load_fitted
from runners.backends.torch_device import preferred_dtype, resolve_device
from runners.selection.protocol import JudgeRequest

FINGERPRINT_BYTES = 1 << 20  # leading bytes of each weight file hashed for a local model's fingerprint


class LabelTokenProbabilities(LogitsProcessor):
    """Returns the scores unchanged; keeps each step's softmax probabilities of `token_ids` (on the CPU)."""

    def __init__(self, token_ids: list[int]) -> None:
        self.token_ids = token_ids
        self.steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self.steps.append(torch.softmax(scores.float(), dim=-1)[:, self.token_ids].cpu())
        return scores


class HFSelector:
    """One transformers model shared by the recorder's threads (generate() calls run one at a time)."""

    def __init__(
        self,
        model: str,
        *,
        revision: str | None = None,
        max_new_tokens: int = 64,
        max_edge: int | None = 448,
        device: str = "auto",
    ) -> None:
        self.source = model
        self.revision = revision
        self.max_new_tokens = max_new_tokens
        self.max_edge = max_edge
        self.device = resolve_device(device)
        self.dtype = preferred_dtype(self.device)
        self.processor = AutoProcessor.from_pretrained(model, revision=revision)
        self.model = AutoModelForImageTextToText.from_pretrained(model, revision=revision, dtype=self.dtype)
        self.model.to(self.device).eval()
        self.processor_kwargs: dict[str, object] = {}
        if hasattr(self.processor.image_processor, "do_image_splitting"):
            self.processor_kwargs["do_image_splitting"] = False
        self.processor.tokenizer.padding_side = "left"
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        self._lock = threading.Lock()
        self._label_tokens: dict[str, dict[int, str]] = {}

    def model_revision(self) -> str | None:
        """Hub commit hash when loaded from the hub; a content fingerprint for a local directory."""
        commit = getattr(self.model.config, "_commit_hash", None)
        if commit:
            return commit
        folder = Path(self.source)
        if not folder.is_dir():
            return self.revision
        digest = hashlib.sha256()
        for path in sorted(folder.iterdir()):
            if path.suffix == ".json":
                digest.update(path.name.encode() + path.read_bytes())
            elif path.suffix in (".safetensors", ".bin"):
                with open(path, "rb") as handle:
                    digest.update(path.name.encode() + str(path.stat().st_size).encode() + handle.read(FINGERPRINT_BYTES))
        return f"local fingerprint sha256:{digest.hexdigest()}"

    def messages(self, request: JudgeRequest) -> list[dict]:
        """The chat turn for `request`: text and image placeholders interleaved."""
        content = [
            {"type": "text", "text": value} if kind == "text" else {"type": "image"}
            for kind, value in request.segments()
        ]
        return [{"role": "user", "content": content}]

    def inputs(self, request: JudgeRequest) -> dict:
        """Processor output (tensors on the model's device) for `request`."""
        return self.batch_inputs([request])

    def batch_inputs(self, requests: Sequence[JudgeRequest]) -> dict:
        """Processor output for several requests, one row each, padded on the left."""
        images = [[load_fitted(path, self.max_edge) for path in r.image_paths] for r in requests]
        texts = [self.processor.apply_chat_template(self.messages(r), add_generation_prompt=True, tokenize=False)
                 for r in requests]
        inputs = self.processor(text=texts, images=images, return_tensors="pt", padding=True,
                                **self.processor_kwargs)
        inputs = inputs.to(self.device)
        if "pixel_values" in inputs:
            inputs["pixel_values"] = inputs["pixel_values"].to(self.dtype)
        return inputs

    def label_tokens(self, labels: Sequence[str]) -> dict[int, str]:
        """Token id -> label, for every spelling of each label (`base.label_spellings`) that is one token."""
        key = "\x1f".join(labels)
        if key not in self._label_tokens:
            tokens: dict[int, str] = {}
            for label in labels:
                for spelling in label_spellings(label):
                    ids = self.processor.tokenizer.encode(spelling, add_special_tokens=False)
                    if len(ids) == 1:
                        tokens.setdefault(ids[0], label)
            self._label_tokens[key] = tokens
        return self._label_tokens[key]

    def generate(self, request: JudgeRequest) -> str:
        """Greedy decoding of the reply; only the new tokens are returned, special tokens dropped."""
        return self.reply_batch([request])[0].text

    def generate_batch(self, requests: Sequence[JudgeRequest]) -> list[str]:
        """Greedy replies to `requests` from one generate() (see the module docstring), in their order."""
        return [reply.text for reply in self.reply_batch(requests)]

    def reply(self, request: JudgeRequest) -> Reply:
        """`reply_batch` of one request."""
        return self.reply_batch([request])[0]

    @torch.inference_mode()
    def reply_batch(self, requests: Sequence[JudgeRequest]) -> list[Reply]:
        """Greedy replies to `requests` from one generate(), each with its label steps when it is a selector
        request (see the module docstring), in their order."""
        inputs = self.batch_inputs(requests)
        offered = [r.labels if isinstance(r, JudgeRequest) else () for r in requests]
        tokens = self.label_tokens(sorted({label for labels in offered for label in labels}))
        watch = LabelTokenProbabilities(list(tokens))
        extra = {"logits_processor": LogitsProcessorList([watch])} if tokens else {}
        with self._lock:
            output = self.model.generate(**inputs, do_sample=False, max_new_tokens=self.max_new_tokens, **extra)
        token_label = list(tokens.values())
        replies = []
        for b, row in enumerate(output[:, inputs["input_ids"].shape[1] :].tolist()):
            end = next((i + 1 for i, token in enumerate(row) if token in self.eos_ids), len(row))
            text = self.processor.decode(row[:end], skip_special_tokens=True)
            if not offered[b]:
                replies.append(Reply(text))
                continue
            steps = []
            for t, token in enumerate(row[:end]):
                if tokens.get(token) in offered[b]:
                    probs = dict.fromkeys(offered[b], 0.0)
                    for label, p in zip(token_label, watch.steps[t][b].tolist()):
                        if label in probs:
                            probs[label] += p
                    steps.append(LabelStep(tokens[token], probs))
            replies.append(Reply(text, tuple(steps)))
        return replies
