"""Batched local inference: one generate() per batch, left padding, replies identical to one at a time.

The tiny Qwen3-VL and SmolVLM2 models (tests/support/vlms.py) answer junk,
but greedy junk is deterministic, so any effect of padding or of the batch's
other rows on a reply shows as a changed text.
"""

import json

import pytest

from audit_core import store
from runners import run_judge
from runners.backends.hf import HFSelector
from runners.rating.recorder import record_rater
from runners.recording.engines import generate_batch
from runners.selection import recorder
from tests.support.pools import write_tiny_dataset
from tests.support.rating_runs import write_rating_dataset
from tests.support.vlms import build_qwen3_vl, build_smolvlm


@pytest.fixture(scope="module")
def selectors(tmp_path_factory):
    root = tmp_path_factory.mktemp("batching_vlms")
    return {kind: HFSelector(str(build(root / kind)), max_new_tokens=6, max_edge=64, device="cpu")
            for kind, build in (("qwen3_vl", build_qwen3_vl), ("smolvlm", build_smolvlm))}


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "b.duckdb"
    write_tiny_dataset(path, tmp_path / "images", n_prompts=2, pool_sizes=(3, 4))
    return path


def planned(db, orders=2):
    con = store.connect(db)
    requests = recorder.plan_requests(con, dataset="tiny", judge="j", orders=orders, contract="ranking", limit=None)[0]
    con.close()
    return requests


@pytest.mark.parametrize("kind", ["qwen3_vl", "smolvlm"])
def test_batched_replies_equal_one_at_a_time(kind, selectors, db):
    selector = selectors[kind]
    requests = planned(db)
    assert {len(r.image_paths) for r in requests} == {3, 4}  # several images per request, unequal lengths
    singles = [selector.generate(r) for r in requests]
    mask = selector.batch_inputs(requests)["attention_mask"]
    assert (mask[:, 0] == 0).any() and (mask[:, -1] == 1).all()  # padded, and on the left
    assert selector.generate_batch(requests) == singles
    mixed = [requests[i] for i in (3, 0, 2)]  # another composition and order
    assert selector.generate_batch(mixed) == [singles[i] for i in (3, 0, 2)]


def test_a_batched_run_records_the_same_calls_with_the_batch_time_shared(selectors, db):
    selector = selectors["smolvlm"]
    con = store.connect(db)
    for judge, size in (("one", 1), ("three", 3)):
        summary = recorder.record_selector(con, dataset="tiny", judge=judge, backend=selector, backend_name="hf",
                                           model="tiny", orders=2, batch_size=size, progress=False)
        assert summary.recorded == 4 and summary.calls_per_second > 0
    calls = con.execute("SELECT r.judge, c.prompt_id, c.order_index, c.raw_output, c.seconds, c.attempts "
                        "FROM calls c JOIN runs r USING (run_id) ORDER BY 2, 3").df()
    one, three = (calls[calls["judge"] == j].reset_index(drop=True) for j in ("one", "three"))
    assert list(three["raw_output"]) == list(one["raw_output"]) and set(three["attempts"]) == {1}
    assert three["seconds"][:3].nunique() == 1 and three["seconds"][1] != three["seconds"][3]  # batches of 3 and 1
    config = json.loads(con.execute("SELECT config_json FROM runs WHERE judge = 'three'").fetchone()[0])
    assert config["execution"] == {"engine": "local", "concurrency": 1, "batch_size": 3}
    speed = config["throughput"]
    assert speed["calls"] == 4 and speed["calls_per_second"] == pytest.approx(4 / speed["wall_seconds"], rel=1e-3)
    assert three["seconds"].sum() <= speed["wall_seconds"]


def test_a_batched_rating_run_records_the_same_ratings(selectors, tmp_path, files):  # noqa: F811
    db = tmp_path / "r.duckdb"
    write_rating_dataset(db, tmp_path / "images", n_prompts=2, pool_sizes=(3,))
    con = store.connect(db)
    instruction, conditions = files
    for judge, size in (("one", 1), ("five", 5)):
        record_rater(con, dataset="tiny", judge=judge, backend=selectors["smolvlm"], backend_name="hf",
                     model="tiny", conditions=("default", "demos_a"), conditions_file=conditions,
                     instruction_file=instruction, batch_size=size, progress=False)
    calls = store.load_rating_calls(con, "tiny").sort_values(["condition", "candidate_id"])
    one, five = (calls[calls["judge"] == j] for j in ("one", "five"))
    assert len(one) == 12  # 6 items under two conditions; demos_a shows 3 images, default 1
    assert list(five["raw_output"]) == list(one["raw_output"])


class FlakyBatches:
    """generate_batch always raises; generate fails for the keys in `broken`, else echoes the key."""

    def __init__(self, broken):
        self.broken, self.single = broken, []

    def generate_batch(self, requests):
        raise RuntimeError("out of memory")

    def generate(self, request):
        self.single.append(request.request_key)
        if request.request_key in self.broken:
            raise ConnectionError("still broken")
        return request.request_key


def test_a_failed_batch_gives_each_request_its_identical_retry_alone(db):
    requests = planned(db)[:4]
    backend = FlakyBatches({requests[2].request_key})
    answered = generate_batch(backend, requests)
    assert backend.single == [r.request_key for r in requests]  # one retry each, no more
    assert [g.raw for g in answered] == [r.request_key for r in requests[:2]] + [None, requests[3].request_key]
    assert {g.attempts for g in answered} == {2} and answered[2].error == "ConnectionError: still broken"
    assert all(g.seconds > 0 for g in answered)


def test_batch_size_below_one_is_a_usage_error(db, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_judge.main(["--db", str(db), "--dataset", "tiny", "--judge", "j", "--backend", "simulated",
                        "--model", "strong", "--batch-size", "0"])
    assert exit_info.value.code == 2 and "--batch-size must be at least 1" in capsys.readouterr().err
