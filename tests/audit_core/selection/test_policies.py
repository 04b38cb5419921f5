"""Policies, gates and per-prompt outcomes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from audit_core.selection import gates
from audit_core.selection.outcomes import prompt_outcomes
from audit_core.selection.policies import majority_vote, policy_picks, scorer_pick
from tests.support.selection_data import make_data, random_data

NAN = np.nan


def small() -> object:
    h = np.array([
        [0.0, 0.5, 1.0, NAN],
        [1.0, 0.2, 0.2, 0.6],
        [0.3, 0.3, 0.9, NAN],
        [0.5, 0.1, 0.0, 0.2],
    ])
    picks = {
        "qwen": np.array([[2, 2, 2], [0, 1, 0], [0, 1, 2], [3, -1, 3]]),
        "smol": np.array([[2, 0, 1], [0, 0, 0], [1, 1, 1], [-1, 0, 0]]),
    }
    scores = {"clip": np.array([[0.1, 0.3, 0.3, 0], [0.9, 0.1, 0.1, 0.1], [0.2, 0.1, 0.5, 0], [0.0, 0.4, 0.4, 0.4]])}
    return make_data(h, picks, scores=scores)


def test_policy_names_follow_the_contract() -> None:
    names = set(policy_picks(small()))
    expected = {
        "qwen", "qwen order 1", "qwen order 2", "qwen majority",
        "qwen agree>=2/3", "qwen agree>=2/3 rejected", "qwen agree>=3/3", "qwen agree>=3/3 rejected",
        "qwen+smol agree", "qwen+smol agree rejected",
        "smol", "smol order 1", "smol order 2", "smol majority",
        "smol agree>=2/3", "smol agree>=2/3 rejected", "smol agree>=3/3", "smol agree>=3/3 rejected",
        "smol+qwen agree", "smol+qwen agree rejected",
        "clip", "qwen+clip agree", "qwen+clip agree rejected", "smol+clip agree", "smol+clip agree rejected",
    }
    assert names == expected
    assert "random" not in names and "oracle" not in names


def test_picks_per_policy() -> None:
    p = policy_picks(small())
    assert p["qwen"].tolist() == [2, 0, 0, 3]
    assert p["qwen order 1"].tolist() == [2, 1, 1, -1]
    # majority acts only when every order parsed; tie (0,1,2) goes to canonical 0
    assert p["qwen majority"].tolist() == [2, 0, 0, -1]
    assert p["qwen agree>=2/3"].tolist() == [2, 0, -1, -1]
    assert p["qwen agree>=3/3"].tolist() == [2, -1, -1, -1]
    assert p["qwen agree>=3/3 rejected"].tolist() == [-1, 0, 0, 3]
    assert p["qwen+smol agree"].tolist() == [2, 0, -1, -1]
    assert p["qwen+smol agree rejected"].tolist() == [-1, -1, 0, 3]  # includes smol's failed call
    assert p["smol+qwen agree rejected"].tolist() == [-1, -1, 1, -1]
    # scorer: argmax with ties to the lowest canonical index
    assert p["clip"].tolist() == [1, 0, 2, 1]
    assert p["qwen+clip agree"].tolist() == [-1, 0, -1, -1]


def test_majority_vote_breaks_ties_by_canonical_order() -> None:
    winner, top = majority_vote(np.array([[3, 1, 1, 3], [2, 0, 1, 3], [1, 1, -1, 1]]), 4)
    assert winner.tolist() == [1, 0, -1]
    assert top.tolist() == [2, 1, 0]


def test_gate_coverage_is_monotone_in_the_threshold() -> None:
    data = random_data(n=200, n_orders=4, seed=5)
    picks = np.where(data.picks["a"] >= 0, data.picks["a"], -1)
    kept_before = np.ones(200, dtype=bool)
    for k in range(1, 5):
        kept = gates.agreement_gate(picks, 4, k) >= 0
        assert not (kept & ~kept_before).any()  # each stricter gate keeps a subset
        kept_before = kept
    assert (gates.agreement_gate(picks, 4, 1) >= 0).sum() == (picks >= 0).all(axis=1).sum()


def test_gate_kept_and_rejected_partition_the_judges_picks() -> None:
    data = random_data(n=120, seed=2)
    p = policy_picks(data)
    base = p["a"] >= 0
    for name in ("a agree>=2/3", "a agree>=3/3", "a+b agree", "a+clip agree"):
        kept, rej = p[name] >= 0, p[f"{name} rejected"] >= 0
        assert not (kept & rej).any()
        assert ((kept | rej) == (base | kept)).all()


def test_order_agreement_share() -> None:
    q = gates.order_agreement(np.array([[1, 1, 1], [1, 2, 1], [0, 1, 2], [0, -1, 0]]), 3)
    assert np.allclose(q[:3], [1.0, 2 / 3, 1 / 3]) and np.isnan(q[3])


def test_scorer_without_scores_abstains() -> None:
    mask = np.array([[True, True], [True, False]])
    assert scorer_pick(np.array([[NAN, NAN], [0.2, NAN]]), mask).tolist() == [-1, 0]


def test_prompt_outcomes_columns_and_values() -> None:
    data = small()
    frame = prompt_outcomes(data, "qwen")
    assert len(frame) == 4 and frame["prompt_id"].tolist() == data.prompts["prompt_id"].tolist()
    assert frame["pick_id"].tolist() == ["p000_gpt-image", "p001_SD35", "p002_SD35", "p003_imagegen3"]
    assert np.allclose(frame["regret"], [0.0, 0.0, 0.6, 0.3])
    assert frame["best"].tolist() == [True, True, False, False]
    assert frame["below_mean"].tolist() == [False, False, True, False]
    assert frame["all_parsed"].tolist() == [True, True, True, False]
    assert frame["flip"].tolist()[:3] == [False, True, True] and frame["flip"].isna().tolist()[3]
    assert frame["unanimous"].tolist()[:3] == [True, False, False]
    assert np.allclose(frame["agreement"][:3], [1, 2 / 3, 1 / 3]) and np.isnan(frame["agreement"][3])
    assert frame["parse_fail"].tolist() == [False, False, False, True]
    assert frame["judges_agree"].tolist()[:3] == [True, True, False] and pd.isna(frame["judges_agree"][3])
    assert frame["judges_disagree"].tolist()[:3] == [False, False, True]
    assert np.allclose(frame["rating_range"], [1.0, 0.8, 0.6, 0.5])
    assert np.allclose(frame["h_mean"], [0.5, 0.5, 0.5, 0.2])


def test_prompt_outcomes_with_one_judge_leaves_agreement_unknown() -> None:
    data = make_data(np.array([[0.1, 0.2, 0.3]]), {"solo": np.array([[2, -1, 2]])})
    frame = prompt_outcomes(data, "solo")
    assert frame["judges_agree"].isna().all() and frame["flip"].isna().all()
    assert frame["parse_fail"].tolist() == [True]
