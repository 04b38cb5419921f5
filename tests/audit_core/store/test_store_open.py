"""Opening the store: every file that cannot be one is a one-line error, never a traceback.

Covers `audit_core.store.connect`, the recorder's `DatabaseFile` and the ingest,
run_judge, score and analyze commands on a text file, an SQLite file, an empty
file, a directory, a read-only file and a file locked by another process.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from audit_core import store
from audit_core.errors import DatabaseFileError, DatabaseHeld, InputError
from audit_core.store.database import READ_MEMORY_LIMIT
from runners import analyze, ingest, run_judge, score
from tests.support.paths import REPO
from tests.support.snapshots import snapshot

POOLS_CSV = "prompt_id,prompt,candidate_id,alignment\np1,a market,p1_a,1\np1,a market,p1_b,0\np2,a wedding,p2_a,0.5\np2,a wedding,p2_b,0\n"
READ_CANDIDATES = (
    "import sys; from audit_core import store; con = store.connect(sys.argv[1], read_only=True); "
    "print(con.execute('SELECT count(*) FROM candidates').fetchone()[0])"
)
HOLDER = (
    "import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); print('held', flush=True); "
    "time.sleep(float(sys.argv[2])); con.close()"
)


def bad_file(tmp_path: Path, kind: str) -> Path:
    """A path that cannot be opened as a store, of the named kind."""
    path = tmp_path / f"{kind}.duckdb"
    if kind == "text":
        path.write_text("not a database\n")
    elif kind == "empty":
        path.touch()
    elif kind == "sqlite":
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE prompts (x)")
        con.commit()
        con.close()
    elif kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    return path


EXPECTED = {
    "text": "not a DuckDB database",
    "empty": "not a DuckDB database",
    "sqlite": "not a DuckDB database (it is an SQLite database)",
    "directory": "is a directory",
    "fifo": "not a regular file",
}


def one_error_line(err: str, path: Path, what: str) -> None:
    """stderr is exactly the command's error line (plus ingest's 'nothing was written'), no traceback."""
    lines = [line for line in err.splitlines() if line]
    assert "Traceback" not in err
    assert lines[0] == f"error: {path}: {what}", lines
    assert lines[1:] in ([], ["nothing was written: the database is unchanged"]), lines


def pools_csv(tmp_path: Path) -> Path:
    path = tmp_path / "pools.csv"
    path.write_text(POOLS_CSV)
    return path


# ------------------------------------------------------------ store.connect


@pytest.mark.parametrize("kind", sorted(EXPECTED))
@pytest.mark.parametrize("read_only", [False, True], ids=["writable", "read-only"])
def test_connect_names_what_is_wrong_with_the_file(tmp_path, kind, read_only):
    path = bad_file(tmp_path, kind)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(DatabaseFileError) as caught:
        store.connect(path, read_only=read_only)
    assert str(caught.value) == f"{path}: {EXPECTED[kind]}"
    assert isinstance(caught.value, InputError) and not isinstance(caught.value, DatabaseHeld)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no WAL or other file left beside it


def test_sqlite_file_reaches_for_no_extension(tmp_path):
    """Even past the header check (DuckDB itself, and the recorder's ATTACH), an SQLite file makes
    DuckDB neither download nor load its sqlite extension: the extension folder under $HOME never appears."""
    path = bad_file(tmp_path, "sqlite")
    home = tmp_path / "home"
    home.mkdir()
    code = (
        "import sys, duckdb\n"
        "from audit_core import store\n"
        "from runners.recording.sessions import DatabaseFile\n"
        "from audit_core.errors import DatabaseFileError\n"
        "path = sys.argv[1]\n"
        "for config in (store.NO_EXTENSIONS, store.READ_ONLY_CONFIG):\n"
        "    try:\n"
        "        duckdb.connect(path, read_only=config is store.READ_ONLY_CONFIG, config=dict(config))\n"
        "    except duckdb.Error as err:\n"
        "        print(store.file_error(path, err, read_only=False))\n"
        "db = DatabaseFile(path)\n"
        "db._migrated = True  # straight to ATTACH, skipping the header check of the first session\n"
        "try:\n"
        "    with db.session():\n"
        "        pass\n"
        "except DatabaseFileError as err:\n"
        "    print(err)\n"
    )
    env = {**os.environ, "HOME": str(home)}
    done = subprocess.run([sys.executable, "-c", code, str(path)], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{path}: not a DuckDB database"] * 3
    assert list(home.iterdir()) == []


def test_file_error_maps_permission_and_read_only_file_system():
    denied = duckdb.IOException('IO Error: Cannot open file "/x/a.duckdb": Permission denied')
    rofs = duckdb.IOException('IO Error: Cannot open file "/x/a.duckdb": Read-only file system')
    assert str(store.file_error("a.duckdb", denied, read_only=False)) == "a.duckdb: read-only: cannot write (permission denied)"
    assert str(store.file_error("a.duckdb", denied, read_only=True)) == "a.duckdb: cannot be read: permission denied"
    assert str(store.file_error("a.duckdb", rofs, read_only=False)) == "a.duckdb: read-only: cannot write (read-only file system)"
    odd = duckdb.IOException("IO Error: something new\nmore detail")
    assert str(store.file_error("a.duckdb", odd, read_only=False)) == "a.duckdb: cannot be opened: IO Error: something new"


def test_lock_wait_from_the_environment(monkeypatch):
    monkeypatch.delenv(store.LOCK_WAIT_ENV, raising=False)
    assert store.write_lock_wait() == store.WRITE_LOCK_WAIT == 30.0
    monkeypatch.setenv(store.LOCK_WAIT_ENV, "0.25")
    assert store.write_lock_wait() == 0.25
    for bad in ("soon", "-1", "1_0", "nan"):
        monkeypatch.setenv(store.LOCK_WAIT_ENV, bad)
        with pytest.raises(InputError, match=rf"\$JUDGE_AUDIT_LOCK_WAIT.*{bad}"):
            store.write_lock_wait()


def test_read_only_connection_reaches_no_other_file(tmp_path):
    path = tmp_path / "s.duckdb"
    store.connect(path).close()
    (tmp_path / "secret.csv").write_text("a\n1\n")
    con = store.connect(path, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM datasets").fetchone() == (0,)
        with pytest.raises(duckdb.PermissionException):
            con.execute("SELECT * FROM read_csv(?)", [str(tmp_path / "secret.csv")]).fetchall()
    finally:
        con.close()


def test_a_reader_bounds_duckdbs_memory_and_a_writer_keeps_its_default(tmp_path):
    """A reader's DuckDB caches at most READ_MEMORY_LIMIT (spilling beyond it); a writer keeps DuckDB's
    default (80% of RAM), which a large ingest's key indexes need."""
    path = tmp_path / "s.duckdb"

    def limit(con: duckdb.DuckDBPyConnection) -> int:
        return con.execute("SELECT value FROM duckdb_settings() WHERE name = 'memory_limit'").fetchone()[0]

    writer = store.connect(path)
    try:
        written = limit(writer)
    finally:
        writer.close()
    reader = store.connect(path, read_only=True)
    try:
        read = limit(reader)
    finally:
        reader.close()
    for config, got in (({}, written), ({"memory_limit": READ_MEMORY_LIMIT}, read)):
        expected = duckdb.connect(":memory:", config=config)
        try:
            assert got == limit(expected)
        finally:
            expected.close()
    assert read != written


# ------------------------------------------------------------ the commands


def command_argv(command: str, db: Path, tmp_path: Path) -> list[str]:
    if command == "ingest":
        return ["table", "--pools", str(pools_csv(tmp_path)), "--db", str(db), "--dataset", "d"]
    if command == "run_judge":
        return ["--db", str(db), "--dataset", "d", "--judge", "j", "--backend", "simulated", "--model", "weak", "--quiet"]
    if command == "score":
        return ["--db", str(db), "--dataset", "d", "--scorer", "s", "--backend", "clip", "--model", "ViT-B-32", "--quiet"]
    return ["--db", str(db), "--dataset", "d", "--out", str(tmp_path / "out")]


COMMANDS = {"ingest": ingest.main, "run_judge": run_judge.main, "score": score.main, "analyze": analyze.main}


@pytest.mark.parametrize("kind", ["text", "sqlite", "directory"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_gives_one_line_and_exit_2(tmp_path, capsys, command, kind):
    path = bad_file(tmp_path, kind)
    assert COMMANDS[command](command_argv(command, path, tmp_path)) == 2
    out, err = capsys.readouterr()
    one_error_line(err, path, EXPECTED[kind])
    assert not (tmp_path / "out").exists()


def readonly_mount_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not readonly_mount_works(), reason="needs `unshare` with user and mount namespaces")
def test_read_only_file_refused_by_ingest_and_readable_by_the_app_loaders(tmp_path):
    """Run as root, chmod 0444 would not stop a write: the store is bind-mounted read-only in a
    private mount namespace instead (what a read-only disk or a foreign user's file looks like)."""
    src = tmp_path / "src"
    src.mkdir()
    db = src / "s.duckdb"
    assert ingest.main(command_argv("ingest", db, tmp_path)) == 0
    before = snapshot(db)
    mounted = tmp_path / "ro"
    mounted.mkdir()
    script = (
        'mount --bind -o ro "$1" "$2" || exit 99\n'
        'shift 2\n'
        'exec "$@"\n'
    )
    inside = mounted / "s.duckdb"
    cases = {
        "ingest": ([sys.executable, "-m", "runners.ingest", *command_argv("ingest", inside, tmp_path)], 2),
        "read": ([sys.executable, "-c", READ_CANDIDATES, str(inside)], 0),
    }
    for name, (argv, status) in cases.items():
        done = subprocess.run(
            ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh", str(src), str(mounted), *argv],
            cwd=REPO, capture_output=True, text=True, timeout=120,
        )
        assert done.returncode == status, (name, done.stderr)
        if status == 2:
            one_error_line(done.stderr, inside, "read-only: cannot write")
        else:
            assert done.stdout.strip() == "4", done.stderr
    assert snapshot(db) == before
    assert sorted(p.name for p in src.iterdir()) == ["s.duckdb"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through chmod 0444; see the read-only mount test")
def test_read_only_file_by_permission(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    store.connect(db).close()
    db.chmod(0o444)
    assert ingest.main(command_argv("ingest", db, tmp_path)) == 2
    one_error_line(capsys.readouterr().err, db, "read-only: cannot write")


# ------------------------------------------------------------ a file locked by another process


@pytest.fixture
def held_db(tmp_path):
    """Start a process holding a write connection on a fresh store; yields (path, start(seconds))."""
    db = tmp_path / "held.duckdb"
    store.connect(db).close()
    holders = []

    def start(seconds: float) -> subprocess.Popen:
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(db), str(seconds)], stdout=subprocess.PIPE, text=True)
        holders.append(holder)
        assert holder.stdout.readline().strip() == "held"
        return holder

    yield db, start
    for holder in holders:
        holder.kill()
        holder.wait()


def test_ingest_waits_for_a_held_database_then_fails_in_one_line(held_db, tmp_path, capsys, monkeypatch):
    db, start = held_db
    before = snapshot(db)
    holder = start(60)
    monkeypatch.setenv(store.LOCK_WAIT_ENV, "0.5")
    assert ingest.main(command_argv("ingest", db, tmp_path)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    waiting, failed, unchanged = err.splitlines()
    assert waiting == f"waiting for {db}: held by another process (retrying for up to 0.5 s)"
    assert failed.startswith(f"error: {db}: held by another process (PID {holder.pid}) for over 0.5 s")
    assert unchanged == "nothing was written: the database is unchanged"
    holder.kill()
    holder.wait()
    assert snapshot(db) == before


def test_ingest_goes_ahead_once_the_holder_lets_go(held_db, tmp_path, capsys, monkeypatch):
    db, start = held_db
    start(0.8)
    monkeypatch.setenv(store.LOCK_WAIT_ENV, "30")
    assert ingest.main(command_argv("ingest", db, tmp_path)) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"waiting for {db}: held by another process (retrying for up to 30 s)"]
    assert "2 prompts" in out
    con = store.connect(db, read_only=True)
    assert con.execute("SELECT count(*) FROM candidates").fetchone() == (4,)
    con.close()


def test_a_runner_on_a_held_database_stays_busy_exit_1(held_db, tmp_path, capsys, monkeypatch):
    db, start = held_db
    start(60)
    monkeypatch.setenv(store.LOCK_WAIT_ENV, "0.3")
    assert run_judge.main(command_argv("run_judge", db, tmp_path)) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines() == [
        f"waiting for {db}: held by another process (retrying for up to 0.3 s)",
        f"error: {db}: another process has held this database for over 0.3 s "
        "(a runner, an ingest or another writer); wait for it to finish, then run again",
    ]


def test_a_bad_lock_wait_is_a_runners_input_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(store.LOCK_WAIT_ENV, "soon")
    db = tmp_path / "s.duckdb"
    assert run_judge.main(command_argv("run_judge", db, tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == ["error: field '$JUDGE_AUDIT_LOCK_WAIT': expected a number of seconds, got 'soon'"]
    assert not db.exists()
