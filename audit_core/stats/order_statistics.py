"""Exact order statistics of values held in partitions, found without gathering the values.

A float64's bits, with the sign bit set for a non-negative value and every bit flipped for a negative
one, read as an unsigned integer, order the values as numbers (`float_keys`; −0 sorts before +0, which
compare equal). The value of rank k (0-based, NaN left out) is found by its key, KEY_BITS bits a pass:
in each pass every partition counts its values whose key begins with the bits known so far, by the
next KEY_BITS bits (`prefix_counts`); the counts, added over the partitions, place rank k in one bin,
which extends what is known. 64 / KEY_BITS passes give the key, hence the value, exactly; a pass moves
2^KEY_BITS counts per rank however many values there are.

`quantiles` and `median` turn order statistics into numpy's `quantile` (linear interpolation) and
`median`, to the bit: the virtual index h = (n − 1)·q, its order statistics x_⌊h⌋ and x_⌊h⌋+1 and
numpy's interpolation between them with weight h − ⌊h⌋.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

KEY_BITS = 16
BINS = 1 << KEY_BITS
PASSES = 64 // KEY_BITS
_SIGN = np.uint64(1 << 63)

# The counts of one pass added over every partition: (prefixes (R,) uint64, known bits) -> (R, BINS) counts.
CountPass = Callable[[np.ndarray, int], np.ndarray]


def float_keys(values: np.ndarray) -> np.ndarray:
    """(n,) uint64 keys in the order of the float64 `values` (NaN must be left out first)."""
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)
    return np.where(bits & _SIGN, ~bits, bits | _SIGN)


def _values(keys: np.ndarray) -> np.ndarray:
    """The float64 values of `float_keys`' keys."""
    keys = np.asarray(keys, dtype=np.uint64)
    return np.where(keys & _SIGN, keys & ~_SIGN, ~keys).view(np.float64)


def prefix_counts(values: np.ndarray, prefixes: np.ndarray, known_bits: int) -> np.ndarray:
    """(R, BINS) for each prefix r, the count of the non-NaN `values` whose key's top `known_bits` bits are
    prefixes[r], by the key's next KEY_BITS bits: one partition's part of a pass."""
    keys = float_keys(values[~np.isnan(values)])
    below = np.uint64(64 - known_bits - KEY_BITS)
    bins = ((keys >> below) & np.uint64(BINS - 1)).astype(np.int64)
    counts = np.zeros((len(prefixes), BINS), dtype=np.int64)
    for r, prefix in enumerate(np.asarray(prefixes, dtype=np.uint64)):
        inside = bins if known_bits == 0 else bins[(keys >> np.uint64(64 - known_bits)) == prefix]
        counts[r] = np.bincount(inside, minlength=BINS)
    return counts


def local_pass(partitions: Sequence[np.ndarray]) -> CountPass:
    """A CountPass over value arrays held here: each one's `prefix_counts`, added."""
    return lambda prefixes, known_bits: sum(prefix_counts(values, prefixes, known_bits) for values in partitions)


def order_statistics(count_pass: CountPass, ranks: Sequence[int], first: np.ndarray | None = None) -> np.ndarray:
    """(len(ranks),) float64 the values of those ranks (0-based, among the non-NaN values); `first` is the
    first pass's (BINS,) counts when the caller made it already (`count_pass([0], 0)[0]`)."""
    ranks = np.asarray(ranks, dtype=np.int64)
    counts = np.tile(count_pass(np.zeros(1, np.uint64), 0)[0] if first is None else first, (len(ranks), 1))
    total = int(counts[0].sum()) if len(ranks) else 0
    if len(ranks) and (ranks.min() < 0 or ranks.max() >= total):
        raise ValueError(f"ranks must be in 0..{total - 1} (the non-NaN values' count), got {ranks.tolist()}")
    prefixes, remaining = np.zeros(len(ranks), np.uint64), ranks.copy()
    for depth in range(PASSES):
        if depth:
            counts = count_pass(prefixes, depth * KEY_BITS)
        below = np.cumsum(counts, axis=1)
        bins = (below <= remaining[:, None]).sum(axis=1)  # the first bin whose cumulative count passes the rank
        remaining -= np.take_along_axis(below, bins[:, None], axis=1)[:, 0] - counts[np.arange(len(ranks)), bins]
        prefixes = (prefixes << np.uint64(KEY_BITS)) | bins.astype(np.uint64)
    return _values(prefixes)


def quantiles(count_pass: CountPass, qs: Sequence[float]) -> np.ndarray:
    """(len(qs),) numpy's `quantile(values, qs)` (linear) of the non-NaN values of every partition; NaN each
    when there are none."""
    qs = np.asarray(qs, dtype=np.float64)
    first = count_pass(np.zeros(1, np.uint64), 0)[0]
    n = int(first.sum())
    if n == 0:
        return np.full(len(qs), np.nan)
    virtual = (n - 1) * qs
    lower = np.floor(virtual)
    upper = np.minimum(lower + 1, n - 1)
    found = order_statistics(count_pass, np.concatenate([lower, upper]).astype(np.int64), first)
    a, b = found[:len(qs)], found[len(qs):]
    weight = virtual - lower
    with np.errstate(invalid="ignore"):  # between infinities, NaN as numpy gives
        difference = b - a
        return np.where(weight >= 0.5, b - difference * (1 - weight), a + difference * weight)


def median(count_pass: CountPass) -> float:
    """numpy's `median` (the mean of the middle two of an even count) of the non-NaN values of every
    partition (`nanmedian`); NaN when there are none."""
    first = count_pass(np.zeros(1, np.uint64), 0)[0]
    n = int(first.sum())
    if n == 0:
        return float("nan")
    if n % 2:
        return float(order_statistics(count_pass, [n // 2], first)[0])
    return float(np.mean(order_statistics(count_pass, [n // 2 - 1, n // 2], first)))
