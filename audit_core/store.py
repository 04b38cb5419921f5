"""The DuckDB store: connection, transactions, bulk writes and frame loaders.

Every id or text from the user reaches SQL as a bound parameter. Loaders return
long pandas frames (one row per prompt, candidate, rating or call) for
`audit_core` to join late.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa

from audit_core.records import CallRecord, DatasetRecord, RunRecord, ScoreRecord, utc_now
from audit_core.schema import SCHEMA_SQL

TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "datasets": tuple(f.name for f in dataclasses.fields(DatasetRecord)),
    "prompts": ("dataset_id", "prompt_id", "prompt", "country", "category", "split"),
    "candidates": (
        "dataset_id",
        "prompt_id",
        "candidate_id",
        "canonical_index",
        "source_model",
        "image_path",
    ),
    "ratings": ("dataset_id", "candidate_id", "outcome", "pool", "value", "n"),
    "votes": ("dataset_id", "candidate_id", "outcome", "pool", "annotator", "value"),
    "runs": tuple(f.name for f in dataclasses.fields(RunRecord)),
    "calls": tuple(f.name for f in dataclasses.fields(CallRecord)),
    "scores": tuple(f.name for f in dataclasses.fields(ScoreRecord)),
}


def connect(
    path: str | Path, *, read_only: bool = False, lock_wait: float = 3.0
) -> duckdb.DuckDBPyConnection:
    """Open (and, when writable, create or migrate) the store at `path`.

    A read-only open waits up to `lock_wait` seconds while another process holds
    the file for writing (a runner commits between its batches and lets go), then
    raises duckdb.IOException.
    """
    path = Path(path)
    if read_only:
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such database")
        deadline = time.monotonic() + lock_wait
        while True:
            try:
                return duckdb.connect(str(path), read_only=True)
            except duckdb.IOException as err:
                if "lock" not in str(err).lower() or time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)
    path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(path))
    con.execute(SCHEMA_SQL)
    return con


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """All-or-nothing block: commits on success, rolls back on any exception."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def insert_frame(con: duckdb.DuckDBPyConnection, table: str, frame: pd.DataFrame | pa.Table) -> int:
    """Append `frame` (a pandas frame or Arrow table, columns named as in the table) to
    `table` in one statement; returns rows written."""
    columns = list(TABLE_COLUMNS[table])
    names = frame.column_names if isinstance(frame, pa.Table) else frame.columns
    missing = [c for c in columns if c not in names]
    if missing:
        raise ValueError(f"insert into {table}: frame lacks columns {missing}")
    if len(frame) == 0:
        return 0
    view = f"_insert_{table}"
    con.register(view, frame.select(columns) if isinstance(frame, pa.Table) else frame.loc[:, columns])
    try:
        column_list = ", ".join(columns)
        con.execute(f"INSERT INTO {table} ({column_list}) SELECT {column_list} FROM {view}")
    finally:
        con.unregister(view)
    return len(frame)


def insert_records(con: duckdb.DuckDBPyConnection, table: str, records: Iterable[object]) -> int:
    """Append dataclass records (fields named as the table's columns) to `table`."""
    rows = [dataclasses.asdict(r) for r in records]
    return insert_frame(con, table, pd.DataFrame(rows, columns=list(TABLE_COLUMNS[table])))


def manifest_sha256(candidates: pd.DataFrame, prompts: pd.DataFrame) -> str:
    """Hash of what a judge is shown: prompt texts and each pool's candidate ids.

    Ratings are excluded on purpose: they are held out from the judge.
    """
    text = prompts.set_index("prompt_id")["prompt"].to_dict()
    pools = candidates.sort_values(["prompt_id", "candidate_id"]).groupby("prompt_id")["candidate_id"]
    payload = [[pid, text[pid], list(ids)] for pid, ids in pools]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()


def dataset_row(con: duckdb.DuckDBPyConnection, dataset_id: str) -> dict | None:
    """The `datasets` row for `dataset_id` as a dict, or None when absent."""
    frame = con.execute("SELECT * FROM datasets WHERE dataset_id = ?", [dataset_id]).df()
    return None if frame.empty else frame.iloc[0].to_dict()


def delete_dataset(con: duckdb.DuckDBPyConnection, dataset_id: str) -> None:
    """Remove a dataset with its pools, ratings, runs, calls and scores."""
    run_ids = "SELECT run_id FROM runs WHERE dataset_id = ?"
    con.execute(f"DELETE FROM calls WHERE run_id IN ({run_ids})", [dataset_id])
    con.execute(f"DELETE FROM scores WHERE run_id IN ({run_ids})", [dataset_id])
    for table in ("runs", "votes", "ratings", "candidates", "prompts", "datasets"):
        con.execute(f"DELETE FROM {table} WHERE dataset_id = ?", [dataset_id])


def delete_judge(con: duckdb.DuckDBPyConnection, dataset_id: str, judge: str) -> None:
    """Remove every run of `judge` on `dataset_id` with its calls and scores."""
    run_ids = "SELECT run_id FROM runs WHERE dataset_id = ? AND judge = ?"
    con.execute(f"DELETE FROM calls WHERE run_id IN ({run_ids})", [dataset_id, judge])
    con.execute(f"DELETE FROM scores WHERE run_id IN ({run_ids})", [dataset_id, judge])
    con.execute("DELETE FROM runs WHERE dataset_id = ? AND judge = ?", [dataset_id, judge])


def finish_run(con: duckdb.DuckDBPyConnection, run_id: str, status: str) -> None:
    """Stamp a run's end time and final status."""
    con.execute(
        "UPDATE runs SET finished_at = ?, status = ? WHERE run_id = ?",
        [utc_now(), status, run_id],
    )


# ---------------------------------------------------------------- loaders


def list_datasets(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Datasets with their prompt and candidate counts, newest first."""
    return con.execute(
        """
        SELECT d.dataset_id, d.name, d.source, d.source_revision, d.created_at, d.notes,
               (SELECT count(*) FROM prompts p WHERE p.dataset_id = d.dataset_id) AS prompts,
               (SELECT count(*) FROM candidates c WHERE c.dataset_id = d.dataset_id) AS candidates
        FROM datasets d ORDER BY d.created_at DESC, d.dataset_id
        """
    ).df()


def load_prompts(con: duckdb.DuckDBPyConnection, dataset_id: str) -> pd.DataFrame:
    """prompt_id, prompt, country, category, split; one row per prompt."""
    return con.execute(
        "SELECT prompt_id, prompt, country, category, split FROM prompts "
        "WHERE dataset_id = ? ORDER BY prompt_id",
        [dataset_id],
    ).df()


def load_candidates(con: duckdb.DuckDBPyConnection, dataset_id: str) -> pd.DataFrame:
    """prompt_id, candidate_id, canonical_index, source_model, image_path."""
    return con.execute(
        "SELECT prompt_id, candidate_id, canonical_index, source_model, image_path "
        "FROM candidates WHERE dataset_id = ? ORDER BY prompt_id, canonical_index",
        [dataset_id],
    ).df()


def load_ratings(
    con: duckdb.DuckDBPyConnection, dataset_id: str, pool: str = "all"
) -> pd.DataFrame:
    """Wide ratings: one row per candidate, one column per outcome (NaN if unrated)."""
    long = con.execute(
        "SELECT candidate_id, outcome, value FROM ratings WHERE dataset_id = ? AND pool = ?",
        [dataset_id, pool],
    ).df()
    wide = long.pivot(index="candidate_id", columns="outcome", values="value")
    wide.columns.name = None
    return wide.reset_index()


def load_votes(
    con: duckdb.DuckDBPyConnection,
    dataset_id: str,
    candidate_ids: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Individual ratings (candidate_id, outcome, pool, annotator, value)."""
    sql = "SELECT candidate_id, outcome, pool, annotator, value FROM votes WHERE dataset_id = ?"
    params: list[object] = [dataset_id]
    if candidate_ids is not None:
        sql += " AND list_contains(?, candidate_id)"
        params.append(list(candidate_ids))
    return con.execute(sql + " ORDER BY candidate_id, outcome, pool, annotator", params).df()


def load_runs(con: duckdb.DuckDBPyConnection, dataset_id: str) -> pd.DataFrame:
    """All runs recorded on a dataset."""
    return con.execute(
        "SELECT * FROM runs WHERE dataset_id = ? ORDER BY judge, started_at", [dataset_id]
    ).df()


def load_judges(con: duckdb.DuckDBPyConnection, dataset_id: str) -> pd.DataFrame:
    """judge, kind, backend, model, runs, calls: one row per judge name."""
    return con.execute(
        """
        SELECT r.judge, any_value(r.kind) AS kind, any_value(r.backend) AS backend,
               any_value(r.model) AS model, count(DISTINCT r.run_id) AS runs,
               (SELECT count(*) FROM calls c JOIN runs r2 USING (run_id)
                 WHERE r2.dataset_id = ? AND r2.judge = r.judge) AS calls
        FROM runs r WHERE r.dataset_id = ?
        GROUP BY r.judge ORDER BY r.judge
        """,
        [dataset_id, dataset_id],
    ).df()


def load_calls(
    con: duckdb.DuckDBPyConnection, dataset_id: str, judges: Sequence[str] | None = None
) -> pd.DataFrame:
    """Selector calls joined to their judge: one row per (judge, prompt, order)."""
    sql = """
        SELECT r.judge, c.run_id, c.prompt_id, c.order_index, c.slot_candidate_ids,
               c.status, c.choice_label, c.chosen_candidate_id, c.ranking,
               c.raw_output, c.parse_note, c.attempts, c.seconds, c.request_key,
               c.created_at
        FROM calls c JOIN runs r USING (run_id)
        WHERE r.dataset_id = ? AND r.kind = 'selector'
    """
    params: list[object] = [dataset_id]
    if judges is not None:
        sql += " AND list_contains(?, r.judge)"
        params.append(list(judges))
    return con.execute(sql + " ORDER BY r.judge, c.prompt_id, c.order_index", params).df()


def load_scores(con: duckdb.DuckDBPyConnection, dataset_id: str) -> pd.DataFrame:
    """Content-scorer outputs: scorer (judge name), candidate_id, score."""
    return con.execute(
        """
        SELECT r.judge AS scorer, s.candidate_id, s.score
        FROM scores s JOIN runs r USING (run_id)
        WHERE r.dataset_id = ? AND r.kind = 'scorer'
        ORDER BY r.judge, s.candidate_id
        """,
        [dataset_id],
    ).df()
