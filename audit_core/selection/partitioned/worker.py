"""One partition of a study as a worker holds it between the driver's passes (`partitioned.audit`).

A `PartitionWorker` loads its partition (`store.partitions.open_partition`) and answers the driver's
passes with sums, counts and small summaries of its prompts alone: never its per-prompt arrays. Its methods
take and return plain picklable values, so the same class runs here (`LocalWorkers`) or as a Ray actor
(`runners.analyze_ray`). What it keeps between passes: its padded `SelectionData` and its judges'
`OrderedCalls` (the study's shape, `shape.padded`), its slices' codes, its Plackett–Luce partitions
(strengths and solved blocks) and, once the policies are fixed, every policy's picks of its prompts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

import duckdb
import numpy as np
import pandas as pd

from audit_core.selection.audit import Evaluated, evaluated_policies
from audit_core.selection.call_summaries import (
    GeneratorSlotSummary,
    PolicyCostSummary,
    TimingSummary,
    generator_slot_summary,
    policy_cost_summary,
    timing_summary,
)
from audit_core.selection.composition import CompositionSummary, composition_summary
from audit_core.selection.data import load_selection_data
from audit_core.selection.debiased.borda import borda_picks
from audit_core.selection.debiased.calibrated import calibrated_picks
from audit_core.selection.debiased.calls import OrderedCalls, load_ordered_calls
from audit_core.selection.debiased.names import BORDA, CALIBRATED, PLACKETT_LUCE, PRIOR_CORRECTED
from audit_core.selection.debiased.plackett_luce import NewtonMaximum, PromptPartition, plackett_luce_result
from audit_core.selection.debiased.prior_corrected import prior_corrected_picks
from audit_core.selection.debiased.slot_prior import fold_counts, slot_counts
from audit_core.selection.debiased.specs import with_debiased
from audit_core.selection.debiased.subsets import DEFAULT_FOLDS, calibration_subset, folds
from audit_core.selection.judge_summaries import Cuts, JudgeTablesSummary, judge_tables_summary
from audit_core.selection.partials import Layout, Partials, layout_of, local_partials
from audit_core.selection.partitioned.shape import StudyShape, padded, shape_of
from audit_core.selection.policies import policy_specs
from audit_core.selection.policy_rows import SIDE_OUTCOMES
from audit_core.selection.slice_summaries import (
    SliceSummary,
    disagreement_values,
    partition_codes,
    range_values,
    slice_summary,
)
from audit_core.selection.slices import SliceValues
from audit_core.stats.order_statistics import prefix_counts
from audit_core.stats.resampling import Resampling
from audit_core.store.database import load_call_texts
from audit_core.store.partitions import Partition, open_partition
from audit_core.store.schema import DEFAULT_POOL, ERROR_OUTCOMES

T = TypeVar("T")


class PartitionWorker:
    """A partition of a study, loaded (module docstring); `pool` is the reference pool of the utility."""

    def __init__(self, partition: Partition, pool: str = DEFAULT_POOL) -> None:
        self.partition, self.pool = partition, pool
        self.data = self._read(lambda con: load_selection_data(con, partition.dataset_id, pool, partition=True))
        self.ordered: dict[str, OrderedCalls] = {}
        self.parts: list = []
        self.everything: list[Evaluated] = []
        self.fits: dict[str, PromptPartition] = {}  # judge -> its Plackett–Luce fit in progress
        self.fitted: dict[str, np.ndarray] = {}  # judge -> its Plackett–Luce picks, until `evaluate`

    def shape(self) -> StudyShape:
        """The shape of this partition's own arrays (the driver joins every partition's)."""
        return shape_of(self.data)

    def pad(self, shape: StudyShape) -> int:
        """Give the arrays the study's `shape` and load the judges' ordered calls in it; returns the prompts."""
        self.data = padded(self.data, shape)
        self.ordered = self._read(lambda con: load_ordered_calls(con, self.data))
        return self.data.n_prompts

    def _read(self, load: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """What `load` reads from a connection on this partition's files."""
        con = open_partition(self.partition)
        try:
            return load(con)
        finally:
            con.close()

    def values(self, name: str) -> np.ndarray:
        """The per-prompt values whose order statistics the driver asks for: "range" and "disagreement"
        (`slice_summaries.range_values`, `disagreement_values`), "seconds/<judge>" (its calls' seconds)."""
        if name.startswith("seconds/"):
            return self.ordered[name.split("/", 1)[1]].seconds
        return {"range": range_values, "disagreement": disagreement_values}[name](self.data)

    def prefix_counts(self, name: str, prefixes: np.ndarray, known_bits: int) -> np.ndarray:
        """This partition's part of an order-statistics pass over `values(name)` (`order_statistics`)."""
        return prefix_counts(np.asarray(self.values(name), dtype=float).ravel(), prefixes, known_bits)

    def slice_summary(self, by: Sequence[str], median: float, cuts: Sequence[float]) -> SliceSummary:
        """The slices' labels this partition holds, at the study's consensus median and range cut points."""
        return slice_summary(self.data, by, median, cuts)

    def slot_counts(self, judge: str, n_folds: int = DEFAULT_FOLDS) -> tuple[np.ndarray, np.ndarray, bool]:
        """(the judge's slot counts per fold (F, M + 1, M), on the calibration subset (M + 1, M), whether some
        call recorded label probabilities): what the driver adds up for the slot priors."""
        calls = self.ordered[judge]
        fold = folds(calls.prompt_ids, n_folds)
        counts = fold_counts(calls, fold, n_folds)
        calibration = slot_counts(calls, calibration_subset(calls.prompt_ids))
        return counts, calibration, bool(calls.has_label_probs.any())

    def plackett_luce_stages(self, judge: str) -> None:
        """Lay out the judge's ranking stages for its Plackett–Luce fit (`plackett_luce.PromptPartition`)."""
        self.fits[judge] = PromptPartition.from_calls(self.ordered[judge])

    def plackett_luce(self, judge: str, method: str, *args: object) -> object:
        """One step of the driver's Newton fit (`plackett_luce.newton_maximum`) on this partition's prompts."""
        return getattr(self.fits[judge], method)(*args)

    def plackett_luce_pick(self, judge: str, maximum: NewtonMaximum) -> None:
        """Keep the fitted policy's picks of this partition's prompts, and free the fit's arrays."""
        fit = self.fits.pop(judge)
        self.fitted[judge] = plackett_luce_result(self.ordered[judge], fit.theta(), maximum).pick

    def evaluate(self, priors: Mapping[str, tuple[np.ndarray | None, np.ndarray | None]],
                 slices: Sequence[SliceValues], median: float, cuts: Sequence[float], resampling: Resampling
                 ) -> Layout:
        """Fix every policy's picks of this partition and its prompts' slice codes: the contract policies
        (`policy_specs`) and each judge's debiased ones under the study's fits (priors: judge -> (its calibrated
        policy's out-of-fold priors or None, its prior-corrected policy's prior or None); Plackett–Luce's picks
        kept by `plackett_luce_pick`), the slices of the study's `slice_layout` at its median and cut points.
        Returns the Layout of the sums, the same in every partition."""
        picks = {}
        for judge, (fold_priors, prior) in priors.items():
            calls, mine = self.ordered[judge], {}
            if fold_priors is not None:
                mine[BORDA] = borda_picks(calls).pick
                mine[CALIBRATED] = calibrated_picks(calls, priors=fold_priors).pick
                mine[PLACKETT_LUCE] = self.fitted.pop(judge)
            if prior is not None:
                mine[PRIOR_CORRECTED] = prior_corrected_picks(calls, prior=prior).pick
            picks[judge] = mine
        specs = with_debiased(policy_specs(self.data), self.ordered, picks)
        self.parts = partition_codes(self.data, slices, median, cuts)
        self.everything = evaluated_policies(self.data, self.ordered, specs)
        outcomes = [o for o in (*ERROR_OUTCOMES, *SIDE_OUTCOMES) if o in self.data.outcomes]
        return layout_of(self.everything, outcomes, self.parts, resampling)

    def partials(self, layout: Layout) -> Partials:
        """The partial sums of this partition's prompts (`partials.local_partials`)."""
        return local_partials(layout, self.data, self.everything, self.parts)

    def cost_summary(self, policies: pd.DataFrame) -> PolicyCostSummary:
        """The cost sums of every row of the policies table over this partition's prompts."""
        return policy_cost_summary(policies, self.data, self.ordered)

    def generator_slot_summary(self, judge: str) -> GeneratorSlotSummary:
        """The judge's generator × slot counts over this partition's calls."""
        return generator_slot_summary(self.data, judge, self.ordered[judge])

    def judge_summary(self, cuts: Cuts) -> JudgeTablesSummary:
        """The judge tables' counts and groups over this partition's prompts, at the study's range cut points."""
        return judge_tables_summary(self.data, cuts)

    def composition_summary(self) -> CompositionSummary:
        """The composition table's counts and sums over this partition's prompts."""
        return composition_summary(self.data)

    def timing_summary(self) -> TimingSummary:
        """The timing sums of this partition's calls, their outputs that are not JSON counted."""
        texts = self._read(lambda con: load_call_texts(con, self.partition.dataset_id))
        return timing_summary(self.data.statuses, {j: self.ordered[j].seconds for j in self.data.statuses}, texts)
