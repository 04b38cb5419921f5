"""A medium dataset (20,000 prompts, generated here) ingested in SQL from Parquet, CSV and JSONL files and
given as DataFrames to `store_from_frames`: the same rows in every store.

The generator (`benchmarks.synthetic.export_synthetic_tables`) writes the pools (six ratings per
candidate), one selector's decisions over three orders and a scorer's scores; DuckDB converts them
to CSV and JSONL. Every file is read in SQL (`staging.FAST_PATH_MIN_BYTES` 0), and the row-by-row
reader is made to fail, so a fallback to it would show.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pytest

from audit_core import store_from_frames
from audit_core.ingest import staging, tables
from benchmarks.synthetic import export_synthetic_tables
from runners import ingest

PROMPTS = 20_000
COMPARED = {  # the stored rows, but the moment they were written and what names the source file
    "prompts": "SELECT * FROM prompts",
    "candidates": "SELECT * FROM candidates",
    "ratings": "SELECT * FROM ratings",
    "datasets": "SELECT dataset_id, manifest_sha256, notes FROM datasets",
    "calls": "SELECT r.judge, c.* EXCLUDE (run_id, request_key, created_at) FROM calls c JOIN runs r USING (run_id)",
    "scores": "SELECT r.judge, s.candidate_id, s.score FROM scores s JOIN runs r USING (run_id)",
}


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, dict[str, Path]]:
    folder = tmp_path_factory.mktemp("medium")
    return export_synthetic_tables(folder, PROMPTS, n_judges=1, formats=("parquet", "csv", "jsonl"), chunk=PROMPTS)


@pytest.fixture
def in_sql_only(monkeypatch):
    """Every table file read in SQL; reading one row by row fails the test."""
    monkeypatch.setattr(staging, "FAST_PATH_MIN_BYTES", 0)

    def refused(path):
        raise AssertionError(f"{path} was read row by row")

    monkeypatch.setattr(tables, "read_rows", refused)


def rows(con: duckdb.DuckDBPyConnection) -> dict[str, list]:
    return {table: con.execute(f"{sql} ORDER BY ALL").fetchall() for table, sql in COMPARED.items()}


@pytest.fixture(scope="module")
def from_frames(generated) -> dict[str, list]:
    files = generated["parquet"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(staging, "FAST_PATH_MIN_BYTES", 0)
        con = store_from_frames(pd.read_parquet(files["pools"]), dataset="medium",
                                decisions={"slot_a": pd.read_parquet(files["decisions slot_a"])},
                                scores={"clip": pd.read_parquet(files["scores clip"])})
    try:
        return rows(con)
    finally:
        con.close()


@pytest.mark.parametrize("form", ["parquet", "csv", "jsonl"])
def test_files_in_every_format_store_the_rows_of_the_frames(form, generated, from_frames, in_sql_only, tmp_path):
    files = generated[form]
    db = tmp_path / "store.duckdb"
    assert ingest.main(["table", "--pools", str(files["pools"]), "--decisions", f"slot_a={files['decisions slot_a']}",
                        "--scores", f"clip={files['scores clip']}", "--db", str(db), "--dataset", "medium"]) == 0
    con = duckdb.connect(str(db), read_only=True)
    try:
        stored = rows(con)
    finally:
        con.close()
    assert {table: len(found) for table, found in stored.items()} == {table: len(found) for table, found in from_frames.items()}
    assert len(stored["prompts"]) == PROMPTS and len(stored["calls"]) == 3 * PROMPTS
    for table, found in stored.items():
        assert found == from_frames[table], table
