"""Output validity and timing per judge, on built call rows and on the published JudgeActs
main split (paper/generated/appendix_validity.tex and appendix_extras_latency.tex of GitHub
seochan99/JudgeActs; unrounded values from results/main/status.json and review_extras.json); the
table from the audit's arrays and the calls with text is the calls frame's, and the audit (`run_audits`)
reads no frame of every call."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit_core import Resampling, audit_selection, load_selection_data, store
from audit_core.selection.debiased import load_ordered_calls
from audit_core.selection.timing import (
    GATE_COST_COLUMNS,
    TIMING_CALL_COLUMNS,
    TIMING_COLUMNS,
    gate_cost,
    is_not_json,
    timing_table,
    timing_table_from_arrays,
)
from audit_core.store import database
from benchmarks.synthetic import build_synthetic_db
from runners.audits import run_audits
from runners.demo import build_demo

STRICT = '{"choice": "A", "ranking": ["A", "B"]}'


def call(judge: str, prompt: str, order: int, status: str, raw: str | None, seconds: float | None,
         note: str | None = None) -> dict[str, object]:
    return {"judge": judge, "prompt_id": prompt, "order_index": order, "status": status,
            "raw_output": raw, "parse_note": note, "seconds": seconds}


@pytest.mark.parametrize(("raw", "note", "expected"), [
    (STRICT, None, False),
    ("```json\n" + STRICT + "\n```", "code fence removed", False),
    ('{"image": "B"}', "one-key object 'image'", False),  # JSON, recovered
    (" B", "bare label", True),
    ("I would pick A.", "not a JSON object (Expecting value at char 0)", True),
    ("", "empty output", True),
    (None, "RuntimeError: out of memory", False),  # no text at all is a runtime failure, not "not JSON"
    (" B", "json_valid=true, schema_valid=false, recovered=true", False),  # the recorded flag wins
    (STRICT, "json_valid=false, schema_valid=false", True),
])
def test_not_json(raw, note, expected) -> None:
    assert is_not_json(raw, note) is expected


def test_timing_of_built_calls() -> None:
    calls = pd.DataFrame([
        call("b", "p1", 0, "ok", STRICT, 10.0),
        call("b", "p1", 1, "recovered", " A", 2.0, "bare label"),
        call("b", "p1", 2, "parse_fail", "no idea", 3.0, "not a JSON object"),
        call("b", "p2", 0, "ok", STRICT, 4.0),
        call("b", "p2", 1, "ok", STRICT, 4.0),
        call("b", "p2", 2, "runtime_fail", None, 1.0, "TimeoutError"),
        call("b", "p3", 0, "ok", STRICT, 6.0),  # order 1 missing, order 2 untimed: not a timed prompt
        call("b", "p3", 2, "ok", STRICT, None),
        call("a", "q1", 0, "ok", STRICT, 1.5),
    ])
    table = timing_table(calls)
    assert table.columns.tolist() == TIMING_COLUMNS and table["judge"].tolist() == ["a", "b"]
    b = table.set_index("judge").loc["b"]
    assert b[["orders", "calls", "valid", "recovered", "failed", "not_json"]].tolist() == [3, 8, 5, 1, 2, 2]
    assert b["valid"] + b["recovered"] + b["failed"] == b["calls"]
    timed = [10.0, 2.0, 3.0, 4.0, 4.0, 1.0, 6.0]
    assert b["seconds_median"] == np.median(timed) and b["seconds_mean"] == pytest.approx(np.mean(timed))
    assert b["timed_prompts"] == 2
    assert b["prompt_seconds_one_order"] == pytest.approx(7.0)  # (10 + 4) / 2
    assert b["prompt_seconds_all_orders"] == pytest.approx(12.0)  # (15 + 9) / 2
    assert b["all_over_one"] == pytest.approx(12 / 7)
    assert b["hours_one_order"] == pytest.approx(14 / 3600) and b["hours_all_orders"] == pytest.approx(24 / 3600)
    a = table.set_index("judge").loc["a"]
    assert a[["orders", "calls", "valid", "timed_prompts"]].tolist() == [1, 1, 1, 1]
    assert a["all_over_one"] == 1.0


def test_timing_without_recorded_seconds() -> None:
    table = timing_table(pd.DataFrame([call("a", "q1", 0, "ok", STRICT, None), call("a", "q1", 1, "ok", STRICT, None)]))
    row = table.iloc[0]
    assert row["calls"] == 2 and row["timed_prompts"] == 0
    assert np.isnan(row["seconds_median"]) and np.isnan(row["all_over_one"]) and row["hours_all_orders"] == 0.0


def test_timing_of_no_calls_has_the_columns() -> None:
    assert timing_table(pd.DataFrame(columns=list(call("a", "q", 0, "ok", None, None)))).columns.tolist() == TIMING_COLUMNS


# judge: calls, exact schema, recovered, failed, non-JSON (appendix_validity.tex);
# median and mean s/call, 1-order and 3-order s/prompt, ratio, 1-order and 3-order hours (latency table)
PUBLISHED = {
    "qwen": ((900, 900, 0, 0, 0), ("3.5", "4.6", "5.4", "13.8", "2.57", "0.45", "1.15")),
    "smol": ((900, 0, 886, 14, 880), ("1.0", "1.1", "1.2", "3.2", "2.80", "0.10", "0.27")),
}


def test_published_validity_and_timing(judgeacts) -> None:  # noqa: F811
    _, calls = judgeacts
    table = timing_table(calls).set_index("judge")
    for judge, (counts, printed) in PUBLISHED.items():
        row = table.loc[judge]
        assert row[["calls", "valid", "recovered", "failed", "not_json"]].tolist() == list(counts)
        assert row["orders"] == 3 and row["timed_prompts"] == 300
        shown = [f"{row['seconds_median']:.1f}", f"{row['seconds_mean']:.1f}", f"{row['prompt_seconds_one_order']:.1f}",
                 f"{row['prompt_seconds_all_orders']:.1f}", f"{row['all_over_one']:.2f}",
                 f"{row['hours_one_order']:.2f}", f"{row['hours_all_orders']:.2f}"]
        assert shown == list(printed), judge
    # the re-typed logs keep seconds to 2 decimals: Qwen's total is 4147.30 s in status.json
    assert table.loc["qwen", "hours_all_orders"] * 3600 == pytest.approx(4147.301174, abs=0.5)
    # the raw text agrees with the flags JudgeActs recorded
    smol = calls[calls["judge"] == "smol"]
    assert sum(is_not_json(raw, None) for raw in smol["raw_output"]) == 880


def test_the_audit_reads_no_accepted_output_and_counts_the_same(judgeacts_db) -> None:
    con = store.connect(judgeacts_db, read_only=True)
    try:
        every, audited = store.load_calls(con, "main"), store.load_calls(con, "main", ok_outputs=False)
    finally:
        con.close()
    assert audited.loc[audited["status"] == "ok", "raw_output"].isna().all()
    assert (audited["status"] == "ok").sum() == 900  # the 4B's calls: their outputs are not read
    kept = audited["status"] != "ok"
    assert audited.loc[kept, "raw_output"].equals(every.loc[kept, "raw_output"])
    pd.testing.assert_frame_equal(timing_table(audited), timing_table(every))


def test_gate_cost_reads_the_policies_cost_columns() -> None:
    # judge a: order 0 takes 2 s, orders 1 and 2 take 1 s each, so its K = 3 orders cost 4 s; judge b: order 0
    # takes 2 s on average; the cost columns as `audit_core.selection.costs` gives them to policies.csv
    policies = pd.DataFrame([
        ("a", "judge", "a", None, 1.0, 1.0, 2.0), ("b", "judge", "b", None, 1.0, 1.0, 2.0),
        ("a majority", "majority", "a", None, 1.0, 3.0, 4.0), ("a borda", "debiased", "a", None, 1.0, 3.0, 4.0),
        ("a prior-corrected", "debiased", "a", None, 0.9, 1.4, 2.8),
        ("a agree>=3/3", "order_gate", "a", None, 0.4, 3.0, 4.0), ("a+b agree", "judge_gate", "a", "b", 0.5, 2.0, 4.0),
        ("b+a agree", "judge_gate", "b", "a", 0.5, 2.0, 4.0), ("a+clip agree", "scorer_gate", "a", "clip", 0.3, 1.0,
                                                                np.nan),
        ("a agree>=3/3 rejected", "order_gate_rejected", "a", None, 0.6, 3.0, 4.0),
        ("clip", "scorer", "clip", None, 1.0, 0.0, np.nan),
    ], columns=["policy", "kind", "base_judge", "partner", "coverage", "calls_per_prompt", "seconds_per_prompt"])
    cost = gate_cost(policies).set_index("policy")
    assert cost.columns.tolist() == GATE_COST_COLUMNS[1:]
    assert list(cost.index) == ["a majority", "a borda", "a prior-corrected", "a agree>=3/3", "a+b agree",
                                "b+a agree", "a+clip agree"]
    # all orders over order 0: 4 s / 2 s, the study's "K orders cost 2.6-2.8x one"
    assert cost.loc["a agree>=3/3", ["judge_calls", "seconds_per_prompt", "over_one"]].tolist() == [3, 4.0, 2.0]
    assert cost.loc["a majority", "over_one"] == 2.0 and cost.loc["a agree>=3/3", "coverage"] == 0.4
    assert cost.loc["a prior-corrected", ["judge_calls", "over_one"]].tolist() == [1.4, 1.4]
    # both judges' order 0, against each base judge's own order 0
    assert cost.loc["a+b agree", ["judge_calls", "seconds_per_prompt", "over_one"]].tolist() == [2, 4.0, 2.0]
    assert cost.loc["b+a agree", "over_one"] == 2.0 and cost.loc["b+a agree", "seconds_per_prompt"] == 4.0
    assert cost.loc["a+clip agree", "judge_calls"] == 1 and np.isnan(cost.loc["a+clip agree", "over_one"])
    untimed = gate_cost(policies.assign(seconds_per_prompt=np.where(policies["kind"] == "judge", np.nan, 1.0)))
    assert untimed["over_one"].isna().all()


def test_published_cost_of_three_orders(judgeacts) -> None:  # noqa: F811
    data, calls = judgeacts
    policies = audit_selection(data, Resampling(0), calls=calls).policies
    cost = gate_cost(policies).set_index("policy")["over_one"]
    # the study: 2.6-2.8x one order; every prompt is timed in every order, so the policies' seconds
    # (`audit_core.selection.costs`) give the ratio timing_table's all_over_one gives
    assert [f"{cost[f'{j} agree>=3/3']:.2f}" for j in ("qwen", "smol")] == ["2.57", "2.80"]
    timing = timing_table(calls).set_index("judge")["all_over_one"]
    for judge in ("qwen", "smol"):
        for name in (f"{judge} majority", f"{judge} borda", f"{judge} agree>=3/3"):
            assert cost[name] == pytest.approx(timing[judge], rel=1e-12)


def arrays_and_frame_timing(db, dataset: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the timing table from the arrays the audit holds and the calls with text, the one from the calls frame
    `store.load_calls(..., ok_outputs=False)`) of `dataset` in the store at `db`."""
    con = store.connect(db, read_only=True)
    try:
        data = load_selection_data(con, dataset)
        ordered = load_ordered_calls(con, data)
        texts = store.load_call_texts(con, dataset)
        calls = store.load_calls(con, dataset, ok_outputs=False, columns=TIMING_CALL_COLUMNS)
    finally:
        con.close()
    seconds = {judge: ordered[judge].seconds for judge in data.judges}
    return timing_table_from_arrays(data.statuses, seconds, texts), timing_table(calls)


@pytest.fixture(scope="module")
def small_stores(tmp_path_factory) -> list[tuple[str, str]]:
    """(db, dataset) of the built-in demo and a small synthetic study (whose one judge fails some calls)."""
    root = tmp_path_factory.mktemp("timing")
    build_demo(root / "demo.duckdb", n_prompts=40, progress=False)
    build_synthetic_db(root / "syn.duckdb", n_prompts=300, n_judges=3, n_orders=3, seed=5, dataset_id="syn")
    return [(str(root / "demo.duckdb"), "demo"), (str(root / "syn.duckdb"), "syn")]


def test_timing_from_the_arrays_equals_the_frames_exactly(small_stores, judgeacts_db) -> None:
    # every column, seconds' means and medians included, is bit for bit the frame's: the same seconds in the
    # same prompt and order sequence
    for db, dataset in [*small_stores, (judgeacts_db, "main")]:
        from_arrays, from_frame = arrays_and_frame_timing(db, dataset)
        pd.testing.assert_frame_equal(from_arrays, from_frame, check_exact=True)
        assert len(from_frame) and from_frame["calls"].sum() > 0, dataset
    assert from_arrays.set_index("judge").loc["smol", "not_json"] == 880  # the text rows count as the frame's


def test_the_call_texts_are_the_frames_calls_with_text(judgeacts_db) -> None:
    con = store.connect(judgeacts_db, read_only=True)
    try:
        texts = store.load_call_texts(con, "main")
        calls = store.load_calls(con, "main", ok_outputs=False, columns=TIMING_CALL_COLUMNS)
    finally:
        con.close()
    with_text = calls[(calls["raw_output"].notna() | calls["parse_note"].notna()).to_numpy()]
    pd.testing.assert_frame_equal(texts, with_text[["judge", "raw_output", "parse_note"]].reset_index(drop=True),
                                  check_categorical=False)
    assert texts["raw_output"].notna().sum() < len(calls)  # the accepted outputs are not read


def test_a_repeated_judge_prompt_order_is_refused() -> None:
    # the store never holds one (ingest refuses a repeated prompt and order, recorders a recorded request key)
    with pytest.raises(ValueError, match="more than one call"):
        timing_table(pd.DataFrame([call("a", "q1", 0, "ok", STRICT, 1.0), call("a", "q1", 0, "ok", STRICT, 2.0)]))


def test_the_audit_without_the_calls_frame_gives_the_same_tables(judgeacts_db, tmp_path, monkeypatch) -> None:
    con = store.connect(judgeacts_db, read_only=True)
    try:
        data = load_selection_data(con, "main")
        calls = store.load_calls(con, "main", ok_outputs=False, columns=TIMING_CALL_COLUMNS)
        ordered = load_ordered_calls(con, data)
    finally:
        con.close()
    settings = Resampling(20, seed=3)
    framed = audit_selection(data, settings, calls=calls, ordered=ordered)
    with pytest.raises(ValueError, match="ordered"):
        audit_selection(data, settings, call_texts=calls.iloc[:0][["judge", "raw_output", "parse_note"]])

    def no_frame(*args, **kwargs):
        raise AssertionError("the audit read a frame of every call")

    db = tmp_path / "ja.duckdb"  # a copy, so that the audit cache beside it starts empty
    db.write_bytes(Path(judgeacts_db).read_bytes())
    monkeypatch.setattr(store, "load_calls", no_frame)
    monkeypatch.setattr(database, "load_calls", no_frame)
    audited = run_audits(db, "main", settings).result
    assert audited.tables().keys() == framed.tables().keys()
    for name, table in framed.tables().items():
        pd.testing.assert_frame_equal(audited.tables()[name], table, check_exact=True, obj=name)
