"""The table ingest in SQL against the row-by-row rules: the same refusals, the same stores.

Random small studies (pools with ratings, votes, a selector's decisions, a rating judge's ratings
and a scorer's scores) are written as CSV, JSONL or Parquet with one defect of a class the contract
refuses (a wrong type, a blank or missing id, a number spelled as no table means, a rating off its
scale, a repeated row, a prompt whose rows disagree, an unknown column, a call whose slots, label or
status do not fit its pool, …) or none. Each is ingested three ways:

- in SQL: `runners.ingest table` with every file read by DuckDB (`staging.FAST_PATH_MIN_BYTES` 0);
- row by row: the same command with every file read by the Python readers;
- the reference: the Python readers' records checked by the pandas checks of `pools.write_dataset`,
  the path every table took before the SQL one.

All three must refuse with the same first error line (file, line, field and message) and leave an
existing store as it was and no new one; or all succeed, the two commands writing the same rows.
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
from audit_core.ingest import pools as pool_writes
from audit_core.ingest import staging, tables
from audit_core.store.schema import OUTCOME_SCALES
from runners import ingest
from tests.support.snapshots import snapshot

ROLES = ("pools", "votes", "decisions", "ratings", "scores")
STATUSES = ("ok", "recovered", "parse_fail", "runtime_fail")


@st.composite
def studies(draw) -> dict[str, list[dict]]:
    """A valid study: rows of each table, by role."""
    sizes = draw(st.lists(st.integers(2, 4), min_size=2, max_size=4), label="pool sizes")
    grid = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])
    pools, candidates = [], []
    for i, size in enumerate(sizes):
        for k in range(size):
            cid = f"p{i}_{k}"
            candidates.append((f"p{i}", cid))
            row = {"prompt_id": f"p{i}", "prompt": f"a scene, {i}", "country": ["Peru", "Japan"][i % 2],
                   "candidate_id": cid, "source_model": f"m{k}", "alignment": draw(grid), "n": draw(st.integers(1, 5))}
            if draw(st.booleans()):
                row["stereotype"] = draw(grid)
            pools.append(row)
    votes = [{"candidate_id": cid, "outcome": "rubric", "pool": pool, "annotator": f"{pool}{a}",
              "value": draw(st.integers(1, 5))}
             for _, cid in candidates[:3] for pool in ("a", "b") for a in range(2)]
    decisions = []
    for i, size in enumerate(sizes):
        ids = [f"p{i}_{k}" for k in range(size)]
        for order in range(2):
            slots = ids[order:] + ids[:order]
            status = draw(st.sampled_from(STATUSES), label="status")
            row = {"prompt_id": f"p{i}", "order_index": order, "slot_candidate_ids": slots, "raw_output": "B",
                   "seconds": 0.5, "status": status}
            if status in ("ok", "recovered"):
                k = draw(st.integers(0, size - 1))
                if draw(st.booleans(), label="by label"):
                    row["choice_label"] = "ABCD"[k]
                else:
                    row["chosen_candidate_id"] = slots[k]
            decisions.append(row)
    ratings = [{"candidate_id": cid, "condition": "default", "status": "ok", "rating": draw(st.integers(1, 5)),
                "raw_output": "3"} for _, cid in candidates[::2]]
    ratings.append({"candidate_id": candidates[1][1], "condition": "default", "status": "abstained",
                    "raw_output": "unspecified"})
    scores = [{"candidate_id": cid, "score": round(0.1 * k, 2)} for k, (_, cid) in enumerate(candidates)]
    return {"pools": pools, "votes": votes, "decisions": decisions, "ratings": ratings, "scores": scores}


def _set(role: str, column: str, value: object):
    def damage(study: dict, pick: int) -> None:
        rows = study[role]
        rows[pick % len(rows)][column] = value
    return damage


def _drop(role: str, column: str):
    def damage(study: dict, pick: int) -> None:
        rows = study[role]
        rows[pick % len(rows)].pop(column, None)
    return damage


def _repeat(role: str, **changes: object):
    def damage(study: dict, pick: int) -> None:
        rows = study[role]
        rows.append({**rows[pick % len(rows)], **changes})
    return damage


def _pool_of_one(study: dict, pick: int) -> None:
    row = study["pools"][pick % len(study["pools"])]
    row["prompt_id"], row["prompt"] = "lonely", "alone"


def _slots(change):
    def damage(study: dict, pick: int) -> None:
        row = study["decisions"][pick % len(study["decisions"])]
        row["slot_candidate_ids"] = change(list(row["slot_candidate_ids"]))
    return damage


DEFECTS = {
    "none": lambda study, pick: None,
    "blank candidate id": _set("pools", "candidate_id", "\u200b "),
    "missing prompt id": _drop("pools", "prompt_id"),
    "missing prompt": _drop("pools", "prompt"),
    "number as prompt": _set("pools", "prompt", 12),
    "list as country": _set("pools", "country", ["Peru"]),
    "odd number spelling": _set("pools", "alignment", "1_0"),
    "not a number": _set("pools", "alignment", "good"),
    "not finite": _set("pools", "stereotype", "inf"),
    "rating off its scale": _set("pools", "alignment", 1.5),
    "count of zero": _set("pools", "n", 0),
    "fractional count": _set("pools", "n", 2.5),
    "count beyond INTEGER": _set("pools", "n", 2**31),
    "unknown column": _set("pools", "colour", "red"),
    "repeated candidate row": _repeat("pools"),
    "prompt text disagrees": _repeat("pools", candidate_id="extra", prompt="other text"),
    "candidate in another pool disagrees": _repeat("pools", pool="b", source_model="other"),
    "pool of one": _pool_of_one,
    "unrated candidate": _drop("pools", "alignment"),
    "vote of an unknown outcome": _set("votes", "outcome", "helpfulness"),
    "vote off its scale": _set("votes", "value", 9),
    "vote of an unknown candidate": _set("votes", "candidate_id", "nobody"),
    "annotator twice": _repeat("votes"),
    "unknown prompt": _set("decisions", "prompt_id", "p9"),
    "slot of another prompt": _slots(lambda s: ["p9_0", *s[1:]]),
    "slot missing": _slots(lambda s: s[:-1] if len(s) > 2 else s + ["p0_0"]),
    "slot twice": _slots(lambda s: [s[0], *s[:-1]]),
    "one slot": _slots(lambda s: s[:1]),
    "label off the slots": _set("decisions", "choice_label", "Z"),
    "bad status": _set("decisions", "status", "great"),
    "chosen not shown": _set("decisions", "chosen_candidate_id", "p0_9"),
    "repeated call": _repeat("decisions"),
    "negative order": _set("decisions", "order_index", -1),
    "ranking of unknown labels": _set("decisions", "ranking", ["A", "Q"]),
    "rating off the rubric": _set("ratings", "rating", 6),
    "ok without a rating": _drop("ratings", "rating"),
    "rating of an unknown candidate": _set("ratings", "candidate_id", "nobody"),
    "rated twice": _repeat("ratings"),
    "score missing": lambda study, pick: study["scores"].pop(pick % len(study["scores"])),
    "scored twice": _repeat("scores"),
}


def write_rows(path: Path, rows: list[dict]) -> Path:
    """Rows as CSV (lists joined by '|'), JSONL or Parquet (in a column whose values no single Arrow type
    holds, what is not text is written as JSON text), by the file's extension."""
    columns = list(dict.fromkeys(k for r in rows for k in r))
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif path.suffix == ".parquet":
        arrays = {}
        for c in columns:
            values = [r.get(c) for r in rows]
            try:
                arrays[c] = pa.array(values)
            except (pa.ArrowException, OverflowError, TypeError, ValueError):
                arrays[c] = pa.array([v if v is None or isinstance(v, str) else json.dumps(v) for v in values])
        pq.write_table(pa.table(arrays), path)
    else:
        def cell(v: object) -> str:
            return "" if v is None else "|".join(map(str, v)) if isinstance(v, list) else str(v)
        pd.DataFrame([[cell(r.get(c)) for c in columns] for r in rows], columns=columns).to_csv(path, index=False)
    return path


def write_study(folder: Path, study: dict, ext: str) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return {role: write_rows(folder / f"{role}.{ext}", study[role]) for role in ROLES}


def argv(files: dict[str, Path], db: Path) -> list[str]:
    return ["table", "--pools", str(files["pools"]), "--votes", str(files["votes"]),
            "--decisions", f"j={files['decisions']}", "--ratings", f"r={files['ratings']}",
            "--scores", f"clip={files['scores']}", "--db", str(db), "--dataset", "d"]


def command(files: dict[str, Path], db: Path, in_sql: bool, monkeypatch) -> tuple[int, str]:
    """(exit status, first stderr line) of `runners.ingest table`, every file read in SQL or row by row."""
    monkeypatch.setattr(staging, "FAST_PATH_MIN_BYTES", 0 if in_sql else 1 << 62)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = ingest.main(argv(files, db))
    return code, (err.getvalue().splitlines() or [""])[0]


def reference(files: dict[str, Path], db: Path) -> tuple[int, str]:
    """(exit status, first error line) of the Python readers' records written by `pools.write_dataset`."""
    try:
        rows = {role: list(tables.read_rows(path)) for role, path in files.items()}
        pools = tables._pool_records(files["pools"], rows["pools"], "d", {}, files["pools"].parent)
        votes = tables._vote_records(files["votes"], rows["votes"], OUTCOME_SCALES)
        pools = pool_writes.with_votes(pools, votes)
        run = tables._call_records(files["decisions"], rows["decisions"], "j")
        rated = tables._rating_records(files["ratings"], rows["ratings"], "r", "rubric", (1, 5))
        scored = tables._score_records(files["scores"], rows["scores"], "clip")
        pool_writes.write_dataset(db, pools, [run], [scored], [rated])
    except InputError as err:
        return 2, f"error: {err}"
    return 0, ""


STORED = {  # the store's rows, but the moment they were written and the hashes that name a run
    "prompts": "SELECT * FROM prompts", "candidates": "SELECT * FROM candidates", "ratings": "SELECT * FROM ratings",
    "votes": "SELECT * FROM votes", "datasets": "SELECT dataset_id, manifest_sha256 FROM datasets",
    "calls": "SELECT * EXCLUDE (run_id, request_key, created_at) FROM calls",
    "rating_calls": "SELECT * EXCLUDE (run_id, request_key, created_at) FROM rating_calls",
    "scores": "SELECT * EXCLUDE (run_id) FROM scores",
}


def stored(db: Path) -> dict:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {table: con.execute(f"{sql} ORDER BY ALL").fetchall() for table, sql in STORED.items()}
    finally:
        con.close()


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """A store holding another dataset: a refused ingest must leave it as it is."""
    folder = tmp_path_factory.mktemp("loaded")
    db = folder / "store.duckdb"
    rows = [{"prompt_id": "q", "prompt": "kept", "candidate_id": f"q_{k}", "alignment": k / 2} for k in range(3)]
    assert ingest.main(["table", "--pools", str(write_rows(folder / "pools.csv", rows)), "--db", str(db),
                        "--dataset", "kept"]) == 0
    return db, snapshot(db)


FORMATS = ["csv", "jsonl", "parquet"]


@pytest.mark.parametrize("defect", sorted(DEFECTS))
@settings(max_examples=2, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(study=studies(), pick=st.integers(0, 50), data=st.data())
def test_sql_and_row_by_row_refuse_alike(defect, study, pick, data, loaded, tmp_path_factory, monkeypatch):
    turn = sorted(DEFECTS).index(defect) % len(FORMATS)  # each defect's first example in a format of its own
    ext = data.draw(st.sampled_from(FORMATS[turn:] + FORMATS[:turn]), label="format")
    db, before = loaded
    DEFECTS[defect](study, pick)
    folder = tmp_path_factory.mktemp("study")
    files = write_study(folder / "files", study, ext)
    fresh = {way: folder / f"{way}.duckdb" for way in ("sql", "rows", "reference")}
    outcomes = {"rows": command(files, fresh["rows"], False, monkeypatch),
                "reference": reference(files, fresh["reference"])}
    # the SQL way goes into the store holding another dataset when the others refuse, which must keep it as it was
    refused = outcomes["rows"][0] == 2
    outcomes["sql"] = command(files, db if refused else fresh["sql"], True, monkeypatch)
    assert outcomes["sql"] == outcomes["rows"] == outcomes["reference"], (defect, ext, outcomes)
    if refused:
        assert snapshot(db) == before and not any(path.exists() for path in fresh.values())
    else:
        assert stored(fresh["sql"]) == stored(fresh["rows"]) == stored(fresh["reference"])
