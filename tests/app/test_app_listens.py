"""The app, started as the README says, listens on this machine's loopback only
(`.streamlit/config.toml`: server.address = "localhost")."""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.local_server import free_port, streamlit_server

LOOPBACK = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1 and ::1 as /proc/net/tcp* spell them


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
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "JUDGE_AUDIT_DB"}
    env["JUDGE_AUDIT_DATA_DIR"] = str(tmp_path)
    with streamlit_server("app.py", port, [], env, tmp_path / "server.log"):
        listening = _listening_addresses(port)
    assert listening and listening <= LOOPBACK, listening
