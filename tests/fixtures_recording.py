"""Helpers for tests of the recording path: a scripted backend, and a recording command killed mid-run.

`Scripted` answers a fixed text after failing a set number of calls per
request key (selectors and raters alike). To test that a resumed run loses
nothing after SIGKILL, `slowed_env` slows a backend class through a
`sitecustomize` hook on the command's PYTHONPATH, and `killed_mid_run` starts
the command, waits for its progress bar to pass a count and kills it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook_dir), str(ROOT)])}


def killed_mid_run(cmd: Sequence[str], env: dict[str, str], *, total: int, at_least: int) -> bytes:
    """Run `cmd` from the repository root, SIGKILL it once its progress bar shows `at_least`/`total`
    (or after 60 s), assert it died of the signal, and return the progress output read until then."""
    proc = subprocess.Popen(list(cmd), cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
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
