"""The audit's slices (`slices.partitions`) of a study held in partitions, made from small per-partition summaries.

A *partition* is one contiguous range of a study's prompts (`SelectionData.rows` of the whole study gives
exactly one). Two slices are cut at points of the whole study: the consensus slice at the median over
prompts of the disagreement, the range slice at the 1/3 and 2/3 quantiles of the rating range. The driver
finds them exactly, never holding the values, with `order_statistics` over CountPasses of each partition's
`disagreement_values` and `range_values` (`cut_points`). Then, in order:

1. each worker makes `slice_summary` of its partition with those cut points: per slice its distinct labels
   and whether some prompt has none, a size bounded by the distinct values, never by the prompts; the
   summaries add up (`+`, or `sum` in partition order);
2. the driver makes `slice_layout` of the summed summary: the slices and their values, and the notes,
   exactly as `slices.partitions` gives them for the whole study;
3. each worker makes `partition_codes` of its partition: its slices with the global values, whose codes
   concatenated over the partitions in order are the whole study's.

The summary must come after the cut points: which tertiles a study has depends on them (ranges 0, 0, 1
cut at 0 and 1/3 have no "mid") and no summary of a partition made before them can tell. The rules are
`slices`' own (labels, values, layout, codes); this module only adds them up. A `by` column unknown to the
prompts table raises InputError in each step, and before any pass with `slices.check_slice_columns` on
one partition's columns (the prompts table's columns are the same in every partition).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from audit_core.selection import metrics
from audit_core.selection.data import SelectionData
from audit_core.selection.judge_summaries import Cuts, range_cuts
from audit_core.selection.slices import (
    BUILT_IN,
    Partition,
    SliceValues,
    check_slice_columns,
    distinct_labels,
    layout,
    partition,
    prompt_disagreement,
    slice_labels,
    slice_names,
)
from audit_core.stats.order_statistics import CountPass, median
from audit_core.summable import Summable

__all__ = [
    "SliceSummary", "cut_points", "disagreement_values", "partition_codes", "range_values", "slice_layout",
    "slice_summary",
]


@dataclass(frozen=True, eq=False)
class SliceSummary(Summable):
    """What the slices' values need of some consecutive prompts, labelled at the whole study's cut points.

    columns: the prompts table's attributes (`m` left out), to check `by` against;
    labels: slice -> its distinct labels in the order first seen, as the labels are (None/NaN left out);
    missing: slice -> whether some prompt has no label.
    """

    columns: tuple[str, ...]
    labels: Mapping[str, tuple[object, ...]]
    missing: Mapping[str, bool]

    @property
    def has_disagreement(self) -> bool:
        """Whether some prompt has a disagreement value (else the consensus slice is left out)."""
        return bool(self.labels["consensus"])

    def __add__(self, other: SliceSummary) -> SliceSummary:
        """The summary of the prompts of `self` followed by those of `other`."""
        if not isinstance(other, SliceSummary):
            return NotImplemented
        if other.columns != self.columns or list(other.labels) != list(self.labels):
            raise ValueError(f"cannot add slice summaries of other slices or prompt attributes: {list(self.labels)} "
                             f"over {list(self.columns)} and {list(other.labels)} over {list(other.columns)}")
        labels = {name: tuple(pd.unique(pd.Series([*seen, *other.labels[name]], dtype=object)))
                  for name, seen in self.labels.items()}
        return SliceSummary(self.columns, labels, {name: self.missing[name] or other.missing[name]
                                                   for name in self.missing})


def disagreement_values(data: SelectionData) -> np.ndarray:
    """(P,) the partition's values whose median is the consensus cut: `slices.prompt_disagreement` (NaN where
    a prompt has none; order statistics leave NaN out)."""
    return prompt_disagreement(data)


def range_values(data: SelectionData) -> np.ndarray:
    """(P,) the partition's values whose tertiles cut the range slice: the rating range h* − min h (NaN where
    unrated)."""
    return metrics.value_range(data.utility)


def cut_points(disagreement: CountPass, spread: CountPass) -> tuple[float, Cuts]:
    """(median, cuts) of the whole study from CountPasses over every partition's `disagreement_values` and
    `range_values`: numpy's nanmedian of the disagreement and (q1, q2) its quantiles RANGE_QUANTILES of the
    range, exactly (`slices.consensus_median`, `position.range_cuts`); NaN where no prompt has a value."""
    return median(disagreement), range_cuts(spread)


def slice_summary(data: SelectionData, by: Sequence[str], median: float, cuts: Sequence[float]) -> SliceSummary:
    """The summary of a partition's slices (`slices.slice_names(by)`), the consensus split at the whole
    study's `median` and the range at its `cuts` (`cut_points`). Raises InputError naming a column of `by`
    that is not a prompt attribute."""
    labels = slice_labels(data, by, median, cuts)
    distinct = {name: distinct_labels(labelled) for name, labelled in labels.items()}
    return SliceSummary(tuple(c for c in data.prompts.columns if c != "m"),
                        {name: seen for name, (seen, _) in distinct.items()},
                        {name: missing for name, (_, missing) in distinct.items()})


def slice_layout(summary: SliceSummary, by: Sequence[str] = ()) -> tuple[list[SliceValues], list[str]]:
    """The slices of the summed summary's study, each with its values (`slices.SliceValues`: names, values
    and "(none)" as `slices.partitions` gives them for the whole study), and the notes on slices left out.

    Raises InputError naming a column of `by` that is not a prompt attribute, ValueError when the summaries
    were made for other `by` columns.
    """
    check_slice_columns(summary.columns, by)
    names = slice_names(by)
    lacking = [name for name in names if name not in summary.labels]
    if lacking:
        raise ValueError(f"the slice summary has no slice {lacking[0]!r}: make the partitions' summaries with "
                         f"by={list(by)}")
    return layout({name: (summary.labels[name], summary.missing[name]) for name in names})


def partition_codes(
    data: SelectionData, values: Sequence[SliceValues], median: float, cuts: Sequence[float],
) -> list[Partition]:
    """A partition's slices (`slices.Partition`): each slice of the layout `values` (`slice_layout`) with its
    global values and the codes of the partition's prompts into them, the consensus split at `median` and
    the range at `cuts` as the summaries were. Concatenated over the partitions in order, the codes are
    the whole study's."""
    labels = slice_labels(data, [v.name for v in values if v.name not in BUILT_IN], median, cuts)
    return [partition(v.name, labels[v.name], values=v) for v in values]
