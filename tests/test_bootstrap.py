"""The shared prompt-level bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

from audit_core import bootstrap


def test_count_weights_are_multinomial_counts_of_an_index_matrix() -> None:
    weights = bootstrap.count_weights(np.random.default_rng(7), 50, 13)
    assert weights.shape == (50, 13)
    assert np.allclose(weights.sum(axis=1), 13)
    # the same draws, counted by hand
    index = np.random.default_rng(7).integers(0, 13, size=(50, 13), dtype=np.int64)
    by_hand = np.stack([np.bincount(row, minlength=13) for row in index])
    assert np.array_equal(weights, by_hand)


def test_resampled_sums_match_a_loop_over_resamples() -> None:
    rng = np.random.default_rng(1)
    values = rng.random((17, 3))
    res = bootstrap.resampled_sums(values, 40, seed=11, blocks=[(0, 5), (5, 17)], block_columns=np.array([2]))
    index = np.random.default_rng(11).integers(0, 17, size=(40, 17), dtype=np.int64)
    for b in range(40):
        assert np.allclose(res.totals[b], values[index[b]].sum(axis=0))
        drawn = index[b]
        assert np.isclose(res.by_block[b, 0, 0], values[drawn[drawn < 5], 2].sum())
        assert np.isclose(res.by_block[b, 1, 0], values[drawn[drawn >= 5], 2].sum())


def test_same_seed_same_intervals_other_seed_other_intervals() -> None:
    values = np.random.default_rng(0).random((60, 2))
    first = bootstrap.resampled_sums(values, 500, seed=3).totals
    again = bootstrap.resampled_sums(values, 500, seed=3).totals
    other = bootstrap.resampled_sums(values, 500, seed=4).totals
    assert np.array_equal(first, again)
    assert not np.array_equal(first, other)


def test_percentile_interval_matches_numpy_and_ignores_undefined_resamples() -> None:
    samples = np.random.default_rng(2).normal(size=(999, 4))
    samples[:10, 1] = np.nan
    samples[:, 3] = np.nan
    lo, hi = bootstrap.percentile_interval(samples, 0.95)
    expected = np.nanpercentile(samples[:, :3], [2.5, 97.5], axis=0)
    assert np.allclose(lo[:3], expected[0]) and np.allclose(hi[:3], expected[1])
    assert np.isnan(lo[3]) and np.isnan(hi[3])
    (lo95, hi95), (lo99, hi99) = bootstrap.percentile_intervals(samples[:, :1], (0.95, 0.99))
    assert lo99[0] < lo95[0] < hi95[0] < hi99[0]


def test_interval_of_a_mean_covers_it() -> None:
    x = np.random.default_rng(5).normal(1.0, 1.0, size=(400, 1))
    ones = np.ones_like(x)
    res = bootstrap.resampled_sums(np.hstack([x, ones]), 2000, seed=0)
    lo, hi = bootstrap.percentile_interval(res.totals[:, 0] / res.totals[:, 1])
    se = x.std() / np.sqrt(len(x))
    assert lo[0] < x.mean() < hi[0]
    assert hi[0] - lo[0] == pytest.approx(2 * 1.96 * se, rel=0.15)


def test_ratio_is_nan_without_denominator() -> None:
    assert np.isnan(bootstrap.ratio(np.array([1.0, 2.0]), np.array([0.0, 4.0]))[0])
    assert bootstrap.ratio(np.array([1.0, 2.0]), np.array([0.0, 4.0]))[1] == 0.5
