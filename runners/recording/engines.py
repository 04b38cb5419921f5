"""How a run's planned requests become raw text: the call with its retry, batches, and the local engine.

An engine takes the requests still to call, in plan order, and yields lists of
(request, `Generated`) as soon as they have finished; the recorder builds the
records and commits each list on its own thread, so an engine never touches
the store. Requests go out in batches of at most `batch_size`, in plan order:

- a backend with `generate_batch(requests) -> list[str]` (hf) answers a batch
  in one call, and each of its calls records seconds = the batch's wall time
  / its size (the batch's time shared out equally). A batch that raises is
  retried request by request: that is each call's one identical retry
  (attempts 2), so one failing request cannot sink the others;
- any other backend answers a batch's requests one after another, each with
  its own time and its own retry (`generate_with_retry`).

A backend that offers `reply_batch` / `reply` (returning `runners.backends.base.Reply`:
the text and its label steps) is asked through them instead of `generate_batch` /
`generate`, so the label probabilities reach the `Generated` record.

`LocalEngine` runs batches on a bounded pool of threads in this process;
`runners.recording.ray_engine.RayEngine` runs them on backend replicas in a Ray cluster.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from runners.backends.base import BackendFailure, LabelStep, Reply

PENDING_PER_WORKER = 128  # requests queued per worker: bounds memory, keeps workers busy while a batch is written

Req = TypeVar("Req")
_Shown = TypeVar("_Shown", contravariant=True)


class TextBackend(Protocol[_Shown]):
    """Any backend that turns a request into raw text (`SelectorBackend`, and the rating backends)."""

    def generate(self, request: _Shown) -> str: ...


@dataclass(frozen=True)
class Generated:
    """A backend's answer after at most one identical retry.

    raw: the text returned, None when both attempts raised; error: the last
    exception as "Type: message"; seconds: the call's wall time (its share of
    the batch's for a batched call); failed_output: what the failing backend
    did receive, when it said (`BackendFailure.raw_output`), stored with the failure;
    label_steps: the reply's label steps (`Reply.label_steps`), None when the backend gives none.
    """

    raw: str | None
    attempts: int
    error: str | None
    seconds: float
    failed_output: str | None = None
    label_steps: tuple[LabelStep, ...] | None = None


class Engine(Protocol[Req]):
    """Where a run's calls happen: it names the model revision and yields finished calls."""

    def model_revision(self) -> str | None: ...

    def settings(self) -> dict:
        """How the calls run (engine name, batch size, workers or replicas), for the run's config."""
        ...

    def results(self, requests: Sequence[Req]) -> Iterator[list[tuple[Req, Generated]]]:
        """Every request with its `Generated`, in lists yielded as soon as they have finished."""
        ...


def generate_with_retry(backend: TextBackend[Req], request: Req, *, tried: float | None = None) -> Generated:
    """`backend.generate(request)`, once more with the same request if it raises; never raises itself.

    `tried` is the seconds of a first attempt already made elsewhere (a batch
    that raised): then only the retry is left, and its time adds to `tried`.
    """
    start = time.perf_counter()
    error: BaseException | None = None
    first = 1 if tried is None else 2
    answer = getattr(backend, "reply", backend.generate)
    for attempt in range(first, 3):
        try:
            reply = as_reply(answer(request))
        except Exception as err:  # any backend failure is recorded, never fatal to the run
            error = err
            continue
        return Generated(reply.text, attempt, None, (tried or 0.0) + time.perf_counter() - start,
                         label_steps=reply.label_steps)
    received = error.raw_output if isinstance(error, BackendFailure) else None
    return Generated(None, 2, f"{type(error).__name__}: {error}", (tried or 0.0) + time.perf_counter() - start,
                     received)


def generate_batch(backend: TextBackend[Req], requests: Sequence[Req]) -> list[Generated]:
    """Every request of one batch answered (see the module docstring for batches, shares and retries)."""
    batched = getattr(backend, "reply_batch", None) or getattr(backend, "generate_batch", None)
    if batched is None or len(requests) == 1:
        return [generate_with_retry(backend, r) for r in requests]
    start = time.perf_counter()
    try:
        replies = [as_reply(answer) for answer in batched(list(requests))]
    except Exception:  # each request then gets its identical retry alone
        share = (time.perf_counter() - start) / len(requests)
        return [generate_with_retry(backend, r, tried=share) for r in requests]
    if len(replies) != len(requests):
        raise RuntimeError(f"{batched.__name__} returned {len(replies)} texts for {len(requests)} requests")
    share = (time.perf_counter() - start) / len(requests)
    return [Generated(reply.text, 1, None, share, label_steps=reply.label_steps) for reply in replies]


def as_reply(answer: str | Reply) -> Reply:
    """A backend's answer as a `Reply` (plain text has no label steps)."""
    return answer if isinstance(answer, Reply) else Reply(answer)


def batches_of(requests: Sequence[Req], size: int) -> list[list[Req]]:
    """`requests` cut into consecutive lists of `size` (the last may be shorter)."""
    return [list(requests[i : i + size]) for i in range(0, len(requests), size)]


class LocalEngine(Generic[Req]):
    """Batches called on `concurrency` threads of this process, at most a bounded number queued."""

    def __init__(self, backend: TextBackend[Req], *, concurrency: int = 1, batch_size: int = 1,
                 name: str = "calls") -> None:
        self.backend = backend
        self.concurrency = concurrency
        self.batch_size = batch_size
        self.name = name

    def model_revision(self) -> str | None:
        return self.backend.model_revision()

    def settings(self) -> dict:
        return {"engine": "local", "concurrency": self.concurrency, "batch_size": self.batch_size}

    def results(self, requests: Sequence[Req]) -> Iterator[list[tuple[Req, Generated]]]:
        window = self.concurrency * max(2, PENDING_PER_WORKER // self.batch_size)
        queue = iter(batches_of(requests, self.batch_size))
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix=self.name) as pool:

            def submit() -> None:
                for batch in queue:
                    future = pool.submit(generate_batch, self.backend, batch)
                    in_flight[future] = batch
                    if len(in_flight) >= window:
                        return

            in_flight: dict[Future[list[Generated]], list[Req]] = {}
            try:
                submit()
                while in_flight:
                    finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                    done = [(f, batch) for f, batch in in_flight.items() if f in finished]  # in plan order
                    for future, _ in done:
                        del in_flight[future]
                    submit()
                    yield [pair for future, batch in done for pair in zip(batch, future.result())]
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                raise
