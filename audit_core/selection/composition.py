"""What a dataset is: prompts, pool sizes, ties and ratings, per country and per generator.

One row per group: `level` is "all" (value "all"), "country" (one row per country)
or "generator" (one row per source model). A group has prompts and candidates:

- all: every prompt and every candidate;
- country: the country's prompts and all their candidates;
- generator: the prompts whose pool holds one of its images, and its images only.

Columns (a wide table, one column per pool size seen, so it reads as a CSV):

- prompts: the group's prompts; pools_m<k>: those with k candidates;
- ties: pools whose candidates all have the same alignment rating (range 0);
- best_tied: pools where more than one candidate has the best rating (ties included);
- images: the group's candidates;
- alignment_mean, stereotype_mean: mean alignment rating and stereotype rate over the
  group's candidates (not over prompts; NaN ratings skipped; NaN without ratings);
- range_mean: mean over the group's prompts of best − worst alignment rating.

Equal ratings are equal within `metrics.TOL`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from audit_core.selection import metrics
from audit_core.selection.data import SelectionData
from audit_core.summable import Summable


def composition_columns(sizes: list[int]) -> list[str]:
    """The table's columns for the pool sizes `sizes` (ascending)."""
    return ["level", "value", "prompts", *[f"pools_m{k}" for k in sizes], "ties", "best_tied",
            "images", "alignment_mean", "stereotype_mean", "range_mean"]


def composition_table(data: SelectionData) -> pd.DataFrame:
    """Composition rows: the "all" row, then countries, then generators (each sorted by name)."""
    return composition_from_summary(composition_summary(data))


# A group's counts: prompts by pool size (0..M), then ties, best_tied, images and the counts of the rated
# candidates (alignment, stereotype) and of the prompts with a range; and the sums those three means divide.
_COUNTED = ("ties", "best_tied", "images")
_MEANS = ("alignment_mean", "stereotype_mean", "range_mean")


@dataclass(frozen=True, eq=False)
class CompositionSummary(Summable):
    """The composition table's counts and sums over some prompts: (level, value) -> (pools (M + 1,) int64
    prompts by pool size, counts (6,) int64: ties, best_tied, images and the values behind each mean,
    sums (3,) float64 of those values), for "all", each country and each generator seen. O(M) numbers a
    group, however many prompts."""

    groups: Mapping[tuple[str, str], tuple[np.ndarray, np.ndarray, np.ndarray]]

    def __add__(self, other: CompositionSummary) -> CompositionSummary:
        """Group by group (a group in one summary only kept as is), pool sizes up to the wider side."""
        if not isinstance(other, CompositionSummary):
            return NotImplemented
        groups = dict(self.groups)
        for key, (pools, counts, sums) in other.groups.items():
            if key not in groups:
                groups[key] = (pools, counts, sums)
                continue
            mine = groups[key][0]
            wide = np.zeros(max(len(mine), len(pools)), dtype=np.int64)
            wide[:len(mine)] += mine
            wide[:len(pools)] += pools
            groups[key] = (wide, groups[key][1] + counts, groups[key][2] + sums)
        return CompositionSummary(groups)


def composition_summary(data: SelectionData) -> CompositionSummary:
    """The composition counts and sums of the prompts of `data` (a whole study or a partition of one)."""
    h = data.utility
    stereotype = data.outcomes.get("stereotype", np.full(h.shape, np.nan))
    spread = metrics.value_range(h)
    best_count = (data.mask & (h >= metrics.oracle_value(h)[:, None] - metrics.TOL)).sum(axis=1)
    width = data.mask.shape[1]
    countries = data.prompts["country"].fillna("").astype(str).to_numpy()

    def group(prompts: np.ndarray, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pools = np.bincount(data.pool_sizes[prompts], minlength=width + 1).astype(np.int64)
        values = [_kept(h[candidates]), _kept(stereotype[candidates]), _kept(spread[prompts])]
        counts = [(spread[prompts] <= metrics.TOL).sum(), (best_count[prompts] > 1).sum(), candidates.sum(),
                  *[len(v) for v in values]]
        return pools, np.array(counts, dtype=np.int64), np.array([np.sum(v) for v in values], dtype=float)

    groups = {("all", "all"): group(np.ones(data.n_prompts, dtype=bool), data.mask)}
    for country in sorted(set(countries)):
        prompts = countries == country
        groups[("country", country)] = group(prompts, data.mask & prompts[:, None])
    for generator in sorted(set(data.source_models[data.mask]) - {""}):
        images = data.mask & (data.source_models == generator)
        groups[("generator", generator)] = group(images.any(axis=1), images)
    return CompositionSummary(groups)


def composition_from_summary(summary: CompositionSummary) -> pd.DataFrame:
    """`composition_table` of the prompts `summary` counts: the "all" row, countries, generators (each by name),
    a pools_m<k> column per pool size k some prompt has. Each mean is its sum over its count (NaN for none)."""
    pools = summary.groups[("all", "all")][0]
    sizes = [int(k) for k in np.nonzero(pools)[0]]
    rows = []
    for level in ("all", "country", "generator"):
        for key in sorted(key for key in summary.groups if key[0] == level):
            by_size, counts, sums = summary.groups[key]
            rows.append([
                level, key[1], int(by_size.sum()), *[int(by_size[k]) if k < len(by_size) else 0 for k in sizes],
                *[int(c) for c in counts[:len(_COUNTED)]],
                *[float(total / n) if n else np.nan for total, n in zip(sums, counts[len(_COUNTED):])],
            ])
    return pd.DataFrame(rows, columns=composition_columns(sizes))


def _kept(values: np.ndarray) -> np.ndarray:
    """The non-NaN values (their mean: sum / count, as `values.mean()` computes it)."""
    return values[~np.isnan(values)]
