"""The selection audit of a study held in partitions, whose driver holds no per-prompt array (DESIGN §4f).

- `shape`: a study's shape and one partition's arrays padded to it;
- `worker`: `PartitionWorker`, one partition loaded from its Parquet files (`store.partitions`), answering the
  driver's passes with sums, counts and summaries of its prompts;
- `audit`: `audit_partitions`, the driver, over `Workers` (`LocalWorkers` in this process; Ray actors in
  `runners.analyze_ray`).

The summaries it adds up have their homes beside the whole-study rules they share: `slice_summaries`,
`judge_summaries`, `call_summaries`, `composition`, `partials`, `debiased.slot_prior`,
`debiased.plackett_luce` and `stats.order_statistics`.
"""

from audit_core.selection.partitioned.audit import LocalWorkers, Workers, audit_partitions
from audit_core.selection.partitioned.shape import StudyShape, padded, shape_of
from audit_core.selection.partitioned.worker import PartitionWorker

__all__ = ["LocalWorkers", "PartitionWorker", "StudyShape", "Workers", "audit_partitions", "padded", "shape_of"]
