"""What each policy of the selection audit costs per prompt: the judge calls it reads and, where they
recorded their time, their seconds (DESIGN §4d, issue 24 item 3).

A policy reads, per prompt, these calls (`policy_reads`):

- random, oracle and a content scorer: no judge call (0 calls, 0 judge seconds; a scorer's own time is
  not recorded, so a scorer's and a scorer gate's seconds are empty);
- `{judge}`: its order-0 call; `{judge} order k`: its order-k call;
- majority, an order gate (both sides), borda, calibrated and plackett-luce: the judge's K calls;
- prior-corrected: order 0 plus every order of the calibration subset (`debiased.calibration_subset`,
  its default fraction f), so 1 + (K − 1)·f̂ calls with f̂ the subset's share of the prompts;
- a cross-judge gate (both sides): each judge's order-0 call (2); a scorer gate: the judge's order-0 call.

calls_per_prompt = the number of calls read, averaged over the prompts; seconds_per_prompt = the
mean, over the prompts where every call read recorded its seconds, of their sum
(`debiased.costs.seconds_per_prompt`); empty without the calls' seconds. A composed gate reads what
its conditions read (`gate_compose.gate_reads`); a kind without a rule gets neither.

`cost_front` sets gain beside cost for every policy of each judge that picks on every prompt it can (its
order-0 pick, majority and debiased policies; an order-k pick is order 0 under another rotation, so it is
left out: naming one of them best would name chance): the policies no cheaper-or-equal policy of the same judge
matches in gain (its gain–cost Pareto front), and the best of them, the cheapest policy with the judge's
highest gain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from audit_core.selection.data import SelectionData
from audit_core.selection.debiased.calls import OrderedCalls
from audit_core.selection.debiased.costs import timed_seconds_sum
from audit_core.selection.debiased.names import prior_corrected_name
from audit_core.selection.debiased.specs import DEBIASED_KIND
from audit_core.selection.debiased.subsets import calibration_subset

POLICY_COST_COLUMNS = ["calls_per_prompt", "seconds_per_prompt"]
NO_CALL_KINDS = ("random", "oracle", "scorer")
ORDER0_KINDS = ("judge", "judge_gate", "judge_gate_rejected", "scorer_gate", "scorer_gate_rejected")
ALL_ORDER_KINDS = ("majority", "order_gate", "order_gate_rejected", DEBIASED_KIND)
UNTIMED_KINDS = ("scorer", "scorer_gate", "scorer_gate_rejected")
FRONT_KINDS = ("judge", "majority", DEBIASED_KIND)  # a judge's policies that pick on every prompt
FRONT_COLUMNS = ["policy", "base_judge", "kind", "cost", "gain", "gain_lo", "gain_hi", "n", "front", "best"]


def policy_reads(policy: Mapping[str, object], data: SelectionData) -> dict[str, np.ndarray] | None:
    """Judge -> (P, K) True for the calls `policy` (a row of the audit's policies table: policy, kind,
    base_judge, partner) reads (module docstring); {} for no call, None for a kind without a rule."""
    kind, name, judge = policy["kind"], str(policy["policy"]), policy["base_judge"]
    if kind in NO_CALL_KINDS:
        return {}
    if kind not in (*ORDER0_KINDS, *ALL_ORDER_KINDS, "order"):
        return None
    used = np.zeros((data.n_prompts, data.n_orders(judge)), dtype=bool)
    if kind in ORDER0_KINDS:
        used[:, 0] = True
    elif kind == "order":
        used[:, int(name.rsplit(" ", 1)[1])] = True
    elif name == prior_corrected_name(judge):
        used[:, 0] = True
        used[calibration_subset(data.prompts["prompt_id"].to_numpy(dtype=object))] = True
    else:
        used[:] = True
    reads = {judge: used}
    if kind in ("judge_gate", "judge_gate_rejected"):
        partner = np.zeros((data.n_prompts, data.n_orders(policy["partner"])), dtype=bool)
        partner[:, 0] = True
        reads[policy["partner"]] = partner
    return reads


def reads_cost(reads: Mapping[str, np.ndarray], ordered: Mapping[str, OrderedCalls], timed: bool = True
               ) -> tuple[float, float]:
    """(calls per prompt, seconds per prompt) of reading `reads` (judge -> (P, K) calls read), the seconds
    from `ordered`: NaN when not `timed` (a content scorer's time is part of it) or a judge's calls are
    not in `ordered`, 0 for no call (module docstring): `cost_from_sums` of `reads_sums`."""
    return cost_from_sums(*reads_sums(reads, ordered, timed))


def reads_sums(reads: Mapping[str, np.ndarray], ordered: Mapping[str, OrderedCalls], timed: bool = True
               ) -> tuple[int, tuple[int, ...], float, int, bool]:
    """What `reads_cost` is made of: (prompts P; the calls read of each judge of `reads`, in its order; the
    seconds read summed over the timed prompts and the timed prompts (`debiased.costs.timed_seconds_sum`
    of the judges' calls side by side), 0.0 and 0 when untimed or nothing is read; whether the reads are
    timed: `timed` and every judge's calls in `ordered`). Of prompts held apart, every number adds."""
    prompts = len(next(iter(reads.values()))) if reads else 0
    calls = tuple(int(used.sum()) for used in reads.values())
    timed = timed and all(judge in ordered for judge in reads)
    if not timed or not reads:
        return prompts, calls, 0.0, 0, timed
    seconds, timed_prompts = timed_seconds_sum(np.hstack([ordered[j].seconds for j in reads]),
                                               np.hstack(list(reads.values())))
    return prompts, calls, seconds, timed_prompts, timed


def cost_from_sums(prompts: int, calls: tuple[int, ...], seconds: float, timed_prompts: int, timed: bool
                   ) -> tuple[float, float]:
    """(calls per prompt, seconds per prompt) from `reads_sums`' numbers: Σ over the judges of calls / prompts
    (0 without prompts), and seconds / timed_prompts (NaN without a timed prompt; NaN when not timed; 0 for
    no call)."""
    per_prompt = sum(float(n / prompts) if prompts else 0.0 for n in calls)
    if not timed:
        return per_prompt, np.nan
    if not calls:
        return per_prompt, 0.0
    return per_prompt, (seconds / timed_prompts if timed_prompts else float("nan"))


def policy_costs(policies: pd.DataFrame, data: SelectionData, ordered: Mapping[str, OrderedCalls]) -> pd.DataFrame:
    """POLICY_COST_COLUMNS per row of `policies` (same index): calls per prompt, and seconds per prompt
    from the seconds of `ordered` (judge -> its calls; NaN for a judge not in it): `policy_cost_frame` of
    the rows' `policy_sums`."""
    return policy_cost_frame(policies, [policy_sums(policy, data, ordered) for policy in policies.to_dict("records")])


def policy_sums(policy: Mapping[str, object], data: SelectionData, ordered: Mapping[str, OrderedCalls]
                ) -> tuple[int, tuple[int, ...], float, int, bool] | None:
    """`reads_sums` of what `policy` (a row of the audit's policies table) reads (`policy_reads`), timed
    unless its kind is UNTIMED_KINDS; None for a kind without a rule."""
    reads = policy_reads(policy, data)
    return None if reads is None else reads_sums(reads, ordered, policy["kind"] not in UNTIMED_KINDS)


def policy_cost_frame(policies: pd.DataFrame, sums: Sequence[tuple[int, tuple[int, ...], float, int, bool] | None]
                      ) -> pd.DataFrame:
    """POLICY_COST_COLUMNS per row of `policies` (same index) from each row's `policy_sums` (NaN for None)."""
    rows = [(np.nan, np.nan) if row is None else cost_from_sums(*row) for row in sums]
    return pd.DataFrame(rows, columns=POLICY_COST_COLUMNS, index=policies.index)


def cost_front(policies: pd.DataFrame, cost: str = "calls_per_prompt") -> pd.DataFrame:
    """FRONT_COLUMNS for the FRONT_KINDS rows of `policies` (the audit's table with its cost columns) with
    a gain and a `cost` (a POLICY_COST_COLUMNS name), judge by judge, cheapest first (ties: higher gain first,
    then the table's order). front: no policy of the same judge costs at most as much and gains at least as
    much, one of them strictly (ties in both: the first listed is on the front); best: the front's last
    point, i.e. the cheapest policy with the judge's highest gain."""
    if cost not in POLICY_COST_COLUMNS:
        raise ValueError(f"cost is one of {', '.join(POLICY_COST_COLUMNS)}, got {cost!r}")
    columns = ["policy", "base_judge", "kind", "gain", "gain_lo", "gain_hi", "n"]
    rows = policies.loc[policies["kind"].isin(FRONT_KINDS), columns].assign(
        cost=policies.loc[policies["kind"].isin(FRONT_KINDS), cost].astype(float))
    rows = rows[np.isfinite(rows["cost"]) & np.isfinite(rows["gain"].astype(float))]
    rows = rows.assign(order=np.arange(len(rows))).sort_values(["base_judge", "cost", "gain", "order"],
                                                               ascending=[True, True, False, True], kind="stable")
    gain = rows["gain"].astype(float)
    front = gain > gain.groupby(rows["base_judge"], sort=False).transform(
        lambda g: g.cummax().shift(1, fill_value=-np.inf))
    best = rows.index.isin(gain[front].groupby(rows.loc[front, "base_judge"], sort=False).idxmax())
    return rows.assign(front=front, best=best)[FRONT_COLUMNS].reset_index(drop=True)
