"""Prompt-level measures: extrema, ties, exact random, the G identity, abstention."""

from __future__ import annotations

import numpy as np
import pytest

from audit_core.selection import metrics

NAN = np.nan


def test_regret_extrema_best_pick_is_zero_and_worst_is_the_range() -> None:
    h = np.array([[0.2, 0.9, 0.5], [1.0, 0.0, 0.25]])
    best = np.array([1, 0])
    worst = np.array([0, 1])
    assert np.allclose(metrics.regret(h, best), 0.0)
    assert np.allclose(metrics.regret(h, worst), [0.7, 1.0])
    assert np.allclose(metrics.regret(h, worst), metrics.value_range(h))
    for pick in (np.array([p, q]) for p in range(3) for q in range(3)):
        assert (metrics.regret(h, pick) >= 0).all()


def test_random_expectation_is_exact_and_its_bmr_is_a_fraction() -> None:
    h = np.array([[0.0, 0.5, 1.0, NAN], [0.0, 0.0, 0.0, 1.0]])
    assert np.allclose(metrics.random_value(h), [0.5, 0.25])
    # below-mean share: 1 of 3, and 3 of 4 — never the indicator of E[h] < h̄ (= 0)
    assert np.allclose(metrics.below_mean_fraction(h), [1 / 3, 3 / 4])
    stats = metrics.prompt_stats(metrics.pool_measures({"alignment": h}), metrics.uniform_choice(h))
    assert np.allclose(stats["bmr"], [1 / 3, 3 / 4])
    assert np.allclose(stats["gain"], 0.0)
    assert np.allclose(stats["regret"], [0.5, 0.75])
    assert np.allclose(stats["best"], [1 / 3, 1 / 4])


def test_ties_count_as_best_and_equal_to_mean_is_not_below() -> None:
    h = np.array([[1.0, 1.0, 0.0], [0.5, 0.5, 0.5]])
    pick = np.array([1, 2])
    assert np.array_equal(metrics.is_best(h, pick), [1.0, 1.0])
    assert np.array_equal(metrics.below_mean(h, pick), [0.0, 0.0])
    assert np.allclose(metrics.best_fraction(h), [2 / 3, 1.0])
    assert np.allclose(metrics.below_mean_fraction(h), [1 / 3, 0.0])


def test_oracle_averages_other_outcomes_over_tied_best_images() -> None:
    h = np.array([[1.0, 1.0, 0.0]])
    stereotype = np.array([[0.0, 1.0, 1.0]])
    pools = metrics.pool_measures({"alignment": h, "stereotype": stereotype})
    stats = metrics.prompt_stats(pools, metrics.oracle_choice(h))
    assert stats["regret"][0] == 0.0 and stats["best"][0] == 1.0
    assert stats["stereotype"][0] == pytest.approx(0.5)
    assert stats["stereotype_delta"][0] == pytest.approx(0.5 - 2 / 3)


def test_gain_identity_holds_for_every_pick() -> None:
    rng = np.random.default_rng(3)
    h = rng.random((50, 4))
    h[rng.random((50, 4)) < 0.2] = NAN
    h[:, 0] = rng.random(50)
    for c in range(4):
        pick = np.full(50, c)
        valid = ~np.isnan(metrics.picked(h, pick))
        g = metrics.gain_over_random(h, pick)[valid]
        r = metrics.regret(h, pick)[valid]
        spread = (metrics.oracle_value(h) - metrics.random_value(h))[valid]
        assert np.allclose(g, spread - r)


def test_abstention_and_unrated_picks_are_nan_not_zero() -> None:
    h = np.array([[0.1, 0.9, NAN], [0.3, 0.4, 0.5]])
    pick = np.array([-1, 2])
    assert np.isnan(metrics.regret(h, pick)[0]) and metrics.regret(h, pick)[1] == 0.0
    assert np.isnan(metrics.below_mean(h, pick)[0])
    stats = metrics.prompt_stats(metrics.pool_measures({"alignment": h}), metrics.one_hot(np.array([2, -1]), 3))
    assert stats["acted"].tolist() == [0.0, 0.0]  # an unrated image (padding) is no action
    assert np.isnan(stats["regret"]).all()


def test_empty_input() -> None:
    h = np.zeros((0, 3))
    assert metrics.regret(h, np.zeros(0, dtype=int)).shape == (0,)
    assert metrics.below_mean_fraction(h).shape == (0,)


def test_margin_variants() -> None:
    h = np.array([[0.5, 0.48, 0.0]])
    assert metrics.is_best(h, np.array([1]), metrics.MARGIN)[0] == 1.0
    assert metrics.is_best(h, np.array([1]))[0] == 0.0
    # mean 0.3267: 0.0 is more than 0.05 below it
    assert metrics.below_mean_fraction(h, metrics.MARGIN)[0] == pytest.approx(1 / 3)


def test_wilson_interval_known_values() -> None:
    lo, hi = metrics.wilson_interval(0, 10)
    assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(0.27754, abs=1e-5)
    lo, hi = metrics.wilson_interval(5, 10)
    assert lo == pytest.approx(0.23659, abs=1e-5) and hi == pytest.approx(0.76341, abs=1e-5)
    assert np.isnan(metrics.wilson_interval(0, 0)[0])


def test_sensitive_pools_differ_across_candidates() -> None:
    values = np.array([[0.0, 0.0, NAN], [0.0, 1.0, 0.0]])
    assert metrics.sensitive(values).tolist() == [False, True]
