"""`--engine ray`: backend replicas as Ray actors, the driver the only writer, records as in one process.

One Ray head per module, started by the test with `ray start --head --block`
inside a fresh network namespace (only its own loopback: nothing leaves
127.0.0.1, no port meets another job's); each driver joins that namespace
with `nsenter` and finds the head through RAY_ADDRESS. The head's workers run
with a hook that slows the simulated selector (0.05 s a call), so a driver
can be killed mid-run. Records compared: request keys, picks, statuses and
raw outputs, against the same judge recorded in this process.
"""

import importlib.util
import json
import subprocess
import sys
import time

import pytest

from audit_core import store
from runners import run_judge
from runners.backends.hf import HFSelector
from runners.backends.simulated import simulated_selector
from runners.recording import ray_engine
from runners.selection.recorder import record_selector
from tests.support.paths import REPO
from tests.support.pools import write_tiny_dataset
from tests.support.ray_head import isolated_ray_head
from tests.support.recording import killed_mid_run, slowed_env
from tests.support.vlms import build_smolvlm

RECORD = ["request_key", "status", "choice_label", "chosen_candidate_id", "raw_output"]


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    """(head process id, environment for drivers): a Ray head alone in its own network namespace."""
    env = slowed_env(tmp_path_factory.mktemp("ray") / "hook", "runners.backends.simulated", "SimulatedSelector", 0.05)
    with isolated_ray_head(env, 100_000_000) as head:
        yield head


def in_head_namespace(pid: int, *args: str) -> list[str]:
    return ["nsenter", "-t", str(pid), "-n", sys.executable, "-m", "runners.run_judge", *args]


def records(db, judge):
    con = store.connect(db, read_only=True)
    calls = con.execute(f"SELECT {', '.join('c.' + c for c in RECORD)} FROM calls c JOIN runs r USING (run_id) "
                        "WHERE r.judge = ? ORDER BY c.request_key", [judge]).df()
    runs = con.execute("SELECT status, config_json FROM runs WHERE judge = ? ORDER BY started_at", [judge]).fetchall()
    con.close()
    return calls, runs


def test_ray_records_equal_one_process_after_a_kill_and_a_resume(ray_head, tmp_path):
    pid, env = ray_head
    local, remote = tmp_path / "local.duckdb", tmp_path / "ray.duckdb"
    for db in (local, remote):
        write_tiny_dataset(db, tmp_path / "images", n_prompts=20, pool_sizes=(3, 4))
    record_selector(local, dataset="tiny", judge="weak", backend=simulated_selector("weak"), backend_name="simulated",
                    model="weak", lenient=True, progress=False)
    cmd = in_head_namespace(pid, "--db", str(remote), "--dataset", "tiny", "--judge", "weak", "--backend",
                            "simulated", "--model", "weak", "--lenient", "--engine", "ray", "--replicas", "2",
                            "--batch-size", "2")
    killed_mid_run(cmd, env, total=60, at_least=10)
    first, _ = records(remote, "weak")
    assert 10 <= len(first) < 60, "killed mid-way"
    out = subprocess.run(cmd + ["--quiet"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"{60 - len(first)} recorded now" in out.stdout
    expected, _ = records(local, "weak")
    final, runs = records(remote, "weak")
    assert len(final) == 60 and final.equals(expected)
    assert final.set_index("request_key").loc[first["request_key"]].reset_index().equals(first)  # kept as they were
    assert [status for status, _ in runs] == ["interrupted", "finished"]
    config = json.loads(runs[1][1])
    assert config["execution"] == {"engine": "ray", "replicas": 2, "gpus_per_replica": 0.0, "batch_size": 2}
    assert config["throughput"]["calls"] == 60 - len(first) and config["throughput"]["calls_per_second"] > 0


def test_ray_replica_of_the_tiny_hf_model_records_what_one_process_does(ray_head, tmp_path):
    pid, env = ray_head
    model = build_smolvlm(tmp_path / "smolvlm")
    local, remote = tmp_path / "local.duckdb", tmp_path / "ray.duckdb"
    for db in (local, remote):
        write_tiny_dataset(db, tmp_path / "images", n_prompts=2, pool_sizes=(3, 4))
    backend = HFSelector(str(model), max_new_tokens=6, max_edge=64, device="cpu")
    record_selector(local, dataset="tiny", judge="smol", backend=backend, backend_name="hf", model=str(model),
                    orders=2, progress=False)
    out = subprocess.run(in_head_namespace(
        pid, "--db", str(remote), "--dataset", "tiny", "--judge", "smol", "--backend", "hf", "--model", str(model),
        "--orders", "2", "--max-new-tokens", "6", "--max-edge", "64", "--device", "cpu", "--engine", "ray",
        "--batch-size", "3", "--quiet"), cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    expected, _ = records(local, "smol")
    final, runs = records(remote, "smol")
    assert len(final) == 4 and set(final["status"]) == {"parse_fail"} and final.equals(expected)
    assert json.loads(runs[0][1])["execution"]["replicas"] == 1


def test_a_missing_ray_names_the_install_command(tmp_path, capsys, monkeypatch):
    db = tmp_path / "t.duckdb"
    write_tiny_dataset(db, tmp_path / "images", n_prompts=2)
    real = importlib.util.find_spec
    monkeypatch.setattr(ray_engine.importlib.util, "find_spec", lambda name: None if name == "ray" else real(name))
    code = run_judge.main(["--db", str(db), "--dataset", "tiny", "--judge", "j", "--backend", "simulated",
                           "--model", "strong", "--engine", "ray", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "the ray engine needs ray" in err and "pip install -r requirements-ray.txt" in err
    con = store.connect(db, read_only=True)
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


def test_replica_flags_need_the_ray_engine(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_judge.main(["--db", str(tmp_path / "t.duckdb"), "--dataset", "tiny", "--judge", "j", "--backend",
                        "simulated", "--model", "strong", "--replicas", "2"])
    assert exit_info.value.code == 2 and "--replicas needs --engine ray" in capsys.readouterr().err


@pytest.mark.parametrize("resources, replicas, per, expected", [
    ({"CPU": 16, "GPU": 4}, None, None, (4, 1.0)),  # one replica per GPU
    ({"CPU": 16, "GPU": 4}, None, 2, (2, 2.0)),
    ({"CPU": 16, "GPU": 4}, None, 0.5, (8, 0.5)),
    ({"CPU": 16, "GPU": 4}, 3, None, (3, 1.0)),
    ({"CPU": 2}, None, None, (1, 0.0)),  # no GPUs: one CPU replica
    ({"CPU": 2}, 2, None, (2, 0.0)),
])
def test_replica_plan_defaults(resources, replicas, per, expected):
    assert ray_engine.replica_plan(resources, replicas, per) == expected


@pytest.mark.parametrize("resources, replicas, per, message", [
    ({"CPU": 16, "GPU": 2}, 3, None, "replicas: 3 × 1 GPU = 3 GPUs, but the Ray cluster has 2"),
    ({"CPU": 2}, None, 1, "replicas: 1 × 1 GPU = 1 GPUs, but the Ray cluster has 0"),
    ({"CPU": 2}, 3, None, "replicas: 3 × 1 CPU, but the Ray cluster has 2"),
])
def test_replica_plan_refuses_what_the_cluster_cannot_hold(resources, replicas, per, message):
    with pytest.raises(ray_engine.InputError, match=message):
        ray_engine.replica_plan(resources, replicas, per)


def test_an_unreachable_ray_address_is_refused_at_once():
    """Ray retries a dead head for minutes; the engine checks the address first (bounded, loopback only)."""
    import socket

    from audit_core.errors import InputError

    listener = socket.create_server(("127.0.0.1", 0))
    open_port = listener.getsockname()[1]
    closed = socket.create_server(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    try:
        ray_engine.check_reachable(f"127.0.0.1:{open_port}", seconds=2)
        ray_engine.check_reachable("auto")
        started = time.monotonic()
        with pytest.raises(InputError, match="RAY_ADDRESS") as caught:
            ray_engine.check_reachable(f"ray://127.0.0.1:{closed_port}", seconds=2)
        assert time.monotonic() - started < 5
        assert f"127.0.0.1:{closed_port}" in str(caught.value)
    finally:
        listener.close()
