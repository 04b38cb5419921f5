"""Selector backend for any OpenAI-compatible chat endpoint (vLLM, TGI, SGLang, Ollama, hosted APIs).

The request is one user message: the instruction text, then per slot the text
"Image A:" and the image as a base64 PNG data URL, then the closing text.
Decoding is greedy (temperature 0) with a bounded `max_tokens`. A request
planned with structured output (`--structured`) also carries `response_format`
{"type": "json_schema", "json_schema": {"name", "schema", "strict": true}} with
the request's own schema (`output_schema()`: the supplied labels for a
selector, the scale for a rater); a server that ignores it is not detected
here, and the strict parser judges the answer either way.

Label probabilities (opt-in, `top_logprobs=N`, the `--logprobs` flag): the body
also carries `logprobs: true, top_logprobs: N`, and `reply` reads the returned
`choices[0].logprobs.content`: every generated token that spells an offered
label (`runners.backends.base.spelled_label`) becomes a `LabelStep` whose
probability for each offered label is the sum of exp(logprob) over that step's
top-N entries spelling it; a label none of them spells is left out (the server
did not say), and a response without usable log-probabilities gives no steps
(the call's label_probs stay NULL). A server that refuses the fields answers
with an error status, recorded as a runtime failure.

Bounds: every exchange with the endpoint (connect, send, status, headers and
the whole body) has a wall-clock deadline of `timeout` seconds, however slowly
the server sends; the body is read in chunks and refused beyond
`max_response_bytes`; the text returned for recording is at most
`STORED_TEXT_CHARS` characters.

Failures: a transport error, a missed deadline, a body over the cap or not the
chat-completions JSON, or a 5xx raises, and the recorder makes its one
identical retry (a body over the cap is recorded with its first bytes, cut).
A 429 (rate limit) is not a failure: the backend waits (Retry-After when
given) and asks again, at most `max_rate_limit_waits` times per call, each
wait at most `max_wait_seconds`. Other 4xx responses raise with the server's
message. Message content that is not text (a number, null, an object, a list
other than text parts) and text cut to the storage bound are returned as a
marked description that no output contract accepts, so the call is a parse
failure, never resampled and never fatal to the run.
"""

from __future__ import annotations

import base64
import email.utils
import http.client
import io
import json
import math
import os
import socket
import threading
import time
import urllib.parse
from collections.abc import Sequence

from runners.backends.base import BackendFailure, LabelStep, Reply, spelled_label
from runners.backends.images import load_fitted
from runners.selection.protocol import JudgeRequest

STORED_TEXT_CHARS = 64 * 1024  # a contract answer is a few dozen characters; more is kept only as evidence
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
READ_CHUNK_BYTES = 64 * 1024
ERROR_PREVIEW_CHARS = 300


class EndpointError(BackendFailure):
    """The endpoint answered with an error status or an unusable body, or not in time."""


class EndpointTimeout(EndpointError):
    """No complete response within the call's deadline."""


def cut_text(text: str, limit: int, what: str) -> str:
    """`text` if it has at most `limit` characters, else its first `limit` and a marker saying it was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[cut: {what}; first {limit} characters kept]"


class OpenAISelector:
    """OpenAI-compatible chat completions; safe to share between the recorder's threads.

    Each exchange opens its own connection (`Connection: close`): the deadline
    is enforced by shutting that socket, which no pooled client exposes, and a
    handshake is small beside a model call.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_new_tokens: int = 64,
        max_edge: int | None = 448,
        timeout: float = 120.0,
        revision: str | None = None,
        max_rate_limit_waits: int = 30,
        max_wait_seconds: float = 60.0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        top_logprobs: int | None = None,
    ) -> None:
        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        if not base_url:
            raise ValueError("no endpoint: pass --base-url or set OPENAI_BASE_URL (e.g. http://localhost:8000/v1)")
        parts = _chat_endpoint(base_url)
        if not 0 < timeout < math.inf:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout}")
        if max_response_bytes < 1:
            raise ValueError(f"max_response_bytes must be positive, got {max_response_bytes}")
        if top_logprobs is not None and top_logprobs < 1:
            raise ValueError(f"top_logprobs must be at least 1, got {top_logprobs}")
        self.model = model
        self.url = urllib.parse.urlunsplit(parts)
        self._parts = parts
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.max_new_tokens = max_new_tokens
        self.max_edge = max_edge
        self.timeout = timeout
        self.revision = revision
        self.max_rate_limit_waits = max_rate_limit_waits
        self.max_wait_seconds = max_wait_seconds
        self.max_response_bytes = max_response_bytes
        self.top_logprobs = top_logprobs

    def model_revision(self) -> str | None:
        """The revision given by the user; an endpoint does not report one reliably."""
        return self.revision

    def payload(self, request: JudgeRequest) -> dict:
        """The JSON body sent for `request`."""
        content = []
        for kind, value in request.segments():
            if kind == "text":
                content.append({"type": "text", "text": value})
            else:
                content.append({"type": "image_url", "image_url": {"url": self._data_url(value)}})
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": self.max_new_tokens,
            "temperature": 0,
        }
        schema_of = getattr(request, "output_schema", None)  # request kinds without structured output lack it
        constraint = schema_of() if schema_of is not None else None
        if constraint is not None:
            name, schema = constraint
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": name, "schema": schema, "strict": True}}
        if self.top_logprobs is not None:
            body["logprobs"] = True
            body["top_logprobs"] = self.top_logprobs
        return body

    def generate(self, request: JudgeRequest) -> str:
        """The reply's text (`reply`)."""
        return self.reply(request).text

    def reply(self, request: JudgeRequest) -> Reply:
        """The reply's text and, with `top_logprobs` and a selector request, its label steps (module docstring)."""
        data = self._completion(request)
        text = self._text(data)
        if self.top_logprobs is None or not isinstance(request, JudgeRequest):
            return Reply(text)
        return Reply(text, label_steps(data, request.labels))

    def _completion(self, request: JudgeRequest) -> bytes:
        """POST the request; wait out rate limits; raise on transport errors, missed deadlines and error statuses."""
        body = json.dumps(self.payload(request)).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json", "Connection": "close"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        for _ in range(self.max_rate_limit_waits + 1):
            status, response_headers, data = self._exchange(body, headers)
            if status == 429:
                time.sleep(self._retry_after(response_headers.get("Retry-After", "")))
                continue
            if status >= 400:
                preview = data.decode("utf-8", errors="replace")[:ERROR_PREVIEW_CHARS]
                raise EndpointError(f"HTTP {status} from {self.url}: {preview}")
            return data
        raise EndpointError(f"still rate-limited after {self.max_rate_limit_waits} waits: {self.url}")

    def _exchange(self, body: bytes, headers: dict[str, str]) -> tuple[int, http.client.HTTPMessage, bytes]:
        """(status, headers, body) of one POST, all of it within `timeout` seconds of wall-clock time.

        A watchdog shuts the socket at the deadline, which ends any blocked
        send or read at once (connecting has its own `timeout`) (a per-read timeout would let a
        server that drips a byte at a time hold the call indefinitely).
        """
        parts = self._parts
        connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        connection = connection_class(parts.hostname, parts.port, timeout=self.timeout)
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            if connection.sock is not None:
                try:  # the plain socket's shutdown: it wakes a blocked TLS read too
                    socket.socket.shutdown(connection.sock, socket.SHUT_RDWR)
                except OSError:
                    pass

        watchdog = threading.Timer(self.timeout, expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            path = parts.path + (f"?{parts.query}" if parts.query else "")
            connection.request("POST", path, body=body, headers=headers)
            response = connection.getresponse()
            data = self._body(response, expired)
            if expired.is_set():  # a body without a length ends at close, which the watchdog also causes
                raise EndpointTimeout(f"no complete response within {self.timeout:g} s from {self.url}")
            return response.status, response.headers, data
        except (OSError, http.client.HTTPException) as err:
            if expired.is_set() or isinstance(err, TimeoutError):
                raise EndpointTimeout(f"no complete response within {self.timeout:g} s from {self.url}") from None
            raise EndpointError(f"{type(err).__name__} talking to {self.url}: {err}") from None
        finally:
            watchdog.cancel()
            watchdog.join()  # so the watchdog never touches a socket after it is closed
            connection.close()

    def _body(self, response: http.client.HTTPResponse, expired: threading.Event) -> bytes:
        """The response body, read a chunk at a time; EndpointError past `max_response_bytes`."""
        chunks: list[bytes] = []
        size = 0
        while not expired.is_set():
            chunk = response.read1(READ_CHUNK_BYTES)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > self.max_response_bytes:
                head = b"".join(chunks)[:STORED_TEXT_CHARS].decode("utf-8", errors="replace")
                raise EndpointError(
                    f"response body from {self.url} exceeds the {self.max_response_bytes}-byte cap",
                    raw_output=f"{head}\n[cut: body over the {self.max_response_bytes}-byte cap; "
                               f"first {STORED_TEXT_CHARS} bytes kept]",
                )
        if response.length:  # the server announced more than arrived
            raise http.client.IncompleteRead(b"".join(chunks), response.length)
        return b"".join(chunks)

    def _data_url(self, path: str) -> str:
        buffer = io.BytesIO()
        load_fitted(path, self.max_edge).save(buffer, format="PNG")
        return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")

    def _retry_after(self, value: str) -> float:
        """Seconds to wait for a Retry-After header value (seconds or an HTTP date), within [0, max_wait_seconds]."""
        try:
            wait = float(value)
        except ValueError:
            try:  # the HTTP-date form
                wait = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
            except (TypeError, ValueError):
                wait = 1.0
        if math.isnan(wait):
            wait = 1.0
        return min(max(wait, 0.0), self.max_wait_seconds)

    def _text(self, data: bytes) -> str:
        """The reply's text, bounded for storage; non-text content becomes a marked description (a parse failure)."""
        try:
            message = json.loads(data)["choices"][0]["message"]
            if not isinstance(message, dict):
                raise TypeError("message is not an object")
        except (ValueError, KeyError, IndexError, TypeError):
            preview = data.decode("utf-8", errors="replace")[:ERROR_PREVIEW_CHARS]
            raise EndpointError(f"unexpected response body from {self.url}: {preview}") from None
        content = message.get("content")
        text = _content_text(content)
        if text is None:
            shown = cut_text(json.dumps(content, ensure_ascii=False), STORED_TEXT_CHARS, "content")
            return f"(message content is {_json_kind(content)}, not text) {shown}"
        return cut_text(text, STORED_TEXT_CHARS, f"reply of {len(text)} characters")


def label_steps(data: bytes, labels: Sequence[str]) -> tuple[LabelStep, ...] | None:
    """The label steps of a chat-completions body (module docstring); None when it has no usable
    `choices[0].logprobs.content` list."""
    try:
        content = json.loads(data)["choices"][0]["logprobs"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    if not isinstance(content, list):
        return None
    steps = []
    for position in content:
        if not isinstance(position, dict) or not isinstance(position.get("token"), str):
            return None
        label = spelled_label(position["token"], labels)
        if label is None:
            continue
        probs: dict[str, float] = {}
        for entry in position.get("top_logprobs") or []:
            spelled = spelled_label(entry.get("token"), labels) if isinstance(entry, dict) else None
            logprob = entry.get("logprob") if spelled is not None else None
            if isinstance(logprob, (int, float)) and not isinstance(logprob, bool) and math.isfinite(logprob):
                probs[spelled] = probs.get(spelled, 0.0) + math.exp(min(logprob, 0.0))
        steps.append(LabelStep(label, probs))
    return tuple(steps)


def _chat_endpoint(base_url: str) -> urllib.parse.SplitResult:
    """The parsed chat-completions URL under `base_url`; ValueError unless http(s) with a host and a valid port."""
    parts = urllib.parse.urlsplit(base_url.rstrip("/") + "/chat/completions")
    try:
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port is None or parts.port > 0)
    except ValueError:  # a port that is not a number in range
        valid = False
    if not valid:
        raise ValueError(f"endpoint {base_url!r} is not an http:// or https:// URL with a host and a valid port")
    return parts


def _content_text(content: object) -> str | None:
    """Text content, or a list of text parts joined (some servers answer in parts); None for anything else."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and all(
        isinstance(part, dict) and part.get("type", "text") == "text" and isinstance(part.get("text"), str)
        for part in content
    ):
        return "".join(part["text"] for part in content)
    return None


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
