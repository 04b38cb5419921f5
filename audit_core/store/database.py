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
import os
import re
import shutil
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa

from audit_core.attributes.taxonomy import Taxonomy, parse_taxonomy
from audit_core.errors import DatabaseFileError, DatabaseHeld, InputError
from audit_core.store.records import (
    CallRecord,
    DatasetRecord,
    GoldLabelRecord,
    LabelAnswerRecord,
    LabelCallRecord,
    RatingCallRecord,
    RunRecord,
    ScoreRecord,
    TaxonomyRecord,
    utc_now,
)
from audit_core.store.schema import ADDED_COLUMNS, DEFAULT_POOL, OPTIONAL_COLUMNS, RUN_RECORD_TABLES, SCHEMA_SQL

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
    "candidate_attributes": ("dataset_id", "candidate_id", "attribute", "value"),
    "runs": tuple(f.name for f in dataclasses.fields(RunRecord)),
    "calls": tuple(f.name for f in dataclasses.fields(CallRecord)),
    "scores": tuple(f.name for f in dataclasses.fields(ScoreRecord)),
    "rating_calls": tuple(f.name for f in dataclasses.fields(RatingCallRecord)),
    "taxonomies": tuple(f.name for f in dataclasses.fields(TaxonomyRecord)),
    "gold_labels": tuple(f.name for f in dataclasses.fields(GoldLabelRecord)),
    "label_calls": tuple(f.name for f in dataclasses.fields(LabelCallRecord)),
    "label_answers": tuple(f.name for f in dataclasses.fields(LabelAnswerRecord)),
}

LOCK_WAIT_ENV = "JUDGE_AUDIT_LOCK_WAIT"
WRITE_LOCK_WAIT = 30.0  # seconds; a writer (ingest, a runner) outwaits another's batch or short job
READ_LOCK_WAIT = 3.0  # seconds; a reader (the app, analyze) only needs a runner's batch to end
# DuckDB would otherwise fetch an extension from the internet for a file it does not
# recognise as its own (an SQLite file, say) and load it.
NO_EXTENSIONS: dict[str, bool] = {"autoload_known_extensions": False, "autoinstall_known_extensions": False}
# DuckDB's working memory in a reader (its default, 80% of RAM, fills as a cache while a large study's
# columns are read, beside the arrays they become); beyond it DuckDB spills to <db>.tmp. A writer keeps
# the default: a ten-million-prompt ingest builds key indexes that DuckDB cannot spill.
READ_MEMORY_LIMIT = "2GB"
# A reader only reads the store: no SQL it runs may reach another file or a URL.
READ_ONLY_CONFIG: dict[str, object] = {**NO_EXTENSIONS, "enable_external_access": False,
                                       "memory_limit": READ_MEMORY_LIMIT}
_DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file
_SQLITE_MAGIC = b"SQLite format 3\x00"
_POLL_SECONDS = 0.05


def write_lock_wait() -> float:
    """Seconds a writable open waits for another process's lock: $JUDGE_AUDIT_LOCK_WAIT, else 30."""
    text = os.environ.get(LOCK_WAIT_ENV, "").strip()
    if not text:
        return WRITE_LOCK_WAIT
    if not re.fullmatch(r"[0-9]+(\.[0-9]*)?", text):
        raise InputError(f"expected a number of seconds, got {text!r}", field=f"${LOCK_WAIT_ENV}")
    return float(text)


def connect(
    path: str | Path, *, read_only: bool = False, lock_wait: float | None = None
) -> duckdb.DuckDBPyConnection:
    """Open (and, when writable, create or migrate) the store at `path`.

    While another process holds the file's lock (a runner commits between its
    batches and lets go), the open retries for `lock_wait` seconds (default:
    3 s read-only, `write_lock_wait()` writable; a writable open says once on
    stderr that it waits). DuckDB never loads or downloads an extension, and a
    read-only connection reaches no file or URL but the store. Raises
    DatabaseFileError, one line naming the file, when the file cannot be opened
    as asked (DatabaseHeld when the lock stays taken).
    """
    path = Path(path)
    con = _locked_connection(path, read_only, lock_wait)
    if not read_only:
        try:
            _create_schema(path, con)
        except BaseException:
            con.close()
            raise
    return con


def _locked_connection(path: Path, read_only: bool, lock_wait: float | None) -> duckdb.DuckDBPyConnection:
    """A connection to `path` once its lock is had (`connect` says how long it waits and what it refuses)."""
    _check_file(path, read_only)
    wait = lock_wait if lock_wait is not None else READ_LOCK_WAIT if read_only else write_lock_wait()
    config = READ_ONLY_CONFIG if read_only else NO_EXTENSIONS
    deadline = time.monotonic() + wait
    told = read_only
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only, config=dict(config))
            break
        except duckdb.Error as err:
            if not is_locked(err):
                raise file_error(path, err, read_only=read_only) from None
            if time.monotonic() >= deadline:
                raise held_error(path, wait, err) from None
            if not told:
                print(waiting_notice(path, wait), file=sys.stderr, flush=True)
                told = True
        time.sleep(_POLL_SECONDS)
    return con


def _create_schema(path: Path, con: duckdb.DuckDBPyConnection) -> None:
    """Create the store's tables, or add the columns (schema.ADDED_COLUMNS) an older database lacks;
    DatabaseFileError when the file cannot take them."""
    try:
        con.execute(SCHEMA_SQL)
        for table, column, kind in ADDED_COLUMNS:
            if not has_column(con, table, column):
                con.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
    except duckdb.IOException as err:  # e.g. a full disk: the file cannot take the schema
        raise file_error(path, err, read_only=False) from None


def has_column(con: duckdb.DuckDBPyConnection, table: str, column: str) -> bool:
    """Whether `table` of the attached database has `column` (a database older than the column lacks it)."""
    rows = con.execute(
        "SELECT count(*) FROM duckdb_columns() WHERE database_name = current_database() "
        "AND schema_name = current_schema() AND table_name = ? AND column_name = ?",
        [table, column],
    ).fetchall()
    return rows[0][0] > 0


def _holds_no_table(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the database `con` is attached to holds no table yet (a file just created)."""
    (tables,) = con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database()").fetchone()
    return tables == 0


@contextlib.contextmanager
def writing(path: str | Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A writable connection to the store at `path` for the block, closed after it.

    When this call created the database and the block raises, the database goes
    again: the file, DuckDB's side files (`<db>.wal`, `<db>.tmp`) and the folders
    made for it. "Created by this call" is decided under the file's lock: the path
    was absent when the call began and the file held no table when the lock was
    taken. So of two writers racing to create the same new path, the one that
    waited finds the other's tables and never removes a database it did not make.
    The files are unlinked before the lock is let go, so a waiting writer never
    opens a database about to vanish (it creates a new one instead).
    """
    path = Path(path)
    absent = not (path.exists() or path.is_symlink())
    new_folders = [p for p in [path.parent, *path.parent.parents] if not p.exists()]  # deepest first
    con = _locked_connection(path, False, None)
    empty = _holds_no_table(con)
    discard = False
    try:
        _create_schema(path, con)
        yield con
    except BaseException:
        discard = absent and empty
        if discard:
            _unlink_store(path)  # while `con` still holds the file's lock
        raise
    finally:
        con.close()
        if discard:
            for folder in new_folders:
                with contextlib.suppress(OSError):  # not empty: something else lives there now
                    folder.rmdir()


def _unlink_store(path: Path) -> None:
    """Remove the database file at `path` and DuckDB's side files beside it (never through a link)."""
    for target in (path, path.with_name(path.name + ".wal")):
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
    spill = path.with_name(path.name + ".tmp")
    if spill.is_dir() and not spill.is_symlink():
        shutil.rmtree(spill, ignore_errors=True)


def is_locked(err: duckdb.Error) -> bool:
    """Whether DuckDB refused the file because another process holds its lock."""
    return isinstance(err, duckdb.IOException) and "could not set lock" in str(err).lower()


def waiting_notice(path: str | Path, seconds: float) -> str:
    """The line a writer prints once when it starts waiting for another process's lock."""
    return f"waiting for {path}: held by another process (retrying for up to {seconds:g} s)"


def held_error(path: str | Path, seconds: float, err: duckdb.Error) -> DatabaseHeld:
    """DatabaseHeld for a lock still taken after `seconds`, naming the holder's PID when DuckDB does."""
    pid = re.search(r"\(PID (\d+)\)", str(err))
    holder = f"another process (PID {pid.group(1)})" if pid else "another process"
    return DatabaseHeld(
        f"held by {holder} for over {seconds:g} s (a runner, an ingest or another writer); "
        "wait for it to finish, then run again",
        file=path,
    )


def file_error(path: str | Path, err: duckdb.Error, *, read_only: bool) -> DatabaseFileError:
    """DuckDB's refusal to open `path` as one line: what is wrong with the file, not DuckDB's wording."""
    text = str(err)
    lowered = text.lower()
    if "not a valid duckdb database" in lowered or "extension" in lowered:
        return DatabaseFileError("not a DuckDB database", file=path)
    if "is a directory" in lowered:
        return DatabaseFileError("is a directory", file=path)
    if "read-only file system" in lowered:
        return DatabaseFileError("read-only: cannot write (read-only file system)", file=path)
    if "permission denied" in lowered:
        what = "cannot be read: permission denied" if read_only else "read-only: cannot write (permission denied)"
        return DatabaseFileError(what, file=path)
    first = text.splitlines()[0] if text else type(err).__name__
    return DatabaseFileError(f"cannot be opened: {first}", file=path)


def _check_file(path: Path, read_only: bool) -> None:
    """Refuse what DuckDB would fail on less clearly (or block on, like a FIFO)."""
    if path.is_dir():
        raise DatabaseFileError("is a directory", file=path)
    if not path.exists():
        if read_only:
            raise DatabaseFileError("no such database", file=path)
        _check_new_file(path)
        return
    if not path.is_file():
        raise DatabaseFileError("not a regular file", file=path)
    try:
        with path.open("rb") as handle:
            header = handle.read(len(_SQLITE_MAGIC))
    except OSError as err:
        raise DatabaseFileError(f"cannot be read: {err.strerror or err}", file=path) from None
    if header.startswith(_SQLITE_MAGIC):
        raise DatabaseFileError("not a DuckDB database (it is an SQLite database)", file=path)
    if header[8:12] != _DUCKDB_MAGIC:
        raise DatabaseFileError("not a DuckDB database", file=path)
    if not read_only and not os.access(path, os.W_OK):
        raise DatabaseFileError("read-only: cannot write", file=path)


def _check_new_file(path: Path) -> None:
    """Make the folder of a database to be created, refusing one that cannot hold it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DatabaseFileError(f"cannot create its folder: {err.strerror or err}", file=path) from None
    if not os.access(path.parent, os.W_OK):
        raise DatabaseFileError("read-only: cannot create a database in this folder", file=path)


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
    `table` in one statement; returns rows written. A column of schema.OPTIONAL_COLUMNS the
    frame lacks is written NULL."""
    names = frame.column_names if isinstance(frame, pa.Table) else frame.columns
    optional = OPTIONAL_COLUMNS.get(table, ())
    columns = [c for c in TABLE_COLUMNS[table] if c in names or c not in optional]
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


def prompt_count(con: duckdb.DuckDBPyConnection, dataset_id: str) -> int:
    """How many prompts `dataset_id` has."""
    return int(con.execute("SELECT count(*) FROM prompts WHERE dataset_id = ?", [dataset_id]).fetchall()[0][0])


def delete_dataset(con: duckdb.DuckDBPyConnection, dataset_id: str) -> None:
    """Remove a dataset with its pools, ratings, votes, runs, every run's records and every other table's rows
    of it (campaigns included: any table of the store with a `dataset_id` column)."""
    run_ids = "SELECT run_id FROM runs WHERE dataset_id = ?"
    for table in RUN_RECORD_TABLES:
        con.execute(f"DELETE FROM {table} WHERE run_id IN ({run_ids})", [dataset_id])
    core = ("runs", "gold_labels", "taxonomies", "candidate_attributes", "votes", "ratings", "candidates", "prompts")
    others = [row[0] for row in con.execute(
        "SELECT DISTINCT table_name FROM duckdb_columns() WHERE database_name = current_database() "
        "AND schema_name = 'main' AND column_name = 'dataset_id' ORDER BY table_name").fetchall()
        if row[0] not in core and row[0] != "datasets"]
    for table in (*others, *core, "datasets"):
        con.execute(f'DELETE FROM "{table}" WHERE dataset_id = ?', [dataset_id])


def delete_judge(con: duckdb.DuckDBPyConnection, dataset_id: str, judge: str) -> None:
    """Remove every run of `judge` on `dataset_id` with its records (calls, scores, rating calls)."""
    run_ids = "SELECT run_id FROM runs WHERE dataset_id = ? AND judge = ?"
    for table in RUN_RECORD_TABLES:
        con.execute(f"DELETE FROM {table} WHERE run_id IN ({run_ids})", [dataset_id, judge])
    con.execute("DELETE FROM runs WHERE dataset_id = ? AND judge = ?", [dataset_id, judge])


def finish_run(con: duckdb.DuckDBPyConnection, run_id: str, status: str) -> None:
    """Stamp a run's end time and final status."""
    con.execute(
        "UPDATE runs SET finished_at = ?, status = ? WHERE run_id = ?",
        [utc_now(), status, run_id],
    )


# ---------------------------------------------------------------- loaders


def list_datasets(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Datasets with their prompt and candidate counts and their number of selector runs, newest first."""
    return con.execute(
        """
        SELECT d.dataset_id, d.name, d.source, d.source_revision, d.created_at, d.notes,
               (SELECT count(*) FROM prompts p WHERE p.dataset_id = d.dataset_id) AS prompts,
               (SELECT count(*) FROM candidates c WHERE c.dataset_id = d.dataset_id) AS candidates,
               (SELECT count(*) FROM runs r WHERE r.dataset_id = d.dataset_id AND r.kind = 'selector') AS selectors
        FROM datasets d ORDER BY d.created_at DESC, d.dataset_id
        """
    ).df()


PROMPT_COLUMNS = ("prompt_id", "prompt", "country", "category", "split")  # what `load_prompts` reads


def load_prompts(con: duckdb.DuckDBPyConnection, dataset_id: str) -> pd.DataFrame:
    """PROMPT_COLUMNS; one row per prompt."""
    return con.execute(
        f"SELECT {', '.join(PROMPT_COLUMNS)} FROM prompts WHERE dataset_id = ? ORDER BY prompt_id",
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
    con: duckdb.DuckDBPyConnection, dataset_id: str, pool: str = DEFAULT_POOL
) -> pd.DataFrame:
    """Wide ratings: one row per candidate, one column per outcome (NaN if unrated)."""
    long = con.execute(
        "SELECT candidate_id, outcome, value FROM ratings WHERE dataset_id = ? AND pool = ?",
        [dataset_id, pool],
    ).df()
    wide = long.pivot(index="candidate_id", columns="outcome", values="value")
    wide.columns.name = None
    return wide.reset_index()


def load_pool_ratings(con: duckdb.DuckDBPyConnection, dataset_id: str, outcome: str) -> pd.DataFrame:
    """Long ratings of one outcome, every pool: candidate_id, pool, value (each pool's consensus rows)."""
    return con.execute(
        "SELECT candidate_id, pool, value FROM ratings WHERE dataset_id = ? AND outcome = ? "
        "ORDER BY candidate_id, pool",
        [dataset_id, outcome],
    ).df()


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


def load_candidate_attributes(con: duckdb.DuckDBPyConnection, dataset_id: str) -> pd.DataFrame:
    """Item attributes for breakdowns (candidate_id, attribute, value), e.g. an image's culture."""
    return con.execute(
        "SELECT candidate_id, attribute, value FROM candidate_attributes WHERE dataset_id = ? "
        "ORDER BY candidate_id, attribute",
        [dataset_id],
    ).df()


def load_runs(con: duckdb.DuckDBPyConnection, dataset_id: str) -> pd.DataFrame:
    """All runs recorded on a dataset."""
    return con.execute(
        "SELECT * FROM runs WHERE dataset_id = ? ORDER BY judge, started_at", [dataset_id]
    ).df()


def load_judges(con: duckdb.DuckDBPyConnection, dataset_id: str) -> pd.DataFrame:
    """judge, kind, backend, model, runs, calls: one row per judge name.

    calls counts every record of the judge's runs (selector calls, scores, rating calls).
    """
    records = " UNION ALL ".join(f"SELECT run_id FROM {table}" for table in RUN_RECORD_TABLES)
    return con.execute(
        f"""
        WITH recorded AS (SELECT run_id, count(*) AS n FROM ({records}) GROUP BY run_id)
        SELECT r.judge, any_value(r.kind) AS kind, any_value(r.backend) AS backend,
               any_value(r.model) AS model, count(DISTINCT r.run_id) AS runs,
               coalesce(sum(rec.n), 0)::BIGINT AS calls
        FROM runs r LEFT JOIN recorded rec USING (run_id) WHERE r.dataset_id = ?
        GROUP BY r.judge ORDER BY r.judge
        """,
        [dataset_id],
    ).df()


# Every column `load_calls` can return, in its order; those with a few distinct values (or one per prompt) come
# back as pandas categoricals when the caller names its `columns`.
CALL_COLUMNS = ("judge", "run_id", "prompt_id", "order_index", "slot_candidate_ids", "status", "choice_label",
                "chosen_candidate_id", "ranking", "raw_output", "parse_note", "attempts", "seconds", "request_key",
                "created_at", "label_probs")
_CATEGORICAL_CALL_COLUMNS = ("judge", "run_id", "prompt_id", "status", "choice_label")
_TEXT_CALL_COLUMNS = ("raw_output", "parse_note")  # mostly NULL in the audit's read


def load_calls(
    con: duckdb.DuckDBPyConnection, dataset_id: str, judges: Sequence[str] | None = None, *, ok_outputs: bool = True,
    columns: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Selector calls joined to their judge: one row per (judge, prompt, order), sorted by judge, prompt, order.

    With `ok_outputs` False, raw_output is NULL where the strict parser accepted the call (status
    'ok'): the audit reads only the other calls' outputs (timing's not-JSON count), and accepted
    outputs are most of the frame's memory at a million prompts. label_probs is NULL throughout for a
    store older than that column.

    `columns` (names from CALL_COLUMNS) reads only those, in that order, compactly: judge, run_id,
    prompt_id, status and choice_label as pandas categoricals (no Python string per row), raw_output
    and parse_note as Arrow-backed strings (a NULL costs a bit, not an object), order_index
    and attempts in the smallest integer type that holds them. Without it, every column as DuckDB
    gives it (object strings, int32, lists). ValueError for a name that is not a column.
    """
    names = CALL_COLUMNS if columns is None else tuple(columns)
    unknown = [name for name in names if name not in CALL_COLUMNS]
    if unknown:
        raise ValueError(f"load_calls: no column {', '.join(map(repr, unknown))} (columns: {', '.join(CALL_COLUMNS)})")
    probs = "c.label_probs" if has_column(con, "calls", "label_probs") else "NULL::VARCHAR"
    expression = {name: f"c.{name}" for name in CALL_COLUMNS}
    expression.update(judge="r.judge", label_probs=f"{probs}",
                      raw_output="CASE WHEN ? OR c.status <> 'ok' THEN c.raw_output END")
    sql = f"""
        SELECT {", ".join(f"{expression[name]} AS {name}" for name in names)}
        FROM calls c JOIN runs r USING (run_id)
        WHERE r.dataset_id = ? AND r.kind = 'selector'
    """
    params: list[object] = [ok_outputs] if "raw_output" in names else []
    params.append(dataset_id)
    if judges is not None:
        sql += " AND list_contains(?, r.judge)"
        params.append(list(judges))
    sql += " ORDER BY r.judge, c.prompt_id, c.order_index"
    if columns is None:
        return con.execute(sql, params).df()
    table = con.sql(sql, params=params).to_arrow_table()
    frame = pd.DataFrame({name: _compact_column(name, table.column(name)) for name in names}, columns=list(names))
    for name in ("order_index", "attempts"):
        if name in frame.columns:
            frame[name] = pd.to_numeric(frame[name], downcast="integer")
    return frame


def load_call_texts(con: duckdb.DuckDBPyConnection, dataset_id: str) -> pd.DataFrame:
    """The selector calls that carry text as `load_calls(..., ok_outputs=False)` reads them: judge, raw_output
    (NULL where status 'ok'), parse_note, only where either is not NULL, in `load_calls`' order and types.
    A large study's accepted calls, most of them, are not read at all."""
    table = con.sql("""
        SELECT r.judge, CASE WHEN c.status <> 'ok' THEN c.raw_output END AS raw_output, c.parse_note
        FROM calls c JOIN runs r USING (run_id)
        WHERE r.dataset_id = $dataset AND r.kind = 'selector'
          AND ((c.status <> 'ok' AND c.raw_output IS NOT NULL) OR c.parse_note IS NOT NULL)
        ORDER BY r.judge, c.prompt_id, c.order_index""", params={"dataset": dataset_id}).to_arrow_table()
    return pd.DataFrame({name: _compact_column(name, table.column(name)) for name in table.column_names})


def _compact_column(name: str, column: pa.ChunkedArray) -> pd.Series:
    """One column of `load_calls`' compact read (its docstring says which type each gets)."""
    if name in _CATEGORICAL_CALL_COLUMNS:
        return column.dictionary_encode().to_pandas()
    if name in _TEXT_CALL_COLUMNS:
        return pd.Series(pd.arrays.ArrowExtensionArray(column))
    return column.to_pandas()


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


def load_rating_calls(con: duckdb.DuckDBPyConnection, dataset_id: str) -> pd.DataFrame:
    """Rating-judge calls: one row per (judge, condition, candidate_id).

    Columns: judge, condition, candidate_id, rating (NaN unless status is 'ok'),
    status, raw_output, parse_note, attempts, seconds, run_id, request_key, created_at.
    """
    return con.execute(
        """
        SELECT r.judge, c.condition, c.candidate_id, c.rating, c.status, c.raw_output,
               c.parse_note, c.attempts, c.seconds, c.run_id, c.request_key, c.created_at
        FROM rating_calls c JOIN runs r USING (run_id)
        WHERE r.dataset_id = ? AND r.kind = 'rater'
        ORDER BY r.judge, c.condition, c.candidate_id
        """,
        [dataset_id],
    ).df()


def load_taxonomy(con: duckdb.DuckDBPyConnection, dataset_id: str) -> Taxonomy | None:
    """The taxonomy a dataset's gold labels were checked against (its sha256 that of the file
    it was read from), or None when the dataset has none."""
    row = con.execute("SELECT taxonomy_json, sha256 FROM taxonomies WHERE dataset_id = ?", [dataset_id]).fetchone()
    if row is None:
        return None
    parsed = parse_taxonomy(row[0].encode(), f"the taxonomy stored with dataset {dataset_id!r}")
    return dataclasses.replace(parsed, sha256=row[1])


def load_gold_labels(con: duckdb.DuckDBPyConnection, dataset_id: str) -> pd.DataFrame:
    """Gold labels: candidate_id, attribute, label; one row per (image, attribute)."""
    return con.execute(
        "SELECT candidate_id, attribute, label FROM gold_labels WHERE dataset_id = ? ORDER BY candidate_id, attribute",
        [dataset_id],
    ).df()


def load_label_answers(con: duckdb.DuckDBPyConnection, dataset_id: str) -> pd.DataFrame:
    """Attribute-judge answers joined to their call and judge: one row per (judge, condition, image, attribute).

    Columns: judge, backend, condition, candidate_id, attribute, status (schema.LABEL_ANSWER_STATUSES),
    label (None unless 'ok'), answer, rationale, call_status, raw_output, parse_note, run_id, request_key.
    """
    return con.execute(
        """
        SELECT r.judge, r.backend, a.condition, a.candidate_id, a.attribute, a.status, a.label, a.answer,
               a.rationale, c.status AS call_status, c.raw_output, c.parse_note, a.run_id, a.request_key
        FROM label_answers a JOIN runs r USING (run_id) LEFT JOIN label_calls c USING (request_key)
        WHERE r.dataset_id = ? AND r.kind = 'labeler'
        ORDER BY r.judge, a.condition, a.candidate_id, a.attribute
        """,
        [dataset_id],
    ).df()
