"""Poisson bootstrap for large studies: weights that depend on the prompt, not on where it is read.

Above POISSON_ABOVE prompts the selection audit's intervals come from this Poisson bootstrap (DESIGN §4f;
`audit_core.selection.partials` reduces the prompts to its sums, docs/large-studies.md):
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
from collections.abc import Iterable

import numpy as np

from audit_core.stats.bootstrap import percentile_interval
from audit_core.stats.id_hash import id_hashes
from audit_core.stats.resampling import Resampling

POISSON_ABOVE = 200_000  # prompts above which a study's intervals come from this bootstrap
MAX_WEIGHT = 20  # largest weight drawn: P(Poisson(1) > 20) < 1e-19
# stated agreement of 95% endpoints with the multinomial bootstrap's, in standard errors of the mean: at
# 4,000 resamples each endpoint carries Monte-Carlo noise of sd ≈ 0.042 standard errors, so the two
# methods' endpoints differ by noise of sd ≈ 0.06; this bound is four of those
AGREEMENT_STANDARD_ERRORS = 0.25
BLOCK_ELEMENTS = 1 << 21  # prompts × resamples of one weight block (16 MB of uint64 per temporary)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_CDF = np.cumsum([math.exp(-1) / math.factorial(k) for k in range(MAX_WEIGHT)])  # F(0..MAX_WEIGHT−1)
LOOKUP_BITS = 16  # top bits of a weight's 53 that index the inverse-CDF table
_STEPS = np.ceil(_CDF * 2.0**53).astype(np.uint64)  # the 53-bit integers at which F⁻¹ steps up
_CELLS = np.arange(1 << LOOKUP_BITS, dtype=np.uint64) << np.uint64(53 - LOOKUP_BITS)  # first 53-bit value of each cell
_LOOKUP = np.searchsorted(_STEPS, _CELLS, side="right").astype(np.uint8)  # F⁻¹ at each cell's first value
_STEP_CELL = _LOOKUP != np.searchsorted(_STEPS, _CELLS + np.uint64((1 << (53 - LOOKUP_BITS)) - 1), side="right")


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

    The mix runs in place; F⁻¹ is read from a table indexed by the top LOOKUP_BITS of the 53 bits, except
    in the few table cells that hold a step of F, where the 53 bits are compared with the steps exactly:
    u ≥ F(k) ⟺ bits ≥ ⌈F(k)·2⁵³⌉, as u is bits·2⁻⁵³ exactly."""
    with np.errstate(over="ignore"):
        seed_word = _mix(np.array([seed], dtype=np.uint64))
        resample = _mix(seed_word + np.arange(start, stop, dtype=np.uint64) * _GOLDEN)
        x = keys.astype(np.uint64)[:, None] ^ resample[None, :]
        shifted = np.empty_like(x)
        for shift, multiplier in ((30, _MIX_1), (27, _MIX_2), (31, None)):
            np.right_shift(x, np.uint64(shift), out=shifted)
            x ^= shifted
            if multiplier is not None:
                x *= multiplier
    np.right_shift(x, np.uint64(64 - LOOKUP_BITS), out=shifted)
    weights = _LOOKUP[shifted]
    exact = _STEP_CELL[shifted]
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
    resamples = resampling.resamples
    totals = np.zeros((resamples, values.shape[1]))
    if resamples == 0 or len(keys) == 0:
        return totals
    rows = max(1, BLOCK_ELEMENTS // resamples)
    for lo in range(0, len(keys), rows):
        weights = poisson_weights(keys[lo:lo + rows], resampling.seed, 0, resamples)
        totals += weights.T.astype(np.float64) @ values[lo:lo + rows]
    return totals


def ratio_interval(numerator: np.ndarray, denominator: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the resample ratios numerator_b / denominator_b (resamples with a
    zero denominator, where the policy acts on no drawn prompt, are left out); NaNs without any."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(denominator > 0, numerator / denominator, np.nan)
    lo, hi = percentile_interval(ratios, level)
    return float(lo[0]), float(hi[0])
