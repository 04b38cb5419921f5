"""A table file read into DuckDB: a private staging database, and the file's rows in it with their lines.

Each input table is read into a DuckDB database of its own (`Staging`, a file in a private temporary
folder), attached in one DuckDB instance per ingest (`Workspace`); the validated rows later go from
it into the store (`staged_writes`), never through Python objects per row. `load_raw` gives a CSV,
JSONL or Parquet file as `raw` (a table; for Parquet a view of the file): a column `line` (the
number the readers name a row by: CSV the physical line of the row's start, JSONL the line,
Parquet the row number from 1) and one column per field of the file, as the file gives it (CSV
text, JSON values, Parquet's types; see `cell_sql`).

`load_raw` returns None when the file should be read the slow way instead (`tables.read_rows`,
whose errors are the contract's own messages): a small file (below FAST_PATH_MIN_BYTES), a file
DuckDB cannot read with the strict options below (malformed CSV or JSON, bytes that are not UTF-8),
a CSV whose quoting is not RFC 4180 (`record_scan` and DuckDB then disagree on the rows), a header
with a column outside the contract or named twice, a file with no rows. `python_rows` gives chosen
rows again as the readers see them (`(line, {column: value})`), so a row the SQL finds bad is
described by the readers' own code.

The file is opened once through `input_files` (a regular file within its limit) and DuckDB reads
that open file (`/proc/self/fd/N`), so a FIFO or device swapped in after the check is never read.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from audit_core.errors import InputError
from audit_core.ingest import input_files, record_scan, sources
from audit_core.ingest.cell_sql import JSON_FORM, TEXT_FORM, Cell, identifier, parquet_form
from audit_core.store.database import NO_EXTENSIONS

FAST_PATH_MIN_BYTES = 1 << 20  # smaller files are read row by row, which is quicker for them
MEMORY_LIMIT = "1GB"  # DuckDB's working memory while staging; it spills to the staging folder beyond
MAX_CELL_BYTES = 64 << 20  # the longest CSV row or JSON line read in bulk (DuckDB's buffer for one)


class Workspace:
    """One DuckDB instance (bounded memory, spilling to a private temporary folder) in which an ingest's
    staging databases are attached: opening an instance costs tens of milliseconds, attaching a file
    less than one. Removed by `close` (or when garbage-collected)."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="judge-audit-staging-"))
        self.con = _connect(self.folder)
        self._made = 0
        self._finalizer = weakref.finalize(self, _discard, self.con, self.folder)

    def staging(self, alias: str | None = None) -> Staging:
        """A new, empty staging database in this workspace, attached as `alias` (default: a fresh name)."""
        return Staging(self, alias or self.fresh_alias())

    def fresh_alias(self) -> str:
        """A name no staging database of this workspace has."""
        self._made += 1
        return f"staged_{self._made}"

    @property
    def open(self) -> bool:
        return self._finalizer.alive

    def close(self) -> None:
        self._finalizer()


def _discard(con: duckdb.DuckDBPyConnection, folder: Path) -> None:
    con.close()
    shutil.rmtree(folder, ignore_errors=True)


class Staging:
    """One input's staging database: a file in its workspace's folder, attached there as `alias`; `con`
    is a connection of the workspace whose default database it is. A Staging made without a workspace
    has one of its own, closed with it."""

    def __init__(self, workspace: Workspace | None = None, alias: str = "staged_0") -> None:
        self.owned = workspace is None
        self.workspace = workspace or Workspace()
        self.alias = alias
        self.path = self.workspace.folder / f"{alias}.duckdb"
        self._con: duckdb.DuckDBPyConnection | None = None
        self._attach()

    def _attach(self) -> None:
        self.workspace.con.execute(f"ATTACH {_quoted(self.path)} AS {identifier(self.alias)}")
        self._con = self.cursor()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """Another connection of the workspace whose default database is this one (close it after use)."""
        cursor = self.workspace.con.cursor()
        cursor.execute(f"USE {identifier(self.alias)}")
        return cursor

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            raise RuntimeError(f"staging {self.alias} is detached")
        return self._con

    def detach(self) -> Path:
        """Detach the database from the workspace (so another DuckDB instance can attach the file); its path."""
        if self._con is not None:
            self._con.close()
            self._con = None
            self.workspace.con.execute(f"DETACH {identifier(self.alias)}")
        return self.path

    def join(self, workspace: Workspace) -> None:
        """Attach this staging database to `workspace` instead (under a new alias), if it is not there."""
        if workspace is self.workspace:
            return
        path = self.detach()
        previous, owned = self.workspace, self.owned
        alias = workspace.fresh_alias()
        self.workspace, self.alias, self.path, self.owned = workspace, alias, workspace.folder / f"{alias}.duckdb", False
        path.rename(self.path)
        self._attach()
        if owned:
            previous.close()

    def close(self) -> None:
        """Detach and remove the database (and an own workspace)."""
        if self.workspace.open:
            self.detach()
        self.path.unlink(missing_ok=True)
        if self.owned:
            self.workspace.close()


def _quoted(path: Path) -> str:
    """A path we made, as a SQL string literal."""
    return "'" + str(path).replace("'", "''") + "'"


def _connect(folder: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB instance for work of our own: no extensions, bounded memory, spilling to `folder`."""
    config = {**NO_EXTENSIONS, "memory_limit": MEMORY_LIMIT, "temp_directory": str(folder / "spill"),
              "preserve_insertion_order": True}
    return duckdb.connect(":memory:", config=config)


@contextlib.contextmanager
def attached(con: duckdb.DuckDBPyConnection, stagings: dict[str, Staging]) -> Iterator[None]:
    """`con` (another DuckDB instance, the store's) with each staging database attached read-only under its
    alias, for the block; they are detached from their workspace first."""
    done = []
    try:
        for alias, staging in stagings.items():
            con.execute(f"ATTACH {_quoted(staging.detach())} AS {identifier(alias)} (READ_ONLY)")
            done.append(alias)
        yield
    finally:
        for alias in done:
            con.execute(f"DETACH {identifier(alias)}")


@dataclass
class RawTable:
    """A file's rows in `raw` (`line` and one column per field): each field's `Cell`, the file's format."""

    path: Path
    form: str  # "csv", "jsonl" or "parquet"
    cells: dict[str, Cell]
    structure: list[str] = field(default_factory=list)  # SQL: the row is not what the readers accept as a row
    records: record_scan.Records | None = None  # JSONL: where each line is
    source: BinaryIO | None = None  # Parquet: the file, open while `raw` (a view of it) is read

    def close(self) -> None:
        if self.source is not None:
            self.source.close()


def suffix(path: Path) -> str:
    return path.suffix.lower()


def load_raw(stage: Staging, path: Path, known: Callable[[str], bool]) -> RawTable | None:
    """The file read into `raw`, or None to read it row by row (module docstring). `known` tells a
    column of the contract; a JSONL row with another key is marked in `structure`."""
    kind = suffix(path)
    if kind not in (".csv", ".jsonl", ".parquet"):
        return None
    handle = input_files.opened(path, input_files.TABLE)
    raw = None
    try:
        if os.fstat(handle.fileno()).st_size >= FAST_PATH_MIN_BYTES:
            opened = f"/proc/self/fd/{handle.fileno()}" if Path("/proc/self/fd").is_dir() else str(path)
            load = {".parquet": _load_parquet, ".csv": _load_csv, ".jsonl": _load_jsonl}[kind]
            raw = load(stage.con, path, opened, known)
    except (duckdb.IOException, duckdb.OutOfMemoryException, MemoryError):
        handle.close()  # a full disk, no memory: nothing to read instead
        raise
    except (duckdb.Error, pa.ArrowException, OSError):  # refused, or not read: the readers say why
        drop_work(stage)
        stage.con.execute("DROP TABLE IF EXISTS objects")
    if raw is not None and raw.form == "parquet":
        raw.source = handle  # the view reads it until the caller closes the RawTable
    else:
        handle.close()
    return raw


def _load_parquet(con: duckdb.DuckDBPyConnection, path: Path, opened: str, known: Callable[[str], bool]) -> RawTable | None:
    names = pq.read_schema(opened).names
    if len(set(names)) < len(names) or not all(known(n) for n in names):
        return None  # a repeated or unknown column: the first row is refused, which the readers say best
    types = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet(?))",
                             [opened]).fetchall())
    if sorted(types) != sorted(names):
        return None
    columns = ", ".join(identifier(n) for n in names)
    # a view, not a copy: the rules read the file itself (`opened` is a path of ours, /proc/self/fd/N)
    con.execute(f"CREATE VIEW raw AS SELECT file_row_number + 1 AS line, {columns} "
                f"FROM read_parquet({_quoted(Path(opened))}, file_row_number = true)")
    if con.execute("SELECT count(*) FROM raw").fetchall()[0][0] == 0:
        con.execute("DROP VIEW raw")
        return None
    return RawTable(path, "parquet", {n: Cell(identifier(n), parquet_form(types[n])) for n in names})


def _load_csv(con: duckdb.DuckDBPyConnection, path: Path, opened: str, known: Callable[[str], bool]) -> RawTable | None:
    records = record_scan.csv_records(path)
    if len(records) < 2 or records.lines[0] != 1:
        return None
    header = _csv_header(path, records)
    if header is None or len(set(header)) < len(header) or not all(known(n) for n in header):
        return None
    lines = pa.table({"line": records.lines[1:], "breaks": records.breaks[1:]})
    columns = "{" + ", ".join(f"{_key(n)}: 'VARCHAR'" for n in header) + "}"
    con.register("record_lines", lines)
    try:
        con.execute(
            f"CREATE TABLE raw AS SELECT * FROM (SELECT true AS parsed, * FROM read_csv(?, header = true, "
            f"auto_detect = false, columns = {columns}, delim = ',', quote = '\"', escape = '\"', strict_mode = true, "
            f"null_padding = false, encoding = 'utf-8', max_line_size = {MAX_CELL_BYTES})) POSITIONAL JOIN record_lines",
            [opened])
    finally:
        con.unregister("record_lines")
    breaks = " + ".join(_breaks(identifier(n)) for n in header)
    (mismatched,) = con.execute(f"SELECT count(*) FILTER (WHERE parsed IS NULL OR line IS NULL OR {breaks} <> breaks) "
                                "FROM raw").fetchall()[0]
    if mismatched:  # quoting outside RFC 4180: the rows are not the records, so neither are the lines
        con.execute("DROP TABLE raw")
        return None
    con.execute("ALTER TABLE raw DROP parsed")
    con.execute("ALTER TABLE raw DROP breaks")
    return RawTable(path, "csv", {n: Cell(identifier(n), TEXT_FORM) for n in header})


def _key(name: str) -> str:
    identifier(name)  # refuses anything but an identifier
    return f"'{name}'"


def _breaks(column: str) -> str:
    """SQL: the line breaks inside a cell (\\n, \\r\\n and a lone \\r each count one)."""
    lf, cr, crlf = "chr(10)", "chr(13)", "chr(13) || chr(10)"
    count = (f"2 * length({column}) - length(replace({column}, {lf}, '')) - length(replace({column}, {cr}, '')) "
             f"- (length({column}) - length(replace({column}, {crlf}, ''))) // 2")
    return f"(CASE WHEN contains({column}, {lf}) OR contains({column}, {cr}) THEN {count} ELSE 0 END)"


def _csv_header(path: Path, records: record_scan.Records) -> list[str] | None:
    """The header's cells as the readers parse them, or None when they would refuse it."""
    with input_files.opened(path, input_files.TABLE) as handle:
        handle.seek(int(records.starts[0]))
        data = handle.read(int(records.ends[0] - records.starts[0]))
    text = data.decode("utf-8", "surrogateescape")
    if sources.text_problem(text):
        return None
    try:
        return next(csv.reader(io.StringIO(text, newline="")), None)
    except csv.Error:
        return None


def _load_jsonl(con: duckdb.DuckDBPyConnection, path: Path, opened: str, known: Callable[[str], bool]) -> RawTable | None:
    records = record_scan.jsonl_lines(path)
    if len(records) == 0:
        return None
    outline = _jsonl_outline(opened, records)
    spans = pa.table({"line": records.lines, "outline": outline})
    con.register("record_lines", spans)
    try:
        con.execute(f"CREATE TABLE objects AS SELECT * FROM (SELECT true AS parsed, json FROM read_ndjson_objects(?, "
                    f"maximum_object_size = {MAX_CELL_BYTES})) POSITIONAL JOIN record_lines", [opened])
    finally:
        con.unregister("record_lines")
    (mismatched,) = con.execute("SELECT count(*) FILTER (WHERE parsed IS NULL OR line IS NULL) FROM objects").fetchall()[0]
    if mismatched:
        con.execute("DROP TABLE objects")
        return None
    keys = [k for (k,) in con.execute("SELECT DISTINCT unnest(json_keys(json)) FROM objects "
                                      "WHERE json_type(json) = 'OBJECT' ORDER BY 1").fetchall()]
    fields = [k for k in keys if known(k)]
    extracted = "".join(f", json -> {_path(k)} AS {identifier(k)}" for k in fields)
    known_keys = "[" + ", ".join(_key(k) for k in fields) + "]::VARCHAR[]"
    con.execute(f"""CREATE TABLE raw AS SELECT line,
        json_type(json) <> 'OBJECT' OR NOT outline OR len(json_keys(json)) <> len(list_distinct(json_keys(json)))
            OR len(list_filter(json_keys(json), lambda k: NOT list_contains({known_keys}, k))) > 0
            OR regexp_matches(regexp_replace(json, '"(?:[^"\\\\]|\\\\.)*"', '""', 'g'), ',[ \t\r\n]*[\\]}}]')
            AS malformed{extracted}
        FROM objects""")
    con.execute("DROP TABLE objects")
    return RawTable(path, "jsonl", {k: Cell(identifier(k), JSON_FORM) for k in fields}, ["malformed"], records)


def _path(key: str) -> str:
    identifier(key)
    return f"'$.\"{key}\"'"


def _jsonl_outline(opened: str, records: record_scan.Records) -> np.ndarray:
    """Per line: it starts with '{' and ends with '}' (spaces, tabs and \\r after it aside), as the readers
    need (they decode from the line's first character, and allow only those after the object)."""
    data = np.memmap(opened, dtype=np.uint8, mode="r")
    ok = data[records.starts] == ord("{")
    last = records.ends - 1
    pending = np.flatnonzero(last >= records.starts)
    while len(pending):
        trailing = np.isin(data[last[pending]], (32, 9, 13))
        pending = pending[trailing]
        last[pending] -= 1
        pending = pending[last[pending] >= records.starts[pending]]
    ok &= (last >= records.starts) & (data[np.maximum(last, 0)] == ord("}"))
    return ok


def drop_work(stage: Staging) -> None:
    """Drop what reading a file in SQL leaves behind (`raw`, `norm`), a table or a view."""
    for name in ("raw", "norm"):
        kind = stage.con.execute("SELECT table_type FROM information_schema.tables WHERE table_catalog = current_database() "
                                 "AND table_name = ?", [name]).fetchall()
        if kind:
            stage.con.execute(f"DROP {'VIEW' if kind[0][0] == 'VIEW' else 'TABLE'} {name}")


def python_rows(raw: RawTable, stage: Staging, lines: list[int]) -> list[tuple[int, dict]]:
    """The rows at `lines` (ascending) as the readers see them: (line, {column: value})."""
    if raw.form == "csv":
        names = list(raw.cells)
        found = stage.con.execute(f"SELECT line, {', '.join(raw.cells[n].sql for n in names)} FROM raw "
                                  "WHERE list_contains(?, line) ORDER BY line", [lines]).fetchall()
        return [(line, {n: (v if v is not None and v.strip() else None) for n, v in zip(names, values)})
                for line, *values in found]
    if raw.form == "jsonl":
        return [(line, _jsonl_row(raw, line)) for line in lines]
    return [(line, _parquet_row(raw.path, line)) for line in lines]


def _jsonl_row(raw: RawTable, line: int) -> dict:
    at = int(np.searchsorted(raw.records.lines, line))
    start, end = int(raw.records.starts[at]), int(raw.records.ends[at])
    with input_files.opened(raw.path, input_files.TABLE) as handle:
        handle.seek(start)
        text = handle.read(end - start).decode("utf-8", "surrogateescape")
    return sources.json_line(text, raw.path, line)


def _parquet_row(path: Path, number: int) -> dict:
    with input_files.opened(path, input_files.TABLE) as source:
        handle = pq.ParquetFile(source)
        first = 0
        for group in range(handle.num_row_groups):
            size = handle.metadata.row_group(group).num_rows
            if number <= first + size:
                row = handle.read_row_group(group).slice(number - first - 1, 1).to_pylist()[0]
                return sources.parquet_cells(row)
            first += size
    raise InputError("row not found", file=path, line=number)
