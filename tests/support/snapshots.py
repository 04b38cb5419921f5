"""Whole-database snapshots for tests that must prove a failed ingest changed nothing."""

from __future__ import annotations

from pathlib import Path

import duckdb

from audit_core import store


def snapshot(db: Path) -> dict | None:
    """Every row of every store table, sorted: equal snapshots mean an unchanged database."""
    if not db.exists():
        return None
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in store.TABLE_COLUMNS}
    finally:
        con.close()
