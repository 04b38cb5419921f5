"""The shared prompt-level bootstrap: fixed-n, stratified and joint resampling."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from audit_core import Resampling
from audit_core.stats import bootstrap

LARGE = bootstrap.EXACT_DRAWS_UP_TO * 3  # above the threshold: resample means drawn from their distribution


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


@pytest.mark.parametrize("n", [1, 7, 300, bootstrap.EXACT_DRAWS_UP_TO])
def test_fixed_n_means_are_a_direct_bootstrap_with_a_fresh_generator(n: int) -> None:
    values = np.random.default_rng(n).random((n, 2))
    samples = bootstrap.fixed_n_means(values, Resampling(1000, 20261002))
    for k in range(2):
        np.testing.assert_allclose(samples[:, k], direct_means(values[:, k], 1000, 20261002), rtol=0, atol=1e-12)
    lo, hi = bootstrap.percentile_interval(samples)
    expected = np.quantile(direct_means(values[:, 0], 1000, 20261002), [0.025, 0.975])
    assert lo[0] == pytest.approx(expected[0], abs=1e-12) and hi[0] == pytest.approx(expected[1], abs=1e-12)


def test_fixed_n_means_of_no_values_are_undefined() -> None:
    assert np.isnan(bootstrap.fixed_n_means(np.zeros((0, 3)), Resampling(20, 0))).all()


def test_batched_means_equal_each_vector_bootstrapped_alone() -> None:
    rng = np.random.default_rng(3)
    vectors = [rng.random(12), rng.random(12), rng.random(5), np.full(4, np.nan), rng.random(12)]
    vectors[1][[2, 7]] = np.nan  # dropped: that vector is a mean over 10 values
    batch = bootstrap.FixedNMeans()
    index = [batch.add(v, every_level=(i == 0)) for i, v in enumerate(vectors)]
    assert batch.add(vectors[0]) == len(vectors)  # an identical vector still gets its own index
    (lo, hi), (lo99, hi99) = batch.intervals(Resampling(400, 5), levels=(0.95, 0.99))
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
    assert np.isnan(batch.intervals(Resampling(0, 5), levels=(0.95,))[0][0]).all()


def test_stratified_max_draws_each_group_in_turn_from_one_generator() -> None:
    rng = np.random.default_rng(4)
    strata = [[rng.random(6), rng.random(3)], [rng.random(6), rng.random(3)], [rng.random(4)], []]
    samples = bootstrap.stratified_max(strata, Resampling(300, 9))
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
    res = bootstrap.resampled_sums(values, Resampling(40, 11))
    index = np.random.default_rng(11).integers(0, 17, size=(40, 17), dtype=np.int64)
    for b in range(40):
        assert np.allclose(res.totals[b], values[index[b]].sum(axis=0))


def test_same_seed_same_intervals_other_seed_other_intervals() -> None:
    values = np.random.default_rng(0).random((60, 2))
    first = bootstrap.resampled_sums(values, Resampling(500, 3)).totals
    again = bootstrap.resampled_sums(values, Resampling(500, 3)).totals
    other = bootstrap.resampled_sums(values, Resampling(500, 4)).totals
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
    lo, hi = bootstrap.percentile_interval(bootstrap.fixed_n_means(x, Resampling(2000, 0)))
    se = x.std() / np.sqrt(len(x))
    assert lo[0] < x.mean() < hi[0]
    assert hi[0] - lo[0] == pytest.approx(2 * 1.96 * se, rel=0.15)


def test_ratio_is_nan_without_denominator() -> None:
    assert np.isnan(bootstrap.ratio(np.array([1.0, 2.0]), np.array([0.0, 4.0]))[0])
    assert bootstrap.ratio(np.array([1.0, 2.0]), np.array([0.0, 4.0]))[1] == 0.5


def test_lattice_of_finds_the_grid_through_float_noise() -> None:
    rng = np.random.default_rng(8)
    sixths = rng.integers(0, 7, 500) / 6 - 0.5
    sixths[:20] += 1e-13  # the same rating reached by other arithmetic
    lattice = bootstrap.lattice_of(sixths)
    assert lattice.origin == pytest.approx(-0.5) and lattice.step == pytest.approx(1 / 6)
    assert np.array_equal(lattice.counts, np.bincount(np.rint((sixths + 0.5) * 6).astype(int)))
    # thirds and quarters: the smallest gap (1/12) is the step
    mixed = np.array([0, 1 / 3, 1 / 4, 3 / 4, 2 / 3, 1 / 3])
    assert bootstrap.lattice_of(mixed).step == pytest.approx(1 / 12)
    assert bootstrap.lattice_of(np.full(9, 0.25)).counts.tolist() == [9]
    assert bootstrap.lattice_of(rng.random(500)) is None  # a continuous score
    assert bootstrap.lattice_of(np.round(np.array([0, 1 / 3, 1 / 7, 1 / 4]), 4)) is None  # step 1e-4: too fine
    assert bootstrap.lattice_of(np.array([0.5, np.nan])) is None


def test_lattice_sum_distribution_is_the_binomial_for_two_points() -> None:
    start, pmf = bootstrap.lattice_sum_distribution(np.array([0.7, 0.3]), 20_000)
    assert 0 < start and len(pmf) < 20_000  # a window around the mean, not the whole support
    np.testing.assert_allclose(pmf, stats.binom.pmf(start + np.arange(len(pmf)), 20_000, 0.3), rtol=0, atol=1e-13)
    assert pmf.sum() == pytest.approx(1, abs=1e-11)


def test_lattice_sum_distribution_is_the_convolution_power() -> None:
    p = np.array([0.5, 0.2, 0.0, 0.3])
    by_hand = np.array([1.0])
    for _ in range(40):
        by_hand = np.convolve(by_hand, p)
    start, pmf = bootstrap.lattice_sum_distribution(p, 40)
    assert start == 0
    np.testing.assert_allclose(pmf[:len(by_hand)], by_hand, rtol=0, atol=1e-15)
    assert np.abs(pmf[len(by_hand):]).max(initial=0) < 1e-15


def _quantile_tolerance(values: np.ndarray, q: float, resamples: int) -> float:
    """4 standard errors of the difference of two independent estimates of the q quantile of
    a mean's bootstrap distribution (normal approximation: sd / √n, density φ(z_q) / sd)."""
    sd = values.std() / np.sqrt(len(values))
    return 4 * np.sqrt(2 * q * (1 - q) / resamples) * sd / stats.norm.pdf(stats.norm.ppf(q))


@pytest.mark.parametrize("kind", ["lattice", "few distinct", "continuous"])
def test_large_n_means_follow_the_index_draw_bootstrap(kind: str) -> None:
    rng = np.random.default_rng(6)
    rounding = 0.0
    if kind == "lattice":  # ratings on sixths
        values = rng.choice(np.arange(7) / 6, LARGE, p=[0.05, 0.1, 0.1, 0.2, 0.25, 0.2, 0.1])
        assert bootstrap.lattice_of(values) is not None
    elif kind == "few distinct":  # shares of annotators rounded to 4 decimals: no small lattice
        values = np.round(rng.choice([0, 1 / 4, 1 / 3, 1 / 2, 2 / 3, 3 / 4, 1], LARGE), 4)
        assert bootstrap.lattice_of(values) is None
    else:  # a continuous score: rounded onto a fine lattice, within its bound
        values = rng.beta(1, 7, LARGE)
        rounding = bootstrap.rounded_lattice(*np.unique(values, return_counts=True), 4000).shift
    resamples = 4000
    samples = bootstrap.fixed_n_means(values[:, None], Resampling(resamples, 1))[:, 0]
    direct = direct_means(values, resamples, 1)
    assert not np.allclose(samples, direct)  # other random numbers ...
    for q in (0.025, 0.975):  # ... the same distribution
        assert abs(np.quantile(samples, q) - np.quantile(direct, q)) < _quantile_tolerance(values, q, resamples) + rounding
    sd = values.std() / np.sqrt(LARGE)
    assert abs(samples.mean() - values.mean()) < 4 * sd / np.sqrt(resamples)
    assert samples.std() == pytest.approx(sd, rel=0.1)
    assert np.array_equal(samples, bootstrap.fixed_n_means(values[:, None], Resampling(resamples, 1))[:, 0])
    assert not np.array_equal(samples, bootstrap.fixed_n_means(values[:, None], Resampling(resamples, 2))[:, 0])


def test_large_n_lattice_means_follow_the_exact_distribution() -> None:
    """Chi-square of 4000 resample sums against their exact distribution, in 20 equal-probability bins."""
    values = np.random.default_rng(2).integers(0, 13, LARGE) / 12
    sums = np.rint(bootstrap.fixed_n_means(values[:, None], Resampling(4000, 3))[:, 0] * LARGE * 12).astype(np.int64)
    lattice = bootstrap.lattice_of(values)
    start, pmf = bootstrap.lattice_sum_distribution(lattice.counts / LARGE, LARGE)
    edges = np.searchsorted(np.cumsum(pmf), np.linspace(0, 1, 21)[1:-1])
    expected = np.add.reduceat(pmf, np.concatenate([[0], edges]))
    observed = np.bincount(np.searchsorted(edges, sums - start, side="right"), minlength=20)
    assert stats.chisquare(observed, expected / expected.sum() * len(sums)).pvalue > 1e-3


@pytest.mark.parametrize("values", [
    np.random.default_rng(4).random(LARGE),  # continuous
    np.random.default_rng(4).lognormal(0, 1.5, LARGE),  # skewed, with a long tail
    np.round(np.random.default_rng(4).integers(0, 61, LARGE) / 60 - np.random.default_rng(5).integers(0, 37, LARGE) / 36, 4),
], ids=["uniform", "lognormal", "rounded differences"])
def test_rounded_lattice_moves_every_resample_mean_by_less_than_its_bound(values: np.ndarray) -> None:
    """Coupled draw for draw with the values themselves, the rounded values' resample means stay
    within the stated bound, which is within ROUNDING_ERROR standard errors."""
    resamples = 2000
    rounded = bootstrap.rounded_lattice(*np.unique(values, return_counts=True), resamples)
    lattice = rounded.lattice
    m = np.rint((values - values.min()) / lattice.step)
    on_lattice = lattice.origin + lattice.step * m
    assert np.array_equal(np.bincount(m.astype(np.int64)), lattice.counts)
    assert on_lattice.mean() == pytest.approx(values.mean(), abs=1e-12)  # centred: the residuals average 0
    index = np.random.default_rng(8).integers(0, LARGE, size=(resamples, LARGE))
    moved = np.abs(values[index].mean(axis=1) - on_lattice[index].mean(axis=1))
    se = values.std() / np.sqrt(LARGE)
    assert moved.max() < rounded.shift <= bootstrap.ROUNDING_ERROR * se
    assert moved.max() > rounded.shift / 100  # the bound is not vacuous: rounding does move the means


def test_large_n_draws_do_not_depend_on_the_other_vectors_of_that_length() -> None:
    rng = np.random.default_rng(9)
    vectors = [rng.integers(0, 7, LARGE) / 6, rng.random(LARGE), rng.integers(0, 13, LARGE) / 12]
    batch = bootstrap.FixedNMeans()
    index = [batch.add(v) for v in vectors]
    lo, hi = batch.intervals(Resampling(300, 5), levels=(0.95,))[0]
    for i, v in zip(index, vectors):
        alone = bootstrap.percentile_interval(bootstrap.fixed_n_means(v[:, None], Resampling(300, 5)))
        assert (lo[i], hi[i]) == pytest.approx((alone[0][0], alone[1][0]), abs=1e-12)


def test_stratified_max_large_groups_leave_the_small_groups_draws_alone() -> None:
    rng = np.random.default_rng(10)
    small, large = rng.random(40), rng.integers(0, 7, LARGE) / 6
    samples = bootstrap.stratified_max([[large, small]], Resampling(300, 9))[:, 0]
    gen = np.random.default_rng(9)
    small_means = small[gen.integers(40, size=(300, 40))].mean(axis=1)  # the stream, as if alone
    large_means = bootstrap.fixed_n_means(large[:, None], Resampling(300, 9))[:, 0]  # the first spawned child
    np.testing.assert_allclose(samples, np.maximum(small_means, large_means), atol=1e-12)
