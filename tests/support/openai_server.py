"""A scripted OpenAI-compatible server on 127.0.0.1 for the openai backend's tests.

`scripted_server()` serves `/v1` on a free port and answers each request with the next step of
its `Script` (by default `{"choice": "A"}`), recording every body and header set it received; the
`server` fixture (tests/runners/conftest.py) yields (script, base URL).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Script:
    """Answers in order: ("ok", text) | ("status", code, headers) | ("sleep", s, text) | ("drop",)
    | ("content", json value) | ("body", bytes, send length?) | ("drip", "headers" or "body", seconds)."""

    def __init__(self):
        self.steps, self.bodies, self.headers = [], [], []
        self.lock = threading.Lock()

    def next(self, body, headers):
        with self.lock:
            self.bodies.append(body)
            self.headers.append(headers)
            return self.steps.pop(0) if self.steps else ("ok", '{"choice": "A"}')


def reply(content) -> bytes:
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()


DRIP_INTERVAL = 0.1  # seconds between the bytes of a dripping response


@contextmanager
def scripted_server() -> Iterator[tuple[Script, str]]:
    """(script, base URL) of a server answering by `script`, shut down on exit."""
    script = Script()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            step = script.next(body, dict(self.headers))
            try:
                self.answer(step)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up, as it should
                pass

        def answer(self, step):
            if step[0] == "drop":
                self.connection.close()
                return
            if step[0] == "drip":
                self.drip(step[1], step[2])
                return
            if step[0] == "sleep":
                time.sleep(step[1])
                step = ("ok", step[2])
            send_length = True
            if step[0] == "status":
                payload = b'{"error": "scripted"}'
                self.send_response(step[1])
                for key, value in step[2].items():
                    self.send_header(key, value)
            else:
                if step[0] == "body":
                    payload, send_length = step[1], step[2]
                else:
                    payload = reply(step[1])
                self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if send_length:
                self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def drip(self, part, seconds):
            """A reply sent a byte every DRIP_INTERVAL in its header block or its body, for at most `seconds`."""
            payload = reply('{"choice": "A"}')
            head = f"HTTP/1.0 200 OK\r\nContent-Length: {len(payload)}\r\n".encode()
            if part == "body":
                self.wfile.write(head + b"\r\n")
                slow = payload
            else:
                slow = head + b"X-Slow: " + b"z" * 500
            for i in range(min(len(slow), int(seconds / DRIP_INTERVAL))):
                self.wfile.write(slow[i:i + 1])
                self.wfile.flush()
                time.sleep(DRIP_INTERVAL)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield script, f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()
