"""Backend protocols: what the recorder needs from a judge or a scorer.

A selector backend turns one `JudgeRequest` into raw text; parsing, retries and
recording are the recorder's job, identical for every backend. A scorer backend
scores each image alone against the prompt (it cannot see any order).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from runners.selection.protocol import JudgeRequest


class BackendFailure(RuntimeError):
    """A runtime failure that carries what the backend did receive (bounded text), to record with it."""

    def __init__(self, message: str, *, raw_output: str | None = None) -> None:
        super().__init__(message)
        self.raw_output = raw_output


@runtime_checkable
class SelectorBackend(Protocol):
    """A judge that sees a prompt and labelled images and answers in text."""

    def generate(self, request: JudgeRequest) -> str:
        """Raw output text for one request; raise on runtime failure (the recorder retries once).

        The text is what gets parsed and stored, so keep it bounded. A
        `BackendFailure` may carry the raw text received; the recorder stores
        it with the runtime failure.

        Must be safe to call from worker threads when the recorder runs with concurrency > 1.
        """
        ...

    def model_revision(self) -> str | None:
        """Exact revision of the model weights or endpoint (commit hash, file hash), if known."""
        ...


@runtime_checkable
class ScorerBackend(Protocol):
    """A content-only scorer: one score per image, higher is better."""

    def score(self, prompt: str, image_paths: list[str]) -> list[float]:
        """Scores of `image_paths` for `prompt`, in the same order."""
        ...

    def model_revision(self) -> str | None:
        """Exact revision of the scoring model, if known."""
        ...
