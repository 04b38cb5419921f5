"""`benchmarks.bench_scale`'s measurements: the process tree it sums and the sizes it parses."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import pytest

from benchmarks.bench_scale import byte_count, descendants, proportional_bytes, run_step


def _sleeps(pids: list[int]) -> int:
    """How many of the processes are `sleep`."""
    names = []
    for pid in pids:
        try:
            names.append(open(f"/proc/{pid}/comm").read().strip())
        except OSError:
            pass
    return names.count("sleep")


def test_descendants_are_the_process_and_everything_below_it():
    """A shell whose two child shells each started two sleeps (one in the background): the four sleeps are
    found below it, each process once, the shell first; once they end, the shell alone."""
    script = "sh -c 'sleep 30 & sleep 30' & sh -c 'sleep 30 & sleep 30' & wait"
    shell = subprocess.Popen(["sh", "-c", script])
    try:
        deadline = time.monotonic() + 10
        while _sleeps(found := descendants(shell.pid)) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert found[0] == shell.pid and len(found) == len(set(found)) and _sleeps(found) == 4
        assert all(proportional_bytes(pid) > 0 for pid in found)
    finally:
        for pid in reversed(descendants(shell.pid)[1:]):
            subprocess.run(["kill", str(pid)], capture_output=True)
        shell.wait(10)
    assert proportional_bytes(shell.pid) == 0  # gone: nothing to read


def test_a_step_reports_its_own_peak_and_its_trees(tmp_path):
    """A child that holds 200 MB and starts a grandchild holding 200 MB: the child's own peak sees at least
    one, the tree's proportional peak both. (The child's ru_maxrss has no upper bound here: a child forked
    from a large test process starts with that process's resident pages counted.)"""
    hold = "import time; b = bytearray(200 << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(3)"
    argv = [sys.executable, "-c", f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', {hold!r}]); "
                                  f"exec({hold!r}); p.wait()"]
    seconds, peak, tree, result = run_step(argv, 4 << 30, {}, tmp_path / "log")
    assert result == "ok" and seconds >= 3
    assert peak >= 200 << 20 and tree >= 390 << 20


def test_a_step_whose_processes_together_pass_the_limit_is_stopped_whole(tmp_path):
    """A child and a grandchild holding 200 MB each, under a limit of 300 MB that neither passes alone: both
    are stopped within about a second, not left to run their 60 seconds, the grandchild included."""
    hold = "import time; b = bytearray(200 << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(60)"
    argv = [sys.executable, "-c", f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', {hold!r}]); "
                                  f"print(p.pid, flush=True); exec({hold!r}); p.wait()"]
    seconds, _, tree, result = run_step(argv, 300 << 20, {}, tmp_path / "log")
    assert result == "stopped: memory passed 0.3 GiB" and seconds < 30 and tree > 300 << 20
    grandchild = int((tmp_path / "log").read_text().split()[0])
    deadline = time.monotonic() + 10
    while proportional_bytes(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proportional_bytes(grandchild) == 0


@pytest.mark.parametrize("text, expected", [("20GiB", 20 << 30), ("512MiB", 512 << 20), ("4G", 4 << 30),
                                            ("1000000", 1_000_000), ("1.5k", 1536)])
def test_sizes_parse(text, expected):
    assert byte_count(text) == expected


@pytest.mark.parametrize("text", ["", "GiB", "20 GiBs", "-1G", "1e9"])
def test_other_sizes_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        byte_count(text)
