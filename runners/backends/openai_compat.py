"""Selector backend for any OpenAI-compatible chat endpoint (vLLM, TGI, SGLang, Ollama, hosted APIs).

The request is one user message: the instruction text, then per slot the text
"Image A:" and the image as a base64 PNG data URL, then the closing text.
Decoding is greedy (temperature 0) with a bounded `max_tokens`.

Failures: a transport error, a timeout or a 5xx raises, and the recorder makes
its one identical retry. A 429 (rate limit) is not a failure: the backend
waits (Retry-After when given) and asks again, at most `max_rate_limit_waits`
times per call. Other 4xx responses raise with the server's message.
"""

from __future__ import annotations

import base64
import email.utils
import io
import os
import threading
import time

import requests

from runners.backends.images import load_fitted
from runners.protocol import JudgeRequest


class EndpointError(RuntimeError):
    """The endpoint answered with an error status or an unusable body."""


class OpenAISelector:
    """OpenAI-compatible chat completions; safe to share between the recorder's threads."""

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
    ) -> None:
        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        if not base_url:
            raise ValueError("no endpoint: pass --base-url or set OPENAI_BASE_URL (e.g. http://localhost:8000/v1)")
        self.model = model
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.max_new_tokens = max_new_tokens
        self.max_edge = max_edge
        self.timeout = timeout
        self.revision = revision
        self.max_rate_limit_waits = max_rate_limit_waits
        self.max_wait_seconds = max_wait_seconds
        self._local = threading.local()

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
        return {
            "model": self.model,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": self.max_new_tokens,
            "temperature": 0,
        }

    def generate(self, request: JudgeRequest) -> str:
        """POST the request; wait out rate limits; raise on transport errors and error statuses."""
        body = self.payload(request)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        for _ in range(self.max_rate_limit_waits + 1):
            response = self._session().post(self.url, json=body, headers=headers, timeout=self.timeout)
            if response.status_code == 429:
                time.sleep(self._retry_after(response))
                continue
            if response.status_code >= 400:
                raise EndpointError(f"HTTP {response.status_code} from {self.url}: {response.text[:300]}")
            return self._text(response)
        raise EndpointError(f"still rate-limited after {self.max_rate_limit_waits} waits: {self.url}")

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
        return session

    def _data_url(self, path: str) -> str:
        buffer = io.BytesIO()
        load_fitted(path, self.max_edge).save(buffer, format="PNG")
        return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")

    def _retry_after(self, response: requests.Response) -> float:
        value = response.headers.get("Retry-After", "")
        try:
            wait = float(value)
        except ValueError:
            try:  # the HTTP-date form
                wait = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
            except (TypeError, ValueError):
                wait = 1.0
        return min(max(wait, 0.0), self.max_wait_seconds)

    def _text(self, response: requests.Response) -> str:
        try:
            message = response.json()["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise EndpointError(f"unexpected response body from {self.url}: {response.text[:300]}") from None
        content = message.get("content")
        if isinstance(content, list):  # some servers return content parts
            return "".join(part.get("text", "") for part in content if isinstance(part, dict))
        return content or ""
