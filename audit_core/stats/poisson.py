"""Poisson bootstrap for large studies: weights that depend on the prompt, not on where it is read.

Above POISSON_ABOVE prompts the selection audit's intervals come from this Poisson bootstrap (DESIGN §4f;
`audit_core.selection.partials` reduces the prompts to its sums, docs/large-studies.md), and so do the
judge change's (`PoissonMeans`, which resamples every mean and ratio of a comparison in one pass of
weights; `audit_core.selection.judge_change.poisson_path`):
prompt p carries weight w_pb ~ Poisson(1) in resample b, and a mean over the prompts a policy
acts on is the ratio of weighted sums Σ_p w_pb·v_p / Σ_p w_pb·a_p (a_p = 1 where it acts). The
weight is a pure function of (seed, prompt id, b):

    u_pb = top 53 bits of mix(key(p) ⊕ mix(seed_word + b·φ)) / 2⁵³,   w_pb = F⁻¹(u_pb)

with key(p) the first 8 bytes of BLAKE2b(prompt id), mix the SplitMix64 finaliser, φ the 64-bit
golden-ratio increment, seed_word = mix(seed) and F⁻¹ the inverse CDF of Poisson(1) (support
0..MAX_WEIGHT; the mass above it, below 1e-19, is folded onto MAX_WEIGHT). So a resample's sums
do not depend on file order, chunking or how the prompts are split across processes or
machines: `weighted_sums` over any partition of the prompts adds up to the sums over all of
them (exactly in the weights; in float64 sums up to summation order, a relative 1e-12).

Against the multinomial (fixed-n) bootstrap the total weight Σ w is itself random (mean n,
sd √n), which widens nothing for a ratio of sums: both are consistent for the same sampling
distribution, and at sizes where both run their 95% endpoints agree within
AGREEMENT_STANDARD_ERRORS standard errors of the mean (tests/audit_core/stats/test_poisson.py).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable

import numpy as np

from audit_core.chunks import row_chunks
from audit_core.stats.bootstrap import chunked_sum, percentile_interval, percentile_intervals
from audit_core.stats.bootstrap import ratio as bootstrap_ratio
from audit_core.stats.id_hash import id_hashes
from audit_core.stats.resampling import Resampling

POISSON_ABOVE = 200_000  # prompts above which a study's intervals come from this bootstrap
MAX_WEIGHT = 20  # largest weight drawn: P(Poisson(1) > 20) < 1e-19
# stated agreement of 95% endpoints with the multinomial bootstrap's, in standard errors of the mean: at
# 4,000 resamples each endpoint carries Monte-Carlo noise of sd ≈ 0.042 standard errors, so the two
# methods' endpoints differ by noise of sd ≈ 0.06; this bound is four of those
AGREEMENT_STANDARD_ERRORS = 0.25
BLOCK_ELEMENTS = 1 << 21  # prompts × resamples of one weight block (16 MB of uint64 per temporary)
MIX_ELEMENTS = 1 << 16  # weights mixed at once: their uint64 temporaries (512 KB each) stay in cache

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_CDF = np.cumsum([math.exp(-1) / math.factorial(k) for k in range(MAX_WEIGHT)])  # F(0..MAX_WEIGHT−1)
LOOKUP_BITS = 16  # top bits of a weight's 53 that index the inverse-CDF table
_STEPS = np.ceil(_CDF * 2.0**53).astype(np.uint64)  # the 53-bit integers at which F⁻¹ steps up
_CELLS = np.arange(1 << LOOKUP_BITS, dtype=np.uint64) << np.uint64(53 - LOOKUP_BITS)  # first 53-bit value of each cell
_LOOKUP = np.searchsorted(_STEPS, _CELLS, side="right").astype(np.uint8)  # F⁻¹ at each cell's first value
_STEP_CELL = _LOOKUP != np.searchsorted(_STEPS, _CELLS + np.uint64((1 << (53 - LOOKUP_BITS)) - 1), side="right")
IN_STEP = np.uint8(255)  # a table cell holding a step of F: the weight is found exactly (never a weight: > MAX_WEIGHT)
_TABLE = np.where(_STEP_CELL, IN_STEP, _LOOKUP).astype(np.uint8)  # F⁻¹ per cell, IN_STEP where F steps within it


def _mix(x: np.ndarray) -> np.ndarray:
    """The SplitMix64 finaliser, element-wise on uint64 (wrapping arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * _MIX_1
    x = (x ^ (x >> np.uint64(27))) * _MIX_2
    return x ^ (x >> np.uint64(31))


def prompt_keys(prompt_ids: Iterable[str]) -> np.ndarray:
    """uint64 key of each prompt id: the first 8 bytes (little-endian) of its BLAKE2b digest
    (`id_hash` with the empty purpose)."""
    return id_hashes(np.array(list(prompt_ids), dtype=object), "")


def poisson_weights(keys: np.ndarray, seed: int, start: int, stop: int) -> np.ndarray:
    """(len(keys), stop − start) uint8 weights w_pb of resamples b = start..stop−1 (module docstring).

    Made MIX_ELEMENTS weights at a time, so that the mix's uint64 temporaries stay in cache; the mix runs
    in place; F⁻¹ is read from a table indexed by the top LOOKUP_BITS of the 53 bits, except in the few
    table cells that hold a step of F (marked IN_STEP in the table), where the 53 bits are compared with
    the steps exactly: u ≥ F(k) ⟺ bits ≥ ⌈F(k)·2⁵³⌉, as u is bits·2⁻⁵³ exactly."""
    with np.errstate(over="ignore"):
        seed_word = _mix(np.array([seed], dtype=np.uint64))
        resample = _mix(seed_word + np.arange(start, stop, dtype=np.uint64) * _GOLDEN)
    keys = keys.astype(np.uint64)
    weights = np.empty((len(keys), stop - start), dtype=np.uint8)
    rows = max(1, MIX_ELEMENTS // max(stop - start, 1))
    for block in row_chunks(len(keys), rows):
        weights[block] = _block_weights(keys[block], resample)
    return weights


def _block_weights(keys: np.ndarray, resample: np.ndarray) -> np.ndarray:
    """(len(keys), len(resample)) uint8 weights of the prompts with `keys` in the resamples whose mixed
    words are `resample` (`poisson_weights`)."""
    with np.errstate(over="ignore"):
        x = keys[:, None] ^ resample[None, :]
        shifted = np.empty_like(x)
        for shift, multiplier in ((30, _MIX_1), (27, _MIX_2), (31, None)):
            np.right_shift(x, np.uint64(shift), out=shifted)
            x ^= shifted
            if multiplier is not None:
                x *= multiplier
    np.right_shift(x, np.uint64(64 - LOOKUP_BITS), out=shifted)
    weights = _TABLE.take(shifted)
    exact = weights == IN_STEP
    if exact.any():
        weights[exact] = np.searchsorted(_STEPS, x[exact] >> np.uint64(11), side="right")
    return weights


def weighted_sums(keys: np.ndarray, values: np.ndarray, resampling: Resampling) -> np.ndarray:
    """(B, k) sums Σ_p w_pb · values[p, j] over the prompts with `keys` (values: (n, k), NaN-free).

    Partial sums of a partition of the prompts add up to the sums over all of them. Weights are
    made a block of prompts at a time (BLOCK_ELEMENTS weights), so memory stays bounded at any n."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys for {len(values)} rows of values")
    if np.isnan(values).any():
        raise ValueError("values must not hold NaN: give 0 with a 0 acted-on indicator instead")
    return _block_sums(keys, lambda block: values[block], values.shape[1], resampling, np.float64)


def _block_sums(keys: np.ndarray, rows: Callable[[slice], np.ndarray], width: int, resampling: Resampling,
                dtype: type) -> np.ndarray:
    """(B, width) float64 sums Σ_p w_pb · rows(block)[p − block.start, j] over the prompts with `keys`, `rows`
    giving the (block.stop − block.start, width) values of the prompts in the `chunks.row_chunks` slice block.

    A block of BLOCK_ELEMENTS weights at a time, its products in `dtype`, added up in float64 by
    `bootstrap.chunked_sum` (on its threads, in an order that does not depend on their timing)."""
    resamples = resampling.resamples
    if resamples == 0 or len(keys) == 0:
        return np.zeros((resamples, width))

    def block_sum(block: slice) -> np.ndarray:
        weights = poisson_weights(keys[block], resampling.seed, 0, resamples)
        return (weights.T.astype(dtype) @ np.asarray(rows(block), dtype=dtype)).astype(np.float64)

    return chunked_sum(len(keys), max(1, BLOCK_ELEMENTS // resamples), block_sum)


class PoissonMeans:
    """Means of per-prompt vectors, each over the prompts where it is defined (not NaN), with Poisson-bootstrap
    intervals: `bootstrap.FixedNMeans`'s `add`, `means` and `intervals` above POISSON_ABOVE prompts, and
    `add_ratio` for a ratio of two columns' sums, all resampled with the same weights (`samples`).

    Entry e is a ratio of column sums: in resample b, Σ_p w_pb·x_p / Σ_p w_pb·y_p over the prompts with
    `keys`, NaN where the denominator is 0 (left out of its interval). A mean of v (`add`) has x = v where
    defined, else 0, and y = 1[v defined]; its point estimate is the mean of v's defined entries as
    FixedNMeans computes it (so the same number), an `add_ratio`'s Σx / Σy. Identical columns are summed
    once, and every column's sums come from one pass of weights (`_block_sums`, float32 products: a sum
    moves by a relative ~1e-6 with another order or chunking of the prompts). The vectors are kept, not
    copied: they must not change after they are added.
    """

    def __init__(self, keys: np.ndarray) -> None:
        self._keys = keys
        self._columns: list[tuple[np.ndarray, bool]] = []  # (values, whether NaN stands for 0)
        self._seen: dict[tuple[object, ...], list[int]] = defaultdict(list)
        self._entries: list[tuple[int, int]] = []  # (numerator column, denominator column)
        self._points: list[float] = []
        self._samples: tuple[Resampling, np.ndarray] | None = None

    def _column(self, values: np.ndarray, filled: bool) -> int:
        """The index of the column `values` (NaN read as 0 when `filled`), stored once."""
        signature = (filled, int(np.isnan(values).sum()), float(np.nansum(values)), float(np.nansum(values[::7])))
        for k in self._seen[signature]:
            if np.array_equal(self._columns[k][0], values, equal_nan=True):
                return k
        self._seen[signature].append(len(self._columns))
        self._columns.append((values, filled))
        self._samples = None
        return len(self._columns) - 1

    def add(self, values: np.ndarray) -> int:
        """The entry of the mean of `values`' defined entries (class docstring)."""
        values = np.asarray(values, dtype=float)
        defined = ~np.isnan(values)
        kept = values[defined]
        self._points.append(float(kept.sum()) / len(kept) if len(kept) else np.nan)  # as FixedNMeans computes it
        self._entries.append((self._column(values, True), self._column(defined, False)))
        return len(self._entries) - 1

    def add_ratio(self, numerator: np.ndarray, denominator: np.ndarray) -> int:
        """The entry of Σ numerator / Σ denominator (NaN-free columns over every prompt; 0 leaves a prompt out)."""
        columns = [np.asarray(c, dtype=float) for c in (numerator, denominator)]
        if any(np.isnan(c).any() for c in columns):
            raise ValueError("a ratio's columns must not hold NaN: give 0 where a prompt does not count")
        self._points.append(float(bootstrap_ratio(np.array([columns[0].sum()]), np.array([columns[1].sum()]))[0]))
        self._entries.append((self._column(columns[0], False), self._column(columns[1], False)))
        return len(self._entries) - 1

    def means(self) -> np.ndarray:
        """Every entry's point estimate, NaN for a mean of no defined entry or a ratio over a zero sum."""
        return np.array(self._points, dtype=float)

    def _rows(self, block: slice) -> np.ndarray:
        """(block.stop − block.start, columns) float32 values of the prompts in the `chunks.row_chunks` slice
        block, NaN read as 0 in filled columns."""
        out = np.empty((block.stop - block.start, len(self._columns)), dtype=np.float32, order="F")
        for k, (values, filled) in enumerate(self._columns):
            part = values[block]
            out[:, k] = np.where(np.isnan(part), 0.0, part) if filled else part
        return out

    def samples(self, resampling: Resampling) -> np.ndarray:
        """(B, entries) every entry's ratio in each resample (class docstring), from one pass of weights."""
        if self._samples is None or self._samples[0] != resampling:
            sums = _block_sums(self._keys, self._rows, len(self._columns), resampling, np.float32)
            ends = np.array(self._entries, dtype=np.int64).reshape(-1, 2)  # (numerator, denominator) columns
            self._samples = (resampling, bootstrap_ratio(sums[:, ends[:, 0]], sums[:, ends[:, 1]]))
        return self._samples[1]

    def intervals(self, resampling: Resampling, levels: tuple[float, ...]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per level, (lo, hi) of every entry's percentile interval over `samples`; NaN with 0 resamples
        or where no resample has a nonzero denominator."""
        if resampling.resamples == 0 or not self._entries:
            nothing = np.full(len(self._entries), np.nan)
            return [(nothing, nothing.copy()) for _ in levels]
        return percentile_intervals(self.samples(resampling), levels)


def ratio_interval(numerator: np.ndarray, denominator: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the resample ratios numerator_b / denominator_b (resamples with a
    zero denominator, where the policy acts on no drawn prompt, are left out); NaNs without any."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(denominator > 0, numerator / denominator, np.nan)
    lo, hi = percentile_interval(ratios, level)
    return float(lo[0]), float(hi[0])
