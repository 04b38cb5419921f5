"""Local servers for tests: a free loopback port, and the app served by `streamlit run` until it answers."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
START_SECONDS = 60.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def streamlit_server(script: str, port: int, options: Sequence[str], env: Mapping[str, str],
                     log: Path) -> Iterator[str]:
    """`streamlit run script --server.port port --server.headless true *options` from the project root,
    its output in `log`; yields http://127.0.0.1:port once its health check answers (failing with the
    log's tail if it never does) and stops it afterwards."""
    cmd = [sys.executable, "-m", "streamlit", "run", script, "--server.port", str(port),
           "--server.headless", "true", *options]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=dict(env), stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"streamlit did not start: {log.read_text(errors='replace')[-2000:]}")
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
