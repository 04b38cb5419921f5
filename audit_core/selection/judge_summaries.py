"""The audit's judge tables and composition table of a study held in partitions, from small per-partition summaries.

A *partition* is one contiguous range of a study's prompts: its `SelectionData` with the study's width,
judges and orders (`SelectionData.rows` of the whole study gives exactly one). A worker summarises its
partition alone; the summaries add up (`+`, or `sum` in partition order) on the driver, and the tables
are made of the sum:

- `judge_tables_summary` → `judge_tables_from_summary`: `audit._judge_tables`, i.e. per judge
  `position.judge_summary` (judges), `position.slot_table` (positions), `position.generator_table`
  (generators), `position.flip_by_range` (flips_by_range) and `position.flip_by_near_ties`
  (flips_by_near_ties);
- `composition_summary` → `composition_from_summary`: `composition.composition_table` (both live in
  `composition`, which makes its table so; re-exported here).

The counts and tables have one home each, in `position`: counted by `judge_sums`, `generator_sums`,
`tertile_groups` (labels: `tertile_labels` with the whole study's cut points, `range_cuts`) and
`near_tie_groups`, made into rows by `judge_row`, `slot_frame`, `generator_frame`, `flip_range_frame` and
`near_tie_frame`; the whole-study functions apply the same rules to the study as one partition, so the
summary of a single partition gives their tables to the bit.

Exact (the same bits as the whole-study functions): every count and the shares that are counts over
counts (first_slot, flip_rate, share, count, share_order0, the slot shares), the range bounds (min and
max), chi2_df, and every interval: a fixed-n interval over n ≤ `bootstrap.EXACT_DRAWS_UP_TO` values draws
them by index in prompt order, so a group keeps its values in prompt order while it has that few
(`FixedNValues.ordered`); above, the draws depend on the values' multiset only (`bootstrap.counted_means`,
`position.first_slot_interval_of_counts`), which the group keeps as value counts. The one exception, a
value set whose resamples keep index draws above EXACT_DRAWS_UP_TO (a non-finite value, or an extreme
outlier that fits no lattice window), cannot be made from a bounded summary: its table raises ValueError
(flip indicators never do; stereotype differences of ratings on a finite scale in practice never do).
Float sums (first_slot_uniform, entropy, the expected slot counts and hence chi2, chi2_p and the pooled
slot uniform, a generator's uniform, stereotype_mean, stereotype_delta and contribution, and the
composition means) add the partitions' sums, equal to the whole study's within float summation order
(relative 1e-12 in the tests).

Size: per judge, O(W² + G + W) numbers (W the widest pool, G the generators) plus its fixed-n groups
(the flips, the first-slot pairs, one per generator, 3 tertiles, ≤ W near-tie counts); a group holds at
most EXACT_DRAWS_UP_TO values in order and one count per distinct value: at most 2 for flips, at most
(K + 1)² for first-slot pairs (K orders), and for a generator's stereotype differences at most the
number of distinct (picked rating − pool mean rating) values, a constant of the rating scale and W. The
composition summary holds O(W) numbers per country and generator. None grows with the prompts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from audit_core.selection import metrics
from audit_core.selection.composition import CompositionSummary, composition_from_summary, composition_summary
from audit_core.selection.data import SelectionData
from audit_core.selection.position import (
    FLIP_COLUMNS,
    GENERATOR_COLUMNS,
    JUDGE_COLUMNS,
    NEAR_TIE_COLUMNS,
    RANGE_QUANTILES,
    SLOT_COLUMNS,
    GroupStat,
    first_slot_interval,
    first_slot_interval_of_counts,
    fixed_n_interval,
    fixed_n_interval_of_counts,
    flip_range_frame,
    flips,
    generator_frame,
    generator_sums,
    judge_row,
    judge_sums,
    near_tie_counts,
    near_tie_frame,
    near_tie_groups,
    slot_frame,
    tertile_groups,
    tertile_labels,
)
from audit_core.selection.votes import valid_picks
from audit_core.stats import bootstrap
from audit_core.stats.order_statistics import CountPass, quantiles
from audit_core.stats.resampling import Resampling
from audit_core.summable import Summable

__all__ = [
    "CompositionSummary", "FixedNValues", "JudgeSummary", "JudgeTablesSummary",
    "composition_from_summary", "composition_summary", "judge_tables_from_summary", "judge_tables_summary",
    "range_cuts",
]

Cuts = tuple[float, float]  # the whole study's 1/3 and 2/3 quantiles of the rating range (`range_cuts`)


@dataclass(frozen=True, eq=False)
class FixedNValues(Summable):
    """One group's values for a mean and its fixed-n interval: rows of d numbers (d = 1 for a value, 2 for a
    first-slot (first, valid) pair).

    n: the rows; total: (d,) their float sum (each partition's `np.sum`, added); ordered: (n, d) the rows in
    prompt order while n ≤ `bootstrap.EXACT_DRAWS_UP_TO`, None above; distinct (k, d) ascending (lexicographic,
    as `np.unique` orders them) and counts (k,) int64: the rows' multiset."""

    n: int
    total: np.ndarray
    ordered: np.ndarray | None
    distinct: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, rows: np.ndarray) -> FixedNValues:
        """The group of `rows` ((n,) values or (n, d) rows, in prompt order)."""
        rows = np.asarray(rows, dtype=float)
        # each column's sum as numpy sums a vector (pairwise), so that one partition's mean is the study's
        total = np.array([np.sum(rows)]) if rows.ndim == 1 else np.array([np.sum(column) for column in rows.T])
        rows = rows[:, None] if rows.ndim == 1 else rows
        distinct, counts = _unique(rows)
        ordered = rows.copy() if len(rows) <= bootstrap.EXACT_DRAWS_UP_TO else None
        return cls(len(rows), total, ordered, distinct, counts)

    def __add__(self, other: FixedNValues) -> FixedNValues:
        """The rows of both, `self`'s prompts first."""
        if not isinstance(other, FixedNValues):
            return NotImplemented
        n = self.n + other.n
        ordered = None
        if n <= bootstrap.EXACT_DRAWS_UP_TO:  # both held theirs in order
            ordered = np.concatenate([self.ordered, other.ordered])
        distinct, inverse = _unique(np.concatenate([self.distinct, other.distinct]), inverse=True)
        counts = np.bincount(inverse, weights=np.concatenate([self.counts, other.counts]),
                             minlength=len(distinct)).astype(np.int64)
        return FixedNValues(n, self.total + other.total, ordered, distinct, counts)

    def mean(self, column: int = 0) -> float:
        """total / n (the group's mean as the whole study's `values.mean()`, up to summation order); NaN when empty."""
        return float(self.total[column] / self.n) if self.n else np.nan

    def interval(self, resampling: Resampling) -> tuple[float, float]:
        """`position.fixed_n_interval` of the values (d = 1): from them in order up to EXACT_DRAWS_UP_TO,
        else from their multiset (`position.fixed_n_interval_of_counts`)."""
        if self.ordered is not None:
            return fixed_n_interval(self.ordered[:, 0], resampling)
        return fixed_n_interval_of_counts(self.distinct[:, 0], self.counts, resampling)

    def stat(self, resampling: Resampling) -> GroupStat:
        """The `position.GroupStat` of the values (d = 1): (n, total, `interval`)."""
        return (self.n, float(self.total[0]), self.interval(resampling))

    def share_interval(self, resampling: Resampling) -> tuple[float, float]:
        """`position.first_slot_interval` of first-slot pairs (d = 2: first, valid; valid > 0)."""
        if self.ordered is not None:
            return first_slot_interval(self.ordered[:, 0], self.ordered[:, 1], resampling)
        return first_slot_interval_of_counts(self.distinct, self.counts, resampling)


def _unique(rows: np.ndarray, inverse: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows (k, d), counts (k,) int64) of (n, d) rows, or (distinct, inverse) with `inverse`;
    one column is ordered as `np.unique` of the values (what `bootstrap` keys its draws by)."""
    if rows.shape[1] == 1:
        found = np.unique(rows[:, 0], return_counts=not inverse, return_inverse=inverse)
        return found[0][:, None], found[1].astype(np.int64).ravel()
    found = np.unique(rows, axis=0, return_counts=not inverse, return_inverse=inverse)
    return found[0], found[1].astype(np.int64).ravel()


@dataclass(frozen=True, eq=False)
class JudgeSummary(Summable):
    """One judge's counts, float sums and fixed-n groups over some prompts (module docstring: sizes), as the
    `position` functions count them.

    orders, statuses, by_size, expected, inverse_sizes, entropy: `position.judge_sums`, with its flips and
    first_slot pairs as FixedNValues; generators: `position.generator_sums` (sorted by name; own: per generator
    its stereotype differences as FixedNValues); tertiles: `position.tertile_groups` (tertile_flips its
    flips); near ties: `position.near_tie_groups` (index k = 0..W)."""

    judge: str
    orders: int
    statuses: np.ndarray
    by_size: np.ndarray
    expected: np.ndarray
    inverse_sizes: float
    entropy: tuple[float, int]
    flips: FixedNValues
    first_slot: FixedNValues
    generators: Mapping[str, object]
    own: tuple[FixedNValues, ...]
    tertiles: Mapping[str, np.ndarray]
    tertile_flips: tuple[FixedNValues, ...]
    near_tie_prompts: np.ndarray
    near_tie_flips: tuple[FixedNValues, ...]

    def __add__(self, other: JudgeSummary) -> JudgeSummary:
        """Both summaries' prompts, `self`'s first: counts and sums added, groups joined, generators by name."""
        if not isinstance(other, JudgeSummary):
            return NotImplemented
        if (other.judge, other.orders, other.by_size.shape) != (self.judge, self.orders, self.by_size.shape):
            raise ValueError(f"cannot add judge {other.judge!r}'s summary ({other.orders} orders, width "
                             f"{other.by_size.shape[1]}) to {self.judge!r}'s ({self.orders} orders, width "
                             f"{self.by_size.shape[1]}): summarise partitions of one study (`SelectionData.rows`)")
        names = tuple(sorted(set(self.generators["generators"]) | set(other.generators["generators"])))
        (mine, my_own), (theirs, their_own) = _aligned(self, names), _aligned(other, names)
        generators = {key: mine[key] + theirs[key] for key in _GENERATOR_SUMS}
        lo, hi = self.tertiles, other.tertiles
        return JudgeSummary(
            self.judge, self.orders, self.statuses + other.statuses, self.by_size + other.by_size,
            self.expected + other.expected, self.inverse_sizes + other.inverse_sizes,
            (self.entropy[0] + other.entropy[0], self.entropy[1] + other.entropy[1]),
            self.flips + other.flips, self.first_slot + other.first_slot,
            {"generators": names, **generators}, tuple(a + b for a, b in zip(my_own, their_own)),
            {"prompts": lo["prompts"] + hi["prompts"], "range_lo": np.minimum(lo["range_lo"], hi["range_lo"]),
             "range_hi": np.maximum(lo["range_hi"], hi["range_hi"])},
            tuple(a + b for a, b in zip(self.tertile_flips, other.tertile_flips)),
            self.near_tie_prompts + other.near_tie_prompts,
            tuple(a + b for a, b in zip(self.near_tie_flips, other.near_tie_flips)),
        )


# `position.generator_sums`' fields that add up: per generator, or a count over the prompts
_GENERATOR_SUMS = ("valid", "chosen", "expected", "chosen_first", "with_first", "image_sums", "image_n", "rated")


def _aligned(summary: JudgeSummary, names: Sequence[str]) -> tuple[dict[str, object], list[FixedNValues]]:
    """The summary's generator sums and own groups on `names` (a superset of its generators, sorted): zero
    and empty for a generator it lacks."""
    rows = pd.Index(list(summary.generators["generators"])).get_indexer(list(names))
    sums = {}
    for key in _GENERATOR_SUMS:
        values = summary.generators[key]
        if np.ndim(values) == 0:
            sums[key] = values
            continue
        sums[key] = np.zeros(len(names), dtype=values.dtype)
        sums[key][rows >= 0] = values[rows[rows >= 0]]
    empty = FixedNValues.of(np.empty(0))
    return sums, [summary.own[r] if r >= 0 else empty for r in rows]


@dataclass(frozen=True, eq=False)
class JudgeTablesSummary(Summable):
    """Every selector judge's `JudgeSummary` over some prompts, by judge name (sorted)."""

    judges: Mapping[str, JudgeSummary]

    def __add__(self, other: JudgeTablesSummary) -> JudgeTablesSummary:
        """Judge by judge, `self`'s prompts first (partitions of one study have the same judges)."""
        if not isinstance(other, JudgeTablesSummary):
            return NotImplemented
        if list(self.judges) != list(other.judges):
            raise ValueError(f"cannot add the judge tables of judges {list(other.judges)} to those of "
                             f"{list(self.judges)}: partitions of one study hold the same judges")
        return JudgeTablesSummary({judge: self.judges[judge] + other.judges[judge] for judge in self.judges})


def range_cuts(count_pass: CountPass) -> Cuts:
    """The cut points of `position.range_tertiles` (numpy's 1/3 and 2/3 quantiles, to the bit) from a CountPass
    over every partition's `metrics.value_range(data.utility)` (`order_statistics.local_pass`, or one asking
    the workers); NaN, NaN when no prompt has a range."""
    q1, q2 = quantiles(count_pass, RANGE_QUANTILES)
    return (float(q1), float(q2))


def judge_tables_summary(data: SelectionData, cuts: Cuts) -> JudgeTablesSummary:
    """The judge tables' summary of a partition `data`; `cuts`: the whole study's range cut points
    (`range_cuts`), by which the partition's prompts fall into tertiles."""
    spread = metrics.value_range(data.utility)
    known = ~np.isnan(spread)
    if known.any() and np.isnan(cuts).any():
        raise ValueError(f"range cut points {cuts} are NaN but {int(known.sum())} prompts have a rating range: "
                         "pass the whole study's `range_cuts`")
    labels = tertile_labels(spread, *cuts)
    near = near_tie_counts(data.utility)
    return JudgeTablesSummary({judge: _judge_summary(data, judge, spread, labels, near) for judge in data.judges})


def _judge_summary(data: SelectionData, judge: str, spread: np.ndarray, labels: np.ndarray,
                   near: np.ndarray) -> JudgeSummary:
    """`JudgeSummary` of a partition."""
    sums = judge_sums(data, judge)
    generators = generator_sums(data, judge)
    flip = flips(valid_picks(data.picks[judge]))
    tertiles = tertile_groups(spread, labels, flip)
    near_ties = near_tie_groups(near, flip, data.mask.shape[1])
    return JudgeSummary(
        judge, sums["orders"], sums["statuses"], sums["by_size"], sums["expected"], sums["inverse_sizes"],
        sums["entropy"], FixedNValues.of(sums["flips"]), FixedNValues.of(sums["first_slot"]),
        {key: value for key, value in generators.items() if key != "own"},
        tuple(FixedNValues.of(values) for values in generators["own"]),
        {key: value for key, value in tertiles.items() if key != "flips"},
        tuple(FixedNValues.of(values) for values in tertiles["flips"]),
        near_ties["prompts"], tuple(FixedNValues.of(values) for values in near_ties["flips"]),
    )


def judge_tables_from_summary(summary: JudgeTablesSummary, resampling: Resampling
                              ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(judges, positions, generators, flips_by_range, flips_by_near_ties) of the prompts `summary` sums, as
    `audit._judge_tables(data, resampling)` makes them of those prompts (rows, order, dtypes; equal as the
    module docstring says). ValueError for a group whose interval needs its values in order (module docstring)."""
    judges = [summary.judges[judge] for judge in sorted(summary.judges)]
    return (
        pd.DataFrame([_judge_row(s, resampling) for s in judges], columns=JUDGE_COLUMNS),
        _concat([slot_frame(s.judge, s.by_size, s.expected) for s in judges], SLOT_COLUMNS),
        _concat([_generator_frame(s, resampling) for s in judges], GENERATOR_COLUMNS),
        _concat([_flip_range_frame(s, resampling) for s in judges], FLIP_COLUMNS),
        _concat([_near_tie_frame(s, resampling) for s in judges], NEAR_TIE_COLUMNS),
    )


def _concat(frames: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    """The frames stacked, or an empty frame with `columns` when there are none (as the audit stacks them)."""
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def _judge_row(s: JudgeSummary, resampling: Resampling) -> dict[str, object]:
    """`position.judge_summary`'s row (`position.judge_row`)."""
    sums = {"orders": s.orders, "statuses": s.statuses, "by_size": s.by_size, "expected": s.expected,
            "inverse_sizes": s.inverse_sizes, "entropy": s.entropy}
    return judge_row(s.judge, sums, s.flips.stat(resampling), s.first_slot.share_interval(resampling))


def _generator_frame(s: JudgeSummary, resampling: Resampling) -> pd.DataFrame:
    """`position.generator_table`'s rows (`position.generator_frame`)."""
    return generator_frame(s.judge, s.generators, [own.stat(resampling) for own in s.own])


def _flip_range_frame(s: JudgeSummary, resampling: Resampling) -> pd.DataFrame:
    """`position.flip_by_range`'s rows (`position.flip_range_frame`)."""
    return flip_range_frame(s.judge, s.tertiles, [flips.stat(resampling) for flips in s.tertile_flips])


def _near_tie_frame(s: JudgeSummary, resampling: Resampling) -> pd.DataFrame:
    """`position.flip_by_near_ties`' rows (`position.near_tie_frame`)."""
    return near_tie_frame(s.judge, s.near_tie_prompts, lambda k: s.near_tie_flips[k].stat(resampling))
