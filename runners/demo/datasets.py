"""What the demo builders (`runners.demo`, `runners.demo.ratings`, `runners.demo.attributes`) share: a SIMULATED dataset's
identity (source `demo`, revision `seed=<seed>`), writing it, and reading it back when it is there."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import duckdb
import pandas as pd

from audit_core import store
from audit_core.attributes.taxonomy import Taxonomy
from audit_core.ingest.pools import PoolSet, write_pools

T = TypeVar("T")


def seed_revision(seed: int) -> str:
    """The source_revision of a demo dataset built from `seed`: same seed, same content."""
    return f"seed={seed}"


def demo_pool_set(dataset: str, seed: int, notes: str, taxonomy: Taxonomy | None = None, **rows: list[dict]) -> PoolSet:
    """The PoolSet of demo dataset `dataset` built from `seed`, from each table's rows (prompts=[{…}, …],
    candidates, ratings, votes, attributes, gold_labels with their `taxonomy`); the ratings' n is a
    nullable integer, as the store holds it (no ratings: an empty table)."""
    tables = {name: pd.DataFrame(table) for name, table in rows.items()}
    ratings = tables.get("ratings", pd.DataFrame(columns=["candidate_id", "outcome", "pool", "value", "n"]))
    tables["ratings"] = ratings.astype({"n": "Int64"})
    return PoolSet(dataset_id=dataset, source="demo", source_revision=seed_revision(seed), notes=notes,
                   taxonomy=taxonomy, **tables)


def read_if_built(db: Path, dataset: str, seed: int, read: Callable[[duckdb.DuckDBPyConnection], T]) -> T | None:
    """`read(con)` on `db` opened read-only when it holds `dataset` built from `seed`; None otherwise."""
    if not db.exists():
        return None
    con = store.connect(db, read_only=True)
    try:
        row = store.dataset_row(con, dataset)
        if row is None or row["source_revision"] != seed_revision(seed):
            return None
        return read(con)
    finally:
        con.close()


@contextlib.contextmanager
def written(db: Path, pools: PoolSet) -> Iterator[duckdb.DuckDBPyConnection]:
    """`db` open with `pools` written in one transaction, replacing an earlier dataset of that id; closed after."""
    con = store.connect(db)
    try:
        with store.transaction(con):
            write_pools(con, pools, replace=True)
        yield con
    finally:
        con.close()
