"""The selection audit of a large study on a Ray cluster: the engine behind `runners.analyze --engine ray`.

Above `poisson.POISSON_ABOVE` prompts the driver never loads the study. It has DuckDB copy the dataset's
prompts, in prompt-id order, into Parquet partitions (`store.partitions.export_store`: every store row of
PARTITION_PROMPTS consecutive prompts a partition, unless told how many), starts one Ray actor per partition
(`partitioned.worker.PartitionWorker`, which loads its partition and keeps it between passes), and runs the
audit as passes over the actors (`partitioned.audit.audit_partitions`): each pass returns sums, counts or
summaries whose size does not grow with the prompts, added on the driver. The tables are the local engine's:
counts, picks and cut points exactly, float sums up to their order, the Poisson bootstrap's within
`partials.SUM_TOLERANCE`.

The partitions go to a temporary folder on this machine, removed afterwards, or to `folder` (kept): on a
cluster, a folder on storage every node mounts at the same path. The actors take no CPU of their own for
scheduling and are spread over the cluster's nodes (`SPREAD`): a partition's memory lives on the node its
actor runs on. Which cluster: `$RAY_ADDRESS` when set, else the cluster `ray start --head` started on this
machine, else a new local instance that ends with the audit; the `runners` and `audit_core` packages go to the
workers (runtime_env py_modules).
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from audit_core.selection.audit import SelectionAudit
from audit_core.selection.partitioned.audit import audit_partitions
from audit_core.selection.partitioned.worker import PartitionWorker
from audit_core.stats.resampling import Resampling
from audit_core.store.partitions import Partition, export_store
from runners.recording.ray_engine import ROOT, SHIPPED_PACKAGES, check_reachable

PARTITION_PROMPTS = 250_000  # prompts per partition unless told how many partitions


class RayWorkers:
    """One `PartitionWorker` actor per partition (`partitioned.audit.Workers`)."""

    def __init__(self, partitions: Sequence[Partition], pool: str) -> None:
        import ray

        actor = ray.remote(PartitionWorker).options(num_cpus=0, scheduling_strategy="SPREAD")
        self.actors = [actor.remote(partition, pool) for partition in partitions]

    def map(self, method: str, *args: object) -> list:
        import ray

        return ray.get([getattr(actor, method).remote(*args) for actor in self.actors])


def _connect() -> bool:
    """Join $RAY_ADDRESS, else this machine's cluster, else start a local instance; True when started here."""
    import ray

    options = {"runtime_env": {"py_modules": [str(ROOT / name) for name in SHIPPED_PACKAGES]},
               "logging_level": logging.WARNING}
    if ray.is_initialized():
        return False
    if os.environ.get("RAY_ADDRESS"):
        check_reachable(os.environ["RAY_ADDRESS"])
        ray.init(**options)
        return False
    try:
        ray.init(address="auto", **options)
        return False
    except ConnectionError:
        ray.init(include_dashboard=False, **options)
        return True


def ray_audit(folder: Path | None = None, partitions: int | None = None):
    """The selection audit of a large study on a Ray cluster (module docstring), as `runners.audits.run_audits`
    calls it: (db, dataset, n_prompts, resampling, pool, by) -> SelectionAudit. `folder` keeps the
    partitions there (shared storage for a cluster), `partitions` sets how many (default one per
    PARTITION_PROMPTS prompts)."""

    def audit(db: Path, dataset: str, n_prompts: int, resampling: Resampling, pool: str, by: Sequence[str]
              ) -> SelectionAudit:
        import ray

        count = min(n_prompts, partitions or max(1, math.ceil(n_prompts / PARTITION_PROMPTS)))
        with tempfile.TemporaryDirectory(prefix="judge-audit-partitions-") as temporary:
            written = export_store(db, dataset, Path(folder) if folder is not None else Path(temporary), count)
            started, workers = _connect(), None
            try:
                workers = RayWorkers(written, pool)
                return audit_partitions(workers, dataset, resampling, by)
            finally:  # the actors hold the study: never left on a cluster that outlives the audit
                for actor in workers.actors if workers is not None else []:
                    ray.kill(actor)
                if started:
                    ray.shutdown()

    return audit
