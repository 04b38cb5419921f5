"""The transformers backend end to end with tiny randomly initialised Qwen3-VL and SmolVLM models.

Everything is built from configs (tests/support/vlms.py): a byte-level tokenizer,
small image/video processors, a minimal chat template and 1-layer models, saved
to a temp directory and loaded back through the real backend by path: no downloads.
Their output is junk, so every call must be a parse failure with its raw text kept.
"""


import pytest

from audit_core import store
from runners import run_judge
from runners.backends.hf import HFSelector
from runners.selection import recorder
from tests.support.pools import write_tiny_dataset


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
