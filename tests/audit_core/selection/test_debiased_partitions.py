"""The slot priors of a study held in partitions: each partition's counts, added, give the whole study's
priors to the bit, and each partition's calibrated and prior-corrected picks under those priors are the
whole study's picks of its prompts (DESIGN §4d; what a partitioned audit's workers compute)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from audit_core.selection.data import NO_CALL
from audit_core.selection.debiased import calibrated_picks, calibration_subset, folds, prior_corrected_picks
from audit_core.selection.debiased.slot_prior import (
    cross_fitted_priors,
    fold_counts,
    out_of_fold_priors,
    prior_from_counts,
    slot_counts,
    slot_prior,
)
from tests.support.debiased import rotated_calls


def random_calls(n_prompts: int, seed: int):
    """A judge's calls on pools of 2–4 images in 3 rotations: random picks, failed calls (no pick), missing
    calls and label probabilities on some calls."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 5, size=n_prompts)
    picks, probs = [], []
    for m in sizes:
        picks.append([int(rng.integers(m)) if u < 0.8 else (None if u < 0.9 else NO_CALL)
                      for u in rng.random(3)])
        probs.append([list(rng.dirichlet(np.ones(m))) if rng.random() < 0.7 else None for _ in range(3)])
    return rotated_calls(sizes.tolist(), 3, slot_picks=picks, slot_probs=probs)


def split(n: int, bounds: list[int]) -> list[slice]:
    """Consecutive slices of range(n) cut at the sorted `bounds`."""
    edges = [0, *sorted(set(bounds)), n]
    return [slice(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]


cuts = st.lists(st.integers(1, 119), max_size=6)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), bounds=cuts)
def test_partitions_counts_add_up_to_the_whole_studys_priors_exactly(seed, bounds):
    calls = random_calls(120, seed)
    parts = split(calls.n_prompts, bounds)
    fold = folds(calls.prompt_ids)
    counts = sum(fold_counts(calls.rows(rows), fold[rows], 5) for rows in parts)
    assert np.array_equal(out_of_fold_priors(counts), cross_fitted_priors(calls, fold, 5))
    subset = calibration_subset(calls.prompt_ids)
    calibration = sum(slot_counts(calls.rows(rows), subset[rows]) for rows in parts)
    assert np.array_equal(prior_from_counts(calibration), slot_prior(calls, subset))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**16), bounds=cuts)
def test_each_partitions_picks_under_the_studys_priors_are_the_whole_studys(seed, bounds):
    calls = random_calls(120, seed)
    whole_calibrated, whole_corrected = calibrated_picks(calls), prior_corrected_picks(calls)
    for rows in split(calls.n_prompts, bounds):
        part = calls.rows(rows)
        calibrated = calibrated_picks(part, priors=whole_calibrated.priors)
        corrected = prior_corrected_picks(part, prior=whole_corrected.prior)
        assert np.array_equal(calibrated.pick, whole_calibrated.pick[rows])
        assert np.array_equal(calibrated.scores, whole_calibrated.scores[rows], equal_nan=True)
        assert np.array_equal(corrected.pick, whole_corrected.pick[rows])
        assert np.array_equal(corrected.corrected, whole_corrected.corrected[rows], equal_nan=True)


def test_a_partition_with_smaller_pools_counts_into_the_studys_width():
    calls = rotated_calls([4, 3, 3], 2, slot_picks=[[0, 1], [2, 2], [1, None]])
    narrow = rotated_calls([3, 3], 2, slot_picks=[[2, 2], [1, None]])  # the last two prompts, loaded alone
    wide = fold_counts(narrow, np.zeros(2, dtype=np.int64), 1, width=4)
    assert wide.shape == (1, 5, 4)
    assert np.array_equal(wide[0], slot_counts(calls, np.array([False, True, True])))
