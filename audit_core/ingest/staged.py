"""Validated table-contract rows waiting in DuckDB to be written: pools, a judge's calls, scores, ratings, answers.

The table readers (`tables`) leave each input's rows, checked row by row and typed, in a staging
database (`staging.Staging`) as one of these tables; `staged_checks` checks them against one
another and `staged_writes` writes them to the store, all in SQL. The columns of each table are
below (SCHEMAS); `ord` orders the rows as the readers met them (errors name the first offending
row) and `line` is the row's line in its file (for error messages).

Rows read the slow way (`tables.read_rows`, small files and files DuckDB cannot read) arrive as the
readers' pandas frames and are staged by `stage_frame`, into the same tables.

`StagedPools` is written by `pools.write_pools` like a PoolSet, through its `hashes` and
`insert_rows`: the manifest is `store.manifest_sha256`'s, byte for byte (computed in SQL); the
content hash is an order-free digest of every table the pools write (row count and the XOR of each
row's MD5), not the pandas frames' CSV that `PoolSet.content_sha256` hashes, so a dataset written
by an earlier version of the table ingest counts as different once (`--replace`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import duckdb
import pandas as pd
import pyarrow as pa

from audit_core import store
from audit_core.attributes.taxonomy import Taxonomy
from audit_core.ingest.cell_sql import identifier
from audit_core.ingest.staging import Staging
from audit_core.store.records import TaxonomyRecord

SCHEMAS: dict[str, dict[str, str]] = {
    "prompts": {"ord": "BIGINT", "line": "BIGINT", "prompt_id": "VARCHAR", "prompt": "VARCHAR", "country": "VARCHAR",
                "category": "VARCHAR", "split": "VARCHAR"},
    "candidates": {"ord": "BIGINT", "line": "BIGINT", "prompt_id": "VARCHAR", "candidate_id": "VARCHAR",
                   "source_model": "VARCHAR", "image_path": "VARCHAR"},
    "ratings": {"ord": "BIGINT", "line": "BIGINT", "file": "VARCHAR", "field": "VARCHAR", "candidate_id": "VARCHAR",
                "outcome": "VARCHAR", "pool": "VARCHAR", "value": "DOUBLE", "n": "INTEGER"},
    "votes": {"ord": "BIGINT", "line": "BIGINT", "file": "VARCHAR", "candidate_id": "VARCHAR", "outcome": "VARCHAR",
              "pool": "VARCHAR", "annotator": "VARCHAR", "value": "DOUBLE"},
    "attributes": {"ord": "BIGINT", "line": "BIGINT", "candidate_id": "VARCHAR", "attribute": "VARCHAR",
                   "value": "VARCHAR"},
    "gold_labels": {"ord": "BIGINT", "line": "BIGINT", "file": "VARCHAR", "candidate_id": "VARCHAR",
                    "attribute": "VARCHAR", "label": "VARCHAR"},
    "calls": {"ord": "BIGINT", "line": "BIGINT", "prompt_id": "VARCHAR", "order_index": "INTEGER",
              "slot_candidate_ids": "VARCHAR[]", "status": "VARCHAR", "choice_label": "VARCHAR",
              "chosen_candidate_id": "VARCHAR", "ranking": "VARCHAR[]", "raw_output": "VARCHAR",
              "parse_note": "VARCHAR", "attempts": "INTEGER", "seconds": "DOUBLE", "input_json": "VARCHAR",
              "label_probs": "VARCHAR"},
    "scores": {"ord": "BIGINT", "candidate_id": "VARCHAR", "score": "DOUBLE"},
    "rating_calls": {"ord": "BIGINT", "line": "BIGINT", "candidate_id": "VARCHAR", "condition": "VARCHAR",
                     "status": "VARCHAR", "rating": "DOUBLE", "raw_output": "VARCHAR", "parse_note": "VARCHAR",
                     "attempts": "INTEGER", "seconds": "DOUBLE", "input_json": "VARCHAR"},
    "answers": {"ord": "BIGINT", "line": "BIGINT", "candidate_id": "VARCHAR", "condition": "VARCHAR",
                "attribute": "VARCHAR", "status": "VARCHAR", "label": "VARCHAR", "answer": "VARCHAR",
                "rationale": "VARCHAR"},
}
_ARROW = {"BIGINT": pa.int64(), "INTEGER": pa.int32(), "DOUBLE": pa.float64(), "VARCHAR": pa.string(),
          "VARCHAR[]": pa.list_(pa.string())}


def create(stage: Staging, table: str, select: str, params: list | None = None) -> None:
    """Create staged `table` (SCHEMAS) from `select`, whose columns are cast to the table's types by name."""
    columns = ", ".join(f'CAST("{c}" AS {t}) AS "{c}"' for c, t in SCHEMAS[table].items())
    stage.con.execute(f"CREATE OR REPLACE TABLE {table} AS SELECT {columns} FROM ({select})", params or [])


def empty(table: str) -> str:
    """A SELECT of no rows with `table`'s columns (for `create`)."""
    return "SELECT " + ", ".join(f'NULL AS "{c}"' for c in SCHEMAS[table]) + " WHERE false"


def stage_frame(stage: Staging, table: str, frame: pd.DataFrame, defaults: dict | None = None) -> None:
    """Stage a reader's pandas `frame` as `table`: `ord` is the frame's order; absent columns are null
    unless `defaults` gives them a value (the same for every row)."""
    frame = frame.reset_index(drop=True).assign(ord=range(len(frame)), **(defaults or {}))
    arrays = {}
    for column, kind in SCHEMAS[table].items():
        values = frame[column] if column in frame.columns else pd.Series([None] * len(frame), dtype=object)
        values = values.astype(object).where(values.notna(), None) if kind != "VARCHAR[]" else values
        if kind == "VARCHAR[]":
            values = [None if not isinstance(v, (list, tuple)) else list(v) for v in values]
        arrays[column] = pa.array(list(values), type=_ARROW[kind])
    stage.con.register("reader_frame", pa.table(arrays))
    try:
        create(stage, table, "SELECT * FROM reader_frame")
    finally:
        stage.con.unregister("reader_frame")


def status_counts(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, int]:
    """{status: rows} of `table` as pandas' value_counts orders it: most frequent first, ties in order of
    first appearance."""
    found = con.execute(f"SELECT status, count(*) AS n FROM {table} GROUP BY status ORDER BY n DESC, min(ord)")
    return {status: n for status, n in found.fetchall()}


def count(con: duckdb.DuckDBPyConnection, table: str) -> int:
    return con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]


def utility_pools(con: duckdb.DuckDBPyConnection, ratings: str = "ratings") -> list[str]:
    """Reference pools holding alignment ratings (the selection audit's utility), sorted."""
    found = con.execute(f"SELECT DISTINCT pool FROM {ratings} WHERE outcome = 'alignment' ORDER BY pool")
    return [pool for (pool,) in found.fetchall()]


POOL_TABLES = {  # staged table: (store table, its columns but dataset_id)
    "prompts": ("prompts", ("prompt_id", "prompt", "country", "category", "split")),
    "candidates": ("candidates", ("prompt_id", "candidate_id", "source_model", "image_path")),
    "ratings": ("ratings", ("candidate_id", "outcome", "pool", "value", "n")),
    "votes": ("votes", ("candidate_id", "outcome", "pool", "annotator", "value")),
    "attributes": ("candidate_attributes", ("candidate_id", "attribute", "value")),
    "gold_labels": ("gold_labels", ("candidate_id", "attribute", "label")),
}
_JSON_ESCAPES = {8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r"}


def _json_string(sql: str) -> str:
    """SQL: the JSON string `json.dumps(text, ensure_ascii=False)` writes (only a text holding a quote, a
    backslash or a control character goes through the chain of replacements)."""
    expr = f"replace(replace({sql}, '\\', '\\\\'), '\"', '\\\"')"
    for code in range(32):
        escape = _JSON_ESCAPES.get(code, f"\\u{code:04x}")
        expr = f"replace({expr}, chr({code}), '{escape}')"
    plain = f"NOT regexp_matches({sql}, '[\"\\\\\\x00-\\x1f]')"
    return f"('\"' || CASE WHEN {plain} THEN {sql} ELSE {expr} END || '\"')"


def manifest_sha256(con: duckdb.DuckDBPyConnection) -> str:
    """`store.manifest_sha256` of the attached pools: the hash of [[prompt id, prompt text, [candidate ids]], …]
    as json.dumps writes it, prompts and ids sorted."""
    (digest,) = con.execute(f"""
        SELECT sha256('[' || coalesce(string_agg(fragment, ', ' ORDER BY prompt_id), '') || ']') FROM (
            SELECT c.prompt_id, '[' || {_json_string('c.prompt_id')} || ', ' || {_json_string('any_value(p.prompt)')}
                   || ', [' || string_agg({_json_string('c.candidate_id')}, ', ' ORDER BY c.candidate_id) || ']]' AS fragment
            FROM pools.candidates c JOIN pools.prompts p USING (prompt_id) GROUP BY c.prompt_id)""").fetchall()[0]
    return digest


def content_sha256(con: duckdb.DuckDBPyConnection, taxonomy: Taxonomy | None) -> str:
    """Order-free hash of everything written for the pools: per table its row count and the XOR of each row's
    MD5, a row spelled as its cells' lengths and texts (so no two rows spell alike)."""
    parts = []
    for table, (_, columns) in POOL_TABLES.items():
        cells = ", ".join(f"coalesce(length(CAST({c} AS VARCHAR)) || ':' || CAST({c} AS VARCHAR), '-')" for c in columns)
        rows, digest = con.execute(f"SELECT count(*), bit_xor(md5_number(concat({cells}))) FROM pools.{table}").fetchall()[0]
        if rows or table not in ("attributes", "gold_labels"):
            parts.append(f"{table}:{rows}:{digest}")
    if count(con, "pools.gold_labels"):
        parts.append(taxonomy.sha256 if taxonomy is not None else "")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


@dataclass
class StagedPools:
    """A dataset's prompts, candidates, ratings, votes, item attributes and gold labels (tables of the
    same names in `stage`), before writing; `scales` declares outcomes beyond schema.OUTCOME_SCALES."""

    stage: Staging
    dataset_id: str
    source: str
    scales: dict[str, tuple[float, float]] = field(default_factory=dict)
    taxonomy: Taxonomy | None = None
    source_revision: str | None = None
    notes: str | None = None

    def close(self) -> None:
        self.stage.close()

    def count(self, table: str, where: str = "true") -> int:
        """Rows of a staged table (where `where` holds), read through the pools' own connection."""
        return self.stage.con.execute(f"SELECT count(*) FROM {table} WHERE {where}").fetchall()[0][0]

    def utility_pools(self) -> list[str]:
        return utility_pools(self.stage.con)

    def vote_counts(self) -> list[tuple[str, str, int]]:
        """(outcome, pool, votes), sorted."""
        return self.stage.con.execute("SELECT outcome, pool, count(*) FROM votes GROUP BY ALL ORDER BY ALL").fetchall()

    def hashes(self, con: duckdb.DuckDBPyConnection) -> tuple[str, str]:
        """(manifest, content) hashes of the pools attached to `con` as `pools` (`manifest_sha256`, `content_sha256`)."""
        return manifest_sha256(con), content_sha256(con, self.taxonomy)

    def insert_rows(self, con: duckdb.DuckDBPyConnection) -> None:
        """Insert the pools attached to `con` as `pools` into the store's tables (canonical_index: rank of the
        candidate id within its prompt), with the gold labels' taxonomy."""
        for table, (target, columns) in POOL_TABLES.items():
            listed = ", ".join(columns)
            if table == "candidates":
                con.execute(f"INSERT INTO candidates (dataset_id, {listed}, canonical_index) SELECT ?, {listed}, "
                            "CAST(row_number() OVER (PARTITION BY prompt_id ORDER BY candidate_id) - 1 AS INTEGER) "
                            "FROM pools.candidates", [self.dataset_id])
            else:
                con.execute(f"INSERT INTO {target} (dataset_id, {listed}) SELECT ?, {listed} FROM pools.{table}",
                            [self.dataset_id])
        if count(con, "pools.gold_labels"):
            tax = self.taxonomy
            store.insert_records(con, "taxonomies", [TaxonomyRecord(self.dataset_id, tax.name, tax.version, tax.sha256,
                                                                    tax.to_json())])


@dataclass
class StagedRun:
    """One judge's staged rows: a selector's `calls`, a scorer's `scores`, a rater's `rating_calls` (with the
    outcome it rates on its integer `scale`) or an attribute judge's `answers` (against `taxonomy`)."""

    stage: Staging
    table: str
    judge: str
    source_file: str
    outcome: str = "rubric"
    scale: tuple[int, int] = (1, 5)
    taxonomy: Taxonomy | None = None

    def close(self) -> None:
        self.stage.close()


def add_votes(pools: StagedPools, votes: Staging | None) -> None:
    """Move staged `votes` into the pools' database (closing theirs), and add a consensus rating for every
    (candidate, outcome, pool) that has votes but no rating: c = mean of its votes (kept within their
    range, which a float mean can overshoot by an ulp), n = their count, the line and file of its first
    vote (DESIGN §4b; `pools.with_votes`). A rating that is given wins over the mean of its votes."""
    if votes is None:
        create(pools.stage, "votes", empty("votes"))
        return
    try:
        votes.join(pools.stage.workspace)
        create(pools.stage, "votes", f"SELECT * FROM {identifier(votes.alias)}.votes")
    finally:
        votes.close()
    pools.stage.con.execute("""
        INSERT INTO ratings
        SELECT (SELECT coalesce(max(ord), 0) FROM ratings) + row_number() OVER (ORDER BY candidate_id, outcome, pool),
               line, file, 'value', candidate_id, outcome, pool, value, n
        FROM (SELECT candidate_id, outcome, pool, count(*) AS n, arg_min(line, ord) AS line, arg_min(file, ord) AS file,
                     least(greatest(fsum(value) / count(*), min(value)), max(value)) AS value
              FROM votes GROUP BY candidate_id, outcome, pool) derived
        WHERE NOT EXISTS (SELECT 1 FROM ratings given WHERE given.candidate_id = derived.candidate_id
                          AND given.outcome = derived.outcome AND given.pool = derived.pool)""")


def add_gold_labels(pools: StagedPools, gold: Staging | None, taxonomy: Taxonomy | None) -> None:
    """Move staged `gold_labels` (of `taxonomy`) into the pools' database, closing theirs."""
    if gold is None:
        create(pools.stage, "gold_labels", empty("gold_labels"))
        return
    try:
        gold.join(pools.stage.workspace)
        create(pools.stage, "gold_labels", f"SELECT * FROM {identifier(gold.alias)}.gold_labels")
    finally:
        gold.close()
    pools.taxonomy = taxonomy
