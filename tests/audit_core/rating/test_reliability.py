"""Reference pools: Krippendorff's alpha against the krippendorff package, pool agreement, consensus."""

from __future__ import annotations

import json

import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from audit_core.rating import reliability
from tests.support.paths import JUDGEACTS_MAIN

MAIN_POOLS = JUDGEACTS_MAIN / "data" / "derived" / "main.jsonl"
# Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 coders x 12 units, missing values
TEXTBOOK = np.array([
    [1, 2, 3, 3, 2, 1, 4, 1, 2, np.nan, np.nan, np.nan],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, np.nan, 3],
    [np.nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, np.nan],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, np.nan],
])


def long_votes(matrix: np.ndarray, pool: str = "p", outcome: str = "rubric") -> pd.DataFrame:
    """coders x units reliability data (NaN = no vote) → the long votes frame."""
    coder, unit = np.nonzero(~np.isnan(matrix))
    return pd.DataFrame({"candidate_id": [f"u{u:03d}" for u in unit], "outcome": outcome, "pool": pool,
                         "annotator": [f"c{c}" for c in coder], "value": matrix[coder, unit]})


def test_alpha_reproduces_the_textbook_example() -> None:
    votes = long_votes(TEXTBOOK)
    units, values = votes["candidate_id"].to_numpy(), votes["value"].to_numpy()
    assert reliability.krippendorff_alpha(units, values, "interval") == pytest.approx(0.849, abs=5e-4)
    assert reliability.krippendorff_alpha(units, values, "ordinal") == pytest.approx(0.815, abs=5e-4)


@pytest.mark.parametrize("seed", range(6))
def test_alpha_matches_the_krippendorff_package_on_random_data_with_missing_votes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    coders, units = int(rng.integers(2, 7)), int(rng.integers(5, 60))
    truth = rng.integers(1, 6, units)
    matrix = np.clip(truth + rng.integers(-1, 2, (coders, units)) * (rng.random((coders, units)) < 0.5), 1, 5).astype(float)
    matrix[rng.random(matrix.shape) < 0.35] = np.nan
    if seed % 2:
        matrix = matrix / 4 - 0.25  # values that are not integers: 0, .25, ... 1
    table = reliability.reliability_table(long_votes(matrix)).iloc[0]
    for level in ("ordinal", "interval"):
        expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement=level)
        assert table[f"alpha_{level}"] == pytest.approx(expected, abs=1e-10)
    pairable = (~np.isnan(matrix)).sum(axis=0) >= 2
    assert table["n_items"] == pairable.sum()
    assert table["n_annotators"] == (~np.isnan(matrix[:, pairable])).any(axis=1).sum()


@pytest.mark.skipif(not MAIN_POOLS.is_file(), reason="shared JudgeActs files are not available")
def test_alpha_and_consensus_on_the_recorded_judgeacts_votes() -> None:
    rows, utility = [], {}
    for line in MAIN_POOLS.read_text().splitlines():
        for cand in json.loads(line)["candidates"]:
            votes = cand.get("alignment_ratings") or []
            rows += [(cand["id"], "alignment", "all", str(k), float(v)) for k, v in enumerate(votes)]
            if votes and cand.get("n_utility") == len(votes):
                utility[cand["id"]] = cand["utility"]
    votes = pd.DataFrame(rows, columns=list(reliability.VOTE_COLUMNS))
    # annotators are positions in each list: alpha needs only the values within each item
    matrix = votes.pivot(index="annotator", columns="candidate_id", values="value").to_numpy()
    table = reliability.reliability_table(votes).iloc[0]
    for level in ("ordinal", "interval"):
        assert table[f"alpha_{level}"] == pytest.approx(krippendorff.alpha(reliability_data=matrix, level_of_measurement=level), abs=1e-10)
    consensus = reliability.pool_consensus(votes, outcome="alignment").set_index("candidate_id")["value"]
    assert len(utility) > 500
    assert np.allclose(consensus[list(utility)], list(utility.values()), atol=1e-9)  # the recorded mean alignment


def test_alpha_is_one_for_perfect_agreement_and_undefined_without_variation() -> None:
    agree = np.array([[1, 2, 3, 4, 5.0], [1, 2, 3, 4, 5]])
    table = reliability.reliability_table(long_votes(agree)).iloc[0]
    assert table["alpha_ordinal"] == 1.0 and table["alpha_interval"] == 1.0
    flat = reliability.reliability_table(long_votes(np.full((3, 4), 3.0))).iloc[0]
    assert np.isnan(flat["alpha_ordinal"]) and np.isnan(flat["alpha_interval"])
    lonely = reliability.reliability_table(long_votes(np.array([[1, np.nan], [np.nan, 2.0]]))).iloc[0]
    assert lonely["n_items"] == 0 and np.isnan(lonely["alpha_interval"])  # single votes are unpairable


def test_reliability_is_reported_per_pool_and_outcome() -> None:
    rng = np.random.default_rng(1)
    votes = pd.concat([long_votes(rng.integers(1, 6, (3, 10)).astype(float), pool, outcome)
                       for pool in ("west", "east") for outcome in ("alignment", "overall")])
    table = reliability.reliability_table(votes)
    assert tuple(table.columns) == reliability.RELIABILITY_COLUMNS
    assert table[["pool", "outcome"]].values.tolist() == [["east", "alignment"], ["east", "overall"],
                                                          ["west", "alignment"], ["west", "overall"]]
    assert (table["n_items"] == 10).all() and (table["n_annotators"] == 3).all()


def test_an_annotator_voting_twice_on_an_item_is_refused() -> None:
    votes = long_votes(np.array([[1, 2.0], [2, 2]]))
    votes = pd.concat([votes, votes.iloc[[0]]])
    with pytest.raises(ValueError, match="annotator 'c0' of pool 'p' votes twice on candidate 'u000'"):
        reliability.reliability_table(votes)


def test_pool_agreement_matches_scipy_and_numpy() -> None:
    rng = np.random.default_rng(4)
    a = rng.integers(1, 6, (5, 40)).astype(float)
    b = np.clip(6 - a + rng.integers(-1, 2, a.shape), 1, 5)
    b[:, :5] = np.nan  # pool b did not rate the first five items
    votes = pd.concat([long_votes(a, "a"), long_votes(b, "b"), long_votes(a[:, :8], "c")])
    table = reliability.pool_agreement_table(votes)
    assert tuple(table.columns) == reliability.AGREEMENT_COLUMNS
    assert table[["pool_a", "pool_b", "n"]].values.tolist() == [["a", "b", 35], ["a", "c", 8], ["b", "c", 3]]
    ca, cb = a.mean(axis=0)[5:], b[:, 5:].mean(axis=0)
    row = table.iloc[0]
    assert row["pearson"] == pytest.approx(stats.pearsonr(ca, cb).statistic, abs=1e-12)
    assert row["mean_abs_diff"] == pytest.approx(np.abs(ca - cb).mean())
    assert table.iloc[1]["pearson"] == pytest.approx(1.0) and table.iloc[1]["mean_abs_diff"] == pytest.approx(0.0)


def test_pearson_is_undefined_for_a_constant_side_never_zero() -> None:
    assert np.isnan(reliability.pearson(np.array([1.0, 2, 3]), np.array([2.0, 2, 2])))
    assert np.isnan(reliability.pearson(np.array([1.0]), np.array([2.0])))
    assert reliability.pearson(np.array([1.0, 2, 3]), np.array([3.0, 2, 1])) == pytest.approx(-1.0)
