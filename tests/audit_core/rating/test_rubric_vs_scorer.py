"""The rubric rescaled to [−1, 1] beside a content scorer: the rescaling, Pearson and Spearman with their
item-level bootstrap checked against scipy on the same draws, and the edge cases (abstentions, constant sides)."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from audit_core import Resampling
from audit_core.rating import rubric_vs_scorer as rvs
from audit_core.stats.bootstrap import count_weights


def test_rescaling_puts_the_scale_on_minus_one_to_one():
    assert rvs.rescaled(np.array([1, 2, 3, 4, 5]), (1, 5)).tolist() == [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert rvs.rescaled(np.array([0, 10, 7]), (0, 10)).tolist() == pytest.approx([-1.0, 1.0, 0.4])
    with pytest.raises(ValueError, match="lo < hi"):
        rvs.rescaled(np.array([1]), (3, 3))


def _frames(rng, n=40, judges=(("j", "default"),), scorers=("clip",)):
    """Rating calls with ties (integer ratings) and an abstention or two, and scores loosely following them."""
    ids = [f"c{i:03d}" for i in range(n)]
    truth = rng.normal(size=n)
    ratings, scores = [], []
    for judge, condition in judges:
        rating = np.clip(np.round(3 + 1.2 * truth + rng.normal(0, 0.7, n)), 1, 5)
        status = np.where(rng.random(n) < 0.1, "abstained", "ok")
        ratings.append(pd.DataFrame({"judge": judge, "condition": condition, "candidate_id": ids,
                                     "rating": np.where(status == "ok", rating, np.nan), "status": status}))
    for scorer in scorers:
        score = np.round(0.25 + 0.05 * truth + rng.normal(0, 0.03, n), 3)  # rounded: some ties in the scores too
        scores.append(pd.DataFrame({"scorer": scorer, "candidate_id": ids, "score": score}))
    return pd.concat(ratings, ignore_index=True), pd.concat(scores, ignore_index=True)


def test_point_estimates_and_every_resample_match_scipy_on_the_same_draws():
    rng = np.random.default_rng(3)
    ratings, scores = _frames(rng)
    result = rvs.rubric_vs_scorer(ratings, scores, (1, 5), Resampling(300, 11))
    row = result.correlations.iloc[0]
    items = result.items
    ok = ratings[ratings["status"] == "ok"]
    assert row["n"] == len(ok) == len(items) and row["unrated"] == (ratings["status"] != "ok").sum()
    assert np.allclose(items["rubric_scaled"], (items["rating"] - 3) / 2)
    s, c = items["rubric_scaled"].to_numpy(), items["score"].to_numpy()
    assert len(np.unique(s)) < len(s) and len(np.unique(c)) < len(c)  # ties on both sides
    assert row["pearson"] == pytest.approx(stats.pearsonr(s, c)[0], abs=1e-12)
    assert row["spearman"] == pytest.approx(stats.spearmanr(s, c)[0], abs=1e-12)
    # The bootstrap: rows of default_rng(seed).integers(0, n, (B, n)), each correlation recomputed by scipy.
    index = np.random.default_rng(11).integers(0, len(s), (300, len(s)))
    pearson = np.array([stats.pearsonr(s[i], c[i])[0] for i in index])
    spearman = np.array([stats.spearmanr(s[i], c[i])[0] for i in index])
    mine = rvs.correlations(s, c, count_weights(np.random.default_rng(11), 300, len(s)))
    assert np.allclose(mine[0], pearson, atol=1e-12) and np.allclose(mine[1], spearman, atol=1e-12)
    for name, values in (("pearson", pearson), ("spearman", spearman)):
        assert [row[f"{name}_lo"], row[f"{name}_hi"]] == pytest.approx(np.percentile(values, [2.5, 97.5]), abs=1e-12)
        assert row[f"{name}_lo"] <= row[name] <= row[f"{name}_hi"]


def test_the_bootstrap_is_the_same_in_blocks(monkeypatch):
    ratings, scores = _frames(np.random.default_rng(5))
    whole = rvs.rubric_vs_scorer(ratings, scores, (1, 5), Resampling(200, 2)).correlations
    monkeypatch.setattr(rvs, "CHUNK_ELEMENTS", 7 * 36)  # blocks of a few resamples
    pd.testing.assert_frame_equal(rvs.rubric_vs_scorer(ratings, scores, (1, 5), Resampling(200, 2)).correlations,
                                  whole)


def test_every_judge_condition_meets_every_scorer_on_the_items_both_cover():
    ratings, scores = _frames(np.random.default_rng(7), judges=(("a", "default"), ("a", "persona"), ("b", "default")),
                              scorers=("clip", "other"))
    scores = scores[~((scores["scorer"] == "other") & (scores["candidate_id"] == "c000"))]  # one image unscored
    result = rvs.rubric_vs_scorer(ratings, scores, (1, 5), Resampling(50))
    keys = list(result.correlations[["judge", "condition", "scorer"]].itertuples(index=False, name=None))
    assert keys == [(j, c, s) for j, c in (("a", "default"), ("a", "persona"), ("b", "default"))
                    for s in ("clip", "other")]
    for (judge, condition, scorer), n in zip(keys, result.correlations["n"]):
        rated = ratings[(ratings["judge"] == judge) & (ratings["condition"] == condition) & (ratings["status"] == "ok")]
        scored = scores[scores["scorer"] == scorer]
        assert n == rated["candidate_id"].isin(scored["candidate_id"]).sum()
    assert list(result.tables()) == ["rubric_vs_scorer", "rubric_vs_scorer_items"]


def test_undefined_when_a_side_is_constant_or_too_few_items_pair_up():
    ids = ["x", "y", "z", "w"]
    scores = pd.DataFrame({"scorer": "clip", "candidate_id": ids, "score": [0.1, 0.2, 0.3, 0.4]})
    constant = pd.DataFrame({"judge": "flat", "condition": "default", "candidate_id": ids, "rating": 4.0,
                             "status": "ok"})
    lone = pd.DataFrame({"judge": "lone", "condition": "default", "candidate_id": ids,
                         "rating": [5.0, np.nan, np.nan, np.nan],
                         "status": ["ok", "abstained", "parse_fail", "abstained"]})
    table = rvs.rubric_vs_scorer(pd.concat([constant, lone]), scores, (1, 5), Resampling(100)).correlations
    table = table.set_index("judge")
    assert table.loc["flat", "n"] == 4 and table.loc[["flat", "lone"], ["pearson", "spearman", "pearson_lo",
                                                                      "spearman_hi"]].isna().all().all()
    assert table.loc["lone", "n"] == 1 and table.loc["lone", "unrated"] == 3
    empty = rvs.rubric_vs_scorer(constant.iloc[:0], scores, (1, 5), Resampling(10))
    assert empty.correlations.empty and list(empty.items.columns) == list(rvs.ITEM_COLUMNS)


def test_resamples_that_draw_one_value_are_left_out_of_the_interval():
    s, c = np.array([-1.0, 1.0]), np.array([0.1, 0.3])
    weights = np.array([[2.0, 0.0], [1.0, 1.0], [0.0, 2.0]])
    pearson, spearman = rvs.correlations(s, c, weights)
    assert np.isnan(pearson[[0, 2]]).all() and pearson[1] == pytest.approx(1.0) and spearman[1] == pytest.approx(1.0)
