"""Prompt-level bootstrap: the resampling routines every interval uses, vectorised over resamples.

Two schemes (DESIGN §4, intervals):

- **Fixed n** (`fixed_n_means`, `FixedNMeans`, `stratified_max`). A statistic that is a mean
  over a set of n prompts — a policy's acted-on prompts, or those within a group — is
  resampled over exactly those prompts: resample b is the mean of n values drawn with
  replacement. How the draws are made depends on n:
  - n ≤ EXACT_DRAWS_UP_TO: as the published JudgeActs study draws them, draw for draw.
    Resample b averages the values at the indices
    `np.random.default_rng(seed).integers(0, n, size=(B, n))[b]`, a fresh generator per
    statistic (the study's seed is 20261002), so such an interval equals a direct numpy
    percentile bootstrap of the statistic's values; all statistics over n values see the
    same draws, which lets them share one draw per n.
  - n > EXACT_DRAWS_UP_TO: B × n index draws per distinct n would dominate the audit, and a
    resample's mean depends only on how often each distinct value was drawn, so each
    statistic's B resample means are drawn from their exact distribution instead, by the
    first of these that applies to its values:
    1. on a lattice origin + step·m, m = 0..G < LATTICE_POINTS (ratings on twelfths, their
       differences and averages; values within SNAP of each other count as one, which moves
       any mean by at most SNAP): the sum in steps of n draws is the n-fold convolution of
       the lattice frequencies, computed by FFT (`lattice_sum_distribution`, on a window of
       at most MAX_WINDOW points that the sum leaves with probability below ALIAS_MASS), and
       each resample mean is an inverse-CDF draw from it (`lattice_means`);
    2. at most MULTINOMIAL_UP_TO distinct values, and at most n / FEW_DISTINCT (fractions
       rounded to 4 decimals): the counts of the distinct values are
       Multinomial(n, frequency / n) (`multinomial_means`);
    3. otherwise (a continuous score, or many distinct values off a lattice): path 1 on the
       values rounded to a fine lattice (`rounded_lattice`), shifted by the mean rounding
       residual ē so that the bootstrap is centred where the values' is. Coupled draw for draw
       with a bootstrap of the values themselves, a resample mean moves by the mean of the
       drawn residuals minus ē: with probability at least 1 − ROUNDING_DELTA, in every one of
       the B resamples by less than Bernstein's t = (M·L/3 + √((M·L/3)² + 2n·v·L)) / n, with
       v and M the residuals' variance and largest deviation from ē (M ≤ step) and
       L = ln(2B / ROUNDING_DELTA); so each interval endpoint moves by less than t. The step
       is chosen so that t ≤ ROUNDING_ERROR standard errors of the mean (sd / √n), a fifth of
       the Monte-Carlo noise of a 95% endpoint at 10,000 resamples (≈ 0.027 standard errors),
       unless the sum's window would then exceed MAX_WINDOW points (n above ~10⁵ for a
       continuous score): the step is then the finest that fits and t larger. Only a value
       set that cannot be put on MAX_WINDOW lattice points keeps index draws, from a generator
       spawned from the statistic's (`Generator.spawn`), so not the study's stream.
    The intervals are an exact fixed-n percentile bootstrap in distribution (1.: up to
    ALIAS_MASS of total variation and float rounding; 3.: up to t), with other random numbers
    than the study's. Paths 1–3 draw from a stream keyed by the statistic's values, so a
    statistic's draws depend on the seed and its own values' multiset (`counted_means` draws them
    from value counts alone, as a study held in partitions keeps them), not on which other statistics
    share its length. Statistics of one length are then no longer paired resample by
    resample; none needs to be, as every fixed-n interval is of one statistic.
  The worst group draws each represented group in turn from one generator (groups in the
  order given) and takes the largest group mean in every resample; a group above
  EXACT_DRAWS_UP_TO spawns its generator from that one without advancing its stream, so an
  item whose groups are all that small draws `integers(0, n_g, size=(B, n_g))` for each in turn.
- **Joint** (`resampled_sums`). A difference between policies acting on different prompts (a
  gate's kept minus its rejected side) resamples all N prompts together — the index draws of
  `rng.integers(0, N, size=(B, N))` at any N — and takes ratios of weighted sums, so both
  sides move with the same draws.

Index draws become multinomial count weights (how often each value was drawn), a block of
resamples at a time, and statistics are products of weight blocks with value matrices: no
Python loop over single resamples or prompts. A weight block stays around DRAW_BLOCK counts
(at least MIN_ROWS resamples), small enough to stay in cache between its counting and its product.
The study's draws come from `study_draws.StudyDraws(seed)`, which draws as a fresh
`default_rng(seed)` would from one stream of the seed's outputs made once and shared.
Each generator's work (one length n, one pattern of group sizes) is independent of the
others', so a few threads run them at once (results do not depend on the threads), with
BLAS kept to one thread each: its many small products lose more to waking and spinning
threads than they gain, which on two cores tripled the audit's time.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from scipy import fft, sparse
from threadpoolctl import ThreadpoolController

from audit_core.chunks import row_chunks
from audit_core.stats.resampling import Resampling
from audit_core.stats.study_draws import StudyDraws

Draws = np.random.Generator | StudyDraws  # what makes index draws: numpy's generator, or the study's stream
_THREADPOOLS = ThreadpoolController()  # found once: each threadpool_limits() call searches the loaded libraries

DRAW_BLOCK = 131_072  # elements of one index matrix turned into counts (cache-sized)
MIN_ROWS = 64  # resamples per weight block at least, so that products stay matrix products
FLOAT32_ABOVE = 20_000  # prompts above which sums run in float32 (error ≪ bootstrap noise)
Summable = TypeVar("Summable")  # what `chunked_sum` adds: arrays, or partial sums that define +
WORKERS = min(4, os.cpu_count() or 1)  # threads drawing independent generators' resamples at once
EXACT_DRAWS_UP_TO = 1_000  # fixed-n statistics over at most this many values get the study's (300 prompts) draws
SNAP = 1e-9  # values closer than this (relative to their magnitude) are one lattice point: float noise
LATTICE_POINTS = 4_096  # most lattice points G + 1 a statistic's values may need for the lattice path
LATTICE_DIVISORS = 64  # lattice steps tried: the smallest gap between distinct values over 1..this
ALIAS_MASS = 1e-12  # probability a lattice sum may fall outside the window its distribution is computed on
MAX_WINDOW = 1 << 22  # longest window (points) of a lattice sum's distribution (32 MB of float64)
FEW_DISTINCT = 16  # off a lattice, n / this distinct values at most: k binomials (~200 ns) beat n draws (~11 ns)
MULTINOMIAL_UP_TO = 64  # and at most this many: B·k binomials would cost more than a rounded lattice's FFT
ROUNDING_ERROR = 0.005  # bound t on a rounded lattice's shift of any resample mean, in standard errors of the mean
ROUNDING_DELTA = 1e-3  # probability that some resample mean moves by more than t


@dataclass(frozen=True)
class Lattice:
    """n values on origin + step·m: counts[m] of them at each m = 0..G."""

    origin: float
    step: float
    counts: np.ndarray


@dataclass(frozen=True)
class Rounded:
    """Values rounded onto `lattice` (origin shifted by their mean residual) and the bound
    `shift` that no resample mean moves beyond, but with probability ROUNDING_DELTA."""

    lattice: Lattice
    shift: float


@dataclass(frozen=True)
class ResampledSums:
    """totals: (B, S) weighted column sums, one row per resample."""

    totals: np.ndarray


def one_blas_thread() -> contextlib.AbstractContextManager:
    """A context in which BLAS runs on one thread (module docstring: the many small products here
    lose more to waking its threads than they gain); on leaving, BLAS runs as it did before."""
    return _THREADPOOLS.limit(limits=1, user_api="blas")


def chunked_sum(n_rows: int, step: int, chunk_sum: Callable[[slice], Summable]) -> Summable | None:
    """Σ over the `chunks.row_chunks` of `step` rows of chunk_sum(rows) (None without rows: no call), on up
    to WORKERS threads with BLAS on one: thread i adds chunks i, i + W, … in order and the threads' sums are
    added in thread order, so the sum is the same whatever their timing."""
    chunks = row_chunks(n_rows, step) if n_rows else []
    workers = max(1, min(WORKERS, len(chunks)))

    def added(mine: list[slice]) -> Summable | None:
        total = None
        for rows in mine:
            part = chunk_sum(rows)
            total = part if total is None else total + part
        return total

    with one_blas_thread(), ThreadPoolExecutor(workers) as pool:
        sums = list(pool.map(added, [chunks[i::workers] for i in range(workers)]))
    total = None
    for part in sums:
        total = part if total is None else total + part
    return total


def working_dtype(n: int) -> type:
    """float64 for small samples; float32 above FLOAT32_ABOVE prompts (halves time and memory;
    relative rounding ~1e-7, far below bootstrap noise)."""
    return np.float32 if n > FLOAT32_ABOVE else np.float64


def count_weights(rng: Draws, resamples: int, n: int, dtype: type = np.float64) -> np.ndarray:
    """(resamples, n) multinomial counts: row r says how often each of n values was drawn in
    row r of `rng.integers(0, n, size=(resamples, n))`. Rows sum to n."""
    weights = np.empty((resamples, n), dtype=dtype)
    for start, stop, block in _weight_blocks(rng, resamples, n, dtype):
        weights[start:stop] = block
    return weights


def _weight_blocks(rng: Draws, resamples: int, n: int, dtype: type) -> Iterator[tuple[int, int, np.ndarray]]:
    """Consecutive (start, stop, counts) blocks of `count_weights(rng, resamples, n)`, about
    DRAW_BLOCK counts (at least MIN_ROWS rows) each, in one buffer that the next block overwrites.

    The index matrix is drawn a block of rows at a time (numpy's bounded integers continue one
    stream, so the counts are those of the whole matrix drawn at once) and counted as a sparse
    matrix with one entry per draw made dense (duplicates add up): a third of the time of
    `np.add.at`, and the block stays in cache for the product that uses it.
    """
    rows = max(1, min(max(MIN_ROWS, DRAW_BLOCK // max(n, 1)), resamples))
    buffer = np.empty((rows, n), dtype=dtype)
    ones = np.ones(rows * n, dtype=dtype)
    index_type = np.int32 if rows * n < 2**31 else np.int64  # the same stream whatever the integer type
    row_starts = np.arange(0, rows * n + 1, n, dtype=index_type)
    for start in range(0, resamples, rows):
        r = min(rows, resamples - start)
        index = rng.integers(0, n, size=r * n, dtype=index_type)
        block = buffer[:r]  # toarray zeroes it first
        sparse.csr_array((ones[:r * n], index, row_starts[:r + 1]), shape=(r, n)).toarray(out=block)
        yield start, start + r, block


def _drawn_means(x: np.ndarray, rng: Draws, resamples: int) -> np.ndarray:
    """(K, B) means of the columns of x (n ≥ 1, K) over the rows of `rng.integers(0, n, size=(B, n))`,
    laid out per column so that percentiles read contiguous rows."""
    n = len(x)
    dtype = working_dtype(n)
    xt = np.ascontiguousarray(x.T, dtype=dtype)
    out = np.empty((x.shape[1], resamples))
    for start, stop, weights in _weight_blocks(rng, resamples, n, dtype):
        out[:, start:stop] = xt @ weights.T
    out /= n
    return out


def lattice_of(values: np.ndarray) -> Lattice | None:
    """The lattice origin + step·m (m = 0..G, G < LATTICE_POINTS) holding every value within
    tol = SNAP × max(1, |value|), or None (also for a non-finite value).

    origin is the smallest value; step is the smallest gap between values more than tol
    apart divided by the smallest q ≤ LATTICE_DIVISORS that puts every value on the lattice.
    """
    return _lattice(*np.unique(values, return_counts=True))


def _lattice(distinct: np.ndarray, counts: np.ndarray) -> Lattice | None:
    """`lattice_of` the values `distinct` (ascending), counts[i] of them at distinct[i]."""
    if not (np.isfinite(distinct[0]) and np.isfinite(distinct[-1])) or len(distinct) > LATTICE_POINTS:
        return None
    tol = SNAP * max(1.0, abs(distinct[0]), abs(distinct[-1]))
    origin = float(distinct[0])
    offsets = distinct - origin
    apart = np.diff(distinct)
    apart = apart[apart > tol]
    if not len(apart):
        return Lattice(origin, 1.0, np.array([int(counts.sum())]))
    for q in range(1, LATTICE_DIVISORS + 1):
        step = float(apart.min()) / q
        m = np.rint(offsets / step)
        if m[-1] >= LATTICE_POINTS:
            return None  # finer steps only need more points
        if np.abs(offsets - m * step).max() <= tol:
            return Lattice(origin, step, np.bincount(m.astype(np.int64), weights=counts).astype(np.int64))
    return None


def rounded_lattice(distinct: np.ndarray, counts: np.ndarray, resamples: int) -> Rounded | None:
    """The values `distinct` (ascending, finite, counts[i] of them at distinct[i]) rounded to the
    lattice min + step·m, with the origin moved by the mean residual ē, and the Bernstein
    bound t on how far that moves any of `resamples` resample means (module docstring, path 3).

    step = ROUNDING_ERROR · sd · √(6 / L) makes t ≈ ROUNDING_ERROR · sd / √n for residuals
    spread evenly over a step (variance step² / 12); a step is halved until t is within it,
    and widened as needed for the sum's window to fit MAX_WINDOW. None when the values span
    more than MAX_WINDOW steps of the step that fits (an extreme outlier).
    """
    n = int(counts.sum())
    share = counts / n
    sd = float(np.sqrt(share @ (distinct - share @ distinct) ** 2))
    if not sd > 0:
        return None
    log_term = np.log(2 * max(resamples, 1) / ROUNDING_DELTA)
    target = ROUNDING_ERROR * sd / np.sqrt(n)
    step = ROUNDING_ERROR * sd * np.sqrt(6 / log_term)
    origin = float(distinct[0])
    for _ in range(8):
        if (distinct[-1] - origin) / step >= MAX_WINDOW:
            return None
        m = np.rint((distinct - origin) / step).astype(np.int64)
        lattice_counts = np.bincount(m, weights=counts)
        width = _sum_window(lattice_counts / n, n)[1]
        if width > MAX_WINDOW:  # too fine for the window: the finest step that fits
            step *= width / MAX_WINDOW * 1.01
            continue
        residual = distinct - (origin + step * m)
        centre = float(share @ residual)
        third = float(np.abs(residual - centre).max()) * log_term / 3
        shift = (third + np.sqrt(third * third + 2 * n * float(share @ (residual - centre) ** 2) * log_term)) / n
        if shift <= target or 2 * width > MAX_WINDOW:  # within the bound, or as fine as the window allows
            break
        step /= 2
    return Rounded(Lattice(origin + centre, step, lattice_counts.astype(np.int64)), shift)


def _power(z: np.ndarray, n: int) -> np.ndarray:
    """z ** n elementwise by repeated squaring (a third of the time of complex `**`, error ~log2(n) ulp)."""
    out, base = np.ones_like(z), z.copy()
    while n:
        if n & 1:
            out *= base
        n >>= 1
        if n:
            base *= base
    return out


def _sum_window(p: np.ndarray, n: int) -> tuple[int, int]:
    """(start, width) of the window start..start+width−1 on which `lattice_sum_distribution` holds
    the sum S of n draws of m with P(m) = p[m]: all of its support 0..nG when that is shorter,
    else |S − nμ| < t, where Bernstein's inequality P(|S − nμ| ≥ t) ≤ 2·exp(−t² / 2(nσ² + Mt/3))
    (M = max(μ, G − μ)) equals ALIAS_MASS."""
    g = len(p) - 1
    m = np.arange(g + 1)
    mu = float(p @ m)
    var = float(p @ (m - mu) ** 2)
    log_odds = np.log(2 / ALIAS_MASS)
    a = log_odds * max(mu, g - mu) / 3
    t = a + np.sqrt(a * a + 2 * log_odds * n * var)
    if n * g + 1 <= 2 * t + 2:
        return 0, n * g + 1
    return max(0, int(np.floor(n * mu - t))), int(np.ceil(2 * t)) + 2


def lattice_sum_distribution(p: np.ndarray, n: int) -> tuple[int, np.ndarray]:
    """(start, pmf) with pmf[i] = P(S = start + i), S the sum of n independent draws of m with
    P(m) = p[m] (m = 0..G), on at least the window `_sum_window` gives.

    The n-fold convolution of p by FFT on a circle of len(pmf) points; unless the window
    holds all of S's support, wrapping around moves at most ALIAS_MASS of probability.
    """
    start, width = _sum_window(p, n)
    size = fft.next_fast_len(max(width, len(p)), real=True)
    circle = fft.irfft(_power(fft.rfft(p, size), n), size)
    return start, np.maximum(np.roll(circle, -(start % size)), 0.0)  # rounding leaves ~1e-17 negatives


def _keyed(parent: np.random.Generator, distinct: np.ndarray, counts: np.ndarray) -> np.random.Generator:
    """A generator determined by `parent`'s seed sequence and the multiset of values alone
    (`distinct` ascending, counts[i] of them at distinct[i])."""
    seq = parent.bit_generator.seed_seq
    digest = hashlib.blake2b(distinct.tobytes() + counts.tobytes(), digest_size=16).digest()
    key = np.frombuffer(digest, dtype=np.uint32).tolist()
    return np.random.default_rng(np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, *key)))


def lattice_means(lattice: Lattice, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """(B,) means of n = Σ counts values drawn with replacement from those on `lattice`:
    inverse-CDF draws from the distribution of their sum (`lattice_sum_distribution`)."""
    n = int(lattice.counts.sum())
    start, pmf = lattice_sum_distribution(lattice.counts / n, n)
    cdf = np.cumsum(pmf)
    steps = start + np.minimum(np.searchsorted(cdf, rng.random(resamples) * cdf[-1], side="right"), len(cdf) - 1)
    return lattice.origin + lattice.step * steps / n


def multinomial_means(distinct: np.ndarray, counts: np.ndarray, rng: np.random.Generator,
                      resamples: int) -> np.ndarray:
    """(B,) means of n = Σ counts values drawn with replacement, counts[i] of them at distinct[i]:
    how often each distinct value is drawn is Multinomial(n, counts / n)."""
    n = int(counts.sum())
    # the first k − 1 shares sum to (n − counts[-1]) / n < 1, as numpy requires, rounding included
    shares = counts / n
    out = np.empty(resamples)
    rows = max(1, DRAW_BLOCK // len(distinct))
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        out[start:stop] = rng.multinomial(n, shares, size=stop - start) @ distinct
    return out / n


def _counted_means(distinct: np.ndarray, counts: np.ndarray, child: np.random.Generator,
                   resamples: int) -> np.ndarray | None:
    """(B,) fixed-n resample means of n = Σ counts > EXACT_DRAWS_UP_TO values, counts[i] of them at
    distinct[i] (ascending, as `np.unique` gives them), by the first of paths 1–3 (module docstring) that
    applies, from a generator keyed by the values (`_keyed`, from `child`); None when the values keep
    index draws (a non-finite value, or one that cannot be put on MAX_WINDOW lattice points): these depend
    on the values' order, not only on their multiset."""
    n = int(counts.sum())
    lattice = _lattice(distinct, counts)
    if lattice is not None and _sum_window(lattice.counts / n, n)[1] <= MAX_WINDOW:
        return lattice_means(lattice, _keyed(child, distinct, counts), resamples)
    if not (np.isfinite(distinct[0]) and np.isfinite(distinct[-1])):
        return None
    if len(distinct) <= min(MULTINOMIAL_UP_TO, n / FEW_DISTINCT):
        return multinomial_means(distinct, counts, _keyed(child, distinct, counts), resamples)
    if (rounded := rounded_lattice(distinct, counts, resamples)) is not None:
        return lattice_means(rounded.lattice, _keyed(child, distinct, counts), resamples)
    return None


def counted_means(distinct: np.ndarray, counts: np.ndarray, resampling: Resampling) -> np.ndarray | None:
    """(B,) `fixed_n_means` of one column of n = Σ counts > EXACT_DRAWS_UP_TO values given by their
    multiset alone: counts[i] (int64) of them at distinct[i] (float64, ascending, NaN-free: `np.unique`'s
    return_counts). Equal to `fixed_n_means` of any column holding those values, since above
    EXACT_DRAWS_UP_TO its draws depend on the multiset only; None when they keep index draws (non-finite
    values, or a value set that fits no MAX_WINDOW lattice: `_counted_means`), which need the values in order."""
    n = int(counts.sum())
    if n <= EXACT_DRAWS_UP_TO:
        raise ValueError(f"{n} values are drawn by index (n ≤ EXACT_DRAWS_UP_TO = {EXACT_DRAWS_UP_TO}): "
                         "pass them in order to fixed_n_means")
    if resampling.resamples == 0:
        return np.empty(0)
    return _counted_means(np.asarray(distinct, dtype=np.float64), np.asarray(counts, dtype=np.int64),
                          StudyDraws(resampling.seed).spawn(1)[0], resampling.resamples)


def _mean_samples(x: np.ndarray, rng: Draws, resamples: int) -> np.ndarray:
    """(K, B) fixed-n resample means of the columns of x (n ≥ 1, K), laid out per column.

    n ≤ EXACT_DRAWS_UP_TO: `_drawn_means` with rng itself (every column the same draws).
    Above, per column: `lattice_means` on a lattice whose window fits MAX_WINDOW, else
    `multinomial_means` when its distinct values are few, else `lattice_means` on the values
    rounded (`rounded_lattice`), each with a generator keyed by the column's values (`_keyed`);
    the other columns `_drawn_means` with a generator spawned from rng. rng's stream is left
    where it was.
    """
    n = len(x)
    if n <= EXACT_DRAWS_UP_TO or resamples == 0:
        return _drawn_means(x, rng, resamples)
    child = rng.spawn(1)[0]
    out = np.empty((x.shape[1], resamples))
    drawn = []
    for k in range(x.shape[1]):
        means = _counted_means(*np.unique(x[:, k], return_counts=True), child, resamples)
        if means is None:
            drawn.append(k)
        else:
            out[k] = means
    if drawn:
        out[drawn] = _drawn_means(x[:, drawn], child, resamples)
    return out


def fixed_n_means(values: np.ndarray, resampling: Resampling) -> np.ndarray:
    """(B, K) bootstrap means of the K columns of `values` (n, K), resampled at fixed n
    (B = resampling.resamples).

    n ≤ EXACT_DRAWS_UP_TO: resample b averages rows
    `np.random.default_rng(seed).integers(0, n, size=(B, n))[b]` of `values` (every column the
    same rows). Above, each column's means are drawn from their distribution or over index
    draws of a generator spawned from that one (module docstring). NaN when n = 0.
    """
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        return np.full((resampling.resamples, values.shape[1]), np.nan)
    with one_blas_thread():
        return _mean_samples(values, StudyDraws(resampling.seed), resampling.resamples).T


class FixedNMeans:
    """Means of value vectors of any length, each with its fixed-n percentile intervals.

    `add` keeps a vector's defined (non-NaN) entries in order — the statistic is their mean —
    and returns its index. `intervals` bootstraps all vectors of the same length in one call
    (`fixed_n_means`), so a vector's interval is exactly the one `fixed_n_means` gives it
    alone. Identical vectors are stored once.
    """

    def __init__(self) -> None:
        self._vectors: list[np.ndarray] = []
        self._means: list[float] = []
        self._every_level: list[bool] = []
        self._index: list[int] = []
        self._seen: dict[tuple[int, float, float], list[int]] = defaultdict(list)

    def add(self, values: np.ndarray, every_level: bool = False) -> int:
        """Store the non-NaN entries of `values`; returns the vector's index. Only vectors
        added with `every_level` get intervals beyond the first level (each costs a partial sort)."""
        values = np.asarray(values, dtype=float)
        kept = values[~np.isnan(values)]
        total = float(kept.sum())
        # a cheap signature finds the candidates, an exact comparison decides (hashing 10⁵ values costs more)
        signature = (len(kept), total, float(kept[::7].sum()))
        stored = next((i for i in self._seen[signature] if np.array_equal(self._vectors[i], kept)), None)
        if stored is None:
            stored = len(self._vectors)
            self._seen[signature].append(stored)
            self._vectors.append(kept)
            self._means.append(total / len(kept) if len(kept) else np.nan)  # as kept.mean() computes it
            self._every_level.append(False)
        self._every_level[stored] |= every_level
        self._index.append(stored)
        return len(self._index) - 1

    def means(self) -> np.ndarray:
        """Exact (float64) mean of every added vector, NaN for an empty one."""
        return np.array(self._means, dtype=float)[np.array(self._index, dtype=np.int64)]

    def intervals(self, resampling: Resampling, levels: tuple[float, ...]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per level, (lo, hi) of every added vector's percentile interval under `resampling`: NaN for
        an empty vector, with 0 resamples, and beyond the first level unless added with `every_level`."""
        resamples, seed = resampling.resamples, resampling.seed
        lo = np.full((len(levels), len(self._vectors)), np.nan)
        hi = np.full((len(levels), len(self._vectors)), np.nan)
        by_length: dict[int, list[int]] = defaultdict(list)
        for i, vector in enumerate(self._vectors):
            by_length[len(vector)].append(i)
        every = np.array(self._every_level, dtype=bool)

        def bounds(members: np.ndarray) -> list[tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]]:
            """(subset of members, per level (lo, hi)) for the vectors of one length."""
            samples = _mean_samples(np.column_stack([self._vectors[i] for i in members]), StudyDraws(seed), resamples)
            return [(members[subset], _owned_intervals(samples[subset], wanted))
                    for subset, wanted in ((~every[members], levels[:1]), (every[members], levels)) if subset.any()]

        # the longest first, so that no thread is left with a long length at the end
        groups = [np.array(by_length[n]) for n in sorted(by_length, reverse=True) if n > 0] if resamples > 0 else []
        with one_blas_thread(), ThreadPoolExecutor(WORKERS) as pool:  # independent draws per length
            for parts in pool.map(bounds, groups):
                for members, intervals in parts:
                    for k, (l, h) in enumerate(intervals):
                        lo[k, members], hi[k, members] = l, h
        index = np.array(self._index, dtype=np.int64)
        return [(lo[k, index], hi[k, index]) for k in range(len(levels))]


def stratified_max(strata: list[list[np.ndarray]], resampling: Resampling) -> np.ndarray:
    """(B, len(strata)) bootstrap samples of the largest group mean, resampled within groups
    (B, seed = resampling.resamples, resampling.seed).

    strata[j] holds item j's value vectors, one per represented group in a fixed order. For
    each item a generator `np.random.default_rng(seed)` resamples its groups in turn as
    `fixed_n_means` does (`integers(0, n_g, size=(B, n_g))` for a group of at most
    EXACT_DRAWS_UP_TO values; a larger one spawns its generator from that one); resample b is
    max_g of group g's mean in resample b. Items with the same group sizes share one generator.
    NaN for an item without groups.
    """
    resamples, seed = resampling.resamples, resampling.seed
    out = np.full((len(strata), resamples), np.nan)
    by_sizes: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for j, groups in enumerate(strata):
        if groups:
            by_sizes[tuple(len(g) for g in groups)].append(j)

    def largest(sizes: tuple[int, ...], members: list[int]) -> np.ndarray:
        rng = StudyDraws(seed)
        best = np.full((len(members), resamples), -np.inf)
        for g in range(len(sizes)):
            np.maximum(best, _mean_samples(np.column_stack([strata[j][g] for j in members]), rng, resamples), out=best)
        return best

    with one_blas_thread(), ThreadPoolExecutor(WORKERS) as pool:  # a generator per size pattern
        patterns = sorted(by_sizes, key=sum, reverse=True)  # the most draws first
        for members, best in zip((by_sizes[p] for p in patterns), pool.map(largest, patterns, (by_sizes[p] for p in patterns))):
            out[members] = best
    return out.T


def resampled_sums(values: np.ndarray, resampling: Resampling) -> ResampledSums:
    """Weighted sums Σ_p w_bp · values[p, s] for B joint resamples of all n prompts
    (B, seed = resampling.resamples, resampling.seed).

    values: (n, S) per-prompt columns (NaN-free: zero out what a policy does not act on).
    w_b counts row b of `np.random.default_rng(seed).integers(0, n, size=(B, n))`, the same
    draws whatever the columns.
    """
    n, width = values.shape
    dtype = working_dtype(n)
    x = np.ascontiguousarray(values, dtype=dtype)
    totals = np.empty((resampling.resamples, width), dtype=np.float64)
    for start, stop, weights in _weight_blocks(StudyDraws(resampling.seed), resampling.resamples, n, dtype):
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
