"""The calls table's optional label_probs column: written with each call when recorded, NULL otherwise,
added on a writable open to a database made before it, and absent without harm on a read-only one."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from audit_core import store
from audit_core.selection.data import load_selection_data
from audit_core.selection.debiased import load_ordered_calls
from audit_core.store.database import has_column
from audit_core.store.records import CallRecord, RunRecord
from tests.support.pools import write_tiny_dataset

PROBS = {"A": 0.125, "B": 0.75, "C": 0.0625}


def recorded_store(tmp_path):
    """A tiny dataset with one judge: prompt p000 in one order, with label probabilities; p001 without."""
    db = tmp_path / "probs.duckdb"
    pools = write_tiny_dataset(db, tmp_path / "images", n_prompts=2, pool_sizes=(3,))
    ids = pools.candidates.groupby("prompt_id")["candidate_id"].apply(sorted)
    con = store.connect(db)
    store.insert_records(con, "runs", [RunRecord("r", "tiny", "j", "selector", "simulated", "finished")])
    store.insert_records(con, "calls", [
        CallRecord("r", "p000", 0, ids["p000"], "ok", "k0", "B", ids["p000"][1], label_probs=json.dumps(PROBS)),
        CallRecord("r", "p001", 0, ids["p001"], "ok", "k1", "A", ids["p001"][0]),
    ])
    con.close()
    return db


def test_label_probabilities_travel_with_each_call_and_are_null_when_not_recorded(tmp_path):
    con = store.connect(recorded_store(tmp_path), read_only=True)
    stored = dict(con.execute("SELECT prompt_id, label_probs FROM calls ORDER BY 1").fetchall())
    assert json.loads(stored["p000"]) == PROBS and stored["p001"] is None
    calls = load_ordered_calls(con, load_selection_data(con, "tiny"))["j"]
    con.close()
    assert calls.label_probs[0, 0].tolist() == [0.125, 0.75, 0.0625] and np.isnan(calls.label_probs[1, 0]).all()


def test_a_database_made_before_the_column_is_read_as_is_and_gains_it_when_opened_for_writing(tmp_path):
    db = recorded_store(tmp_path)
    con = store.connect(db)
    con.execute("ALTER TABLE calls DROP COLUMN label_probs")  # the file as an older release left it
    con.close()

    con = store.connect(db, read_only=True)
    try:
        assert not has_column(con, "calls", "label_probs")
        assert len(store.load_calls(con, "tiny")) == 2
        calls = load_ordered_calls(con, load_selection_data(con, "tiny"))["j"]
        assert np.isnan(calls.label_probs).all() and calls.picks[:, 0].tolist() == [1, 0]
    finally:
        con.close()

    con = store.connect(db)  # a writer adds the column, at the table's end, and keeps every row
    try:
        assert has_column(con, "calls", "label_probs")
        columns = [r[0] for r in con.execute("DESCRIBE calls").fetchall()]
        assert columns[-1] == "label_probs" and sorted(columns) == sorted(store.TABLE_COLUMNS["calls"])
        assert con.execute("SELECT count(*), count(label_probs) FROM calls").fetchone() == (2, 0)
    finally:
        con.close()
    fresh = store.connect(tmp_path / "fresh.duckdb")  # a new database has the same columns in the same order
    assert [r[0] for r in fresh.execute("DESCRIBE calls").fetchall()] == columns
    fresh.close()


def test_a_calls_frame_may_leave_label_probs_out_but_no_other_column(tmp_path):
    db = recorded_store(tmp_path)
    con = store.connect(db)
    try:
        frame = con.execute("SELECT * EXCLUDE (label_probs) FROM calls").df()
        frame["request_key"] = frame["request_key"] + "-copy"
        store.insert_frame(con, "calls", frame)
        assert con.execute("SELECT count(*), count(label_probs) FROM calls").fetchone() == (4, 1)
        with pytest.raises(ValueError, match=r"lacks columns \['status'\]"):
            store.insert_frame(con, "calls", frame.drop(columns=["status"]))
        with pytest.raises(ValueError, match="lacks columns"):
            store.insert_frame(con, "scores", pd.DataFrame({"run_id": ["r"], "candidate_id": ["x"]}))
    finally:
        con.close()
