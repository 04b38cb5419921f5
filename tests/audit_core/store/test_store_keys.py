"""The bulk tables' keys (schema.KEYS) are kept by the writers, not by indexes.

A new store declares a PRIMARY KEY only on datasets, runs and taxonomies; ingesting the same files
again, replacing a dataset, re-ingesting votes and decisions, and recording a judge twice leave no key
on two rows. A store made before (its bulk tables with PRIMARY KEY / UNIQUE indexes) is still read and
written by the same commands.
"""

from __future__ import annotations

import re

import duckdb
import pytest

from audit_core import store
from audit_core.store.schema import KEYS, SCHEMA_SQL
from runners import ingest
from runners.backends.simulated import simulated_selector
from runners.run_judge import run_selector
from tests.support.pools import write_tiny_dataset
from tests.support.tables import pool_rows, write_table

SMALL_TABLES = {"datasets", "runs", "taxonomies"}


def repeated_keys(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """{bulk table: number of its keys held by more than one row}; all zero in a store whose writers keep them."""
    found = {}
    for table, key in KEYS.items():
        columns = ", ".join(key)
        found[table] = con.execute(f"SELECT count(*) FROM (SELECT {columns} FROM {table} GROUP BY ALL "
                                   "HAVING count(*) > 1)").fetchone()[0]
    return found


def keyed_schema_sql() -> str:
    """SCHEMA_SQL as stores were made before: each bulk table with a PRIMARY KEY on its key."""
    sql = SCHEMA_SQL
    for table, key in KEYS.items():
        body = re.search(rf"CREATE TABLE IF NOT EXISTS {table} \((.*?)\n\);", sql, re.S)
        sql = sql.replace(body.group(0), body.group(0)[:-3] + f",\n    PRIMARY KEY ({', '.join(key)})\n);")
    return sql


def decisions_rows() -> list[dict]:
    rows = []
    for pid, ids in (("p1", ["p1_a", "p1_b", "p1_c"]), ("p2", ["p2_a", "p2_b"]),
                     ("p3", ["p3_a", "p3_b", "p3_c", "p3_d"])):
        for order in range(2):
            rows.append({"prompt_id": pid, "order_index": order, "slot_candidate_ids": ids[order:] + ids[:order],
                         "choice_label": "A"})
    return rows


@pytest.fixture
def files(tmp_path):
    votes = [{"candidate_id": r["candidate_id"], "outcome": "rubric", "annotator": f"a{k}", "value": 3}
             for r in pool_rows() for k in range(2)]
    return {"pools": write_table(tmp_path / "pools.csv", pool_rows()),
            "votes": write_table(tmp_path / "votes.jsonl", votes),
            "decisions": write_table(tmp_path / "decisions.parquet", decisions_rows()),
            "scores": write_table(tmp_path / "scores.csv", [{"candidate_id": r["candidate_id"], "score": 0.5}
                                                             for r in pool_rows()])}


def ingest_table(files: dict, db, *extra: str) -> int:
    return ingest.main(["table", "--pools", str(files["pools"]), "--votes", str(files["votes"]),
                        "--decisions", f"j={files['decisions']}", "--scores", f"clip={files['scores']}",
                        "--db", str(db), "--dataset", "d", *extra])


def record(con: duckdb.DuckDBPyConnection) -> None:
    """A simulated judge recorded on the tiny dataset (tests.support.pools), every prompt in 3 orders."""
    run_selector(con, dataset="tiny", judge="sim", backend=simulated_selector("slot_a"), backend_name="simulated",
                 model="slot_a", progress=False)


def test_a_new_store_indexes_only_the_small_tables(tmp_path):
    con = store.connect(tmp_path / "new.duckdb")
    keyed = {t for (t,) in con.execute("SELECT DISTINCT table_name FROM duckdb_constraints() WHERE constraint_type "
                                       "IN ('PRIMARY KEY', 'UNIQUE')").fetchall()}
    indexed = con.execute("SELECT count(*) FROM duckdb_indexes()").fetchone()[0]
    assert keyed == SMALL_TABLES and indexed == 0
    assert set(KEYS) == set(store.TABLE_COLUMNS) - SMALL_TABLES


def test_ingest_again_replace_and_record_twice_repeat_no_key(files, tmp_path):
    db = tmp_path / "s.duckdb"
    assert ingest_table(files, db) == 0
    con = store.connect(db)
    first = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in KEYS}
    con.close()
    assert ingest_table(files, db) == 0  # the same files: unchanged
    assert ingest_table(files, db, "--replace") == 0
    moved = [{**r, "alignment": 1 - r["alignment"]} for r in pool_rows()]
    files = {**files, "pools": write_table(tmp_path / "pools2.csv", moved)}
    assert ingest_table(files, db) == 2  # other content under the same name: refused
    assert ingest_table(files, db, "--replace") == 0
    con = store.connect(db)
    assert {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in KEYS} == first
    con.close()
    write_tiny_dataset(db, tmp_path / "images", n_prompts=3)
    con = store.connect(db)
    for _ in range(2):  # the second run finds every call recorded
        record(con)
    assert len(store.load_calls(con, "tiny")) == 3 * 3  # 3 prompts x 3 orders, each once
    assert repeated_keys(con) == dict.fromkeys(KEYS, 0)


def test_a_store_made_with_key_indexes_is_read_and_written(files, tmp_path):
    db = tmp_path / "old.duckdb"
    old = duckdb.connect(str(db))
    old.execute(keyed_schema_sql())
    old.close()
    assert ingest_table(files, db) == 0 and ingest_table(files, db) == 0
    write_tiny_dataset(db, tmp_path / "images", n_prompts=3)
    con = store.connect(db)
    record(con)
    keyed = {t for (t,) in con.execute("SELECT DISTINCT table_name FROM duckdb_constraints() WHERE constraint_type = "
                                       "'PRIMARY KEY'").fetchall()}
    assert keyed == set(KEYS) | SMALL_TABLES  # its indexes are kept
    assert len(store.load_calls(con, "d")) == 6 and len(store.load_votes(con, "d")) == 2 * len(pool_rows())
    assert len(store.load_calls(con, "tiny")) == 9
    assert repeated_keys(con) == dict.fromkeys(KEYS, 0)
