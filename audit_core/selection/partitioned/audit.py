"""The selection audit of a study held in partitions, the driver holding no per-prompt array.

`audit_partitions(workers, …)` runs the audit of `audit.audit_selection` above `poisson.POISSON_ABOVE`
prompts as passes over the partitions' workers (`worker.PartitionWorker`, one per partition, here or on
a cluster): every pass returns sums, counts or summaries whose size does not grow with the prompts, and
the driver adds them in partition order. The passes:

1. shape: each partition's widest pool, judges' orders, scorers and outcomes, joined and given back to
   every partition (`shape.padded`), which then loads its judges' ordered calls;
2. slices: the labels present, the consensus median and the range tertiles' cut points, exact from
   `order_statistics` passes over the prompts' disagreement and rating range;
3. the debiased selectors' fits: each judge's slot counts per fold and on the calibration subset (added:
   the calibrated and prior-corrected priors, `slot_prior`), and Plackett–Luce's Newton steps
   (`plackett_luce.newton_maximum`: the driver holds the slot effects, the partitions their prompts'
   strengths);
4. the policies' picks on each partition under those fits, and their partial sums (`partials`: the
   policies, slices, groups, gates, cultural and risk–coverage tables of the Poisson bootstrap);
5. the judge tables, composition, generator slots, timing and costs from their partition summaries.

Every table equals the whole-study audit's of the same data: counts, picks and cut points exactly,
float sums up to their summation order, and the Poisson bootstrap's resampled sums within
`partials.SUM_TOLERANCE` (float32 within a chunk; the chunks fall otherwise than in one process).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Protocol

import numpy as np
import pandas as pd

from audit_core.selection.audit import SelectionAudit, selection_audit
from audit_core.selection.call_summaries import (
    generator_slot_table_from_summary,
    policy_costs_from_summary,
    timing_table_from_summary,
)
from audit_core.selection.composition import composition_from_summary
from audit_core.selection.costs import POLICY_COST_COLUMNS
from audit_core.selection.debiased.plackett_luce import DEFAULT_RIDGE, newton_maximum
from audit_core.selection.debiased.slot_prior import out_of_fold_priors, prior_from_counts
from audit_core.selection.judge_summaries import judge_tables_from_summary
from audit_core.selection.partials import Layout, Partials, policy_frames
from audit_core.selection.policy_rows import SIDE_OUTCOMES
from audit_core.selection.position import GENERATOR_SLOT_COLUMNS
from audit_core.selection.slice_summaries import cut_points, slice_layout
from audit_core.selection.slices import check_slice_columns
from audit_core.stats.order_statistics import CountPass
from audit_core.stats.resampling import Resampling
from audit_core.store.database import PROMPT_COLUMNS
from audit_core.store.schema import ERROR_OUTCOMES


class Workers(Protocol):
    """Calls one method of every partition's worker with the same arguments; the results in partition order
    (`LocalWorkers` here, actors on a Ray cluster: `runners.analyze_ray`)."""

    def map(self, method: str, *args: object) -> list: ...


@dataclass(frozen=True)
class LocalWorkers:
    """Workers in this process, called one after another."""

    workers: Sequence

    def map(self, method: str, *args: object) -> list:
        return [getattr(worker, method)(*args) for worker in self.workers]


def count_pass(workers: Workers, name: str) -> CountPass:
    """The order-statistics pass over the workers' `values(name)`: their `prefix_counts`, added."""
    return lambda prefixes, known_bits: sum(workers.map("prefix_counts", name, prefixes, known_bits))


def _total(parts: list) -> object:
    """The partitions' summaries added in partition order."""
    return reduce(lambda a, b: a + b, parts)


def audit_partitions(workers: Workers, dataset_id: str, resampling: Resampling, by: Sequence[str] = ()
                     ) -> SelectionAudit:
    """The selection audit of the study whose partitions `workers` hold (module docstring), as
    `audit.audit_selection` makes it above `poisson.POISSON_ABOVE` prompts given the judges' ordered calls
    and the calls that carry text. InputError naming an unknown `by` column, before any pass over the
    prompts."""
    check_slice_columns(PROMPT_COLUMNS, by)
    shape = reduce(lambda a, b: a | b, workers.map("shape"))
    workers.map("pad", shape)
    median, cuts = cut_points(count_pass(workers, "disagreement"), count_pass(workers, "range"))
    slice_values, slice_notes = slice_layout(_total(workers.map("slice_summary", by, median, cuts)), by)
    priors = {judge: _fitted(workers, judge, orders, shape.width) for judge, orders in shape.orders}
    layouts = workers.map("evaluate", priors, slice_values, median, cuts, resampling)
    layout = layouts[0]
    if any(other != layout for other in layouts[1:]):
        raise RuntimeError("the partitions evaluated different policies or slices: their shapes differ")
    total = _total(workers.map("partials", layout))
    table, ungated, slice_frame = policy_frames(layout, total)
    table[POLICY_COST_COLUMNS] = policy_costs_from_summary(table, _total(workers.map("cost_summary", table)))
    judges = [judge for judge, _ in shape.orders]
    generator_slots = [generator_slot_table_from_summary(_total(workers.map("generator_slot_summary", judge)))
                       for judge in judges]
    timing = timing_table_from_summary(_total(workers.map("timing_summary")),
                                       {j: count_pass(workers, f"seconds/{j}") for j in judges})
    judge_tables = judge_tables_from_summary(_total(workers.map("judge_summary", tuple(cuts))), resampling)
    composition = composition_from_summary(_total(workers.map("composition_summary")))
    extra_outcomes = [o for o in (*ERROR_OUTCOMES, *SIDE_OUTCOMES) if o in shape.outcomes]
    return selection_audit(dataset_id, resampling, extra_outcomes, table, ungated, slice_frame,
                           _slice_prompts(layout, total), slice_notes, judge_tables, composition,
                           pd.concat(generator_slots, ignore_index=True) if generator_slots
                           else pd.DataFrame(columns=GENERATOR_SLOT_COLUMNS), timing)


def _fitted(workers: Workers, judge: str, orders: int, width: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The judge's debiased fits over every partition, as `debiased.specs` makes them for a whole study:
    (the calibrated policy's out-of-fold priors, None under 2 orders; the prior-corrected policy's prior,
    None when no call recorded label probabilities); with 2 orders or more the Plackett–Luce fit, whose
    picks each worker keeps."""
    counts = workers.map("slot_counts", judge)
    prior = prior_from_counts(_total([c[1] for c in counts])) if any(c[2] for c in counts) else None
    if orders < 2:
        return None, prior
    workers.map("plackett_luce_stages", judge)
    maximum = newton_maximum(lambda method, *args: workers.map("plackett_luce", judge, method, *args), width,
                             width - 1, DEFAULT_RIDGE)
    workers.map("plackett_luce_pick", judge, maximum)
    return out_of_fold_priors(_total([c[0] for c in counts])), prior


def _slice_prompts(layout: Layout, total: Partials) -> dict[str, dict[str, int]]:
    """Slice -> value -> its prompts, from the sums' prompts per slice value (in the layout's order)."""
    counts = iter(np.rint(total.slice_prompts).astype(np.int64).tolist())
    return {name: {value: next(counts) for value in values} for name, values in layout.slices}
