"""The judge change above poisson.POISSON_ABOVE prompts (`judge_change.poisson_path`), run here on 3,000 prompts
with the threshold set to 0 as tests/audit_core/selection/test_audit_poisson.py does for the audit: the same rows,
counts and point estimates as the fixed-n path, intervals that agree with its, and a result that does not depend
on the order of the prompts.

Tolerances: point estimates are computed by the same code on both paths, so they are equal exactly. Interval
endpoints agree with the fixed-n path's within AGREEMENT standard errors of the mean at 2,000 resamples, as the
audit's do (each endpoint's Monte-Carlo noise is ~0.06 SE; the Poisson bootstrap lets a mean's n vary); the
largest gap seen on this study is 0.25 SE. In another prompt order the weights are the same and only the
float32 products are summed in another order: a relative ~1e-6 in a sum, so SUM_TOLERANCE in an endpoint.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from audit_core.selection.judge_change import compare_judges, comparison, gate_verdict, pair_judges
from audit_core.selection.partials import SUM_TOLERANCE
from audit_core.stats.resampling import Resampling
from tests.support.judge_change import in_file_order
from tests.support.selection_data import random_data

AGREEMENT = 0.35  # standard errors of the mean (fixed-n interval width / 3.92)
POINTS = ["measure", "policy", "baseline", "candidate", "difference", "n"]
GATE_POINTS = ["gate", "judge", "role", "kept_n", "rejected_n", "coverage", "kept_gain", "rejected_gain",
               "kept_minus_rejected"]
GATE_INTERVALS = ("kept_gain", "rejected_gain", "kept_minus_rejected")


@pytest.fixture(scope="module")
def data():
    return random_data(3_000, judges=("a", "b", "c"))


def poisson_change(monkeypatch, data, resampling: Resampling, baseline: str = "a", candidate: str = "b"):
    monkeypatch.setattr(comparison, "POISSON_ABOVE", 0)  # these 3,000 prompts are above it
    return compare_judges(pair_judges(data, baseline, candidate), resampling=resampling)


def assert_within(fixed: pd.DataFrame, poisson: pd.DataFrame, stat: str) -> None:
    """Both endpoints of `stat` within AGREEMENT standard errors of the fixed-n path's, where that is defined."""
    se = (fixed[f"{stat}_hi"] - fixed[f"{stat}_lo"]) / (2 * 1.96)
    for end in ("lo", "hi"):
        gap = (fixed[f"{stat}_{end}"] - poisson[f"{stat}_{end}"]).abs()
        assert (gap <= AGREEMENT * se + 1e-12)[fixed[f"{stat}_{end}"].notna()].all(), (stat, end, (gap / se).max())
        assert (fixed[f"{stat}_{end}"].isna() == poisson[f"{stat}_{end}"].isna()).all(), (stat, end)


def test_point_estimates_equal_and_intervals_agree_with_the_fixed_n_path(data, monkeypatch) -> None:
    resampling = Resampling(2_000, 5)
    fixed = compare_judges(pair_judges(data, "a", "b"), resampling=resampling)
    poisson = poisson_change(monkeypatch, data, resampling)

    pd.testing.assert_frame_equal(poisson.compare[POINTS], fixed.compare[POINTS], check_exact=True)
    assert_within(fixed.compare, poisson.compare, "difference")
    pd.testing.assert_frame_equal(poisson.gates[GATE_POINTS], fixed.gates[GATE_POINTS], check_exact=True)
    for stat in GATE_INTERVALS:
        assert_within(fixed.gates, poisson.gates, stat)
    assert len(poisson.gates) == 8  # orders>=2/3, orders>=3/3, scorer(clip), judge(c), each on both judges
    for row in poisson.gates.to_dict("records"):  # each verdict follows from the row's own numbers
        assert row["verdict"] == gate_verdict(row["kept_n"], row["rejected_n"], row["rejected_gain_lo"],
                                              row["kept_minus_rejected_lo"], poisson.rule)

    f, p = fixed.disagreement, poisson.disagreement
    assert (p.n, p.both) == (f.n, f.both) and p.n > 100
    for name in ("baseline_gain", "candidate_gain", "difference"):
        ours, theirs = getattr(p, name), getattr(f, name)
        assert ours[0] == theirs[0], name
        se = (theirs[2] - theirs[1]) / (2 * 1.96)
        assert abs(ours[1] - theirs[1]) <= AGREEMENT * se and abs(ours[2] - theirs[2]) <= AGREEMENT * se, name


def test_the_result_does_not_depend_on_the_order_of_the_prompts(data, monkeypatch) -> None:
    resampling = Resampling(300, 11)
    whole = poisson_change(monkeypatch, data, resampling)
    order = np.random.default_rng(3).permutation(data.n_prompts)
    shuffled = poisson_change(monkeypatch, in_file_order(data, list(data.prompts["prompt_id"].iloc[order])),
                              resampling)
    for ours, theirs in ((shuffled.compare, whole.compare), (shuffled.gates, whole.gates)):
        assert list(ours.columns) == list(theirs.columns) and len(ours) == len(theirs)
        for column in ours.columns:
            if ours[column].dtype.kind == "f":
                np.testing.assert_allclose(ours[column], theirs[column], rtol=SUM_TOLERANCE, atol=1e-12,
                                           equal_nan=True, err_msg=column)
            else:
                assert ours[column].tolist() == theirs[column].tolist(), column
    np.testing.assert_allclose(shuffled.disagreement.difference, whole.disagreement.difference, rtol=SUM_TOLERANCE)


def test_a_judge_against_itself_differs_by_exactly_zero(data, monkeypatch) -> None:
    change = poisson_change(monkeypatch, data, Resampling(200, 1), "a", "a")
    defined = change.compare["n"] > 0
    for column in ("difference", "difference_lo", "difference_hi"):
        assert (change.compare.loc[defined, column] == 0.0).all(), column
    gates = change.gates
    assert gates[gates["role"] == "baseline"].drop(columns=["role"]).reset_index(drop=True).equals(
        gates[gates["role"] == "candidate"].drop(columns=["role"]).reset_index(drop=True))


def test_without_resamples_every_interval_is_undefined_and_no_gate_has_evidence(data, monkeypatch) -> None:
    change = poisson_change(monkeypatch, data, Resampling(0))
    assert change.compare[["difference_lo", "difference_hi"]].isna().all().all()
    assert change.compare["difference"].notna().any()
    assert change.gates[[f"{s}_{e}" for s in GATE_INTERVALS for e in ("lo", "hi")]].isna().all().all()
    assert set(change.gates["verdict"]) == {"no evidence either way"}
