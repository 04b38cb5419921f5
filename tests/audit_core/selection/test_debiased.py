"""Debiased selectors (DESIGN §4d): Borda, calibrated, Plackett–Luce and prior-corrected picks from the
recorded calls alone, checked on hand-worked examples, simulated judges with a known slot preference,
the `choix` package, and the JudgeActs main split (4B, 8B and SmolVLM2 judges)."""

from __future__ import annotations

import dataclasses
import json
import shutil

import choix
import numpy as np
import pytest
from scipy.optimize import approx_fprime, check_grad, minimize

from audit_core import store
from audit_core.errors import InputError
from audit_core.selection import metrics
from audit_core.selection.data import NO_CALL, NO_PICK, compact_indices, index_dtype, load_selection_data
from audit_core.selection.debiased import (
    borda_name,
    borda_picks,
    borda_points,
    calibrated_name,
    calibrated_picks,
    calibration_subset,
    calls_used,
    folds,
    judge_costs,
    load_ordered_calls,
    order0_slots,
    ordered_calls,
    plackett_luce,
    plackett_luce_fit,
    plackett_luce_name,
    policy_name,
    prior_corrected_name,
    prior_corrected_picks,
    seconds_per_prompt,
    slot_prior,
)
from audit_core.selection.debiased.calls import ABSENT
from audit_core.selection.debiased.plackett_luce import (
    newton_direction,
    penalised_hessian,
    penalised_objective,
    ranking_stages,
)
from audit_core.selection.debiased.ties import best_of, tie_order
from audit_core.selection.votes import majority_vote, valid_picks
from audit_core.stats.id_hash import id_hash
from tests.support.debiased import plackett_luce_rankings, rotated_calls, stored_calls
from tests.support.judge_change import ingest_main_with_8b
from tests.support.paths import JUDGEACTS_MAIN

# ------------------------------------------------------------------ names and fixed rules


def test_policy_names_are_the_contract():
    assert [f("qwen") for f in (borda_name, calibrated_name, plackett_luce_name, prior_corrected_name)] == [
        "qwen borda", "qwen calibrated", "qwen plackett-luce", "qwen prior-corrected"]
    with pytest.raises(ValueError, match="unknown debiased method"):
        policy_name("qwen", "majority")


def test_folds_and_calibration_subset_are_fixed_functions_of_the_prompt_ids():
    ids = np.array([f"prompt-{i}" for i in range(4000)], dtype=object)
    fold = folds(ids, 5)
    # the rule, written out independently: BLAKE2b-64 of the id, personalised with the purpose
    assert fold[17] == id_hash("prompt-17", "fold") % 5
    assert np.array_equal(folds(ids[::-1], 5), fold[::-1])  # row order plays no part
    assert np.bincount(fold).min() > 0.9 * 800  # about equal folds
    subset = calibration_subset(ids, 0.2)
    assert subset[17] == (id_hash("prompt-17", "calibration") / 2**64 < 0.2)
    assert abs(subset.mean() - 0.2) < 4 * np.sqrt(0.2 * 0.8 / 4000)
    assert np.array_equal(calibration_subset(ids[:100], 0.2), subset[:100])  # the same prompts, whatever else
    assert not np.array_equal(subset, fold == 0)  # independent draws for the two purposes
    with pytest.raises(ValueError):
        calibration_subset(ids, 0.0)
    with pytest.raises(ValueError):
        folds(ids, 1)


def test_ties_go_to_a_fixed_order_of_the_candidate_ids_never_to_slot_a():
    ids = np.array(["p1", "p2"], dtype=object)
    candidates = np.array([["p1_a", "p1_b", "p1_c"], ["p2_a", "p2_b", ""]], dtype=object)
    mask = candidates != ""
    order = tie_order(ids, candidates, mask)
    keys = [[id_hash(f"{p}/{c}", "tie") for c in row if c] for p, row in zip(ids, candidates)]
    assert order[0].tolist() == np.argsort(np.argsort(keys[0])).tolist() and order[1, 2] == -1
    scores = np.array([[2.0, 2.0, 2.0], [1.0, 1.0 + 1e-12, np.nan]])
    expected = [int(np.argmin(keys[0])), int(np.argmin(keys[1]))]
    assert best_of(scores, mask, order).tolist() == expected
    assert best_of(np.array([[1.0, 3.0, 2.0], [0, 0, 0]]), np.array([[True] * 3, [False] * 3]), order).tolist() == [
        1, NO_PICK]


# ------------------------------------------------------------------ Borda


def test_borda_on_a_hand_worked_example():
    # One pool of 3 in its 3 rotations (order k shows candidate (s + k) mod 3 in slot s).
    # order 0 ranks slots A > B > C: candidates 0 > 1 > 2  -> points 2, 1, 0
    # order 1 ranks slots C > A > B: candidates 0 > 1 > 2  -> points 2, 1, 0
    # order 2 ranks slots A > C > B: candidates 2 > 1 > 0  -> points 0, 1, 2
    # totals 4, 3, 2: candidate 0, although order 2 put candidate 2 first.
    calls = rotated_calls([3], 3, slot_rankings=[[[0, 1, 2], [2, 0, 1], [0, 2, 1]]])
    assert borda_points(calls).tolist() == [[4.0, 3.0, 2.0]]
    result = borda_picks(calls)
    assert result.pick.tolist() == [0] and result.counts() == {"full": 1, "fallback": 0, "abstained": 0}


def test_borda_ties_missing_rankings_and_failed_orders_follow_the_documented_rule():
    # p0: a pure slot-A judge with every image in slot A once: 3 + 3 points each, a three-way tie.
    # p1: m = 4; order 0 ranks fully (candidates 2 > 0 > 3 > 1: 3, 2, 1, 0 points), order 1 gives a pick
    #     only (slot B = candidate 2: 3 points, the others (4-2)/2 = 1), order 2 failed ((4-1)/2 = 1.5 each).
    # p2: no order returned a pick: NO_PICK.
    calls = rotated_calls(
        [3, 4, 3], 3,
        slot_rankings=[[[0, 1, 2]] * 3, [[2, 0, 3, 1], None, None], [None] * 3],
        slot_picks=[[0, 0, 0], [2, 1, None], [None, None, NO_CALL]],
    )
    points = borda_points(calls)
    assert points[0, :3].tolist() == [3.0, 3.0, 3.0] and np.isnan(points[0, 3])
    assert points[1].tolist() == [2 + 1 + 1.5, 0 + 1 + 1.5, 3 + 3 + 1.5, 1 + 1 + 1.5]
    result = borda_picks(calls)
    tie = tie_order(calls.prompt_ids, calls.candidate_ids, calls.mask)
    assert result.pick[0] == int(np.nonzero(tie[0] == 0)[0][0]) and result.pick[1] == 2 and result.pick[2] == NO_PICK
    assert result.full.tolist() == [True, False, False] and result.fallback.tolist() == [False, True, False]
    assert result.counts() == {"full": 1, "fallback": 1, "abstained": 1}


def test_a_ranking_that_is_not_a_full_ranking_of_the_pool_counts_as_none():
    calls = rotated_calls([3, 3, 3], 1, slot_rankings=[[[0, 1, 2]], [[0, 1]], [[0, 0, 1]]])
    assert calls.full_ranking[:, 0].tolist() == [True, False, False]
    inconsistent = dataclasses.replace(calls, picks=np.array([[1], [0], [0]]))  # the pick is not rank 1
    assert not inconsistent.full_ranking[0, 0]


def test_choices_only_borda_is_the_plurality_of_the_orders():
    rng = np.random.default_rng(0)
    sizes = rng.choice([3, 4], size=300)
    picks = [[int(rng.integers(m)) for _ in range(3)] for m in sizes]
    calls = rotated_calls(list(sizes), 3, slot_picks=picks)
    votes = (calls.picks[:, :, None] == np.arange(4)).sum(axis=1)
    winners = votes == votes.max(axis=1, keepdims=True)
    pick = borda_picks(calls).pick
    assert winners[np.arange(300), pick].all()
    unique = winners.sum(axis=1) == 1
    assert np.array_equal(pick[unique], votes[unique].argmax(axis=1))


# ------------------------------------------------------------------ calibrated


def slot_counted_prior(calls, prompts):
    """The add-one slot prior written out with loops: (count + 1) / (calls + m) per pool size."""
    width = calls.width
    prior = np.zeros((width + 1, width))
    for m in range(1, width + 1):
        counts, total = np.zeros(m), 0
        for p in np.nonzero(prompts & (calls.pool_sizes == m))[0]:
            for k in range(calls.n_orders):
                if calls.picks[p, k] >= 0:
                    counts[list(calls.slot_order[p, k]).index(calls.picks[p, k])] += 1
                    total += 1
        prior[m, :m] = (counts + 1) / (total + m)
    return prior


def pure_slot_judge(n_prompts: int, seed: int):
    """A judge with a slot preference and no content signal: in each of the m rotations it ranks the
    slots by a Plackett–Luce draw on log π_m (so it picks slot s with probability π_m(s))."""
    rng = np.random.default_rng(seed)
    preference = {3: np.array([0.6, 0.3, 0.1]), 4: np.array([0.5, 0.25, 0.15, 0.1])}
    sizes = [3 + p % 2 for p in range(n_prompts)]
    rankings, picks = [], []
    for m in sizes:
        ranked = [plackett_luce_rankings(np.log(preference[m]), rng) for _ in range(m)]
        rankings.append(ranked + [None] * (4 - m))
        picks.append([r[0] for r in ranked] + [NO_CALL] * (4 - m))
    return rotated_calls(sizes, 4, slot_rankings=rankings, slot_picks=picks), preference


def test_calibrated_prior_is_cross_fitted_a_prompts_calls_never_set_its_own_prior():
    calls, _ = pure_slot_judge(400, seed=1)
    base = calibrated_picks(calls, n_folds=5)
    for f in range(5):
        assert np.allclose(base.priors[f], slot_counted_prior(calls, base.fold != f))
    # Change one prompt's calls: every order now picks the image in slot A.
    not_all_a = (calls.pick_slots > 0).any(axis=1)
    target = int(np.nonzero((base.fold == 2) & not_all_a)[0][0])
    changed = calls.picks.copy()
    m = calls.pool_sizes[target]
    changed[target, :m] = calls.slot_order[target, :m, 0]
    moved = calibrated_picks(dataclasses.replace(calls, picks=changed), n_folds=5)
    assert np.array_equal(moved.priors[2], base.priors[2])  # its own fold's prior does not move
    assert all(not np.array_equal(moved.priors[f], base.priors[f]) for f in (0, 1, 3, 4))  # the others' do
    same_fold = (base.fold == 2) & (np.arange(calls.n_prompts) != target)
    assert np.array_equal(moved.pick[same_fold], base.pick[same_fold])
    assert np.allclose(moved.scores[same_fold], base.scores[same_fold], equal_nan=True)


def test_calibrated_scores_are_inverse_prior_weighted_votes():
    calls, _ = pure_slot_judge(200, seed=2)
    result = calibrated_picks(calls, n_folds=4)
    p = 7
    prior = result.priors[result.fold[p], calls.pool_sizes[p]]
    expected = np.zeros(calls.width)
    for k in range(calls.n_orders):
        if calls.picks[p, k] >= 0:
            expected[calls.picks[p, k]] += 1 / prior[list(calls.slot_order[p, k]).index(calls.picks[p, k])]
    assert np.allclose(result.scores[p, : calls.pool_sizes[p]], expected[: calls.pool_sizes[p]])
    # the prompts of 3 have no order 3: partial, like a prompt with a failed call
    assert result.counts() == {"all": 100, "partial": 100, "abstained": 0}


def test_a_pure_slot_judge_debiased_picks_slot_a_at_the_uniform_rate():
    """With every image in every slot once, the debiased policies' first-slot share is the uniform
    expectation mean(1/m) while the judge's own order-0 share is its preference for slot A."""
    calls, preference = pure_slot_judge(2000, seed=3)
    uniform = np.mean(1 / calls.pool_sizes)
    tolerance = 4 * np.sqrt(uniform * (1 - uniform) / calls.n_prompts)  # four binomial standard errors
    order0 = order0_slots(valid_picks(calls.picks[:, 0]), calls)
    assert np.mean(order0 == 0) == pytest.approx(np.mean([preference[m][0] for m in calls.pool_sizes]), abs=0.03)
    for result in (calibrated_picks(calls), borda_picks(calls), plackett_luce_fit(calls)):
        slots = order0_slots(result.pick, calls)
        assert (slots >= 0).all()
        assert abs(np.mean(slots == 0) - uniform) < tolerance, type(result).__name__


# ------------------------------------------------------------------ Plackett–Luce


def simulated_rankings(n_prompts: int, sizes, n_orders: int, beta: np.ndarray, seed: int):
    """(calls, θ) of a Plackett–Luce judge with strengths θ ~ N(0, 1) and slot effects `beta`, order k
    the rotation by k mod m."""
    rng = np.random.default_rng(seed)
    pool = [sizes[p % len(sizes)] for p in range(n_prompts)]
    theta = rng.normal(size=(n_prompts, max(pool)))
    rankings = []
    for p, m in enumerate(pool):
        shown = [[(s + k) % m for s in range(m)] for k in range(n_orders)]
        rankings.append([plackett_luce_rankings(theta[p, shown[k]] + beta[:m], rng) for k in range(n_orders)])
    return rotated_calls(pool, n_orders, slot_rankings=rankings), theta


def test_plackett_luce_strengths_agree_with_choix():
    calls, _ = simulated_rankings(24, [3, 4], 3, np.zeros(4), seed=4)
    fit = plackett_luce_fit(calls, ridge=0.1, slot_effects=False)
    sizes = calls.pool_sizes
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    data = [[int(offsets[p] + i) for i in calls.rankings[p, k, : sizes[p]]]
            for p in range(calls.n_prompts) for k in range(calls.n_orders)]
    # choix's penalty is alpha·Σθ², ours (ridge/2)·Σθ²
    reference = choix.opt_rankings(int(sizes.sum()), data, alpha=0.05, tol=1e-12)
    ours = np.concatenate([fit.theta[p, :m] for p, m in enumerate(sizes)])
    assert np.abs(ours - reference).max() < 1e-6  # both optimisers stop within ~1e-8 of the optimum
    assert fit.converged and np.array_equal(fit.beta, np.zeros(4))
    assert np.array_equal(fit.pick, np.nanargmax(fit.theta, axis=1))


def test_plackett_luce_gradient_is_the_derivative_of_its_objective():
    calls, _ = simulated_rankings(12, [3, 4], 3, np.array([0.0, -0.5, -1.0, -0.2]), seed=5)
    stages = ranking_stages(calls)
    n_theta = calls.n_prompts * calls.width
    x = np.random.default_rng(6).normal(size=n_theta + 3)
    error = check_grad(lambda v: penalised_objective(v, stages, n_theta, 0.1)[0],
                       lambda v: penalised_objective(v, stages, n_theta, 0.1)[1], x)
    assert error < 1e-4 * np.linalg.norm(penalised_objective(x, stages, n_theta, 0.1)[1])


def dense_hessian(calls, params: np.ndarray, ridge: float) -> np.ndarray:
    """The blocks of `penalised_hessian` laid out as one dense matrix over (θ, β_B, …)."""
    n, width = calls.n_prompts, calls.width
    blocks = penalised_hessian(params, ranking_stages(calls), n, width, ridge)
    n_theta, n_slots = n * width, blocks.slots.shape[0]
    dense = np.zeros((n_theta + n_slots, n_theta + n_slots))
    for p in range(n):
        rows = slice(p * width, (p + 1) * width)
        dense[rows, rows] = blocks.strengths[p]
        dense[rows, n_theta:] = blocks.cross[p]
        dense[n_theta:, rows] = blocks.cross[p].T
    dense[n_theta:, n_theta:] = blocks.slots
    return dense


def test_plackett_luce_hessian_is_the_derivative_of_its_gradient_and_the_step_solves_it():
    calls, _ = simulated_rankings(10, [3, 4], 3, np.array([0.0, -0.5, -1.0, -0.2]), seed=5)
    stages, n_theta = ranking_stages(calls), calls.n_prompts * calls.width
    x = np.random.default_rng(9).normal(size=n_theta + 3)
    dense = dense_hessian(calls, x, 0.1)
    numeric = np.array([approx_fprime(x, lambda v: penalised_objective(v, stages, n_theta, 0.1)[1][i], 1e-6)
                        for i in range(len(x))])
    assert np.abs(dense - numeric).max() < 1e-4  # forward differences of step 1e-6: error O(1e-6)
    gradient = penalised_objective(x, stages, n_theta, 0.1)[1]
    step = newton_direction(penalised_hessian(x, stages, calls.n_prompts, calls.width, 0.1), gradient)
    assert np.allclose(step, -np.linalg.solve(dense, gradient), rtol=0, atol=1e-10)  # the Schur complement is exact


def mixed_rankings():
    """Simulated rankings (pools of 3 and 4) where some orders gave a pick without a ranking and some none,
    and one prompt has no pick at all: stages of 1 to 3 per order, prompts of unequal depth."""
    calls, _ = simulated_rankings(40, [3, 4], 3, np.array([0.0, -0.5, -1.0, -0.2]), seed=12)
    rankings, picks = calls.rankings.copy(), calls.picks.copy()
    rankings[::3, 1] = ABSENT  # a pick alone
    picks[::7, 2] = NO_PICK
    rankings[::7, 2] = ABSENT
    picks[5], rankings[5] = NO_PICK, ABSENT
    return dataclasses.replace(calls, rankings=rankings, picks=picks)


def test_plackett_luce_fitted_a_few_prompts_at_a_time_is_the_same(monkeypatch):
    """PROMPT_CHUNK bounds the memory of every pass over a large study; chunks of 3 prompts (uneven, with
    pools of 3 and 4 and prompts of unequal depth) give the same stages, Hessian blocks and fit as one
    chunk: sums of the same terms in another grouping, so rounding only."""
    calls = mixed_rankings()
    x = np.random.default_rng(3).normal(size=calls.n_prompts * calls.width + 3)
    stages = ranking_stages(calls)
    whole = penalised_hessian(x, stages, calls.n_prompts, calls.width, 0.1)
    fits = {effects: plackett_luce_fit(calls, slot_effects=effects) for effects in (True, False)}
    monkeypatch.setattr(plackett_luce, "PROMPT_CHUNK", 3)
    chunked_stages = ranking_stages(calls)
    for name in ("images", "slots", "starts"):
        assert np.array_equal(getattr(chunked_stages, name), getattr(stages, name)), name
    chunked = penalised_hessian(x, stages, calls.n_prompts, calls.width, 0.1)
    for name in ("strengths", "cross", "slots"):
        assert np.allclose(getattr(chunked, name), getattr(whole, name), rtol=0, atol=1e-12), name
    for effects, one_chunk in fits.items():
        fit = plackett_luce_fit(calls, slot_effects=effects)
        assert fit.converged and fit.counts() == one_chunk.counts() and fit.counts()["abstained"] == 1
        assert np.array_equal(fit.pick, one_chunk.pick)
        assert np.nanmax(np.abs(fit.theta - one_chunk.theta)) < 1e-10
        assert np.array_equal(np.isnan(fit.theta), np.isnan(one_chunk.theta))
        assert np.abs(fit.beta - one_chunk.beta).max() < 1e-10
        assert fit.log_likelihood == pytest.approx(one_chunk.log_likelihood, rel=1e-12)


def test_plackett_luce_with_slot_effects_agrees_with_an_independent_optimiser():
    calls, _ = simulated_rankings(30, [3, 4], 3, np.array([0.0, -0.7, -1.1, -0.4]), seed=11)
    fit = plackett_luce_fit(calls)
    stages, n_theta = ranking_stages(calls), calls.n_prompts * calls.width
    reference = minimize(penalised_objective, np.zeros(n_theta + 3), args=(stages, n_theta, 0.1), jac=True,
                         method="BFGS", options={"gtol": 1e-11, "maxiter": 10_000}).x
    theta = reference[:n_theta].reshape(calls.n_prompts, calls.width)
    assert np.nanmax(np.abs(fit.theta - np.where(np.isnan(fit.theta), np.nan, theta))) < 1e-6
    assert np.abs(fit.beta[1:] - reference[n_theta:]).max() < 1e-6 and fit.converged


def test_plackett_luce_recovers_known_slot_effects():
    beta = np.array([0.0, -0.6, -1.0, -1.3])
    # 40 orders per prompt (each rotation ten times): with a handful the ML estimate of the shared β is
    # exaggerated beside the prompts' own strengths (see the module docstring), with many it is not
    calls, theta = simulated_rankings(200, [4], 40, beta, seed=7)
    fit = plackett_luce_fit(calls)
    assert fit.converged and fit.counts() == {"full": 200, "partial": 0, "abstained": 0}
    assert np.abs(fit.beta - beta).max() < 0.1  # about three standard errors
    assert np.mean(fit.pick == theta.argmax(axis=1)) > 0.8
    few, _ = simulated_rankings(600, [4], 4, beta, seed=8)
    assert (plackett_luce_fit(few).beta[1:] < beta[1:]).all()  # the documented bias, away from 0


def test_plackett_luce_takes_a_pick_without_ranking_as_a_choice_out_of_the_pool():
    calls = rotated_calls([3, 3], 2, slot_picks=[[0, 2], [None, None]])
    stages = ranking_stages(calls)
    # prompt 0: order 0 picked candidate 0 (slot A) out of all three; order 1 picked slot C = candidate 0
    assert stages.images.tolist() == [[0, 1, 2], [0, 1, 2]]
    assert stages.slots.tolist() == [[0, 1, 2], [2, 0, 1]]
    fit = plackett_luce_fit(calls)
    assert fit.pick.tolist() == [0, NO_PICK] and fit.counts() == {"full": 0, "partial": 1, "abstained": 1}


# ------------------------------------------------------------------ prior-corrected


def test_prior_corrected_on_a_hand_worked_example():
    # Calibration: 3 prompts of 3 in 3 orders picking slots A, A, B / A, B, C / A, A, A:
    # slot counts 6, 2, 1 of 9 calls -> prior (6+1, 2+1, 1+1) / (9+3) = 7/12, 3/12, 2/12.
    # Prompt 3 (order 0 only): P = 0.5, 0.3, 0.15 over slots A, B, C (0.05 to other tokens):
    # P/π = 0.5·12/7, 0.3·12/3, 0.15·12/2 = 0.857, 1.2, 0.9 -> q = 0.291, 0.407, 0.305: slot B.
    picks = [[0, 0, 1], [0, 1, 2], [0, 0, 0], [0, None, None]]
    probs = [[None] * 3] * 3 + [[[0.5, 0.3, 0.15], None, None]]
    calls = rotated_calls([3] * 4, 3, slot_picks=picks, slot_probs=probs)
    result = prior_corrected_picks(calls, calibration=np.array([True, True, True, False]))
    assert np.allclose(result.prior[3], [7 / 12, 3 / 12, 2 / 12])
    ratio = np.array([0.5 * 12 / 7, 0.3 * 12 / 3, 0.15 * 12 / 2])
    assert np.allclose(result.corrected[3], ratio / ratio.sum())
    assert result.pick.tolist() == [NO_PICK, NO_PICK, NO_PICK, 1]  # the uncorrected argmax is slot A
    assert result.counts() == {"calibration": 3, "with_probs": 1, "without_probs": 3}


def test_prior_corrected_recovers_the_content_ranking_from_slot_biased_probabilities():
    """A judge whose label probabilities are content × a known slot prior: the order-0 argmax mostly
    returns slot A; divided by the prior estimated on the calibration subset, the best image."""
    rng = np.random.default_rng(9)
    n, m = 2000, 4
    prior = np.array([0.55, 0.2, 0.15, 0.1])
    content = np.array([rng.permutation([1.0, 0.7, 0.5, 0.35]) for _ in range(n)])
    picks, probs = [], []
    for p in range(n):
        shown = [[(s + k) % m for s in range(m)] for k in range(m)]
        belief = [prior * content[p, shown[k]] / (prior * content[p, shown[k]]).sum() for k in range(m)]
        picks.append([int(rng.choice(m, p=b)) for b in belief])
        probs.append([0.9 * b for b in belief])  # 0.1 of the mass went to tokens that spell no label
    calls = rotated_calls([m] * n, m, slot_picks=picks, slot_probs=probs)
    result = prior_corrected_picks(calls, fraction=0.2)
    assert np.array_equal(result.calibration, calibration_subset(calls.prompt_ids, 0.2))
    assert np.abs(result.prior[m] - prior).max() < 0.03
    best = content.argmax(axis=1)
    uncorrected = calls.slot_order[np.arange(n), 0, np.argmax(calls.label_probs[:, 0], axis=1)]
    assert np.mean(uncorrected == best) < 0.4 and np.mean(order0_slots(uncorrected, calls) == 0) > 0.85
    assert np.mean(result.pick == best) > 0.99
    assert abs(np.mean(order0_slots(result.pick, calls) == 0) - 1 / m) < 4 * np.sqrt(3 / 16 / n)


# ------------------------------------------------------------------ costs


def test_costs_count_calls_and_sum_the_seconds_of_the_calls_each_policy_reads():
    seconds = np.array([[1.0, 2.0, 3.0], [1.5, np.nan, 2.5], [2.0, 2.0, 2.0], [1.0, 1.0, 1.0]])
    calls = rotated_calls([3] * 4, 3, slot_picks=[[0, 0, 0]] * 4, seconds=seconds, judge="j")
    calibration = np.array([True, False, False, False])
    costs = judge_costs(calls, calibration).set_index("policy")
    assert costs["calls_per_prompt"].to_dict() == {
        "j": 1.0, "j majority": 3.0, "j borda": 3.0, "j calibrated": 3.0, "j plackett-luce": 3.0,
        "j prior-corrected": 1 + 2 * 0.25}
    assert costs.loc["j", "seconds_per_prompt"] == pytest.approx((1.0 + 1.5 + 2.0 + 1.0) / 4)
    assert costs.loc["j borda", "seconds_per_prompt"] == pytest.approx((6.0 + 6.0 + 3.0) / 3)  # prompt 1 untimed
    assert costs.loc["j borda", "timed_prompts"] == 3
    assert costs.loc["j prior-corrected", "seconds_per_prompt"] == pytest.approx((6.0 + 1.5 + 2.0 + 1.0) / 4)
    assert calls_used(calls, "prior-corrected", calibration).sum() == 3 + 3
    assert seconds_per_prompt(np.full((2, 3), np.nan), np.ones((2, 3), bool))[1] == 0


# ------------------------------------------------------------------ the JudgeActs main split


@pytest.fixture(scope="module")
def judgeacts_db(tmp_path_factory):
    """The JudgeActs main split with the 4B (`qwen`), 8B (`qwen8b`) and SmolVLM2 (`smol`) runs."""
    if not JUDGEACTS_MAIN.is_dir():
        pytest.skip(f"{JUDGEACTS_MAIN} is not available")
    return ingest_main_with_8b(tmp_path_factory.mktemp("debiased") / "ja.duckdb")


def debiased_picks(db) -> tuple[object, dict[str, object], dict[str, dict[str, object]]]:
    """(SelectionData, judge -> OrderedCalls, judge -> method -> its result) of the store at `db`."""
    data, ordered = stored_calls(db, "main")
    results = {judge: {"borda": borda_picks(calls), "calibrated": calibrated_picks(calls),
                       "plackett-luce": plackett_luce_fit(calls), "prior-corrected": prior_corrected_picks(calls)}
               for judge, calls in ordered.items()}
    return data, ordered, results


@pytest.fixture(scope="module")
def judgeacts_picks(judgeacts_db):
    return debiased_picks(judgeacts_db)


def test_the_loaded_calls_are_compact(judgeacts_picks):
    """Canonical indices as int8; a judge without label probabilities (the JudgeActs runs recorded none)
    holds one NaN seen P·K·M times, not an array of them."""
    data, ordered, _ = judgeacts_picks
    for judge, calls in ordered.items():
        assert data.picks[judge].dtype == data.slots[judge].dtype == np.int8
        assert calls.slot_order.dtype == calls.rankings.dtype == np.int8
        assert not calls.has_label_probs.any() and calls.label_probs.strides == (0, 0, 0)
        assert calls.label_probs.shape == calls.slot_order.shape and not calls.label_probs.flags.writeable


def test_compact_indices_take_the_smallest_type_of_their_range():
    assert compact_indices(np.array([NO_CALL, NO_PICK, 0, 3])).dtype == np.int8
    assert compact_indices(np.array([], dtype=np.int64)).dtype == np.int8
    assert compact_indices(np.array([-1, 127])).dtype == np.int8
    wide = compact_indices(np.array([-1, 128]))
    assert wide.dtype == np.int64 and wide.tolist() == [-1, 128]
    assert index_dtype(4) == np.int8 and index_dtype(200) == np.int64
    with pytest.raises(TypeError, match="integer"):
        compact_indices(np.array([0.0, 1.0]))


def test_shuffled_ratings_give_the_same_picks(judgeacts_db, judgeacts_picks, tmp_path):
    shuffled = tmp_path / "shuffled.duckdb"
    shutil.copy(judgeacts_db, shuffled)
    con = store.connect(shuffled)
    ratings = con.execute("SELECT * FROM ratings").df()
    rng = np.random.default_rng(10)
    ratings["value"] = ratings.groupby(["outcome", "pool"])["value"].transform(lambda v: rng.permutation(v.to_numpy()))
    con.execute("DELETE FROM ratings")
    store.insert_frame(con, "ratings", ratings)
    con.close()
    (data, _, results), (moved_data, _, moved) = judgeacts_picks, debiased_picks(shuffled)
    assert not np.allclose(data.utility, moved_data.utility, equal_nan=True)  # the ratings did move
    for judge in results:
        for method, result in results[judge].items():
            assert np.array_equal(result.pick, moved[judge][method].pick), (judge, method)


def test_the_policies_run_on_the_recorded_calls_of_the_4b_8b_and_smolvlm2_judges(judgeacts_picks):
    data, ordered, results = judgeacts_picks
    assert sorted(ordered) == ["qwen", "qwen8b", "smol"]
    h = data.utility
    gains = {}
    for judge, calls in ordered.items():
        assert np.array_equal(calls.pick_slots, data.slots[judge])  # the slot orders as recorded
        borda, fit, corrected = (results[judge][m] for m in ("borda", "plackett-luce", "prior-corrected"))
        assert fit.converged
        assert corrected.counts()["without_probs"] == 300  # JudgeActs recorded no label probabilities
        order0 = valid_picks(calls.picks[:, 0])
        majority = majority_vote(valid_picks(calls.picks), calls.width)[0]
        picks = {"order0": order0, "majority": majority,
                 **{m: results[judge][m].pick for m in ("borda", "calibrated", "plackett-luce")}}
        gains[judge] = {name: float(np.nanmean(metrics.gain_over_random(h, pick))) for name, pick in picks.items()}
        if judge == "smol":  # answers with a choice only: Borda is the plurality, Plackett-Luce a choice model
            assert borda.counts() == {"full": 0, "fallback": 300, "abstained": 0}
            assert fit.counts() == {"full": 0, "partial": 300, "abstained": 0}
            assert fit.beta[1] > 0  # it prefers slot B
        else:  # the Qwen judges rank every image in every call
            assert borda.counts() == {"full": 300, "fallback": 0, "abstained": 0}
            assert calls.full_ranking.all() and (fit.beta[1:] < 0).all()  # they prefer slot A
        costs = judge_costs(calls, corrected.calibration).set_index("policy")
        assert costs.loc[f"{judge} borda", "calls_per_prompt"] == 3 and (costs["timed_prompts"] == 300).all()
    # the 4B's slot-A preference costs it: every debiased policy gains more than its order-0 pick and its majority
    assert all(gains["qwen"][m] > gains["qwen"]["majority"] > gains["qwen"]["order0"]
               for m in ("borda", "calibrated", "plackett-luce"))
    assert gains["qwen"]["order0"] == pytest.approx(0.039, abs=5e-4)


def test_recorded_label_probabilities_are_read_by_slot_and_bad_ones_refused(judgeacts_db, tmp_path):
    db = tmp_path / "probs.duckdb"
    shutil.copy(judgeacts_db, db)
    con = store.connect(db)
    first = con.execute("SELECT prompt_id FROM candidates GROUP BY 1 HAVING count(*) = 3 ORDER BY 1").fetchone()[0]
    con.execute("UPDATE calls SET label_probs = ? WHERE prompt_id = ? AND order_index = 0 AND run_id IN "
                "(SELECT run_id FROM runs WHERE judge = 'qwen')", [json.dumps({"A": 0.2, "C": 0.7}), first])
    data = load_selection_data(con, "main")
    calls = load_ordered_calls(con, data, ["qwen"])["qwen"]
    row = int(np.nonzero(data.prompts["prompt_id"] == first)[0][0])
    assert calls.label_probs[row, 0, :3].tolist() == [0.2, 0.0, 0.7] and np.isnan(calls.label_probs[row, 0, 3])
    assert calls.has_label_probs.sum() == 1
    assert prior_corrected_picks(calls).pick[row] == calls.slot_order[row, 0, 2]
    con.execute("UPDATE calls SET label_probs = '{\"A\": 2}' WHERE label_probs IS NOT NULL")
    with pytest.raises(InputError, match=f"label_probs.*prompt '{first}', order 0"):
        load_ordered_calls(con, data, ["qwen"])
    con.close()


def test_slot_prior_counts_only_the_chosen_prompts_calls():
    calls = rotated_calls([3, 3, 4], 2, slot_picks=[[0, 1], [2, None], [3, 3]])
    prior = slot_prior(calls, np.array([True, True, False]))
    assert np.allclose(prior[3], [2 / 6, 2 / 6, 2 / 6, 0]) and np.allclose(prior[4], [0.25] * 4)
    assert np.allclose(prior, slot_counted_prior(calls, np.array([True, True, False])))


def test_the_loader_maps_ranked_labels_through_the_recorded_slot_order(judgeacts_db, tmp_path):
    db = tmp_path / "rankings.duckdb"
    shutil.copy(judgeacts_db, db)
    con = store.connect(db)
    try:
        first = con.execute("SELECT prompt_id FROM candidates GROUP BY 1 HAVING count(*) = 3 ORDER BY 1").fetchone()[0]
        judge_calls = "prompt_id = ? AND run_id IN (SELECT run_id FROM runs WHERE judge = 'qwen')"
        recorded = con.execute(f"SELECT order_index, slot_candidate_ids, ranking FROM calls WHERE {judge_calls} "
                               "ORDER BY 1", [first]).fetchall()
        con.execute(f"UPDATE calls SET ranking = ['A', 'B', 'E'] WHERE {judge_calls} AND order_index = 1", [first])
        data = load_selection_data(con, "main")
        calls = load_ordered_calls(con, data, ["qwen"])["qwen"]
    finally:
        con.close()
    row = int(np.nonzero(data.prompts["prompt_id"] == first)[0][0])
    ids = list(data.candidate_ids[row, :3])
    order, slots, ranking = recorded[0]
    assert calls.rankings[row, 0, :3].tolist() == [ids.index(slots["ABC".index(label)]) for label in ranking]
    assert calls.rankings[row, 1].tolist() == [-1] * 4  # a label beyond the pool: no ranking
    assert calls.full_ranking[row].tolist() == [True, False, True]


def test_the_store_loader_makes_the_same_arrays_as_the_frame_of_calls(judgeacts_db, tmp_path):
    # load_ordered_calls reads slots and rankings as integer columns in DuckDB; ordered_calls reads the
    # frame of id lists `store.load_calls` gives: every array equal, odd records included
    db = tmp_path / "odd.duckdb"
    shutil.copy(judgeacts_db, db)
    con = store.connect(db)
    try:
        qwen = "run_id IN (SELECT run_id FROM runs WHERE judge = 'qwen')"
        first, second, third = [r[0] for r in con.execute(
            "SELECT prompt_id FROM candidates GROUP BY 1 HAVING count(*) = 3 ORDER BY 1 LIMIT 3").fetchall()]
        con.execute(f"UPDATE calls SET label_probs = ? WHERE prompt_id = ? AND order_index = 0 AND {qwen}",
                    [json.dumps({"A": 0.5, "B": 0.25}), first])
        con.execute(f"UPDATE calls SET ranking = ['B', 'AB', 'A'] WHERE prompt_id = ? AND order_index = 1 AND {qwen}",
                    [first])  # a label that names no slot: no ranking
        con.execute(f"UPDATE calls SET ranking = NULL, seconds = NULL WHERE prompt_id = ? AND {qwen}", [second])
        con.execute(f"UPDATE calls SET ranking = [] WHERE prompt_id = ? AND order_index = 2 AND {qwen}", [third])
        data = load_selection_data(con, "main")
        loaded = load_ordered_calls(con, data)
        framed = ordered_calls(data, store.load_calls(con, "main", ok_outputs=False))
    finally:
        con.close()
    assert list(loaded) == list(framed) == data.judges and "qwen" in loaded
    for judge, calls in loaded.items():
        for field in ("slot_order", "rankings", "label_probs", "seconds", "picks", "tie_ranks"):
            got, expected = getattr(calls, field), getattr(framed[judge], field)
            assert got.dtype == expected.dtype and np.array_equal(got, expected, equal_nan=got.dtype.kind == "f"), field
    assert loaded["qwen"].has_label_probs.sum() == 1 and np.isnan(loaded["qwen"].seconds).sum() == 3
    assert (loaded["qwen"].rankings[:, :, 0] >= 0).sum() == 900 - 1 - 3 - 1
