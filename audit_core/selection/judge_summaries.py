"""The audit's judge tables and composition table of a study held in partitions, from small per-partition summaries.

A *partition* is one contiguous range of a study's prompts: its `SelectionData` with the study's width,
judges and orders (`SelectionData.rows` of the whole study gives exactly one). A worker summarises its
partition alone; the summaries add up (`+`, or `sum` in partition order) on the driver, and the tables
are made of the sum:

- `judge_tables_summary` → `judge_tables_from_summary`: `audit._judge_tables`, i.e. per judge
  `position.judge_summary` (judges), `position.slot_table` (positions), `position.generator_table`
  (generators), `position.flip_by_range` (flips_by_range) and `position.flip_by_near_ties`
  (flips_by_near_ties);
- `composition_summary` → `composition_from_summary`: `composition.composition_table` (whose own rule,
  both re-exported here).

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
    SLOT_COLUMNS,
    TERTILES,
    _fixed_n_interval,
    _valid_calls,
    chi_square_of_counts,
    expected_slot_counts,
    first_slot_interval,
    first_slot_interval_of_counts,
    fixed_n_interval_of_counts,
    flips,
    near_tie_counts,
    order_entropy,
    slot_counts_by_size,
    slot_frame,
    tertile_labels,
)
from audit_core.selection.votes import valid_picks
from audit_core.stats import bootstrap
from audit_core.stats.order_statistics import CountPass, quantiles
from audit_core.stats.resampling import Resampling

__all__ = [
    "CompositionSummary", "FixedNValues", "JudgeSummary", "JudgeTablesSummary",
    "composition_from_summary", "composition_summary", "judge_tables_from_summary", "judge_tables_summary",
    "range_cuts",
]

Cuts = tuple[float, float]  # the whole study's 1/3 and 2/3 quantiles of the rating range (`range_cuts`)


class _Sums:
    """`sum(summaries)` starts from 0: 0 + a summary is the summary."""

    def __radd__(self, other: object):
        if isinstance(other, int) and other == 0:
            return self
        return NotImplemented


@dataclass(frozen=True, eq=False)
class FixedNValues(_Sums):
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
        """`position._fixed_n_interval` of the values (d = 1): from them in order up to EXACT_DRAWS_UP_TO,
        else from their multiset (`position.fixed_n_interval_of_counts`)."""
        if self.ordered is not None:
            return _fixed_n_interval(self.ordered[:, 0], resampling)
        return fixed_n_interval_of_counts(self.distinct[:, 0], self.counts, resampling)

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
class JudgeSummary(_Sums):
    """One judge's counts, float sums and fixed-n groups over some prompts (module docstring: sizes).

    statuses: (calls, recovered, parse_fail, runtime_fail); by_size (W + 1, W) valid calls by pool size and
    chosen slot (`position.slot_counts_by_size`); expected (W,) `position.expected_slot_counts` of the valid
    calls; inverse_sizes Σ 1/m over them; entropy (Σ, count) of `position.order_entropy` where defined;
    flips: the flip indicators of the prompts where every order parsed; first_slot: the (first, valid) pairs of
    the prompts with a valid call.
    Generators (sorted by name): chosen, expected (Σ over valid calls of copies / m), chosen_first (order-0
    picks), images (Σ, count) of their stereotype ratings, own: per generator the stereotype differences d_p
    of the prompts whose order-0 pick is its image; with_first: prompts with an order-0 pick; rated: prompts
    with a d_p.
    Tertiles (low, mid, high): prompts, range_lo / range_hi (min / max range, ±inf when none), their flips;
    near ties (index k = 0..W): prompts with k near-ties, their flips."""

    judge: str
    orders: int
    statuses: np.ndarray
    by_size: np.ndarray
    expected: np.ndarray
    inverse_sizes: float
    entropy: tuple[float, int]
    flips: FixedNValues
    first_slot: FixedNValues
    generators: tuple[str, ...]
    chosen: np.ndarray
    generator_expected: np.ndarray
    chosen_first: np.ndarray
    images: tuple[np.ndarray, np.ndarray]
    own: tuple[FixedNValues, ...]
    with_first: int
    rated: int
    tertile_prompts: np.ndarray
    range_lo: np.ndarray
    range_hi: np.ndarray
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
        generators = tuple(sorted(set(self.generators) | set(other.generators)))
        a, b = _aligned(self, generators), _aligned(other, generators)
        return JudgeSummary(
            self.judge, self.orders, self.statuses + other.statuses, self.by_size + other.by_size,
            self.expected + other.expected, self.inverse_sizes + other.inverse_sizes,
            (self.entropy[0] + other.entropy[0], self.entropy[1] + other.entropy[1]),
            self.flips + other.flips, self.first_slot + other.first_slot, generators,
            a["chosen"] + b["chosen"], a["generator_expected"] + b["generator_expected"],
            a["chosen_first"] + b["chosen_first"], (a["image_sums"] + b["image_sums"], a["image_n"] + b["image_n"]),
            tuple(x + y for x, y in zip(a["own"], b["own"])), self.with_first + other.with_first,
            self.rated + other.rated, self.tertile_prompts + other.tertile_prompts,
            np.minimum(self.range_lo, other.range_lo), np.maximum(self.range_hi, other.range_hi),
            tuple(x + y for x, y in zip(self.tertile_flips, other.tertile_flips)),
            self.near_tie_prompts + other.near_tie_prompts,
            tuple(x + y for x, y in zip(self.near_tie_flips, other.near_tie_flips)),
        )


def _aligned(summary: JudgeSummary, generators: Sequence[str]) -> dict[str, object]:
    """The summary's per-generator fields on `generators` (a superset of its own, sorted), zero / empty elsewhere."""
    rows = pd.Index(list(summary.generators)).get_indexer(list(generators))

    def spread(values: np.ndarray) -> np.ndarray:
        out = np.zeros(len(generators), dtype=values.dtype)
        out[rows >= 0] = values[rows[rows >= 0]]
        return out

    empty = FixedNValues.of(np.empty(0))
    return {
        "chosen": spread(summary.chosen), "generator_expected": spread(summary.generator_expected),
        "chosen_first": spread(summary.chosen_first), "image_sums": spread(summary.images[0]),
        "image_n": spread(summary.images[1]), "own": [summary.own[r] if r >= 0 else empty for r in rows],
    }


@dataclass(frozen=True, eq=False)
class JudgeTablesSummary(_Sums):
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
    q1, q2 = quantiles(count_pass, [1 / 3, 2 / 3])
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
    """`JudgeSummary` of a partition, counted as the `position` functions count."""
    width = data.mask.shape[1]
    status = data.statuses[judge]
    valid, sizes = _valid_calls(data, judge)
    picks = valid_picks(data.picks[judge])
    flip = flips(picks)
    entropy = order_entropy(picks, data.pool_sizes, width)
    defined = ~np.isnan(entropy)
    valid_per_prompt = valid.sum(axis=1)
    first = (valid & (data.slots[judge] == 0)).sum(axis=1)
    has_valid = valid_per_prompt > 0
    generators = _generator_sums(data, valid, picks)
    tertiles = [labels == name for name in TERTILES]
    return JudgeSummary(
        judge=judge,
        orders=picks.shape[1],
        statuses=np.array([(status != "").sum(), (status == "recovered").sum(), (status == "parse_fail").sum(),
                           (status == "runtime_fail").sum()], dtype=np.int64),
        by_size=slot_counts_by_size(data.slots[judge][valid], sizes[valid], width),
        expected=expected_slot_counts(sizes[valid], width),
        inverse_sizes=float(np.sum(1 / sizes[valid])),
        entropy=(float(np.sum(np.where(defined, entropy, 0.0))), int(defined.sum())),
        flips=FixedNValues.of(flip[~np.isnan(flip)]),
        first_slot=FixedNValues.of(np.column_stack([first[has_valid], valid_per_prompt[has_valid]])),
        **generators,
        tertile_prompts=np.array([members.sum() for members in tertiles], dtype=np.int64),
        range_lo=np.array([spread[members].min() if members.any() else np.inf for members in tertiles]),
        range_hi=np.array([spread[members].max() if members.any() else -np.inf for members in tertiles]),
        tertile_flips=tuple(FixedNValues.of(flip[members & ~np.isnan(flip)]) for members in tertiles),
        near_tie_prompts=np.bincount(near, minlength=width + 1).astype(np.int64),
        near_tie_flips=tuple(FixedNValues.of(flip[(near == k) & ~np.isnan(flip)]) for k in range(width + 1)),
    )


def _generator_sums(data: SelectionData, valid: np.ndarray, picks: np.ndarray) -> dict[str, object]:
    """A partition's per-generator fields of `JudgeSummary`, as `position.generator_table` counts them."""
    generators = sorted(set(data.source_models.ravel()) - {""})
    codes = pd.Index(generators).get_indexer(data.source_models.ravel()).reshape(data.source_models.shape)
    count = len(generators)
    rows_idx, orders = np.nonzero(valid)
    picked_codes = codes[rows_idx, picks[rows_idx, orders]]
    chosen = np.bincount(picked_codes[picked_codes >= 0], minlength=count).astype(np.int64)
    per_prompt = np.zeros((data.n_prompts, count))
    cells = codes.ravel() >= 0
    np.add.at(per_prompt, (np.repeat(np.arange(data.n_prompts), codes.shape[1])[cells], codes.ravel()[cells]),
              (data.mask / np.maximum(data.pool_sizes, 1)[:, None]).ravel()[cells])
    first = picks[:, 0]
    has_first = first >= 0
    first_model = np.where(has_first, codes[np.arange(data.n_prompts), np.clip(first, 0, None)], -1)
    stereotype = data.outcomes.get("stereotype", np.full(data.mask.shape, np.nan))
    diff = metrics.picked(stereotype, first) - metrics.random_value(stereotype)
    rated = ~np.isnan(diff)
    images = [stereotype[(codes == i) & data.mask] for i in range(count)]
    images = [values[~np.isnan(values)] for values in images]
    return {
        "generators": tuple(generators),
        "chosen": chosen,
        "generator_expected": valid.sum(axis=1) @ per_prompt,
        "chosen_first": np.bincount(first_model[first_model >= 0], minlength=count).astype(np.int64),
        "images": (np.array([np.sum(values) for values in images], dtype=float),
                   np.array([len(values) for values in images], dtype=np.int64)),
        "own": tuple(FixedNValues.of(diff[rated & (first_model == i)]) for i in range(count)),
        "with_first": int(has_first.sum()),
        "rated": int(rated.sum()),
    }


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
    """`position.judge_summary`'s row."""
    calls, recovered, parse_fail, runtime_fail = (int(x) for x in s.statuses)
    n_valid = int(s.by_size.sum())
    stat, df, p = chi_square_of_counts(s.by_size.sum(axis=0), s.expected)
    first_lo, first_hi = s.first_slot.share_interval(resampling)
    flip_lo, flip_hi = s.flips.interval(resampling)
    return {
        "judge": s.judge,
        "orders": s.orders,
        "calls": calls,
        "valid": n_valid,
        "recovered": recovered,
        "failed": parse_fail + runtime_fail,
        "parse_fail": parse_fail,
        "runtime_fail": runtime_fail,
        "first_slot": float(s.by_size[:, 0].sum() / n_valid) if n_valid else np.nan,
        "first_slot_uniform": float(s.inverse_sizes / n_valid) if n_valid else np.nan,
        "chi2": stat,
        "chi2_df": df,
        "chi2_p": p,
        "flip_n": s.flips.n,
        "flip_rate": s.flips.mean(),
        "entropy": s.entropy[0] / s.entropy[1] if s.entropy[1] else np.nan,
        "first_slot_lo": first_lo,
        "first_slot_hi": first_hi,
        "flip_rate_lo": flip_lo,
        "flip_rate_hi": flip_hi,
    }


def _generator_frame(s: JudgeSummary, resampling: Resampling) -> pd.DataFrame:
    """`position.generator_table`'s rows."""
    n = int(s.by_size.sum())
    rows = []
    for i, model in enumerate(s.generators):
        own, image_n = s.own[i], int(s.images[1][i])
        rows.append((
            s.judge, str(model),
            s.chosen[i] / n if n else np.nan, s.generator_expected[i] / n if n else np.nan, int(s.chosen[i]),
            int(s.chosen_first[i]), s.chosen_first[i] / s.with_first if s.with_first else np.nan,
            float(s.images[0][i] / image_n) if image_n else np.nan,
            own.mean(),
            *own.interval(resampling),
            float(own.total[0] / s.rated) if s.rated else np.nan,
        ))
    return pd.DataFrame(rows, columns=GENERATOR_COLUMNS)


def _flip_range_frame(s: JudgeSummary, resampling: Resampling) -> pd.DataFrame:
    """`position.flip_by_range`'s rows."""
    rows = []
    for t, name in enumerate(TERTILES):
        bounds = (float(s.range_lo[t]), float(s.range_hi[t])) if s.tertile_prompts[t] else (np.nan, np.nan)
        rows.append((s.judge, name, *bounds, *_flip_row(int(s.tertile_prompts[t]), s.tertile_flips[t], resampling)))
    return pd.DataFrame(rows, columns=FLIP_COLUMNS)


def _near_tie_frame(s: JudgeSummary, resampling: Resampling) -> pd.DataFrame:
    """`position.flip_by_near_ties`'s rows: one per near-tie count k ≥ 1 some prompt has."""
    rows = [(s.judge, int(k), *_flip_row(int(s.near_tie_prompts[k]), s.near_tie_flips[k], resampling))
            for k in np.nonzero(s.near_tie_prompts)[0] if k > 0]
    return pd.DataFrame(rows, columns=NEAR_TIE_COLUMNS)


def _flip_row(prompts: int, values: FixedNValues, resampling: Resampling) -> tuple:
    """(prompts, parsed, flip rate, lo, hi) as `position._flip_summary` gives them."""
    return (prompts, values.n, values.mean(), *values.interval(resampling))
