"""Prompt-level bootstrap: the resampling routines every interval uses, vectorised over resamples.

Two schemes (DESIGN §4, intervals):

- **Fixed n** (`fixed_n_means`, `FixedNMeans`, `stratified_max`). A statistic that is a mean
  over a set of n prompts — a policy's acted-on prompts, or those within a group — is
  resampled over exactly those prompts, as the published JudgeActs study does: resample b
  averages the values at the indices `np.random.default_rng(seed).integers(0, n, size=(B, n))[b]`,
  a fresh generator per statistic (the study's seed is 20261002). Such an interval therefore
  equals a direct numpy percentile bootstrap of the statistic's values, and all statistics
  over n values see the same draws, which is what lets them share one draw per n.
  The worst group draws each represented group's indices in turn from one generator (groups
  in the order given) and takes the largest group mean in every resample.
- **Joint** (`resampled_sums`). A difference between policies acting on different prompts (a
  gate's kept minus its rejected side) resamples all N prompts together — the fixed-n draws
  with n = N — and takes ratios of weighted sums, so both sides move with the same draws.

Draws become multinomial count weights (how often each value was drawn), a chunk of
resamples at a time, and statistics are products of weight chunks with value matrices: no
Python loop over resamples or prompts. A weight chunk stays around WEIGHT_BLOCK elements.
Each generator's work (one length n, one pattern of group sizes) is independent of the
others', so a few threads run them at once (results do not depend on the threads), with
BLAS kept to one thread each: its many small products lose more to waking and spinning
threads than they gain, which on two cores tripled the audit's time.
"""

from __future__ import annotations

import hashlib
import os
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

WEIGHT_BLOCK = 50_000_000  # elements of the (b × n) weight chunk
DRAW_BLOCK = 65_536  # elements of one index matrix turned into counts (cache-sized)
FLOAT32_ABOVE = 20_000  # prompts above which sums run in float32 (error ≪ bootstrap noise)
WORKERS = min(4, os.cpu_count() or 1)  # threads drawing independent generators' resamples at once


@dataclass(frozen=True)
class ResampledSums:
    """totals: (B, S) weighted column sums, one row per resample."""

    totals: np.ndarray


def working_dtype(n: int) -> type:
    """float64 for small samples; float32 above FLOAT32_ABOVE prompts (halves time and memory;
    relative rounding ~1e-7, far below bootstrap noise)."""
    return np.float32 if n > FLOAT32_ABOVE else np.float64


def count_weights(rng: np.random.Generator, resamples: int, n: int, dtype: type = np.float64) -> np.ndarray:
    """(resamples, n) multinomial counts: row r says how often each of n values was drawn in
    row r of `rng.integers(0, n, size=(resamples, n))`. Rows sum to n.

    The index matrix is drawn a few rows at a time; numpy's bounded integers continue one
    stream, so the counts are those of the whole matrix drawn at once.
    """
    weights = np.zeros((resamples, n), dtype=dtype)
    flat = weights.reshape(-1)
    rows = max(1, DRAW_BLOCK // max(n, 1))
    for start in range(0, resamples, rows):
        r = min(rows, resamples - start)
        index = rng.integers(0, n, size=(r, n), dtype=np.int64)
        index += (np.arange(start, start + r, dtype=np.int64) * n)[:, None]
        np.add.at(flat, index.ravel(), flat.dtype.type(1))  # unbuffered: repeated draws of a value all count
    return weights


def _weight_chunks(rng: np.random.Generator, resamples: int, n: int, dtype: type) -> Iterator[tuple[int, int, np.ndarray]]:
    """Consecutive (start, stop, counts) blocks of `count_weights(rng, resamples, n)`."""
    chunk = max(1, WEIGHT_BLOCK // max(n, 1))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        yield start, stop, count_weights(rng, stop - start, n, dtype)


def _mean_samples(x: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """(K, B) means of the columns of x (n ≥ 1, K) over the rows of `rng.integers(0, n, size=(B, n))`,
    laid out per column so that percentiles read contiguous rows."""
    n = len(x)
    dtype = working_dtype(n)
    xt = np.ascontiguousarray(x.T, dtype=dtype)
    out = np.empty((x.shape[1], resamples))
    for start, stop, weights in _weight_chunks(rng, resamples, n, dtype):
        out[:, start:stop] = xt @ weights.T
    out /= n
    return out


def fixed_n_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """(B, K) bootstrap means of the K columns of `values` (n, K), resampled at fixed n.

    Resample b averages rows `np.random.default_rng(seed).integers(0, n, size=(B, n))[b]` of
    `values` (every column the same rows). NaN when n = 0.
    """
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        return np.full((resamples, values.shape[1]), np.nan)
    with threadpool_limits(1, user_api="blas"):
        return _mean_samples(values, np.random.default_rng(seed), resamples).T


class FixedNMeans:
    """Means of value vectors of any length, each with its fixed-n percentile intervals.

    `add` keeps a vector's defined (non-NaN) entries in order — the statistic is their mean —
    and returns its index. `intervals` bootstraps all vectors of the same length with one
    draw (`fixed_n_means`), so a vector's interval is exactly the one `fixed_n_means` gives
    it alone. Identical vectors are stored once.
    """

    def __init__(self) -> None:
        self._vectors: list[np.ndarray] = []
        self._means: list[float] = []
        self._every_level: list[bool] = []
        self._index: list[int] = []
        self._seen: dict[bytes, int] = {}

    def add(self, values: np.ndarray, every_level: bool = False) -> int:
        """Store the non-NaN entries of `values`; returns the vector's index. Only vectors
        added with `every_level` get intervals beyond the first level (each costs a partial sort)."""
        values = np.asarray(values, dtype=float)
        kept = values[~np.isnan(values)]
        key = hashlib.blake2b(kept.tobytes(), digest_size=16).digest()
        if key not in self._seen:
            self._seen[key] = len(self._vectors)
            self._vectors.append(kept)
            self._means.append(float(kept.mean()) if len(kept) else np.nan)
            self._every_level.append(False)
        stored = self._seen[key]
        self._every_level[stored] |= every_level
        self._index.append(stored)
        return len(self._index) - 1

    def means(self) -> np.ndarray:
        """Exact (float64) mean of every added vector, NaN for an empty one."""
        return np.array(self._means, dtype=float)[np.array(self._index, dtype=np.int64)]

    def intervals(self, resamples: int, seed: int, levels: tuple[float, ...]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per level, (lo, hi) of every added vector's percentile interval: NaN for an empty
        vector, when `resamples` is 0, and beyond the first level unless added with `every_level`."""
        lo = np.full((len(levels), len(self._vectors)), np.nan)
        hi = np.full((len(levels), len(self._vectors)), np.nan)
        by_length: dict[int, list[int]] = defaultdict(list)
        for i, vector in enumerate(self._vectors):
            by_length[len(vector)].append(i)
        every = np.array(self._every_level, dtype=bool)

        def bounds(members: np.ndarray) -> list[tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]]:
            """(subset of members, per level (lo, hi)) for the vectors of one length."""
            samples = _mean_samples(np.column_stack([self._vectors[i] for i in members]), np.random.default_rng(seed),
                                    resamples)
            return [(members[subset], _owned_intervals(samples[subset], wanted))
                    for subset, wanted in ((~every[members], levels[:1]), (every[members], levels)) if subset.any()]

        groups = [np.array(m) for n, m in by_length.items() if n > 0] if resamples > 0 else []
        with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(WORKERS) as pool:  # independent draws per length
            for parts in pool.map(bounds, groups):
                for members, intervals in parts:
                    for k, (l, h) in enumerate(intervals):
                        lo[k, members], hi[k, members] = l, h
        index = np.array(self._index, dtype=np.int64)
        return [(lo[k, index], hi[k, index]) for k in range(len(levels))]


def stratified_max(strata: list[list[np.ndarray]], resamples: int, seed: int) -> np.ndarray:
    """(B, len(strata)) bootstrap samples of the largest group mean, resampled within groups.

    strata[j] holds item j's value vectors, one per represented group in a fixed order. For
    each item a generator `np.random.default_rng(seed)` draws `integers(0, n_g, size=(B, n_g))`
    for its groups in turn; resample b is max_g of group g's mean over row b. Items with the
    same group sizes share the draws. NaN for an item without groups.
    """
    out = np.full((len(strata), resamples), np.nan)
    by_sizes: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for j, groups in enumerate(strata):
        if groups:
            by_sizes[tuple(len(g) for g in groups)].append(j)

    def largest(sizes: tuple[int, ...], members: list[int]) -> np.ndarray:
        rng = np.random.default_rng(seed)
        best = np.full((len(members), resamples), -np.inf)
        for g in range(len(sizes)):
            np.maximum(best, _mean_samples(np.column_stack([strata[j][g] for j in members]), rng, resamples), out=best)
        return best

    with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(WORKERS) as pool:  # a generator per size pattern
        for members, best in zip(by_sizes.values(), pool.map(largest, by_sizes.keys(), by_sizes.values())):
            out[members] = best
    return out.T


def resampled_sums(values: np.ndarray, resamples: int, seed: int) -> ResampledSums:
    """Weighted sums Σ_p w_bp · values[p, s] for B joint resamples of all n prompts.

    values: (n, S) per-prompt columns (NaN-free: zero out what a policy does not act on).
    w_b counts row b of `np.random.default_rng(seed).integers(0, n, size=(B, n))`, the same
    draws whatever the columns.
    """
    n, width = values.shape
    dtype = working_dtype(n)
    x = np.ascontiguousarray(values, dtype=dtype)
    totals = np.empty((resamples, width), dtype=np.float64)
    for start, stop, weights in _weight_chunks(np.random.default_rng(seed), resamples, n, dtype):
        totals[start:stop] = weights @ x
    return ResampledSums(totals)


def ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, NaN where the denominator is 0 (nothing to average)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.true_divide(numerator, denominator)
    out[np.broadcast_to(denominator, out.shape) <= 0] = np.nan
    return out


def _quantile_ranks(q: float, b: int) -> tuple[int, int, float]:
    """Order statistics (lower, upper) around quantile q of b values and the weight of the upper
    one under linear interpolation (numpy's default quantile method)."""
    pos = q * (b - 1)
    lo = int(np.floor(pos))
    return lo, min(lo + 1, b - 1), pos - lo


def _row_quantiles(rows: np.ndarray, qs: list[float]) -> np.ndarray:
    """(len(qs), K) quantiles of each row of `rows` (K, B), all finite; `rows` is reordered in place.

    The needed order statistics are selected in increasing order, each partition working on
    what is left above the previous one (one multi-rank np.partition costs more than a sort).
    """
    ranks = [_quantile_ranks(q, rows.shape[1]) for q in qs]
    value: dict[int, np.ndarray] = {}
    start = 0  # rows[:, start:] holds exactly the values of rank ≥ start
    for r in sorted({k for lo, hi, _ in ranks for k in (lo, hi)}):
        if r == start:
            value[r] = rows[:, start:].min(axis=1)
            continue
        rows[:, start:].partition(r - start, axis=1)
        value[r], start = rows[:, r].copy(), r + 1
    return np.array([value[lo] * (1 - w) + value[hi] * w for lo, hi, w in ranks])


def percentile_intervals(samples: np.ndarray, levels: tuple[float, ...] = (0.95,)) -> list[tuple[np.ndarray, np.ndarray]]:
    """Percentile interval per column of (B, k) bootstrap samples for each level, ignoring NaN.

    lo, hi = the (1−level)/2 and (1+level)/2 quantiles (linear interpolation between
    order statistics, numpy's default) of the resamples where the statistic is
    defined; NaN for a column defined in no resample. Columns defined in every
    resample only need partial sorts (np.partition at the needed ranks).
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
        out[:, full] = _row_quantiles(np.array(samples[:, full].T, order="C"), qs)
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


def _owned_intervals(rows: np.ndarray, levels: tuple[float, ...]) -> list[tuple[np.ndarray, np.ndarray]]:
    """`percentile_intervals` of finite samples laid out per row (K, B), reordering `rows` in place."""
    out = _row_quantiles(rows, [q for level in levels for q in ((1 - level) / 2, (1 + level) / 2)])
    return [(out[2 * i], out[2 * i + 1]) for i in range(len(levels))]


def percentile_interval(samples: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The `level` percentile interval per column (see `percentile_intervals`)."""
    return percentile_intervals(samples, (level,))[0]
