import subprocess
import sys

import duckdb
import pandas as pd
import pytest

from audit_core import store
from audit_core.errors import DatabaseFileError, DatabaseHeld


def test_transaction_rolls_back_everything_on_error(tmp_path):
    con = store.connect(tmp_path / "t.duckdb")
    frame = pd.DataFrame(
        {"dataset_id": ["d"], "prompt_id": ["p"], "prompt": ["x"], "country": [None], "category": [None], "split": [None]}
    )
    with pytest.raises(RuntimeError):
        with store.transaction(con):
            store.insert_frame(con, "prompts", frame)
            raise RuntimeError("boom")
    assert con.execute("SELECT count(*) FROM prompts").fetchone()[0] == 0
    with store.transaction(con):
        store.insert_frame(con, "prompts", frame)
    assert con.execute("SELECT count(*) FROM prompts").fetchone()[0] == 1


def test_ids_are_bound_parameters_not_sql(tmp_path):
    con = store.connect(tmp_path / "t.duckdb")
    hostile = "x'; DROP TABLE prompts; --"
    assert store.load_prompts(con, hostile).empty
    assert con.execute("SELECT count(*) FROM prompts").fetchone()[0] == 0


def test_read_only_open_of_missing_file_names_it(tmp_path):
    with pytest.raises(DatabaseFileError, match="nope.duckdb: no such database"):
        store.connect(tmp_path / "nope.duckdb", read_only=True)


def test_manifest_hash_ignores_row_order_but_not_content():
    prompts = pd.DataFrame({"prompt_id": ["p1", "p2"], "prompt": ["a", "b"]})
    cands = pd.DataFrame({"prompt_id": ["p1", "p1", "p2", "p2"], "candidate_id": ["p1_x", "p1_y", "p2_x", "p2_y"]})
    same = store.manifest_sha256(cands.iloc[::-1], prompts.iloc[::-1])
    assert same == store.manifest_sha256(cands, prompts)
    changed = prompts.assign(prompt=["a", "B"])
    assert store.manifest_sha256(cands, changed) != same


def test_schema_is_created_once_and_reopens(tmp_path):
    path = tmp_path / "t.duckdb"
    store.connect(path).close()
    con = store.connect(path)
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert {"datasets", "prompts", "candidates", "ratings", "votes", "runs", "calls", "scores"} <= tables
    con.close()
    ro = store.connect(path, read_only=True)
    with pytest.raises(duckdb.Error):
        ro.execute("DELETE FROM prompts")


def test_read_only_open_waits_for_a_writer_to_let_go(tmp_path):
    path = tmp_path / "t.duckdb"
    store.connect(path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); print('held', flush=True); "
         "time.sleep(float(sys.argv[2])); con.close()", str(path), "0.6"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(DatabaseHeld, match="held by another process"):
            store.connect(path, read_only=True, lock_wait=0.0)
        con = store.connect(path, read_only=True, lock_wait=10.0)
        assert con.execute("SELECT count(*) FROM prompts").fetchone()[0] == 0
        con.close()
    finally:
        holder.wait(timeout=10)
