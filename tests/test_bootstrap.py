"""The shared prompt-level bootstrap: fixed-n, stratified and joint resampling."""

from __future__ import annotations

import numpy as np
import pytest

from audit_core import bootstrap


def direct_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """Means over rows of one index matrix drawn 250 rows at a time, as the published study's
    bootstrap_mean does: a fresh generator per statistic."""
    rng = np.random.default_rng(seed)
    rows = [rng.integers(len(values), size=(min(250, resamples - start), len(values))) for start in range(0, resamples, 250)]
    return values[np.concatenate(rows)].mean(axis=1)


def test_count_weights_are_multinomial_counts_of_an_index_matrix() -> None:
    weights = bootstrap.count_weights(np.random.default_rng(7), 50, 13)
    assert weights.shape == (50, 13)
    assert np.allclose(weights.sum(axis=1), 13)
    # the same draws, counted by hand
    index = np.random.default_rng(7).integers(0, 13, size=(50, 13), dtype=np.int64)
    by_hand = np.stack([np.bincount(row, minlength=13) for row in index])
    assert np.array_equal(weights, by_hand)


@pytest.mark.parametrize("n", [1, 7, 300])
def test_fixed_n_means_are_a_direct_bootstrap_with_a_fresh_generator(n: int) -> None:
    values = np.random.default_rng(n).random((n, 2))
    samples = bootstrap.fixed_n_means(values, 1000, seed=20261002)
    for k in range(2):
        np.testing.assert_allclose(samples[:, k], direct_means(values[:, k], 1000, 20261002), rtol=0, atol=1e-12)
    lo, hi = bootstrap.percentile_interval(samples)
    expected = np.quantile(direct_means(values[:, 0], 1000, 20261002), [0.025, 0.975])
    assert lo[0] == pytest.approx(expected[0], abs=1e-12) and hi[0] == pytest.approx(expected[1], abs=1e-12)


def test_fixed_n_means_of_no_values_are_undefined() -> None:
    assert np.isnan(bootstrap.fixed_n_means(np.zeros((0, 3)), 20, seed=0)).all()


def test_batched_means_equal_each_vector_bootstrapped_alone() -> None:
    rng = np.random.default_rng(3)
    vectors = [rng.random(12), rng.random(12), rng.random(5), np.full(4, np.nan), rng.random(12)]
    vectors[1][[2, 7]] = np.nan  # dropped: that vector is a mean over 10 values
    batch = bootstrap.FixedNMeans()
    index = [batch.add(v, every_level=(i == 0)) for i, v in enumerate(vectors)]
    assert batch.add(vectors[0]) == len(vectors)  # an identical vector still gets its own index
    (lo, hi), (lo99, hi99) = batch.intervals(400, seed=5, levels=(0.95, 0.99))
    for i, v in zip(index, vectors):
        kept = v[~np.isnan(v)]
        if not len(kept):
            assert np.isnan(batch.means()[i]) and np.isnan(lo[i]) and np.isnan(hi[i])
            continue
        assert batch.means()[i] == pytest.approx(kept.mean(), abs=1e-15)
        expected = np.quantile(direct_means(kept, 400, 5), [0.025, 0.975, 0.005, 0.995])
        np.testing.assert_allclose([lo[i], hi[i]], expected[:2], atol=1e-12)
        if i == 0:
            np.testing.assert_allclose([lo99[i], hi99[i]], expected[2:], atol=1e-12)
        else:
            assert np.isnan(lo99[i]) and np.isnan(hi99[i])  # only asked for the first level
    assert np.isnan(batch.intervals(0, seed=5, levels=(0.95,))[0][0]).all()


def test_stratified_max_draws_each_group_in_turn_from_one_generator() -> None:
    rng = np.random.default_rng(4)
    strata = [[rng.random(6), rng.random(3)], [rng.random(6), rng.random(3)], [rng.random(4)], []]
    samples = bootstrap.stratified_max(strata, 300, seed=9)
    for j, groups in enumerate(strata):
        if not groups:
            assert np.isnan(samples[:, j]).all()
            continue
        gen = np.random.default_rng(9)
        means = [g[gen.integers(len(g), size=(300, len(g)))].mean(axis=1) for g in groups]
        np.testing.assert_allclose(samples[:, j], np.max(means, axis=0), atol=1e-12)


def test_resampled_sums_match_a_loop_over_resamples() -> None:
    rng = np.random.default_rng(1)
    values = rng.random((17, 3))
    res = bootstrap.resampled_sums(values, 40, seed=11)
    index = np.random.default_rng(11).integers(0, 17, size=(40, 17), dtype=np.int64)
    for b in range(40):
        assert np.allclose(res.totals[b], values[index[b]].sum(axis=0))


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
    lo, hi = bootstrap.percentile_interval(bootstrap.fixed_n_means(x, 2000, seed=0))
    se = x.std() / np.sqrt(len(x))
    assert lo[0] < x.mean() < hi[0]
    assert hi[0] - lo[0] == pytest.approx(2 * 1.96 * se, rel=0.15)


def test_ratio_is_nan_without_denominator() -> None:
    assert np.isnan(bootstrap.ratio(np.array([1.0, 2.0]), np.array([0.0, 4.0]))[0])
    assert bootstrap.ratio(np.array([1.0, 2.0]), np.array([0.0, 4.0]))[1] == 0.5
