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

import numpy as np
import pandas as pd

from audit_core.selection import metrics
from audit_core.selection.data import SelectionData


def composition_columns(sizes: list[int]) -> list[str]:
    """The table's columns for the pool sizes `sizes` (ascending)."""
    return ["level", "value", "prompts", *[f"pools_m{k}" for k in sizes], "ties", "best_tied",
            "images", "alignment_mean", "stereotype_mean", "range_mean"]


def composition_table(data: SelectionData) -> pd.DataFrame:
    """Composition rows: the "all" row, then countries, then generators (each sorted by name)."""
    h = data.utility
    stereotype = data.outcomes.get("stereotype", np.full(h.shape, np.nan))
    spread = metrics.value_range(h)
    best_count = (data.mask & (h >= metrics.oracle_value(h)[:, None] - metrics.TOL)).sum(axis=1)
    sizes = sorted(int(k) for k in np.unique(data.pool_sizes))
    countries = data.prompts["country"].fillna("").astype(str).to_numpy()

    def row(level: str, value: str, prompts: np.ndarray, candidates: np.ndarray) -> list[object]:
        m = data.pool_sizes[prompts]
        return [
            level, value, int(prompts.sum()), *[int((m == k).sum()) for k in sizes],
            int((spread[prompts] <= metrics.TOL).sum()), int((best_count[prompts] > 1).sum()),
            int(candidates.sum()), _mean(h[candidates]), _mean(stereotype[candidates]), _mean(spread[prompts]),
        ]

    every = np.ones(data.n_prompts, dtype=bool)
    rows = [row("all", "all", every, data.mask)]
    for country in sorted(set(countries)):
        prompts = countries == country
        rows.append(row("country", country, prompts, data.mask & prompts[:, None]))
    for generator in sorted(set(data.source_models[data.mask]) - {""}):
        images = data.mask & (data.source_models == generator)
        rows.append(row("generator", generator, images.any(axis=1), images))
    return pd.DataFrame(rows, columns=composition_columns(sizes))


def _mean(values: np.ndarray) -> float:
    """Mean of the non-NaN values; NaN when there are none."""
    values = values[~np.isnan(values)]
    return float(values.mean()) if len(values) else np.nan
