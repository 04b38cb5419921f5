"""Two ingests into the same new database path: the one that reports success keeps its database.

`store.writing` decides "this run created the file" under the file's lock, so the
ingest that is refused (here: the same dataset name with other content, no
`--replace`) never removes a database another ingest created and filled.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from audit_core.store import database
from runners import ingest
from tests.support.paths import REPO
from tests.support.snapshots import snapshot

# the same dataset name, other content: whichever ingest comes second is refused
TABLES = {
    "first": "prompt_id,prompt,candidate_id,alignment\np1,a market,p1_a,1\np1,a market,p1_b,0\np1,a market,p1_c,0.5\n",
    "second": "prompt_id,prompt,candidate_id,alignment\np9,a wedding,p9_a,0\np9,a wedding,p9_b,1\np9,a wedding,p9_c,0\n",
}


def table_files(tmp_path: Path) -> dict[str, Path]:
    files = {}
    for name, text in TABLES.items():
        files[name] = tmp_path / f"{name}.csv"
        files[name].write_text(text)
    return files


def ingest_argv(pools: Path, db: Path) -> list[str]:
    return ["table", "--pools", str(pools), "--db", str(db), "--dataset", "d"]


def prompt_ids(db: Path) -> list[str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [row[0] for row in con.execute("SELECT prompt_id FROM prompts ORDER BY ALL").fetchall()]
    finally:
        con.close()


def test_refused_ingest_keeps_a_database_another_ingest_created_after_it_looked(tmp_path, monkeypatch, capsys):
    """The refused ingest saw no file, then another ingest created and filled it: the file stays."""
    files = table_files(tmp_path)
    db = tmp_path / "new" / "race.duckdb"
    locked_connection = database._locked_connection

    def other_ingest_first(path: Path, read_only: bool, lock_wait: float | None) -> duckdb.DuckDBPyConnection:
        # this ingest has already found the path absent; another one now creates the database
        done = subprocess.run([sys.executable, "-m", "runners.ingest", *ingest_argv(files["first"], db)],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return locked_connection(path, read_only, lock_wait)

    monkeypatch.setattr(database, "_locked_connection", other_ingest_first)
    assert ingest.main(ingest_argv(files["second"], db)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "already exists with different" in err, err
    assert prompt_ids(db) == ["p1"]


def test_failed_ingest_that_created_the_file_removes_it(tmp_path, monkeypatch, capsys):
    """An ingest that created the database and then fails leaves nothing behind, folders included."""
    files = table_files(tmp_path)
    db = tmp_path / "made" / "for" / "it.duckdb"

    def fail(*args: object, **kwargs: object) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("audit_core.ingest.pools.write_pools", fail)
    assert ingest.main(ingest_argv(files["first"], db)) == 2
    assert not (tmp_path / "made").exists()


@pytest.mark.parametrize("attempt", range(3))
def test_two_ingests_started_at_once(tmp_path, attempt):
    """Started together into one new path: exactly one succeeds and the database holds its tables."""
    files = table_files(tmp_path)
    db = tmp_path / "at-once.duckdb"
    procs = {name: subprocess.Popen([sys.executable, "-m", "runners.ingest", *ingest_argv(path, db)], cwd=REPO,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, path in files.items()}
    codes = {name: proc.wait(timeout=120) for name, proc in procs.items()}
    errors = {name: proc.stderr.read() for name, proc in procs.items()}
    for proc in procs.values():
        proc.stdout.close()
        proc.stderr.close()
    assert sorted(codes.values()) == [0, 2], errors
    winner = next(name for name, code in codes.items() if code == 0)
    loser = next(name for name, code in codes.items() if code == 2)
    assert "Traceback" not in errors[loser] and "already exists with different" in errors[loser], errors[loser]
    assert prompt_ids(db) == {"first": ["p1"], "second": ["p9"]}[winner]
    assert snapshot(db) is not None
