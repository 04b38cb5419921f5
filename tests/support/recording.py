"""Helpers for tests of the recording path: a scripted backend, and a recording command killed mid-run.

`Scripted` answers a fixed text after failing a set number of calls per
request key (selectors and raters alike). To test that a resumed run loses
nothing after SIGKILL, `slowed_env` slows a backend class through a
`sitecustomize` hook on the command's PYTHONPATH, `killed_mid_run` starts
the command, waits for its progress bar to pass a count and kills it, and
`assert_resumed` runs it again and checks that nothing was lost or repeated.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import duckdb
import pandas as pd

from audit_core import store
from tests.support.paths import REPO


class Scripted:
    """Backend that fails the first `failures` calls of each key, then answers `text`; `seen` counts calls per key."""

    def __init__(self, text: str = '{"choice": "A"}', failures: int = 0):
        self.text, self.failures, self.seen = text, failures, {}
        self.lock = threading.Lock()

    def generate(self, request) -> str:
        with self.lock:
            n = self.seen[request.request_key] = self.seen.get(request.request_key, 0) + 1
        if n <= self.failures:
            raise ConnectionError(f"scripted failure {n}")
        return self.text

    def model_revision(self) -> str:
        return "scripted-1"


SLOWED = """
import time
from {module} import {cls} as _backend
_generate = _backend.generate
def _slow(self, request):
    time.sleep({seconds})
    return _generate(self, request)
_backend.generate = _slow
"""


def slowed_env(hook_dir: Path, module: str, cls: str, seconds: float) -> dict[str, str]:
    """The environment for a command whose backend class `module.cls` sleeps `seconds` before each generate
    (a sitecustomize hook written to `hook_dir`), so that there is time to kill it mid-run."""
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(SLOWED.format(module=module, cls=cls, seconds=seconds))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook_dir), str(REPO)])}


def killed_mid_run(cmd: Sequence[str], env: dict[str, str], *, total: int, at_least: int) -> bytes:
    """Run `cmd` from the repository root, SIGKILL it once its progress bar shows `at_least`/`total`
    (or after 60 s), assert it died of the signal, and return the progress output read until then."""
    proc = subprocess.Popen(list(cmd), cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    progress = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        chunk = os.read(proc.stderr.fileno(), 4096)
        if not chunk:
            break
        progress += chunk
        counts = [int(n) for n in re.findall(rb"(\d+)/%d" % total, progress)]
        if counts and counts[-1] >= at_least:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    return progress


def assert_resumed(cmd: Sequence[str], env: dict[str, str], db: Path, first: pd.DataFrame, total: int,
                   load: Callable[[duckdb.DuckDBPyConnection], pd.DataFrame]) -> None:
    """Run `cmd` again (with --quiet) after `killed_mid_run` left the calls `first` in `db`, and assert
    the resumed run lost and repeated nothing: `total` calls (`load` reads them), one per condition and
    candidate; those recorded before the kill kept as they were (raw output, run); the killed run
    'interrupted' and the new one 'finished'; and the rest reported as recorded now."""
    out = subprocess.run([*cmd, "--quiet"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    con = store.connect(db)
    try:
        final = load(con)
        runs = con.execute("SELECT status FROM runs ORDER BY started_at").fetchall()
    finally:
        con.close()
    assert len(final) == total and not final.duplicated(["condition", "candidate_id"]).any()
    kept = final.set_index("request_key").loc[first["request_key"]]
    assert list(kept["raw_output"]) == list(first["raw_output"]) and list(kept["run_id"]) == list(first["run_id"])
    assert runs == [("interrupted",), ("finished",)]
    assert f"{total - len(first)} recorded now" in out.stdout


def calls_of(con, judge):
    return con.execute(
        "SELECT c.* FROM calls c JOIN runs r USING (run_id) WHERE r.judge = ? ORDER BY prompt_id, order_index",
        [judge],
    ).df()

