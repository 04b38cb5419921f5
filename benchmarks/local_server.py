"""Local servers for the benchmarks and the tests: a free loopback port, and `streamlit run` until it answers."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POLL = 0.05  # seconds between health checks while a server starts


class ServerDidNotStart(RuntimeError):
    """`streamlit run` exited or did not answer its health check in time; the message ends with its log."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def streamlit_server(script: str, port: int, options: Sequence[str], env: Mapping[str, str], log: Path,
                     start_seconds: float = 60.0) -> Iterator[tuple[str, float]]:
    """`streamlit run script --server.port port --server.headless true *options` from the project root,
    its output in `log`; yields (http://127.0.0.1:port, seconds from launch to the health check's answer)
    once it answers, raising ServerDidNotStart with the log's tail if it has not within `start_seconds`,
    and stops it afterwards."""
    cmd = [sys.executable, "-m", "streamlit", "run", script, "--server.port", str(port),
           "--server.headless", "true", *options]
    launched = time.perf_counter()
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=dict(env), stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_seconds
        while True:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise ServerDidNotStart(f"streamlit did not start: {log.read_text(errors='replace')[-2000:]}")
                time.sleep(POLL)
        yield url, time.perf_counter() - launched
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
