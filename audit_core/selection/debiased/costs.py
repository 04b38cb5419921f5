"""What each policy of a judge costs: calls per prompt and, where the calls recorded their time,
seconds per prompt (DESIGN §4d, issue 24 item 3).

Calls per prompt: 1 for a policy that reads one order (`{judge}`, order 0), K for one that reads
every order (`{judge} majority`, borda, calibrated, plackett-luce), and 1 + (K − 1)·f for
prior-corrected, where f is the share of prompts in its calibration subset (run in all K orders;
the others once), as realised on this dataset. Seconds per prompt: the mean, over the prompts where
every call the policy reads recorded its seconds (`timed_prompts`), of the sum of those seconds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from audit_core.selection.debiased.calls import OrderedCalls
from audit_core.selection.debiased.names import BORDA, CALIBRATED, PLACKETT_LUCE, PRIOR_CORRECTED, policy_name

COST_COLUMNS = ["policy", "calls_per_prompt", "seconds_per_prompt", "timed_prompts"]
ALL_ORDER_METHODS = ("majority", BORDA, CALIBRATED, PLACKETT_LUCE)


def calls_used(calls: OrderedCalls, method: str | None, calibration: np.ndarray | None = None) -> np.ndarray:
    """(P, K) the calls the policy reads: order 0 for `{judge}` (method None), every order for
    ALL_ORDER_METHODS, order 0 plus every order of the `calibration` prompts for prior-corrected."""
    used = np.zeros((calls.n_prompts, calls.n_orders), dtype=bool)
    if method is None:
        used[:, 0] = True
    elif method in ALL_ORDER_METHODS:
        used[:] = True
    elif method == PRIOR_CORRECTED:
        if calibration is None:
            raise ValueError("prior-corrected reads the calibration subset's calls: pass `calibration`")
        used[:, 0] = True
        used[calibration] = True
    else:
        raise ValueError(f"no cost rule for method {method!r}")
    return used


def seconds_per_prompt(seconds: np.ndarray, used: np.ndarray) -> tuple[float, int]:
    """(mean over timed prompts of Σ seconds of the used calls, timed prompts); NaN and 0 when none is timed.
    The mean is `timed_seconds_sum`'s total over its count."""
    total, timed = timed_seconds_sum(seconds, used)
    return (total / timed if timed else float("nan")), timed


def timed_seconds_sum(seconds: np.ndarray, used: np.ndarray) -> tuple[float, int]:
    """(Σ over the timed prompts of Σ seconds of their used calls, timed prompts): a timed prompt uses a
    call and recorded the seconds of every call it uses. Of prompts held apart, both add."""
    timed = (~np.isnan(seconds) | ~used).all(axis=1) & used.any(axis=1)
    return float(np.where(used, np.nan_to_num(seconds), 0.0)[timed].sum(axis=1).sum()), int(timed.sum())


def judge_costs(calls: OrderedCalls, calibration: np.ndarray) -> pd.DataFrame:
    """COST_COLUMNS for `{judge}`, its majority and its four debiased policies; `calibration` ((P,)
    bool) is the prior-corrected policy's calibration subset."""
    k, share = calls.n_orders, float(np.mean(calibration)) if len(calibration) else 0.0
    rows = []
    for method in (None, *ALL_ORDER_METHODS, PRIOR_CORRECTED):
        used = calls_used(calls, method, calibration)
        name = calls.judge if method is None else (
            f"{calls.judge} majority" if method == "majority" else policy_name(calls.judge, method))
        per_prompt = 1.0 if method is None else 1.0 + (k - 1) * share if method == PRIOR_CORRECTED else float(k)
        seconds, timed = seconds_per_prompt(calls.seconds, used)
        rows.append((name, per_prompt, seconds, timed))
    return pd.DataFrame(rows, columns=COST_COLUMNS)
