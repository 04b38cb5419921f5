"""Backend protocols: what the recorder needs from a judge or a scorer.

A selector backend turns one `JudgeRequest` into raw text; parsing, retries and
recording are the recorder's job, identical for every backend. A backend that can
also say how likely each offered label was (hf; openai with `--logprobs`) offers
`reply(request) -> Reply` (and may offer `reply_batch`), which the engines prefer
(`runners.recording.engines`). A scorer backend scores each image alone against the
prompt (it cannot see any order).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from runners.selection.protocol import JudgeRequest


class BackendFailure(RuntimeError):
    """A runtime failure that carries what the backend did receive (bounded text), to record with it."""

    def __init__(self, message: str, *, raw_output: str | None = None) -> None:
        super().__init__(message)
        self.raw_output = raw_output


# How a label may be written as one token: alone, after a space, after a quote, after both.
LABEL_SPELLINGS: tuple[str, ...] = ("{}", " {}", '"{}', ' "{}')


def label_spellings(label: str) -> tuple[str, ...]:
    """The token texts that spell `label` (LABEL_SPELLINGS)."""
    return tuple(spelling.format(label) for spelling in LABEL_SPELLINGS)


def spelled_label(token: str, labels: Sequence[str]) -> str | None:
    """The label of `labels` that the token text `token` spells, None when it spells none."""
    return next((label for label in labels if token in label_spellings(label)), None)


@dataclass(frozen=True)
class LabelStep:
    """One generated token that spells an offered label, and the label probabilities at that step.

    label: the offered label the generated token spells (`spelled_label`); probs: offered label ->
    probability, over the whole vocabulary, that the token at this step spells that label (the
    spellings' probabilities add). A label is absent when the backend cannot say (a server's top-N
    list without it), so the values sum to at most 1.
    """

    label: str
    probs: Mapping[str, float]


@dataclass(frozen=True)
class Reply:
    """A backend's answer: the raw text and, when the backend can give them, its label steps in order.

    label_steps: every generated token that spells an offered label, first to last; None when the
    backend records no probabilities. The recorder keeps the probabilities of the first step whose
    label is the parsed choice (`runners.selection.recorder.label_probs_of_choice`).
    """

    text: str
    label_steps: tuple[LabelStep, ...] | None = None


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
