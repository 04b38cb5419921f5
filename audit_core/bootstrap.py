"""Prompt-level bootstrap: one vectorised resampling routine shared by every statistic.

Every audit statistic is a ratio of sums over prompts, Σ_p w_p·x_p / Σ_p w_p·a_p,
so a resample is fully described by its multinomial count weights w (how often
each prompt was drawn, Σ w = n). `resampled_sums` draws B such weight vectors
from one seeded generator and returns the weighted column sums W @ X for a
prompt-by-column matrix X holding every policy's numerators and denominators.
Because all columns share the same weights, a prompt's orders, judges and
policies travel together and any difference of two statistics is a paired
difference resampled jointly.

Memory: W is never materialised whole. Resamples are processed in chunks whose
(b × n) weight block stays around 200 MB; the counts of a few resamples at a
time come from one bincount over an index matrix. Sums over `blocks` (contiguous
prompt ranges, e.g. one per country) are kept separately for the columns in
`block_columns`, so subgroup statistics (and the worst group) are recomputed
inside every resample from the same draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

WEIGHT_BLOCK = 50_000_000  # elements of the (b × n) weight chunk
DRAW_BLOCK = 500_000  # elements of one index matrix turned into counts (cache-sized)
FLOAT32_ABOVE = 20_000  # prompts above which sums run in float32 (error ≪ bootstrap noise)


@dataclass(frozen=True)
class ResampledSums:
    """totals: (B, S) weighted column sums; by_block: (B, G, len(block_columns))."""

    totals: np.ndarray
    by_block: np.ndarray


def working_dtype(n: int) -> type:
    """float64 for small samples; float32 above FLOAT32_ABOVE prompts (halves time and memory;
    relative rounding ~1e-7, far below bootstrap noise)."""
    return np.float32 if n > FLOAT32_ABOVE else np.float64


def count_weights(rng: np.random.Generator, resamples: int, n: int, dtype: type = np.float64) -> np.ndarray:
    """(resamples, n) multinomial counts: row r says how often each of n prompts was drawn
    when drawing n prompts with replacement. Rows sum to n."""
    weights = np.empty((resamples, n), dtype=dtype)
    rows = max(1, DRAW_BLOCK // max(n, 1))
    for start in range(0, resamples, rows):
        r = min(rows, resamples - start)
        index = rng.integers(0, n, size=(r, n), dtype=np.int64)
        index += (np.arange(r, dtype=np.int64) * n)[:, None]
        weights[start : start + r] = np.bincount(index.ravel(), minlength=r * n).reshape(r, n)
    return weights


def resampled_sums(
    values: np.ndarray,
    resamples: int,
    seed: int,
    blocks: list[tuple[int, int]] | None = None,
    block_columns: np.ndarray | None = None,
) -> ResampledSums:
    """Weighted sums Σ_p w_bp · values[p, s] for B prompt-level bootstrap resamples.

    values: (n, S) per-prompt columns (NaN-free: zero out what a policy does not act on).
    blocks: contiguous [start, end) prompt ranges (default: one block of all prompts).
    block_columns: columns whose per-block sums are also kept (default: none).
    The same seed gives the same resamples whatever the columns.
    """
    n, width = values.shape
    blocks = blocks or [(0, n)]
    block_columns = np.asarray(block_columns if block_columns is not None else [], dtype=np.int64)
    dtype = working_dtype(n)
    # block columns are summed per block, and their totals are the sum over blocks
    rest = np.setdiff1d(np.arange(width), block_columns)
    x_rest = np.ascontiguousarray(values[:, rest], dtype=dtype)
    x_block = np.ascontiguousarray(values[:, block_columns], dtype=dtype)
    totals = np.empty((resamples, width), dtype=np.float64)
    by_block = np.empty((resamples, len(blocks), len(block_columns)), dtype=np.float64)
    rng = np.random.default_rng(seed)
    chunk = max(1, WEIGHT_BLOCK // max(n, 1))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        weights = count_weights(rng, stop - start, n, dtype)
        totals[start:stop, rest] = weights @ x_rest
        for g, (lo, hi) in enumerate(blocks):
            by_block[start:stop, g] = weights[:, lo:hi] @ x_block[lo:hi]
    totals[:, block_columns] = by_block.sum(axis=1)
    return ResampledSums(totals, by_block)


def ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, NaN where the denominator is 0 (nothing to average)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.true_divide(numerator, denominator)
    out[np.broadcast_to(denominator, out.shape) <= 0] = np.nan
    return out


def percentile_intervals(samples: np.ndarray, levels: tuple[float, ...] = (0.95,)) -> list[tuple[np.ndarray, np.ndarray]]:
    """Percentile interval per column of (B, k) bootstrap samples for each level, ignoring NaN.

    lo, hi = the (1−level)/2 and (1+level)/2 quantiles (linear interpolation between
    order statistics, numpy's default) of the resamples where the statistic is
    defined; NaN for a column defined in no resample. Columns defined in every
    resample only need a partial sort (np.partition at the needed ranks).
    """
    samples = np.asarray(samples, dtype=float)
    if samples.ndim == 1:
        samples = samples[:, None]
    n, k = samples.shape
    qs = [q for level in levels for q in ((1 - level) / 2, (1 + level) / 2)]
    out = np.full((len(qs), k), np.nan)
    valid = (~np.isnan(samples)).sum(axis=0)
    full = valid == n
    if n and full.any():
        ranks = [(int(np.floor(q * (n - 1))), min(int(np.floor(q * (n - 1))) + 1, n - 1), q * (n - 1)) for q in qs]
        kth = sorted({r for lo, hi, _ in ranks for r in (lo, hi)})
        part = np.partition(np.ascontiguousarray(samples[:, full].T), kth, axis=1)
        for i, (lo, hi, pos) in enumerate(ranks):
            out[i, full] = part[:, lo] * (1 - (pos - lo)) + part[:, hi] * (pos - lo)
    rest = np.nonzero(~full & (valid > 0))[0]
    if len(rest):
        ordered = np.sort(samples[:, rest], axis=0)  # NaN sorts last
        last = valid[rest] - 1
        cols = np.arange(len(rest))
        for i, q in enumerate(qs):
            pos = q * last
            lo = np.floor(pos).astype(np.int64)
            hi = np.minimum(lo + 1, last)
            out[i, rest] = ordered[lo, cols] * (1 - (pos - lo)) + ordered[hi, cols] * (pos - lo)
    return [(out[2 * i], out[2 * i + 1]) for i in range(len(levels))]


def percentile_interval(samples: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The `level` percentile interval per column (see `percentile_intervals`)."""
    return percentile_intervals(samples, (level,))[0]
