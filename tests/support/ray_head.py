"""A Ray head for tests, alone in a fresh network namespace (only its own loopback: nothing leaves
127.0.0.1, no port meets another job's), started with `ray start --head --block`; drivers join the
namespace with `nsenter -t PID -n` and find the head through RAY_ADDRESS. Usage stats are off and no
token file in ~/.ray is read or made."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import pytest

HEAD_START_SECONDS = 90


def can_unshare() -> bool:
    """Whether this process may make a network namespace (root, unshare -n)."""
    try:
        return subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@contextmanager
def isolated_ray_head(env: Mapping[str, str], object_store_bytes: int) -> Iterator[tuple[int, dict[str, str]]]:
    """(head's process id, environment for drivers) while the head runs with `env` and 2 CPUs; skips the
    test where Ray is not installed or the namespace cannot be made."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed (requirements-ray.txt)")
    if not can_unshare() or shutil.which("ip") is None or shutil.which("nsenter") is None:
        pytest.skip("needs root with unshare -n, nsenter and ip to isolate the Ray head's network")
    env = {**env, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths live under it
    ray = os.path.join(os.path.dirname(sys.executable), "ray")
    start = (f"ip link set lo up && exec {ray} start --head --block --node-ip-address=127.0.0.1 --port=6379 "
             f"--num-cpus=2 --num-gpus=0 --include-dashboard=false --object-store-memory={object_store_bytes} "
             f"--disable-usage-stats --temp-dir={temp}")
    log = open(os.path.join(temp, "head.log"), "w+b")
    head = subprocess.Popen(["unshare", "-n", "sh", "-c", start], env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + HEAD_START_SECONDS
    try:
        while b"Ray runtime started" not in open(log.name, "rb").read():
            assert head.poll() is None and time.monotonic() < deadline, open(log.name, "rb").read()[-2000:]
            time.sleep(0.2)
        yield head.pid, {**env, "RAY_ADDRESS": "127.0.0.1:6379"}
    finally:
        head.send_signal(signal.SIGTERM)  # `ray start --block` stops every process it started
        head.wait(timeout=60)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)
