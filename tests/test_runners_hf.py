"""The transformers backend end to end with tiny randomly initialised Qwen3-VL and SmolVLM models.

Everything is built here from configs: a byte-level tokenizer made with the
`tokenizers` library, the image/video processors from their classes with small
sizes, a minimal chat template, and 1-layer models. They are saved to a temp
directory and loaded back through the real backend by path: no downloads.
Their output is junk, so every call must be a parse failure with its raw text kept.
"""

from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from audit_core import store
from fixtures_pools import write_tiny_dataset
from runners import recorder, run_judge
from runners.backends.hf import HFSelector

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


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_vlms")
    return {"qwen3_vl": build_qwen3_vl(root / "qwen3_vl"), "smolvlm": build_smolvlm(root / "smolvlm")}


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "hf.duckdb"
    write_tiny_dataset(path, tmp_path / "images", n_prompts=2, pool_sizes=(3, 4))
    return path


@pytest.mark.parametrize("kind", ["qwen3_vl", "smolvlm"])
def test_tiny_model_end_to_end_records_parse_failures(kind, tiny_models, db):
    code = run_judge.main([
        "--db", str(db), "--dataset", "tiny", "--judge", kind, "--backend", "hf",
        "--model", str(tiny_models[kind]), "--orders", "2", "--max-new-tokens", "6", "--max-edge", "64",
        "--device", "cpu", "--quiet",
    ])
    assert code == 0
    con = store.connect(db)
    calls = store.load_calls(con, "tiny")
    run = con.execute("SELECT backend, model, model_revision, status FROM runs").fetchone()
    assert len(calls) == 4 and not calls.duplicated(["prompt_id", "order_index"]).any()
    assert set(calls["status"]) == {"parse_fail"}
    assert calls["raw_output"].map(lambda t: isinstance(t, str)).all()
    assert calls["chosen_candidate_id"].isna().all() and set(calls["attempts"]) == {1}
    assert run[0] == "hf" and run[1] == str(tiny_models[kind]) and run[3] == "finished"
    assert run[2].startswith("local fingerprint sha256:")


def test_prompt_interleaves_labels_and_images_without_splitting(tiny_models, db):
    con = store.connect(db)
    request = recorder.plan_requests(con, dataset="tiny", judge="j", orders=1, contract="ranking", limit=1)[0][0]
    con.close()
    smol = HFSelector(str(tiny_models["smolvlm"]), max_new_tokens=4, max_edge=64, device="cpu")
    assert smol.processor_kwargs == {"do_image_splitting": False}
    content = smol.messages(request)[0]["content"]
    kinds = [c["type"] for c in content]
    assert kinds == ["text"] + ["text", "image"] * 3 + ["text"]
    assert [c["text"].strip() for c in content if c["type"] == "text"][1:4] == ["Image A:", "Image B:", "Image C:"]
    inputs = smol.inputs(request)
    assert tuple(inputs["pixel_values"].shape[:2]) == (1, 3)  # one tile per image: no splitting
    qwen = HFSelector(str(tiny_models["qwen3_vl"]), max_new_tokens=4, max_edge=48, device="cpu")
    grid = qwen.inputs(request)["image_grid_thw"]
    assert grid.shape[0] == 3
    assert qwen.generate(request) == qwen.generate(request)  # greedy: same input, same text
