"""The gain–cost front of each judge's policies (`audit_core.selection.costs.cost_front`) on a hand-built
policies table: which policies no cheaper one of the same judge matches, and the cheapest best."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from audit_core.selection.costs import FRONT_COLUMNS, cost_front

COLUMNS = ["policy", "kind", "base_judge", "calls_per_prompt", "seconds_per_prompt", "gain", "gain_lo", "gain_hi"]


def policies() -> pd.DataFrame:
    """Judge a: order 0 (1 call) is beaten by prior-corrected (1.4 calls), which Borda (3 calls) beats; calibrated
    ties Borda at the same cost, majority gains less at 3 calls; judge b's order-0 pick beats its majority."""
    rows = [
        ("random", "random", None, 0.0, 0.0, 0.0, 0.0, 0.0),
        ("a", "judge", "a", 1.0, 2.0, 0.10, 0.05, 0.15),
        ("a order 1", "order", "a", 1.0, 2.0, 0.30, 0.25, 0.35),  # a rotation of order 0: not on the chart
        ("a majority", "majority", "a", 3.0, 6.0, 0.11, 0.06, 0.16),
        ("a borda", "debiased", "a", 3.0, 6.0, 0.20, 0.15, 0.25),
        ("a calibrated", "debiased", "a", 3.0, 6.5, 0.20, 0.15, 0.25),
        ("a plackett-luce", "debiased", "a", 3.0, 6.0, np.nan, np.nan, np.nan),  # never acts: no gain
        ("a prior-corrected", "debiased", "a", 1.4, 2.8, 0.15, 0.10, 0.20),
        ("a agree>=3/3", "order_gate", "a", 3.0, 6.0, 0.50, 0.40, 0.60),  # a gate: not on every prompt
        ("b", "judge", "b", 1.0, np.nan, 0.30, 0.20, 0.40),
        ("b majority", "majority", "b", 3.0, np.nan, 0.25, 0.20, 0.30),
        ("clip", "scorer", None, 0.0, np.nan, 0.05, 0.0, 0.1),
    ]
    return pd.DataFrame(rows, columns=COLUMNS).assign(n=50)


def test_the_front_and_the_cheapest_best_by_calls():
    front = cost_front(policies()).set_index("policy")
    assert list(front.columns) == FRONT_COLUMNS[1:]
    assert list(front.index) == ["a", "a prior-corrected", "a borda", "a calibrated", "a majority", "b", "b majority"]
    assert front.index[front["front"]].tolist() == ["a", "a prior-corrected", "a borda", "b"]
    # Borda and calibrated tie in gain and calls: the first listed is the cheapest best
    assert front.index[front["best"]].tolist() == ["a borda", "b"]
    assert front.loc["a prior-corrected", "cost"] == 1.4 and front.loc["a borda", "gain_lo"] == 0.15


def test_by_seconds_calibrated_costs_more_and_untimed_judges_drop_out():
    front = cost_front(policies(), "seconds_per_prompt").set_index("policy")
    assert "b" not in front.index and front.loc["a calibrated", "cost"] == 6.5
    assert front.index[front["front"]].tolist() == ["a", "a prior-corrected", "a borda"]
    assert front.index[front["best"]].tolist() == ["a borda"]


def test_a_cost_must_be_a_cost_column():
    with pytest.raises(ValueError, match="calls_per_prompt"):
        cost_front(policies(), "gain")
