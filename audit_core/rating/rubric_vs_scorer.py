"""A rating judge's rubric next to a content scorer (e.g. CLIP cosine) on the same images (issue 12, item 4).

For each rating judge × condition and each content scorer, on the items the judge rated
(status ok) and the scorer scored:

    s_i      = 2 (r_i − lo) / (hi − lo) − 1       the rating on the scorer's [−1, 1] scale
                                                  (DESIGN §4b; 1–5: s = (r − 3) / 2)
    pearson  = corr_i(s_i, score_i)
    spearman = corr_i(rank s_i, rank score_i)     average ranks for ties, as scipy.stats.spearmanr

Each is undefined (NaN) when either side is constant, or fewer than two items pair up.
`unrated` counts the scored items without an ok rating from the judge (abstained, failed or
not asked): they are left out, never turned into a number.

Intervals: 95% percentile intervals from an item-level bootstrap. A pair's n items (sorted by
candidate id) are drawn with replacement as the rows of
`numpy.random.default_rng(seed).integers(0, n, (B, n))` (as count weights,
`bootstrap.count_weights`), and both correlations are recomputed on each resample, ranks
included; resamples where a side is constant are left out of the interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from audit_core.chunks import row_chunks
from audit_core.stats.bootstrap import count_weights, percentile_interval
from audit_core.stats.resampling import Resampling

ITEM_COLUMNS = ("judge", "condition", "scorer", "candidate_id", "rating", "rubric_scaled", "score")
CORRELATION_COLUMNS = ("judge", "condition", "scorer", "n", "unrated", "pearson", "pearson_lo", "pearson_hi",
                       "spearman", "spearman_lo", "spearman_hi")
CHUNK_ELEMENTS = 2_000_000  # resamples × items per block of the bootstrap: bounds memory


@dataclass(frozen=True)
class RubricVsScorer:
    """items: ITEM_COLUMNS, one row per judge × condition × scorer × item both rated and scored;
    correlations: CORRELATION_COLUMNS, one row per judge × condition × scorer; resampling: how the
    intervals were made."""

    scale: tuple[int, int]
    resampling: Resampling
    items: pd.DataFrame
    correlations: pd.DataFrame

    def tables(self) -> dict[str, pd.DataFrame]:
        """Table name → frame, as the analyze command writes them (name.csv)."""
        return {"rubric_vs_scorer": self.correlations, "rubric_vs_scorer_items": self.items}


def rescaled(ratings: np.ndarray, scale: tuple[int, int]) -> np.ndarray:
    """s = 2 (r − lo) / (hi − lo) − 1: the scale's bottom at −1, its top at +1."""
    lo, hi = scale
    if hi <= lo:
        raise ValueError(f"a rubric scale needs lo < hi, got {lo}-{hi}")
    return 2 * (np.asarray(ratings, dtype=float) - lo) / (hi - lo) - 1


def _drawn_values(values: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(group of each item among the distinct values, (B, K) copies of each distinct value drawn)."""
    _, group, sizes = np.unique(values, return_inverse=True, return_counts=True)
    order = np.argsort(group, kind="stable")
    return group, np.add.reduceat(weights[:, order], np.concatenate([[0], np.cumsum(sizes)[:-1]]), axis=1)


def _ranks(group: np.ndarray, drawn: np.ndarray) -> np.ndarray:
    """(B, n) average rank of each item's value in each resample (`_drawn_values`): copies of smaller
    values + (copies of equal values + 1) / 2, as scipy.stats.rankdata('average') on the resampled values."""
    return (np.cumsum(drawn, axis=1) - drawn + (drawn + 1) / 2)[:, group]


def _pearson(sums: np.ndarray, undefined: np.ndarray) -> np.ndarray:
    """corr from the columns Σw, Σwx, Σwy, Σwx², Σwy², Σwxy of `sums` (B, 6); NaN where `undefined`."""
    n, x, y, xx, yy, xy = sums.T
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (n * xy - x * y) / np.sqrt((n * xx - x * x) * (n * yy - y * y))
    return np.where(undefined, np.nan, np.clip(r, -1.0, 1.0))


def correlations(s: np.ndarray, score: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pearson, spearman), each (B,), of s and score (n,) over the resamples given as count weights (B, n):
    item i counted weights[b, i] times in resample b. NaN where a side takes one value over the items drawn."""
    groups = [_drawn_values(v, weights) for v in (s, score)]
    undefined = np.logical_or(*[(drawn > 0).sum(axis=1) < 2 for _, drawn in groups])
    pearson = _pearson(weights @ np.column_stack([np.ones_like(s), s, score, s * s, score * score, s * score]),
                       undefined)
    a, b = (_ranks(group, drawn) for group, drawn in groups)
    sums = np.column_stack([weights.sum(axis=1), *((weights * v).sum(axis=1) for v in (a, b, a * a, b * b, a * b))])
    return pearson, _pearson(sums, undefined)


def _pair_row(s: np.ndarray, score: np.ndarray, resampling: Resampling) -> dict[str, float]:
    """n, the point estimates and their intervals for one judge × condition × scorer."""
    n = len(s)
    row = {"n": n}
    if n < 2:
        return row | {f"{name}{end}": np.nan for name in ("pearson", "spearman") for end in ("", "_lo", "_hi")}
    pearson, spearman = correlations(s, score, np.ones((1, n)))
    row |= {"pearson": pearson[0], "spearman": spearman[0]}
    resamples = resampling.resamples
    samples = np.full((resamples, 2), np.nan)
    rng = np.random.default_rng(resampling.seed)
    step = max(1, CHUNK_ELEMENTS // n)
    for block in row_chunks(resamples, step):
        samples[block] = np.column_stack(correlations(s, score, count_weights(rng, block.stop - block.start, n)))
    lo, hi = percentile_interval(samples) if resamples else (np.full(2, np.nan), np.full(2, np.nan))
    return row | {"pearson_lo": lo[0], "pearson_hi": hi[0], "spearman_lo": lo[1], "spearman_hi": hi[1]}


def rubric_vs_scorer(ratings: pd.DataFrame, scores: pd.DataFrame, scale: tuple[int, int],
                     resampling: Resampling = Resampling()) -> RubricVsScorer:
    """Every rating judge × condition beside every content scorer on the items both cover (see the module docstring).

    ratings: judge, condition, candidate_id, rating, status (`store.load_rating_calls`; rating NaN
    unless status 'ok'); scores: scorer, candidate_id, score (`store.load_scores`).
    """
    rated = ratings[ratings["status"] == "ok"].dropna(subset=["rating"])
    items, rows = [], []
    pairs = ratings[["judge", "condition"]].drop_duplicates().sort_values(["judge", "condition"])
    for judge, condition in pairs.itertuples(index=False, name=None):
        mine = rated[(rated["judge"] == judge) & (rated["condition"] == condition)]
        for scorer, scored in scores.groupby("scorer", sort=True):
            both = mine[["candidate_id", "rating"]].merge(scored[["candidate_id", "score"]], on="candidate_id")
            both = both.sort_values("candidate_id", kind="stable").reset_index(drop=True)
            both["rubric_scaled"] = rescaled(both["rating"].to_numpy(), scale)
            items.append(both.assign(judge=judge, condition=condition, scorer=scorer))
            row = _pair_row(both["rubric_scaled"].to_numpy(), both["score"].to_numpy(float), resampling)
            unrated = int((~scored["candidate_id"].isin(mine["candidate_id"])).sum())
            rows.append({"judge": judge, "condition": condition, "scorer": scorer, "unrated": unrated, **row})
    item_frame = (pd.concat(items, ignore_index=True) if items else pd.DataFrame(columns=list(ITEM_COLUMNS)))
    return RubricVsScorer(scale, resampling, item_frame[list(ITEM_COLUMNS)],
                          pd.DataFrame(rows, columns=list(CORRELATION_COLUMNS)))
