"""Slices: every policy's measures within each value of a prompt attribute (`slices.csv`).

Built-in slices (DESIGN §4, slices), in this order:

- `all`: every prompt (value "all");
- `country`, `category`: the prompt's own attribute;
- `pool_size`: the number of candidates m (3, 4, …);
- `best`: `unique` when one candidate has the highest alignment rating, else `tied`;
- `consensus`: per prompt, the mean over candidates with at least two alignment votes of
  the population variance of those votes; `high` when strictly below the median over
  prompts, else `low` (ties go to low). Left out when no prompt has such a candidate;
- `range`: tertiles of best − worst alignment rating, cut as the flip table cuts them
  (`position.range_tertiles`: q1, q2 = the 1/3 and 2/3 quantiles over prompts;
  `low` ≤ q1 < `mid` ≤ q2 < `high`).

`by` adds any other column of the prompts table as a slice named after it. A prompt
without a value (missing attribute, no votes, no ratings) gets the value "(none)";
values no prompt has are not listed.

The rules have one home each, here, for a study seen whole (`partitions`) and held in partitions
(`slice_summaries`): the cut points (`consensus_median`, `range_cuts`), every prompt's label given them
(`slice_labels`), a slice's values from its distinct labels (`slice_values`), which slices there are
(`layout`) and the codes into given values (`partition`).

Within a value, n is the number of its prompts the policy acts on and coverage = n / the
value's prompts. regret, gain, random_regret (random on the same prompts) and
stereotype_delta are means over those prompts with fixed-n intervals (resampled within
the value, `bootstrap.FixedNMeans`); bmr, bmr_random and best are means without
intervals. A value where the policy acts on nothing has coverage 0 and NaN measures,
never zero risk.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from audit_core.errors import InputError
from audit_core.selection import metrics
from audit_core.selection.data import SelectionData
from audit_core.selection.position import range_cuts, tertile_labels
from audit_core.stats.bootstrap import FixedNMeans, ratio

NONE = "(none)"
BUILT_IN = ("all", "country", "category", "pool_size", "best", "consensus", "range")
ORDERS = {"best": ("unique", "tied"), "consensus": ("high", "low"), "range": ("low", "mid", "high")}  # fixed values
CONSENSUS_LEFT_OUT = "consensus slice left out: no candidate has two or more alignment votes"
INTERVAL_STATS = ("regret", "gain", "random_regret", "stereotype_delta")
POINT_STATS = ("bmr", "bmr_random", "best")
SLICE_COLUMNS = [
    "slice", "value", "policy", "n", "coverage", "regret", "regret_lo", "regret_hi", "gain", "gain_lo", "gain_hi",
    "bmr", "bmr_random", "best", "random_regret", "random_regret_lo", "random_regret_hi",
    "stereotype_delta", "stereotype_delta_lo", "stereotype_delta_hi",
]


@dataclass(frozen=True)
class Partition:
    """One slice: its value names and, per value, its prompts' rows (ascending)."""

    name: str
    values: list[str]
    codes: np.ndarray  # (P,) index into values

    @cached_property
    def members(self) -> list[np.ndarray]:
        """Rows of each value's prompts, in prompt order."""
        order = np.argsort(self.codes, kind="stable")
        return np.split(order, np.cumsum(self.sizes)[:-1])

    @cached_property
    def sizes(self) -> np.ndarray:
        """Prompts per value."""
        return np.bincount(self.codes, minlength=len(self.values))


@dataclass(frozen=True)
class SliceValues:
    """One slice's values: its prompts' distinct labels in value order, as the labels are (pool sizes are
    ints, sorted as numbers), and whether some prompt has no label ("(none)", last)."""

    name: str
    labels: tuple[object, ...]
    missing: bool

    @property
    def values(self) -> list[str]:
        """The value names, as `Partition.values` shows them."""
        return [str(v) for v in self.labels] + ([NONE] if self.missing else [])


def distinct_labels(labels: Iterable[object]) -> tuple[tuple[object, ...], bool]:
    """(the distinct labels in the order first seen, None/NaN left out; whether some label is None/NaN).
    Of the distinct labels of consecutive prompts, those of their concatenation are `pd.unique` of theirs
    concatenated: the same labels in the same order."""
    labels = pd.Series(list(labels), dtype=object)
    present = labels.notna()
    return tuple(pd.unique(labels[present])), bool((~present).any())


def slice_values(
    name: str, seen: Sequence[object], missing: bool, order: Sequence[object] | None = None,
) -> SliceValues:
    """The slice's values from its distinct labels `seen`: in `order` when given (values no prompt has
    dropped), else the labels sorted (pandas `sort_values`)."""
    if order is not None:
        kept = set(seen)
        return SliceValues(name, tuple(v for v in order if v in kept), missing)
    return SliceValues(name, tuple(pd.Series(list(seen), dtype=object).sort_values()), missing)


def partition(
    name: str, labels: Sequence[object], order: Sequence[object] | None = None, values: SliceValues | None = None,
) -> Partition:
    """The slice `name` from each prompt's label (None/NaN: no value, shown as "(none)").

    Values follow `order` when given, else the labels' sorted order; "(none)" comes last.
    Values no prompt has are dropped. Given `values` (a whole study's, for some of its prompts),
    the codes index those instead; a label outside them raises ValueError.
    """
    labels = pd.Series(list(labels), dtype=object)
    present = labels.notna().to_numpy()
    if values is None:
        values = slice_values(name, *distinct_labels(labels), order)
    codes = np.full(len(labels), len(values.labels), dtype=np.int64)
    codes[present] = pd.Index(list(values.labels), dtype=object).get_indexer(labels[present])
    if (codes < 0).any() or (not values.missing and not present.all()):
        outside = labels[present][codes[present] < 0]
        raise ValueError(f"slice {name!r}: label {outside.iloc[0] if len(outside) else None!r} is not among its "
                         f"values {values.values}")
    return Partition(name, values.values, codes)


def prompt_disagreement(data: SelectionData) -> np.ndarray:
    """(P,) mean over candidates with ≥ 2 alignment votes of their votes' population variance;
    NaN where no candidate has two votes (or the dataset has no votes)."""
    if data.vote_variance is None:
        return np.full(data.n_prompts, np.nan)
    variance = data.vote_variance
    counted = ~np.isnan(variance)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counted.any(axis=1), np.nansum(variance, axis=1) / counted.sum(axis=1), np.nan)


def consensus_median(disagreement: np.ndarray) -> float:
    """The median over prompts of the disagreement (`np.nanmedian`); NaN when no prompt has one."""
    return float(np.nanmedian(disagreement)) if (~np.isnan(disagreement)).any() else np.nan


def consensus_labels(disagreement: np.ndarray, median: float | None = None) -> np.ndarray:
    """"high" where disagreement is strictly below the median over prompts, else "low"; None
    where undefined. `median`: the whole study's (`consensus_median`), by default these prompts'."""
    median = consensus_median(disagreement) if median is None else median
    return np.where(np.isnan(disagreement), None, np.where(disagreement < median, "high", "low"))


def range_labels(h: np.ndarray, cuts: Sequence[float] | None = None) -> np.ndarray:
    """"low" / "mid" / "high" tertile of the rating range h* − min h, cut as the flip table
    cuts it; None where unrated. `cuts`: the whole study's (q1, q2) (`range_cuts`), by default
    these prompts'."""
    spread = metrics.value_range(h)
    q1, q2 = range_cuts(spread) if cuts is None else cuts
    labels = tertile_labels(spread, q1, q2)
    return np.where(labels == "", None, labels)


def best_labels(h: np.ndarray) -> np.ndarray:
    """"unique" when exactly one candidate has the highest rating, else "tied" (None if unrated)."""
    with np.errstate(invalid="ignore"):
        top = (h >= metrics.oracle_value(h)[:, None] - metrics.TOL).sum(axis=1)
    return np.where(top == 0, None, np.where(top == 1, "unique", "tied"))


def check_slice_columns(columns: Iterable[str], by: Sequence[str]) -> None:
    """Raise InputError naming a column of `by` that is not a prompt attribute (`columns`: the prompts
    table's, the same in every partition of a study)."""
    columns = [c for c in columns if c != "m"]
    unknown = [c for c in by if c not in columns]
    if unknown:
        raise InputError(f"slice column {unknown[0]!r} is not a prompt attribute (columns of the prompts table: "
                         f"{', '.join(columns)})")


def slice_names(by: Sequence[str] = ()) -> list[str]:
    """The slices in order: the built-in ones, then each column of `by` (once; a built-in name adds nothing)."""
    return [*BUILT_IN, *(column for column in dict.fromkeys(by) if column not in BUILT_IN)]


def slice_labels(
    data: SelectionData, by: Sequence[str] = (), median: float | None = None, cuts: Sequence[float] | None = None,
) -> dict[str, Sequence[object]]:
    """slice name -> each prompt's label (None/NaN: none), every slice of `slice_names(by)`, the consensus
    split at `median` and the range at `cuts` (by default these prompts' own). Raises InputError naming a
    column of `by` that is not a prompt attribute."""
    check_slice_columns(data.prompts.columns, by)
    h = data.utility
    labels = {
        "all": ["all"] * data.n_prompts,
        "country": data.prompts["country"],
        "category": data.prompts["category"],
        "pool_size": data.pool_sizes,
        "best": best_labels(h),
        "consensus": consensus_labels(prompt_disagreement(data), median),
        "range": range_labels(h, cuts),
    }
    return {name: labels[name] if name in labels else data.prompts[name] for name in slice_names(by)}


def layout(distinct: Mapping[str, tuple[Sequence[object], bool]]) -> tuple[list[SliceValues], list[str]]:
    """The slices' values from each one's (distinct labels, whether some prompt has none), in the order
    given, and notes on slices left out: the consensus slice when no prompt has a disagreement value."""
    kept, notes = [], []
    for name, (seen, missing) in distinct.items():
        if name == "consensus" and not len(seen):
            notes.append(CONSENSUS_LEFT_OUT)
        else:
            kept.append(slice_values(name, seen, missing, ORDERS.get(name)))
    return kept, notes


def partitions(data: SelectionData, by: Sequence[str] = ()) -> tuple[list[Partition], list[str]]:
    """The built-in slices, then one per column in `by`, and notes on slices left out.

    Raises InputError naming a column of `by` that is not a prompt attribute.
    """
    labels = slice_labels(data, by, consensus_median(prompt_disagreement(data)),
                          range_cuts(metrics.value_range(data.utility)))
    values, notes = layout({name: distinct_labels(labelled) for name, labelled in labels.items()})
    return [partition(v.name, labels[v.name], values=v) for v in values], notes


def register_cells(means: FixedNMeans, part: Partition, stats: dict[str, np.ndarray]) -> np.ndarray:
    """Add one policy's INTERVAL_STATS within every value of `part` to `means`.

    stats: per-prompt values, NaN where the policy does not act (or the value is undefined);
    a stat the dataset lacks counts as undefined. Returns (values, stats) indices into `means`.
    """
    missing = np.full(len(part.codes), np.nan)
    return np.array([[means.add(stats.get(stat, missing)[rows]) for stat in INTERVAL_STATS] for rows in part.members],
                    dtype=np.int64).reshape(len(part.values), len(INTERVAL_STATS))


def slice_rows(
    part: Partition,
    policy: str,
    stats: dict[str, np.ndarray],
    index: np.ndarray,
    estimate: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
) -> dict[str, np.ndarray]:
    """Columns (SLICE_COLUMNS plus `prompts`) of one policy's rows in `part`, one per value;
    `index` comes from `register_cells`, estimate/lo/hi are the means' point estimates and bounds."""
    width = len(part.values)
    acted = np.bincount(part.codes, weights=stats["acted"], minlength=width)
    sizes = part.sizes
    rows: dict[str, np.ndarray] = {
        "slice": np.full(width, part.name, dtype=object),
        "value": np.array(part.values, dtype=object),
        "policy": np.full(width, policy, dtype=object),
        "prompts": sizes,
        "n": np.rint(acted).astype(np.int64),
        "coverage": acted / sizes,
    }
    for k, stat in enumerate(INTERVAL_STATS):
        rows[stat], rows[f"{stat}_lo"], rows[f"{stat}_hi"] = estimate[index[:, k]], lo[index[:, k]], hi[index[:, k]]
    for stat in POINT_STATS:
        values = stats[stat]
        defined = ~np.isnan(values)
        rows[stat] = ratio(np.bincount(part.codes[defined], weights=values[defined], minlength=width),
                           np.bincount(part.codes[defined], minlength=width).astype(float))
    return rows
