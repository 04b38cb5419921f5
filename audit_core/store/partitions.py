"""Partitions of a dataset: contiguous ranges of its prompts, each written as Parquet files a worker opens alone.

A distributed audit's driver must never hold a whole study: it cuts the dataset's prompts, in prompt-id order
(the rows 0..P−1 of `store.load_prompts` and `selection.data.load_selection_data`), into ranges of near-equal
size (as numpy's `array_split`), and each worker loads one. A partition holds every store row of its prompts:
the prompts, their candidates, the candidates' ratings, votes and scores, and the selector calls on the prompts;
beside them the dataset's small tables, whole (its `datasets` row, its runs). `export_partitions` has DuckDB copy
each table straight to Parquet (no row passes through Python, and DuckDB streams the copy); `open_partition`
gives a connection on which those files are views named as the store's tables, so the store's loaders read a
partition unchanged and return its rows of the whole study's arrays:
`load_selection_data(open_partition(p), dataset)` is `whole.rows(p.rows)`, but for padding. A partition's
widest pool and most orders are its own: where all its pools are smaller than the study's largest, its arrays
have fewer candidate columns (and a judge with no call on its prompts is absent); the columns it lacks are the
whole's padding.

Not exported: what the selection audit does not read (candidate attributes, rating and attribute judges' calls,
gold labels).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import duckdb

from audit_core.store.database import NO_EXTENSIONS, READ_MEMORY_LIMIT, transaction

# The configuration of a connection to export from: a reader's (store.READ_ONLY_CONFIG) but that it may write
# files, which COPY needs: duckdb.connect(path, read_only=True, config=dict(EXPORT_CONFIG)).
EXPORT_CONFIG: dict[str, object] = {**NO_EXTENSIONS, "memory_limit": READ_MEMORY_LIMIT}

# Each exported table's rows of one partition; $dataset, and the range's bounds $first and $last (prompt ids,
# both inclusive), are bound parameters.
_IN_RANGE = "dataset_id = $dataset AND prompt_id BETWEEN $first AND $last"
_RANGE_CANDIDATES = f"(SELECT candidate_id FROM candidates WHERE {_IN_RANGE})"
_DATASET_RUNS = "(SELECT run_id FROM runs WHERE dataset_id = $dataset)"
TABLE_ROWS: dict[str, str] = {
    "datasets": "SELECT * FROM datasets WHERE dataset_id = $dataset",
    "runs": "SELECT * FROM runs WHERE dataset_id = $dataset",
    "prompts": f"SELECT * FROM prompts WHERE {_IN_RANGE}",
    "candidates": f"SELECT * FROM candidates WHERE {_IN_RANGE}",
    "ratings": f"SELECT * FROM ratings WHERE dataset_id = $dataset AND candidate_id IN {_RANGE_CANDIDATES}",
    "votes": f"SELECT * FROM votes WHERE dataset_id = $dataset AND candidate_id IN {_RANGE_CANDIDATES}",
    "calls": f"SELECT * FROM calls WHERE prompt_id BETWEEN $first AND $last AND run_id IN {_DATASET_RUNS}",
    "scores": f"SELECT * FROM scores WHERE run_id IN {_DATASET_RUNS} AND candidate_id IN {_RANGE_CANDIDATES}",
}

# ntile deals rows out as numpy's array_split does: the first P mod count ranges hold one prompt more.
_RANGES = """
    SELECT min(prompt_id) AS first_id, max(prompt_id) AS last_id, count(*) AS n
    FROM (SELECT prompt_id, ntile($count) OVER (ORDER BY prompt_id) AS part FROM prompts WHERE dataset_id = $dataset)
    GROUP BY part ORDER BY part"""

# characters read_parquet takes for a file pattern: a path holding one could name other files
_GLOB_CHARACTERS = "*?["


@dataclass(frozen=True)
class Partition:
    """One range of a dataset's prompts as Parquet files (module docstring).

    folder: the partition's own folder; files: table name -> its Parquet file in `folder`. first: the range's
    first row in the whole dataset's prompt order; n_prompts: its number of prompts (at least one);
    first_prompt_id, last_prompt_id: its first and last prompt ids.
    """

    dataset_id: str
    folder: Path
    files: Mapping[str, Path]
    first: int
    n_prompts: int
    first_prompt_id: str
    last_prompt_id: str

    @property
    def rows(self) -> slice:
        """The range as a slice of the whole dataset's prompt rows (`SelectionData.rows(partition.rows)`)."""
        return slice(self.first, self.first + self.n_prompts)


def export_partitions(con: duckdb.DuckDBPyConnection, dataset_id: str, folder: str | Path, count: int
                      ) -> list[Partition]:
    """The `count` partitions of `dataset_id`, in prompt order, written as `folder`/part-<i>/<table>.parquet
    (files already there are replaced, a link in their place refused; the store is only read).

    `con` must be allowed to write files, which a reader opened with store.READ_ONLY_CONFIG is not: open the
    store with EXPORT_CONFIG. All partitions are read in one transaction, so they are of one state of the
    store. KeyError for a dataset without prompts; ValueError for a count below one or above the number of
    prompts (a partition holds at least one), and for a folder whose path holds * ? or [.
    """
    if count < 1:
        raise ValueError(f"export_partitions: count must be at least 1, got {count}")
    folder = Path(folder).absolute()
    if any(c in str(folder) for c in _GLOB_CHARACTERS):
        raise ValueError(f"{folder}: a partition folder's path may not hold any of {' '.join(_GLOB_CHARACTERS)} "
                         "(DuckDB reads them as a file pattern); choose another folder")
    if not con.execute("SELECT current_setting('enable_external_access')").fetchone()[0]:
        raise ValueError("export_partitions: this connection may not write files (a reader opened with "
                         "store.READ_ONLY_CONFIG); open the store with partitions.EXPORT_CONFIG")
    with transaction(con):
        ranges = con.execute(_RANGES, {"dataset": dataset_id, "count": count}).fetchall()
        if not ranges:
            raise KeyError(f"dataset {dataset_id!r} has no prompts")
        total = sum(n for _, _, n in ranges)
        if len(ranges) < count:
            raise ValueError(f"dataset {dataset_id!r} has {total} prompts: it cannot be cut into {count} "
                             f"partitions of at least one prompt each (ask for at most {total})")
        digits = max(4, len(str(count - 1)))
        partitions, first = [], 0
        for i, (first_id, last_id, n) in enumerate(ranges):
            part = folder / f"part-{i:0{digits}d}"
            files = {table: part / f"{table}.parquet" for table in TABLE_ROWS}
            linked = [path for path in (part, *files.values()) if path.is_symlink()]
            if linked:  # a copy through it would write wherever the link points
                raise ValueError(f"{linked[0]} is a link; remove it or choose another folder for the partitions")
            part.mkdir(parents=True, exist_ok=True)
            bounds = {"dataset": dataset_id, "first": first_id, "last": last_id}
            for table, sql in TABLE_ROWS.items():
                params = {name: value for name, value in bounds.items() if f"${name}" in sql}
                con.execute(f"COPY ({sql}) TO {_sql_text(files[table])} (FORMAT parquet)", params)
            partitions.append(Partition(dataset_id, part, files, first, n, first_id, last_id))
            first += n
    return partitions


def export_store(db: str | Path, dataset_id: str, folder: str | Path, count: int) -> list[Partition]:
    """`export_partitions` of the store at `db`, opened for it (EXPORT_CONFIG) and closed afterwards."""
    con = duckdb.connect(str(db), read_only=True, config=dict(EXPORT_CONFIG))
    try:
        return export_partitions(con, dataset_id, folder, count)
    finally:
        con.close()


def open_partition(partition: Partition) -> duckdb.DuckDBPyConnection:
    """An in-memory connection on which each table of `partition` is a view over its Parquet file, named as
    the store's table: the store's loaders read it as a store holding the partition's prompts alone.

    Like a store reader, it reaches no other file or URL (nor can be made to), and DuckDB's working memory
    is store.READ_MEMORY_LIMIT.
    """
    con = duckdb.connect(config={**NO_EXTENSIONS, "memory_limit": READ_MEMORY_LIMIT})
    try:
        con.execute(f"SET allowed_paths = [{', '.join(_sql_text(p) for p in partition.files.values())}]")
        con.execute("SET enable_external_access = false")
        for table, path in partition.files.items():
            con.execute(f'CREATE VIEW "{table}" AS SELECT * FROM read_parquet({_sql_text(path)})')
    except BaseException:
        con.close()
        raise
    return con


def _sql_text(path: Path) -> str:
    """A path we made, as a SQL string literal (COPY's target and a view's file cannot be parameters)."""
    return "'" + str(path).replace("'", "''") + "'"
