"""The simulated judges' label probabilities: the softmax of the call's own utilities (so the largest is at
the pick, as with greedy decoding), recorded with each call that gives a choice; the text is `generate`'s."""

from __future__ import annotations

import json

import numpy as np
import pytest

from audit_core import store
from runners.backends.simulated import simulated_selector
from runners.selection import recorder
from tests.support.pools import write_tiny_dataset


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "sim.duckdb"
    write_tiny_dataset(path, tmp_path / "images", n_prompts=6, pool_sizes=(3, 4))
    return path


def planned(db, judge="j"):
    con = store.connect(db)
    try:
        return recorder.plan_requests(con, dataset="tiny", judge=judge, orders=3, contract="ranking", limit=None)[0]
    finally:
        con.close()


@pytest.mark.parametrize("profile", ["slot_a", "strong", "weak"])
def test_label_probabilities_are_the_softmax_of_the_calls_utilities_largest_at_the_pick(profile, db):
    judge = simulated_selector(profile)
    for request in planned(db):
        probs = judge.label_probs(request)
        u = judge.utility(request)
        expected = np.exp((u - u.max()) / judge.noise) / np.exp((u - u.max()) / judge.noise).sum()
        assert list(probs) == list(request.labels) and np.allclose(list(probs.values()), expected, rtol=1e-12)
        assert sum(probs.values()) == pytest.approx(1.0)
        text = judge.generate(request)
        if text.startswith("{"):
            assert json.loads(text)["ranking"] == sorted(request.labels, key=lambda label: -probs[label])


def test_a_reply_is_generates_text_with_one_step_at_its_choice(db):
    judge = simulated_selector("weak")  # answers some calls with a bare label or prose
    kinds = set()
    for request in planned(db):
        reply = judge.reply(request)
        assert reply.text == judge.generate(request)
        if reply.text.startswith("I think"):
            kinds.add("prose")
            assert reply.label_steps == ()
        else:
            choice = reply.text.strip() if not reply.text.startswith("{") else json.loads(reply.text)["choice"]
            kinds.add("bare" if reply.text.startswith(" ") else "json")
            assert [s.label for s in reply.label_steps] == [choice]
            assert reply.label_steps[0].probs == judge.label_probs(request)
    assert kinds >= {"json"}


def test_a_simulated_run_records_label_probabilities(db):
    summary = recorder.record_selector(db, dataset="tiny", judge="slot", backend=simulated_selector("slot_a"),
                                       backend_name="simulated", model="slot_a", orders=3, progress=False)
    assert summary.recorded == 18
    judge = simulated_selector("slot_a")
    expected = {r.request_key: judge.label_probs(r) for r in planned(db, judge="slot")}
    con = store.connect(db, read_only=True)
    try:
        rows = con.execute("SELECT request_key, label_probs FROM calls").fetchall()
    finally:
        con.close()
    assert {key: json.loads(text) for key, text in rows} == expected  # JSON keeps every float exactly
