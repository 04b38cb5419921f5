"""Backend replicas as Ray actors: the engine behind `--engine ray`.

The driver (the recording process) plans the requests as for the local engine
and sends them, in batches of `batch_size` in plan order, to `replicas` Ray
actors, each holding its own backend built by `make_backend` (the model loads
once per replica, before the run opens) on `gpus_per_replica` GPUs. Each
replica keeps two batches queued, so it does not wait for the driver between
batches. Replicas return `Generated` values and never touch the store: the
driver alone builds the records and commits each finished batch
(`runners.recording.recorder`), so the guarantees are the local engine's: committed as
they finish, kill -9 safe, resumable by request key. A replica that dies
stops the run ('failed', finished calls kept); the same command resumes it.

Which cluster: `$RAY_ADDRESS` when set, else the cluster that `ray start
--head` started on this machine, else a new local instance (no dashboard)
that ends with the run. The project's `runners` and `audit_core` packages go
to the workers (runtime_env `py_modules`); every node needs the same Python
packages (requirements-models.txt for hf, requirements-ray.txt) and the
images at the same paths, which the replicas read.

Sizing: G = `gpus_per_replica`, default 1 when the cluster has GPUs, else 0;
replicas default to floor(cluster GPUs / G), else 1. Each replica also takes
one CPU. A plan the cluster cannot hold now is refused before any call.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Generic, TypeVar

from audit_core.errors import InputError
from runners.recording.engines import Generated, TextBackend, batches_of, generate_batch

QUEUED_PER_REPLICA = 2
SHIPPED_PACKAGES = ("runners", "audit_core")
ROOT = Path(__file__).resolve().parents[2]

Req = TypeVar("Req")


CONNECT_SECONDS = 10.0


def check_reachable(address: str, seconds: float = CONNECT_SECONDS) -> None:
    """InputError naming $RAY_ADDRESS unless a TCP connection to its host:port opens within
    `seconds` (Ray itself retries an unreachable head for minutes); `auto`/`local` pass."""
    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    if address in ("auto", "local") or not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=seconds).close()
    except OSError as err:
        raise InputError(f"nothing answers at {address} ({err.strerror or err}): start the cluster with "
                         "`ray start --head`, or unset RAY_ADDRESS for a local instance", field="RAY_ADDRESS") from None


class ReplicaLost(RuntimeError):
    """A replica died mid-run (its node went away, it ran out of memory, ...)."""


class Replica:
    """One backend inside a Ray actor: built on `load()`, then answering batches."""

    def __init__(self, make_backend: Callable[[], TextBackend]) -> None:
        self.make_backend = make_backend
        self.backend: TextBackend | None = None

    def load(self) -> tuple[str | None, str | None]:
        """(model revision, None) once the backend is built, or (None, "Type: message") if building it failed."""
        try:
            self.backend = self.make_backend()
            return self.backend.model_revision(), None
        except Exception as err:  # reported to the driver as one line, not an actor's traceback
            return None, f"{type(err).__name__}: {err}"

    def generate(self, batch: list) -> list[Generated]:
        return generate_batch(self.backend, batch)


def require_ray() -> None:
    """InputError with the install command when ray is not installed (it is an optional extra)."""
    if importlib.util.find_spec("ray") is None:
        raise InputError("the ray engine needs ray, which this environment lacks; install it with "
                         "`.venv/bin/python -m pip install -r requirements-ray.txt`", field="--engine")


def replica_plan(resources: Mapping[str, float], replicas: int | None,
                 gpus_per_replica: float | None) -> tuple[int, float]:
    """(replicas, GPUs per replica) for a cluster with `resources` (Ray's "CPU", "GPU" totals); defaults
    in the module docstring. InputError when the cluster cannot hold them."""
    gpus, cpus = float(resources.get("GPU", 0)), float(resources.get("CPU", 0))
    per = gpus_per_replica if gpus_per_replica is not None else (1.0 if gpus else 0.0)
    n = replicas if replicas is not None else (max(1, int(gpus // per)) if per > 0 else 1)
    if n * per > gpus:
        raise InputError(f"replicas: {n} × {per:g} GPU = {n * per:g} GPUs, but the Ray cluster has {gpus:g}",
                         field="--gpus-per-replica" if replicas is None else "--replicas")
    if n > cpus:
        raise InputError(f"replicas: {n} × 1 CPU, but the Ray cluster has {cpus:g}", field="--replicas")
    return n, per


class RayEngine(Generic[Req]):
    """Calls answered by backend replicas in a Ray cluster (see the module docstring)."""

    def __init__(self, make_backend: Callable[[], TextBackend], *, replicas: int | None = None,
                 gpus_per_replica: float | None = None, batch_size: int = 1) -> None:
        require_ray()
        if batch_size < 1:
            raise InputError(f"--batch-size must be at least 1, got {batch_size}", field="--batch-size")
        self.make_backend = make_backend
        self.requested = (replicas, gpus_per_replica)
        self.batch_size = batch_size
        self.actors: list = []
        self.revision: str | None = None
        self.plan: tuple[int, float] | None = None
        self.started_local = False

    def _start(self) -> None:
        """Connect (or start a local instance), then build every replica's backend in parallel."""
        if self.actors:
            return
        import ray

        options = {"runtime_env": {"py_modules": [str(ROOT / name) for name in SHIPPED_PACKAGES]},
                   "logging_level": logging.WARNING}
        if not ray.is_initialized():
            if os.environ.get("RAY_ADDRESS"):
                check_reachable(os.environ["RAY_ADDRESS"])
                ray.init(**options)
            else:
                try:
                    ray.init(address="auto", **options)
                except ConnectionError:  # no cluster on this machine: one of our own, ended with the run
                    ray.init(include_dashboard=False, **options)
                    self.started_local = True
        self.plan = n, per = replica_plan(ray.cluster_resources(), *self.requested)
        actor = ray.remote(Replica).options(num_cpus=1, num_gpus=per)
        self.actors = [actor.remote(self.make_backend) for _ in range(n)]
        loaded = ray.get([a.load.remote() for a in self.actors])
        failures = [(i, error) for i, (_, error) in enumerate(loaded) if error]
        if failures:
            self.close()
            i, error = failures[0]
            raise InputError(f"replica {i} could not build its backend: {error}", field="--model")
        self.revision = loaded[0][0]

    def model_revision(self) -> str | None:
        self._start()
        return self.revision

    def settings(self) -> dict:
        if self.plan is None:
            self._start()
        n, per = self.plan
        return {"engine": "ray", "replicas": n, "gpus_per_replica": per, "batch_size": self.batch_size}

    def results(self, requests: Sequence[Req]) -> Iterator[list[tuple[Req, Generated]]]:
        self._start()
        import ray

        queue = iter(batches_of(requests, self.batch_size))
        pending: dict = {}  # object ref -> (replica index, batch)
        queued = [0] * len(self.actors)

        def feed() -> None:
            for i, actor in enumerate(self.actors):
                while queued[i] < QUEUED_PER_REPLICA:
                    batch = next(queue, None)
                    if batch is None:
                        return
                    pending[actor.generate.remote(batch)] = (i, batch)
                    queued[i] += 1

        try:
            feed()
            while pending:
                (ref,), _ = ray.wait(list(pending), num_returns=1)
                i, batch = pending.pop(ref)
                try:
                    answered = ray.get(ref)
                except ray.exceptions.RayActorError as err:
                    raise ReplicaLost(f"replica {i} died: {str(err).splitlines()[0]}") from None
                queued[i] -= 1
                feed()
                yield list(zip(batch, answered))
        finally:
            self.close()

    def close(self) -> None:
        """End the replicas (freeing their GPUs), and the local Ray instance if this engine started it."""
        import ray

        for actor in self.actors:
            ray.kill(actor)
        self.actors = []
        if self.started_local:
            ray.shutdown()
            self.started_local = False
