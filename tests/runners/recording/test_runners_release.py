"""The command-line runners release the database between writes: others can read it, and wait their turn."""

import signal
import subprocess
import sys
import time

import pytest

from audit_core import store
from audit_core.errors import DatabaseHeld
from runners import run_judge
from runners.recording.sessions import DatabaseBusy, DatabaseFile
from tests.support.paths import REPO
from tests.support.pools import write_tiny_dataset
from tests.support.recording import calls_of, slowed_env

N_CALLS = 120  # 40 prompts, 3 orders


@pytest.fixture
def slow_cli(tmp_path):
    """(db path, function starting `runners.run_judge` for a judge name on a simulated backend slowed to
    20 ms a call, so that a run lasts a few seconds)."""
    db = tmp_path / "r.duckdb"
    write_tiny_dataset(db, tmp_path / "images", n_prompts=40, pool_sizes=(3, 4))
    started = []

    env = slowed_env(tmp_path / "hook", "runners.backends.simulated", "SimulatedSelector", 0.02)

    def start(judge):
        cmd = [sys.executable, "-m", "runners.run_judge", "--db", str(db), "--dataset", "tiny", "--judge", judge,
               "--backend", "simulated", "--model", "weak", "--lenient", "--concurrency", "1", "--quiet"]
        # Ctrl-C as at a terminal: a suite started in the background (`cmd &`) ignores SIGINT, and a
        # child would inherit that
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        started.append(proc)
        return proc

    yield db, start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def read_progress(db, judge):
    """(calls recorded, run status) read through a read-only connection, or None while a writer holds the file."""
    try:
        con = store.connect(db, read_only=True)
    except DatabaseHeld:
        return None
    try:
        n = con.execute("SELECT count(*) FROM calls c JOIN runs r USING (run_id) WHERE r.judge = ?",
                        [judge]).fetchone()[0]
        status = con.execute("SELECT max(status) FROM runs WHERE judge = ?", [judge]).fetchone()[0]
        return n, status
    finally:
        con.close()


def wait_for_calls(db, judge, proc, at_least):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        seen = read_progress(db, judge)
        if seen and seen[0] >= at_least:
            return
        time.sleep(0.02)
    pytest.fail(f"{judge}: fewer than {at_least} calls readable while the run lasted")


def test_progress_is_readable_read_only_while_the_cli_records(slow_cli):
    db, start = slow_cli
    proc = start("weak")
    seen, refused = [], 0
    while proc.poll() is None:
        progress = read_progress(db, "weak")
        if progress is None:
            refused += 1
        elif proc.poll() is None:  # still running after the read: a mid-run observation
            seen.append(progress)
        # a viewer's pace: a reader reopening the file every 10 ms left the writer, which retries
        # every 50 ms, so few chances in on a loaded machine that it once wrote 119 of 120 calls at once
        time.sleep(0.1)
    assert proc.returncode == 0, proc.stderr.read()
    counts = [n for n, _ in seen]
    assert counts == sorted(counts), "progress never goes backwards"
    assert len({n for n in counts if 0 < n < N_CALLS}) >= 3, f"too few mid-run readings: {seen} ({refused} refused)"
    assert "running" in {status for _, status in seen}
    con = store.connect(db, read_only=True)
    final = calls_of(con, "weak")
    runs = con.execute("SELECT status FROM runs").fetchall()
    con.close()
    assert len(final) == N_CALLS and not final.duplicated(["prompt_id", "order_index"]).any()
    assert runs == [("finished",)]


def test_same_judge_is_refused_while_another_judge_records_alongside(slow_cli, capsys):
    db, start = slow_cli
    proc = start("a")
    wait_for_calls(db, "a", proc, 1)
    base = ["--db", str(db), "--dataset", "tiny", "--backend", "simulated", "--model", "weak", "--lenient", "--quiet"]
    assert run_judge.main([*base, "--judge", "a"]) == 1
    err = capsys.readouterr().err
    assert str(db) in err and "judge 'a' on dataset 'tiny' is being recorded by another process" in err
    assert run_judge.main([*base, "--judge", "b", "--limit", "5"]) == 0
    assert proc.poll() is None, "the second judge was recorded while the first run went on"
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    con = store.connect(db, read_only=True)
    a, b = calls_of(con, "a"), calls_of(con, "b")
    runs = dict(con.execute("SELECT judge, status FROM runs").fetchall())
    con.close()
    assert len(a) == N_CALLS and a["request_key"].is_unique
    assert len(b) == 15 and b["request_key"].is_unique
    assert runs == {"a": "finished", "b": "finished"}


def test_ctrl_c_mid_run_keeps_what_finished_and_marks_the_run_interrupted(slow_cli):
    db, start = slow_cli
    proc = start("weak")
    wait_for_calls(db, "weak", proc, 20)
    proc.send_signal(signal.SIGINT)  # the main thread is then mostly inside DuckDB: the commit must not be cut short
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted: finished calls are recorded" in err
    n, status = read_progress(db, "weak")
    assert 20 <= n < N_CALLS and status == "interrupted"
    args = ["--db", str(db), "--dataset", "tiny", "--judge", "weak", "--backend", "simulated", "--model", "weak",
            "--lenient", "--quiet"]
    assert run_judge.main(args) == 0
    con = store.connect(db, read_only=True)
    final = calls_of(con, "weak")
    runs = con.execute("SELECT status FROM runs ORDER BY started_at").fetchall()
    con.close()
    assert len(final) == N_CALLS and final["request_key"].is_unique
    assert runs == [("interrupted",), ("finished",)]


HOLD = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
con.close()
"""


def test_a_file_held_elsewhere_is_waited_for_then_refused_by_name(tmp_path):
    db = tmp_path / "h.duckdb"
    write_tiny_dataset(db, tmp_path / "images", n_prompts=2)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(db), "1.5"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(DatabaseBusy, match=rf"{db}: another process has held this database for over 0.2 s"):
            with DatabaseFile(db, wait_seconds=0.2).session():
                pass
        start = time.monotonic()
        with DatabaseFile(db, wait_seconds=30).session() as con:  # waits for the holder to let go
            assert con.execute("SELECT count(*) FROM prompts").fetchone()[0] == 2
        assert time.monotonic() - start > 0.2
    finally:
        holder.kill()
        holder.wait()
