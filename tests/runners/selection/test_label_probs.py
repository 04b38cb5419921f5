"""Label probabilities from backend to store: a backend's `Reply` carries its label steps, the engines
put them in `Generated`, and the selector's record keeps those of the step where the parsed choice was
generated (NULL when there is no choice, no step spelling it, or no probability at it)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from audit_core import store
from audit_core.selection.data import load_selection_data
from audit_core.selection.debiased import load_ordered_calls
from runners.backends.base import LabelStep, Reply, label_spellings, spelled_label
from runners.recording.engines import Generated, generate_batch, generate_with_retry
from runners.selection import recorder
from runners.selection.recorder import label_probs_of_choice, selector_record
from tests.support.pools import write_tiny_dataset

STEPS = (LabelStep("B", {"A": 0.1, "B": 0.8, "C": 0.05}), LabelStep("A", {"A": 0.6, "B": 0.3, "C": 0.1}),
         LabelStep("B", {"A": 0.0, "B": 0.99, "C": 0.0}))
RANKING = '{"choice": "B", "ranking": ["B", "A", "C"]}'


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "lp.duckdb"
    write_tiny_dataset(path, tmp_path / "images", n_prompts=2, pool_sizes=(3, 4))
    return path


def planned(db, orders=2):
    con = store.connect(db)
    try:
        return recorder.plan_requests(con, dataset="tiny", judge="j", orders=orders, contract="ranking",
                                      limit=None)[0]
    finally:
        con.close()


def test_spellings_of_a_label():
    assert label_spellings("B") == ("B", " B", '"B', ' "B')
    assert [spelled_label(t, ("A", "B")) for t in ("B", " A", '"B', ' "A', "B\"", "b", "AB", "")] == [
        "B", "A", "B", "A", None, None, None, None]


def test_the_choice_keeps_the_probabilities_of_the_first_step_that_spells_it():
    assert label_probs_of_choice(STEPS, "B") == {"A": 0.1, "B": 0.8, "C": 0.05}
    assert label_probs_of_choice(STEPS, "A") == {"A": 0.6, "B": 0.3, "C": 0.1}
    assert label_probs_of_choice(STEPS, "C") is None and label_probs_of_choice(STEPS, None) is None
    assert label_probs_of_choice(None, "B") is None


def test_a_record_stores_the_choice_probabilities_as_json_and_null_otherwise(db):
    request = planned(db)[0]

    def record(raw, steps, lenient=False):
        generated = Generated(raw, 1, None if raw is not None else "ConnectionError: x", 0.5, label_steps=steps)
        return selector_record(request, generated, run_id="r", lenient=lenient, input_json="{}")

    assert json.loads(record(RANKING, STEPS).label_probs) == {"A": 0.1, "B": 0.8, "C": 0.05}
    assert record(RANKING, None).label_probs is None  # the backend gave none
    assert record("I like B", STEPS).label_probs is None  # no choice parsed
    assert record(None, STEPS).label_probs is None  # runtime failure
    assert record(RANKING, (LabelStep("B", {}),)).label_probs is None  # a step without probabilities
    recovered = record(" B", (LabelStep("B", {"B": 0.5}),), lenient=True)
    assert recovered.status == "recovered" and json.loads(recovered.label_probs) == {"B": 0.5}


def ranked_b_first(request) -> str:
    return json.dumps({"choice": "B", "ranking": ["B", "A", *request.labels[2:]]})


class Texting:
    """A backend answering B first, in text only; `asked` lists the methods called."""

    def __init__(self):
        self.asked: list[str] = []

    def generate(self, request):
        self.asked.append("generate")
        return ranked_b_first(request)

    def model_revision(self):
        return "scripted-1"


class Answering(Texting):
    """The same answers as replies carrying STEPS."""

    def reply(self, request):
        self.asked.append("reply")
        return Reply(ranked_b_first(request), STEPS)


class AnsweringInBatches(Answering):
    def reply_batch(self, requests):
        self.asked.append("reply_batch")
        return [Reply(ranked_b_first(r), STEPS) for r in requests]


def test_the_engines_ask_for_replies_when_a_backend_offers_them(db):
    requests = planned(db)[:3]
    one = Answering()
    assert generate_with_retry(one, requests[0]).label_steps == STEPS and one.asked == ["reply"]
    answered = generate_batch(one, requests)
    assert [g.label_steps for g in answered] == [STEPS] * 3 and one.asked == ["reply"] * 4
    batched = AnsweringInBatches()
    answered = generate_batch(batched, requests)
    assert [g.label_steps for g in answered] == [STEPS] * 3 and batched.asked == ["reply_batch"]
    assert len({g.seconds for g in answered}) == 1  # the batch's time shared out
    plain = Texting()
    assert generate_with_retry(plain, requests[0]).label_steps is None and plain.asked == ["generate"]
    assert generate_with_retry(plain, requests[0]).raw == ranked_b_first(requests[0])


def test_a_recorded_run_stores_label_probabilities_the_debiased_loader_reads(db):
    summary = recorder.record_selector(db, dataset="tiny", judge="j", backend=Answering(), backend_name="scripted",
                                       model="m", orders=2, progress=False)
    assert summary.recorded == 4
    con = store.connect(db, read_only=True)
    try:
        stored = [json.loads(t) for (t,) in con.execute("SELECT label_probs FROM calls").fetchall()]
        calls = load_ordered_calls(con, load_selection_data(con, "tiny"))["j"]
    finally:
        con.close()
    assert stored == [{"A": 0.1, "B": 0.8, "C": 0.05}] * 4
    assert calls.label_probs[:, :, :3].tolist() == [[[0.1, 0.8, 0.05]] * 2] * 2
    assert calls.label_probs[1, :, 3].tolist() == [0.0, 0.0]  # a label the record leaves out (D): probability 0
    assert np.isnan(calls.label_probs[0, :, 3]).all()  # a pool of three has no slot D
