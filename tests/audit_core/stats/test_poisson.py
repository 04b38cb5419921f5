"""The Poisson bootstrap's weights depend only on (seed, prompt id, resample), its sums partition,
and its intervals agree with the multinomial bootstrap's where both run."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from audit_core.stats.bootstrap import FixedNMeans, percentile_intervals
from audit_core.stats.poisson import (
    AGREEMENT_STANDARD_ERRORS,
    MAX_WEIGHT,
    PoissonMeans,
    poisson_weights,
    prompt_keys,
    ratio_interval,
    weighted_sums,
)
from audit_core.stats.resampling import Resampling

SUM_TOLERANCE = 1e-12  # relative: float64 sums of the same terms in another order
SUM_TOLERANCE_FLOAT32 = 1e-5  # relative: PoissonMeans' float32 products against float64 ones


def ids(n: int, prefix: str = "p") -> list[str]:
    return [f"{prefix}{i:07d}" for i in range(n)]


def test_weights_follow_poisson_one():
    weights = poisson_weights(prompt_keys(ids(2_000)), seed=0, start=0, stop=500).ravel()
    assert weights.max() <= MAX_WEIGHT
    observed = np.bincount(weights, minlength=8)[:8]
    expected = [stats.poisson.pmf(k, 1) * weights.size for k in range(7)] + [stats.poisson.sf(6, 1) * weights.size]
    observed[7] = (weights >= 7).sum()
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    assert abs(weights.mean() - 1) < 4 / math.sqrt(weights.size)


def test_weights_are_a_function_of_seed_prompt_and_resample():
    keys = prompt_keys(ids(300))
    whole = poisson_weights(keys, seed=7, start=0, stop=200)
    # any order of prompts, any split of resamples: the same weight for the same (prompt, resample)
    order = np.random.default_rng(1).permutation(300)
    assert np.array_equal(poisson_weights(keys[order], 7, 0, 200), whole[order])
    assert np.array_equal(np.hstack([poisson_weights(keys, 7, 0, 64), poisson_weights(keys, 7, 64, 200)]), whole)
    assert not np.array_equal(poisson_weights(keys, 8, 0, 200), whole)  # another seed, other weights
    # keys come from the ids alone
    assert np.array_equal(prompt_keys(ids(300)), keys)
    assert len(set(keys.tolist())) == 300


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 400), cuts=st.lists(st.integers(0, 400), max_size=4), seed=st.integers(0, 2**31))
def test_partial_sums_of_any_partition_add_up(n, cuts, seed):
    keys = prompt_keys(ids(n))
    values = np.random.default_rng(seed).random((n, 3))
    resampling = Resampling(50, seed)
    whole = weighted_sums(keys, values, resampling)
    bounds = sorted({0, n, *(c % (n + 1) for c in cuts)})
    parts = sum(weighted_sums(keys[a:b], values[a:b], resampling) for a, b in zip(bounds, bounds[1:]))
    np.testing.assert_allclose(parts, whole, rtol=SUM_TOLERANCE, atol=SUM_TOLERANCE)


def test_blocks_do_not_change_the_sums(monkeypatch):
    keys, values = prompt_keys(ids(1_000)), np.random.default_rng(2).random((1_000, 2))
    big = weighted_sums(keys, values, Resampling(100, 3))
    monkeypatch.setattr("audit_core.stats.poisson.BLOCK_ELEMENTS", 700)  # 7 prompts per block
    np.testing.assert_allclose(weighted_sums(keys, values, Resampling(100, 3)), big, rtol=SUM_TOLERANCE)


def test_the_weights_are_those_every_earlier_audit_drew():
    """2,000 prompts × 500 resamples hash as they did before the weights were mixed in cache-sized blocks with one
    table lookup (so the Poisson path's published numbers stand), whatever the block size."""
    keys = prompt_keys(ids(2_000))
    expected = "e76f0bab7b336f93c66a9366059ac69d9c2925ee287be51905f45a176c3edd45"
    assert hashlib.sha256(poisson_weights(keys, 7, 0, 500).tobytes()).hexdigest() == expected
    assert np.array_equal(poisson_weights(keys, 7, 0, 500), np.vstack(
        [poisson_weights(keys[lo:lo + 3], 7, 0, 500) for lo in range(0, 2_000, 3)]))


def test_poisson_means_are_ratios_of_weighted_sums_over_the_defined_prompts(monkeypatch):
    """A mean's resample b is Σ w·v / Σ w over the prompts where v is defined and its point the FixedNMeans mean;
    an added ratio's is Σ w·x / Σ w·y; one pass serves all (float32 products: SUM_TOLERANCE_FLOAT32)."""
    n, resampling = 500, Resampling(200, 4)
    rng = np.random.default_rng(8)
    v = np.where(rng.random(n) < 0.3, np.nan, rng.random(n))
    x, y = rng.random(n), rng.integers(0, 3, n).astype(float)
    keys = prompt_keys(ids(n))
    monkeypatch.setattr("audit_core.stats.poisson.BLOCK_ELEMENTS", 7_000)  # blocks of 35 prompts, over the threads
    means = PoissonMeans(keys)
    cells = [means.add(v), means.add(v.copy()), means.add_ratio(x, y), means.add(np.full(n, np.nan))]
    sums = weighted_sums(keys, np.column_stack([np.nan_to_num(v), ~np.isnan(v), x, y]), resampling)
    samples = means.samples(resampling)
    for cell, (num, den) in zip(cells, ((0, 1), (0, 1), (2, 3))):
        np.testing.assert_allclose(samples[:, cell], sums[:, num] / sums[:, den], rtol=SUM_TOLERANCE_FLOAT32)
    fixed = FixedNMeans()
    fixed.add(v)
    assert means.means()[0] == means.means()[1] == fixed.means()[0]
    assert means.means()[2] == x.sum() / y.sum() and np.isnan(means.means()[3])
    (lo, hi), = means.intervals(resampling, (0.95,))
    (expected_lo, expected_hi), = percentile_intervals(samples, (0.95,))
    np.testing.assert_array_equal(lo, expected_lo)
    np.testing.assert_array_equal(hi, expected_hi)
    assert np.isnan(lo[3]) and np.isnan(hi[3])
    nothing, = means.intervals(Resampling(0), (0.95,))
    assert np.isnan(nothing[0]).all() and np.isnan(nothing[1]).all()
    with pytest.raises(ValueError, match="NaN"):
        means.add_ratio(v, y)


@pytest.mark.parametrize("kind", ["ratings", "binary", "continuous"])
def test_intervals_agree_with_the_multinomial_bootstrap(kind):
    """At n = 2,000 and 4,000 resamples both run: the 95% endpoints of a mean over the acted-on
    prompts agree within AGREEMENT_STANDARD_ERRORS standard errors (sd / √n)."""
    n, resamples = 2_000, 4_000
    rng = np.random.default_rng(11)
    values = {"ratings": rng.integers(0, 13, n) / 12, "binary": (rng.random(n) < 0.3).astype(float),
              "continuous": rng.normal(0.1, 0.3, n)}[kind]
    acted = rng.random(n) < 0.8
    v = np.where(acted, values, 0.0)
    sums = weighted_sums(prompt_keys(ids(n)), np.column_stack([v, acted]), Resampling(resamples, 5))
    poisson = ratio_interval(sums[:, 0], sums[:, 1])
    # the multinomial bootstrap over the acted-on prompts, written out with numpy
    x = values[acted]
    means = x[np.random.default_rng(5).integers(0, len(x), size=(resamples, len(x)))].mean(axis=1)
    multinomial = np.percentile(means, [2.5, 97.5])
    se = x.std(ddof=1) / math.sqrt(len(x))
    assert np.abs(np.array(poisson) - multinomial).max() < AGREEMENT_STANDARD_ERRORS * se


def test_ratio_interval_skips_resamples_without_acted_prompts():
    assert ratio_interval(np.array([1.0, 0.0, 3.0]), np.array([1.0, 0.0, 1.0]), level=0.5) == pytest.approx((1.5, 2.5))
    assert all(math.isnan(x) for x in ratio_interval(np.zeros(3), np.zeros(3)))


def test_bad_values_are_refused():
    with pytest.raises(ValueError, match="NaN"):
        weighted_sums(prompt_keys(ids(2)), np.array([1.0, np.nan]), Resampling(10))
    with pytest.raises(ValueError, match="2 keys for 3 rows"):
        weighted_sums(prompt_keys(ids(2)), np.ones(3), Resampling(10))
