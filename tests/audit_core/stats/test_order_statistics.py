"""Exact order statistics over partitions: numpy's quantile and median of the values, to the bit, from
counts that never gather the values, however the values are split."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from audit_core.stats.order_statistics import float_keys, local_pass, median, order_statistics, quantiles

values = arrays(np.float64, st.integers(0, 300),
                elements=st.floats(allow_nan=True, allow_infinity=True, width=64) | st.sampled_from([0.0, -0.0, 1.0]))


def split(values: np.ndarray, cuts: list[int]) -> list[np.ndarray]:
    """`values` cut at the (sorted, clipped) positions `cuts`."""
    return np.split(values, sorted(min(c, len(values)) for c in cuts))


@settings(max_examples=200, deadline=None)
@given(x=values, cuts=st.lists(st.integers(0, 300), max_size=6))
def test_keys_sort_as_the_values(x, cuts):
    finite = x[~np.isnan(x)]
    order = np.argsort(float_keys(finite), kind="stable")
    assert np.array_equal(finite[order], np.sort(finite))


@settings(max_examples=100, deadline=None)
@given(x=values, cuts=st.lists(st.integers(0, 300), max_size=6),
       qs=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4))
def test_quantiles_and_median_are_numpys_to_the_bit_for_any_split(x, cuts, qs):
    count_pass = local_pass(split(x, cuts))
    known = x[~np.isnan(x)]
    if len(known) == 0:
        assert np.isnan(quantiles(count_pass, qs)).all() and np.isnan(median(count_pass))
        return
    with np.errstate(invalid="ignore"):
        expected = np.quantile(known, qs)
        expected_median = np.nanmedian(x)
    assert np.array_equal(quantiles(count_pass, qs), expected, equal_nan=True)
    assert np.array_equal(median(count_pass), expected_median, equal_nan=True)
    ranks = np.unique([0, len(known) // 2, len(known) - 1])
    assert np.array_equal(order_statistics(count_pass, ranks), np.sort(known)[ranks])


def test_the_tertiles_of_a_million_ratings_ranges_take_four_passes_of_65536_counts():
    rng = np.random.default_rng(0)
    x = np.round(rng.random(1_000_000), 3)  # many ties, as ratings' ranges have
    passes = []

    def counted(prefixes, known_bits):
        passes.append(known_bits)
        return local_pass(np.array_split(x, 7))(prefixes, known_bits)

    assert np.array_equal(quantiles(counted, [1 / 3, 2 / 3]), np.quantile(x, [1 / 3, 2 / 3]))
    assert passes == [0, 16, 32, 48]  # the first pass gives n and serves every rank's first bin


def test_a_rank_outside_the_values_is_refused():
    with pytest.raises(ValueError, match="ranks must be in 0..2"):
        order_statistics(local_pass([np.array([1.0, np.nan, 2.0]), np.array([3.0])]), [3])
