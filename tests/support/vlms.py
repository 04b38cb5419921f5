"""Tiny randomly initialised Qwen3-VL and SmolVLM2 models, built from configs (no downloads).

Each builder makes a byte-level tokenizer with the `tokenizers` library, the
image/video processors from their classes with small sizes, a minimal chat
template and a 1-layer model (seeded), and saves them to a directory that the
hf backend loads by path. Their output is junk text. Used by the hf tests and
by `benchmarks.bench_inference` (`--model tiny-qwen3-vl`, `tiny-smolvlm`).
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                 "<|image_pad|>", "<|video_pad|>"]
QWEN_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% for item in message['content'] %}{% if item['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% else %}{{ item['text'] }}\n{% endif %}{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SMOL_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<end_of_utterance>", "<fake_token_around_image>", "<image>",
                 "<global-img>", "<video>"]
SMOL_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{ message['role'] | capitalize }}:"
    "{% for item in message['content'] %}{% if item['type'] == 'image' %}<image>{% else %}{{ item['text'] }}\n"
    "{% endif %}{% endfor %}<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}Assistant:{% endif %}"
)


def byte_tokenizer(specials, **kwargs):
    """Byte-level BPE with no merges: 256 byte tokens plus the model's special tokens."""
    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(specials)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, **kwargs)


def build_qwen3_vl(out: Path) -> Path:
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration, Qwen3VLProcessor
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    tokenizer = byte_tokenizer(QWEN_SPECIALS, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in QWEN_SPECIALS}
    processor = Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessor(patch_size=16, merge_size=2, temporal_patch_size=2,
                                              size={"shortest_edge": 32 * 32, "longest_edge": 64 * 64}),
        tokenizer=tokenizer,
        video_processor=Qwen3VLVideoProcessor(patch_size=16, merge_size=2, temporal_patch_size=2),
        chat_template=QWEN_TEMPLATE,
    )
    config = Qwen3VLConfig(
        text_config=dict(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=4096,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                          "mrope_section": [4, 2, 2], "mrope_interleaved": True}),
        vision_config=dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=32,
                           patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=64,
                           deepstack_visual_indexes=[0]),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
    )
    torch.manual_seed(0)
    model = Qwen3VLForConditionalGeneration(config)
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def build_smolvlm(out: Path) -> Path:
    from transformers import SmolVLMConfig, SmolVLMForConditionalGeneration, SmolVLMProcessor
    from transformers.models.smolvlm.image_processing_smolvlm import SmolVLMImageProcessor
    from transformers.models.smolvlm.video_processing_smolvlm import SmolVLMVideoProcessor

    tokenizer = byte_tokenizer(SMOL_SPECIALS, eos_token="<end_of_utterance>", pad_token="<|endoftext|>")
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SMOL_SPECIALS}
    sizes = {"size": {"longest_edge": 128}, "max_image_size": {"longest_edge": 64}}
    processor = SmolVLMProcessor(
        image_processor=SmolVLMImageProcessor(**sizes),
        tokenizer=tokenizer,
        video_processor=SmolVLMVideoProcessor(**sizes),
        image_seq_len=4,  # (64 / 16)^2 patches / scale_factor^2
        chat_template=SMOL_TEMPLATE,
    )
    config = SmolVLMConfig(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_size=64, patch_size=16),
        text_config=dict(model_type="llama", vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                         max_position_embeddings=4096),
        scale_factor=2, image_token_id=ids["<image>"], pad_token_id=ids["<|endoftext|>"],
    )
    torch.manual_seed(0)
    model = SmolVLMForConditionalGeneration(config)
    model.generation_config.eos_token_id = ids["<end_of_utterance>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


BUILDERS = {"tiny-qwen3-vl": build_qwen3_vl, "tiny-smolvlm": build_smolvlm}
