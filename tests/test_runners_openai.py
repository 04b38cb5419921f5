"""The OpenAI-compatible backend against a scripted local server on 127.0.0.1."""

import base64
import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest
from PIL import Image

from audit_core import store
from fixtures_pools import write_tiny_dataset
from runners import recorder
from runners.backends.openai_compat import EndpointError, OpenAISelector
from runners.run_judge import run_selector


class Script:
    """Answers in order: ("ok", text) | ("status", code, headers) | ("sleep", s, text) | ("drop",)."""

    def __init__(self):
        self.steps, self.bodies, self.headers = [], [], []
        self.lock = threading.Lock()

    def next(self, body, headers):
        with self.lock:
            self.bodies.append(body)
            self.headers.append(headers)
            return self.steps.pop(0) if self.steps else ("ok", '{"choice": "A"}')


@pytest.fixture
def server():
    script = Script()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            step = script.next(body, dict(self.headers))
            if step[0] == "drop":
                self.connection.close()
                return
            if step[0] == "sleep":
                time.sleep(step[1])
                step = ("ok", step[2])
            if step[0] == "status":
                payload = b'{"error": "scripted"}'
                self.send_response(step[1])
                for key, value in step[2].items():
                    self.send_header(key, value)
            else:
                payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": step[1]}}]}).encode()
                self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            try:
                self.wfile.write(payload)
            except BrokenPipeError:
                pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield script, f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def con(tmp_path):
    db = tmp_path / "o.duckdb"
    write_tiny_dataset(db, tmp_path / "images", n_prompts=2, pool_sizes=(3,))
    connection = store.connect(db)
    yield connection
    connection.close()


def first_request(con):
    return recorder.plan_requests(con, dataset="tiny", judge="api", orders=1, contract="choice", limit=1)[0][0]


def test_payload_interleaves_labels_and_data_url_images(server, con, monkeypatch):
    script, url = server
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    backend = OpenAISelector("tiny-vlm", max_new_tokens=16, max_edge=32)
    assert backend.generate(first_request(con)) == '{"choice": "A"}'
    body, headers = script.bodies[0], script.headers[0]
    assert headers["Authorization"] == "Bearer sk-test"
    assert (body["model"], body["max_tokens"], body["temperature"]) == ("tiny-vlm", 16, 0)
    content = body["messages"][0]["content"]
    assert [c["text"].strip() for c in content if c["type"] == "text"][1:4] == ["Image A:", "Image B:", "Image C:"]
    images = [c["image_url"]["url"] for c in content if c["type"] == "image_url"]
    assert len(images) == 3 and all(u.startswith("data:image/png;base64,") for u in images)
    decoded = Image.open(io.BytesIO(base64.b64decode(images[0].split(",", 1)[1])))
    assert decoded.size == (32, 32)  # 96x96 fitted into the 32-pixel box


def test_rate_limits_wait_and_do_not_count(server, con):
    script, url = server
    script.steps = [("status", 429, {"Retry-After": "0.05"}), ("status", 429, {}), ("ok", '{"choice": "B"}')]
    backend = OpenAISelector("m", base_url=url)
    backend._retry_after = lambda response: min(OpenAISelector._retry_after(backend, response), 0.05)
    run_selector(con, dataset="tiny", judge="api", backend=backend, backend_name="openai", model="m",
                 orders=1, contract="choice", limit=1, progress=False)
    call = store.load_calls(con, "tiny").iloc[0]
    assert (call["status"], call["choice_label"], call["attempts"]) == ("ok", "B", 1)
    assert len(script.bodies) == 3


def test_5xx_and_dropped_connection_get_one_identical_retry(server, con):
    script, url = server
    script.steps = [("status", 503, {}), ("ok", '{"choice": "C"}'), ("drop",), ("ok", "not json at all")]
    backend = OpenAISelector("m", base_url=url, timeout=5)
    run_selector(con, dataset="tiny", judge="api", backend=backend, backend_name="openai", model="m",
                 orders=1, contract="choice", progress=False)
    calls = store.load_calls(con, "tiny")
    assert list(calls["status"]) == ["ok", "parse_fail"]
    assert list(calls["attempts"]) == [2, 2]
    assert calls["raw_output"].iloc[1] == "not json at all"
    assert script.bodies[0] == script.bodies[1] and script.bodies[2] == script.bodies[3]


def test_timeouts_twice_is_a_runtime_failure_and_other_calls_go_on(server, con):
    script, url = server
    script.steps = [("sleep", 1.0, '{"choice": "A"}'), ("sleep", 1.0, '{"choice": "A"}')]
    backend = OpenAISelector("m", base_url=url, timeout=0.2)
    summary = run_selector(con, dataset="tiny", judge="api", backend=backend, backend_name="openai", model="m",
                           orders=1, contract="choice", progress=False)
    calls = store.load_calls(con, "tiny")
    assert summary.statuses == {"runtime_fail": 1, "ok": 1}
    failed = calls[calls["status"] == "runtime_fail"].iloc[0]
    assert failed["attempts"] == 2 and "Timeout" in failed["parse_note"] and pd.isna(failed["raw_output"])


def test_bounded_concurrency_and_client_errors(server, con):
    script, url = server
    script.steps = [("sleep", 0.3, '{"choice": "A"}') for _ in range(6)]
    backend = OpenAISelector("m", base_url=url)
    start = time.perf_counter()
    summary = run_selector(con, dataset="tiny", judge="api", backend=backend, backend_name="openai", model="m",
                           orders=3, contract="choice", concurrency=3, progress=False)
    assert summary.statuses == {"ok": 6}
    assert time.perf_counter() - start < 1.5  # six 0.3 s calls, three at a time
    script.steps = [("status", 400, {})]
    with pytest.raises(EndpointError, match="HTTP 400"):
        backend.generate(first_request(con))


def test_missing_endpoint_says_what_to_set(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="OPENAI_BASE_URL"):
        OpenAISelector("m")
