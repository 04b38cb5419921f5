"""The decisions table's optional `label_probs` column: one JSON object per call, offered label -> probability.

Random small studies whose calls carry label probabilities (some calls none) are ingested from CSV, JSONL
and Parquet, in SQL and row by row: the stored `calls.label_probs` hold the same objects as given (JSON
compared as values) and both ways store the same rows. Each defect the contract refuses (not JSON, not an
object, a label the call did not offer, a probability that is not a number or lies outside [0, 1], a sum
beyond 1 + the tolerance, a repeated key, NaN) is refused alike by both ways, naming the file, the line and
the field, exit 2, with the store unchanged; `store_from_frames` takes the column too, as a dict or its text.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit_core.errors import InputError
from audit_core.ingest import staging, tables
from audit_core.ingest.frames import store_from_frames
from audit_core.ingest.values import LABEL_PROBS_TOLERANCE
from runners import ingest
from tests.support.snapshots import snapshot

FORMATS = ["csv", "jsonl", "parquet"]
READ_ROWS = tables.read_rows


@st.composite
def studies(draw) -> dict[str, list[dict]]:
    """Pools of 2 to 4 candidates, each shown in two orders; most calls carry label probabilities."""
    sizes = draw(st.lists(st.integers(2, 4), min_size=2, max_size=4), label="pool sizes")
    pools, decisions = [], []
    for i, size in enumerate(sizes):
        ids = [f"p{i}_{k}" for k in range(size)]
        pools += [{"prompt_id": f"p{i}", "prompt": f"scene {i}", "candidate_id": cid, "alignment": k / size}
                  for k, cid in enumerate(ids)]
        for order in range(2):
            slots = ids[order:] + ids[:order]
            row = {"prompt_id": f"p{i}", "order_index": order, "slot_candidate_ids": slots, "choice_label": "A"}
            if draw(st.integers(0, 4), label="probabilities recorded") > 0:
                shares = draw(st.lists(st.integers(0, 8), min_size=size, max_size=size), label="shares")
                offered = draw(st.integers(1, size), label="labels given")
                total = max(sum(shares[:offered]), 1) * draw(st.sampled_from([1, 2]), label="sum below 1")
                row["label_probs"] = {chr(65 + k): shares[k] / total for k in range(offered)}
            decisions.append(row)
    return {"pools": pools, "decisions": decisions}


def _probs(change):
    """A defect: the label probabilities of one call that has them replaced by `change(call's slots)`."""
    def damage(study: dict, pick: int) -> None:
        rows = study["decisions"]
        rows[pick % len(rows)]["label_probs"] = change(rows[pick % len(rows)]["slot_candidate_ids"])
    return damage


def _text(text: str):
    return _probs(lambda slots: text)


DEFECTS = {
    "not JSON": _text("A=0.5"),
    "JSON cut short": _text('{"A": 0.5'),
    "trailing comma": _text('{"A": 0.5,}'),
    "a list": _text("[0.5, 0.5]"),
    "a number": _text("0.5"),
    "label not offered": _probs(lambda slots: {chr(65 + len(slots)): 0.1}),
    "lower-case label": _probs(lambda slots: {"a": 0.1}),
    "negative": _probs(lambda slots: {"A": -0.25}),
    "above one": _probs(lambda slots: {"A": 1.5}),
    "text value": _probs(lambda slots: {"A": "0.5"}),
    "null value": _probs(lambda slots: {"A": None}),
    "true": _probs(lambda slots: {"A": True}),
    "NaN": _probs(lambda slots: {"A": float("nan")}),
    "infinite": _text('{"A": 1e999}'),
    "sum beyond the tolerance": _probs(lambda slots: {"A": 0.75, "B": 0.25 + 2 * LABEL_PROBS_TOLERANCE}),
    "key twice": _text('{"A": 0.25, "A": 0.5}'),
}


def write_rows(path: Path, rows: list[dict]) -> Path:
    """Rows as CSV (lists joined by '|', label_probs as JSON text), JSONL (label_probs an object, or a string
    when given as text) or Parquet (label_probs as JSON text)."""
    columns = list(dict.fromkeys(k for r in rows for k in r))

    def probs_text(v: object) -> object:
        return v if v is None or isinstance(v, str) else json.dumps(v)

    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif path.suffix == ".parquet":
        arrays = {c: pa.array([probs_text(r.get(c)) for r in rows]) if c == "label_probs"
                  else pa.array([r.get(c) for r in rows]) for c in columns}
        pq.write_table(pa.table(arrays), path)
    else:
        def cell(c: str, v: object) -> str:
            if c == "label_probs":
                return probs_text(v) or ""
            return "" if v is None else "|".join(map(str, v)) if isinstance(v, list) else str(v)
        pd.DataFrame([[cell(c, r.get(c)) for c in columns] for r in rows], columns=columns).to_csv(path, index=False)
    return path


def ingested(folder: Path, study: dict, ext: str, db: Path, in_sql: bool, monkeypatch,
             only_sql: bool = False) -> tuple[int, str]:
    """(exit status, first stderr line) of `runners.ingest table`, every file read in SQL or row by row
    (`only_sql`: a file read row by row after all fails the test)."""
    files = {role: write_rows(folder / f"{role}.{ext}", study[role]) for role in ("pools", "decisions")}
    monkeypatch.setattr(staging, "FAST_PATH_MIN_BYTES", 0 if in_sql else 1 << 62)
    monkeypatch.setattr(tables, "read_rows", _refused if only_sql else READ_ROWS)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = ingest.main(["table", "--pools", str(files["pools"]), "--decisions", f"j={files['decisions']}",
                            "--db", str(db), "--dataset", "d"])
    return code, (err.getvalue().splitlines() or [""])[0]


def _refused(path):
    raise AssertionError(f"{path} was read row by row")


def stored_calls(db: Path) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT * EXCLUDE (run_id, request_key, created_at) FROM calls ORDER BY ALL").fetchall()
    finally:
        con.close()


def stored_probs(db: Path) -> dict[tuple[str, int], dict | None]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT prompt_id, order_index, label_probs FROM calls").fetchall()
    finally:
        con.close()
    return {(pid, order): None if text is None else json.loads(text) for pid, order, text in rows}


@settings(max_examples=6, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(study=studies())
def test_label_probs_round_trip_in_every_format(study, tmp_path_factory, monkeypatch):
    given_probs = {(r["prompt_id"], r["order_index"]): r.get("label_probs") for r in study["decisions"]}
    stores = []
    for ext in FORMATS:
        folder = tmp_path_factory.mktemp(ext)
        for in_sql in (True, False):
            db = folder / f"{'sql' if in_sql else 'rows'}.duckdb"
            assert ingested(folder, study, ext, db, in_sql, monkeypatch, only_sql=in_sql) == (0, "")
            stores.append(stored_calls(db))
            assert stored_probs(db) == given_probs  # float text read back exactly (json writes repr)
    assert all(calls == stores[0] for calls in stores)


@pytest.mark.parametrize("defect", sorted(DEFECTS))
@settings(max_examples=2, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(study=studies(), pick=st.integers(0, 50), data=st.data())
def test_bad_label_probs_are_refused_alike(defect, study, pick, data, tmp_path_factory, monkeypatch):
    turn = sorted(DEFECTS).index(defect) % len(FORMATS)
    ext = data.draw(st.sampled_from(FORMATS[turn:] + FORMATS[:turn]), label="format")
    DEFECTS[defect](study, pick)
    line = pick % len(study["decisions"]) + (1 if ext != "csv" else 2)
    folder = tmp_path_factory.mktemp("bad")
    kept = folder / "kept.duckdb"
    rows = [{"prompt_id": "q", "prompt": "kept", "candidate_id": f"q_{k}", "alignment": k / 2} for k in range(3)]
    assert ingest.main(["table", "--pools", str(write_rows(folder / "kept.csv", rows)), "--db", str(kept),
                        "--dataset", "kept"]) == 0
    before = snapshot(kept)
    outcomes = {way: ingested(folder, study, ext, kept, way == "sql", monkeypatch) for way in ("sql", "rows")}
    assert outcomes["sql"] == outcomes["rows"], (defect, ext, outcomes)
    code, message = outcomes["sql"]
    assert code == 2 and f"decisions.{ext} line {line}, field 'label_probs': " in message, (defect, ext, message)
    assert snapshot(kept) == before


def test_store_from_frames_takes_label_probs_as_dicts_or_text():
    pools = pd.DataFrame({"prompt_id": ["p"] * 3, "prompt": ["a scene"] * 3, "candidate_id": ["a", "b", "c"],
                          "alignment": [0.0, 0.5, 1.0]})
    decisions = pd.DataFrame({"prompt_id": ["p", "p"], "order_index": [0, 1],
                              "slot_candidate_ids": [["a", "b", "c"], ["c", "a", "b"]], "choice_label": ["A", "B"],
                              "label_probs": [{"A": 0.5, "B": 0.25, "C": 0.125}, '{"B": 0.875}']})
    con = store_from_frames(pools, decisions={"j": decisions})
    found = dict(con.execute("SELECT order_index, label_probs FROM calls").fetchall())
    assert {k: json.loads(v) for k, v in found.items()} == {0: {"A": 0.5, "B": 0.25, "C": 0.125}, 1: {"B": 0.875}}
    bad = decisions.assign(label_probs=[{"A": 0.5}, {"D": 0.5}])
    with pytest.raises(InputError) as refused:
        store_from_frames(pools, decisions={"j": bad})
    assert str(refused.value) == ("decisions j frame line 2, field 'label_probs': label 'D' is not offered in this "
                                  "call (A, B, C)")
