"""The app, started as the README says, listens on this machine's loopback only
(`.streamlit/config.toml`: server.address = "localhost")."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOOPBACK = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1 and ::1 as /proc/net/tcp* spell them


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening_addresses(port: int) -> set[str]:
    """The local addresses with a socket listening on `port` (state 0A), from /proc/net/tcp and tcp6."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


def test_the_app_listens_on_loopback_only_unless_told_otherwise(tmp_path):
    port = _free_port()
    env = {**os.environ, "JUDGE_AUDIT_DATA_DIR": str(tmp_path)}
    env.pop("JUDGE_AUDIT_DB", None)
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
           "--server.headless", "true"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                assert urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1).read() == b"ok"
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the app did not start"
                time.sleep(0.2)
        listening = _listening_addresses(port)
        assert listening and listening <= LOOPBACK, listening
    finally:
        proc.terminate()
        proc.wait(timeout=20)
