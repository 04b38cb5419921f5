"""The openai backend end to end against a real OpenAI-compatible server: `transformers serve`.

The server runs on 127.0.0.1 (a free port) with the tiny randomly initialised
Qwen3-VL model of tests/support/vlms.py, saved to a temp directory and
loaded from there with the hub offline and its update check off, so nothing
leaves this machine. `python -m runners.run_judge --backend openai` then records
a small dataset through it: images go as data URLs, every call is recorded with
the server's raw text, and the tiny model's junk comes out as parse failures.
With `--structured` the request also carries the schema; transformers serve
5.24 ignores `response_format` (it says so in its log), so this shows that the
strict parser, not the server, is what judges each answer.

Waits are bounded (SERVER_START_SECONDS for the server to answer /health) and
the server's process group is ended after the module, however it went.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from audit_core import store
from benchmarks.local_server import free_port
from runners.backends.openai_compat import OpenAISelector
from runners.selection import recorder
from tests.support.paths import REPO
from tests.support.pools import write_tiny_dataset

transformers_utils = pytest.importorskip("transformers.utils.import_utils", reason="needs transformers")
pytestmark = pytest.mark.skipif(
    not transformers_utils.is_serve_available(),
    reason="`transformers serve` needs the serving extras (fastapi, uvicorn, pydantic, openai); "
    "`pip install -r requirements-dev.txt` installs them",
)

SERVER_START_SECONDS = 120.0  # imports and model load; about 15-30 s on this 2-core machine
MAX_NEW_TOKENS = 6


def offline_env(home: Path) -> dict[str, str]:
    """This environment with the hub offline, no update check or telemetry, and a cache of its own."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HOME": str(home), "NO_PROXY": "127.0.0.1"}


def wait_for_health(process: subprocess.Popen, base: str, log: Path) -> None:
    """Return once GET /health answers 200; fail with the log's tail if the server exits or the wait runs out."""
    deadline = time.monotonic() + SERVER_START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"transformers serve exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.25)
    pytest.fail(f"transformers serve did not answer within {SERVER_START_SECONDS:g} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(model directory, base URL, log file) of a `transformers serve` of the tiny Qwen3-VL on 127.0.0.1."""
    from tests.support.vlms import build_qwen3_vl

    root = tmp_path_factory.mktemp("serve")
    model = build_qwen3_vl(root / "qwen3_vl")
    port = free_port()
    log = root / "serve.log"
    command = [str(Path(sys.executable).with_name("transformers")), "serve", str(model), "--device", "cpu",
               "--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=offline_env(root / "hf"),
                                   start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(process, base, log)
        yield model, f"{base}/v1", log
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "serve.duckdb"
    write_tiny_dataset(path, tmp_path / "images", n_prompts=2, pool_sizes=(3, 4))
    return path


def run_judge(db: Path, model: Path, url: str, judge: str, *extra: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "runners.run_judge", "--db", str(db), "--dataset", "tiny", "--judge", judge,
               "--backend", "openai", "--model", str(model), "--base-url", url, "--orders", "2",
               "--max-new-tokens", str(MAX_NEW_TOKENS), "--max-edge", "64", "--timeout", "60", "--quiet", *extra]
    return subprocess.run(command, cwd=REPO, env=offline_env(db.parent / "hf"), capture_output=True, text=True,
                          timeout=180)


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def recorded(db: Path, judge: str) -> tuple[list[tuple], tuple]:
    con = store.connect(db, read_only=True)
    try:
        calls = con.execute(
            "SELECT c.request_key, c.status, c.raw_output, c.attempts, c.choice_label FROM calls c "
            "JOIN runs r USING (run_id) WHERE r.judge = ? ORDER BY c.prompt_id, c.order_index", [judge]).fetchall()
        run = con.execute("SELECT backend, model, status, config_json FROM runs WHERE judge = ?", [judge]).fetchone()
        return calls, run
    finally:
        con.close()


def test_a_judge_through_transformers_serve_records_every_call_with_its_raw_text(served, db):
    model, url, log = served
    done = run_judge(db, model, url, "served")
    assert done.returncode == 0, done.stderr
    calls, run = recorded(db, "served")
    assert run[:3] == ("openai", str(model), "finished") and not json.loads(run[3])["structured"]
    assert len(calls) == 4 and {c[1] for c in calls} == {"parse_fail"}  # the random model's junk
    assert all(c[3] == 1 and c[4] is None for c in calls)  # answered at once, and no pick invented
    con = store.connect(db, read_only=True)
    try:
        planned = recorder.plan_requests(con, dataset="tiny", judge="served", orders=2, contract="ranking",
                                         limit=None)[0]
    finally:
        con.close()
    backend = OpenAISelector(str(model), base_url=url, max_new_tokens=MAX_NEW_TOKENS, max_edge=64)
    by_key = {c[0]: c[2] for c in calls}
    assert set(by_key) == {r.request_key for r in planned}
    # The same request again (greedy decoding): the server's text is exactly what was recorded.
    for request in planned:
        body = backend.payload(request)
        assert sum(part["image_url"]["url"].startswith("data:image/png;base64,")
                   for part in body["messages"][0]["content"] if part["type"] == "image_url") == len(request.labels)
        assert post(url, body)["choices"][0]["message"]["content"] == by_key[request.request_key]
    # The images reach the model: without them the same request has fewer prompt tokens.
    body = backend.payload(planned[0])
    with_images = post(url, body)["usage"]["prompt_tokens"]
    body["messages"][0]["content"] = [p for p in body["messages"][0]["content"] if p["type"] == "text"]
    assert post(url, body)["usage"]["prompt_tokens"] < with_images


def test_structured_output_through_a_server_that_ignores_it_is_still_checked_by_the_parser(served, db):
    model, url, log = served
    done = run_judge(db, model, url, "served-structured", "--structured")
    assert done.returncode == 0, done.stderr
    calls, run = recorded(db, "served-structured")
    assert json.loads(run[3])["structured"] is True
    assert len(calls) == 4 and {c[1] for c in calls} == {"parse_fail"} and all(c[2] for c in calls)
    assert "response_format" in log.read_text()  # the server's own word that it ignored the schema
