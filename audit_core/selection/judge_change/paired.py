"""Paired differences candidate − baseline (DESIGN §4e), and the prompts where their picks differ.

For a measure x and a policy both judges have, on the n prompts where both define x:
difference = mean_p (x_candidate(p) − x_baseline(p)); baseline and candidate are each judge's
mean over those same n prompts. Per prompt (`metrics.prompt_stats`): gain, regret, bmr (below
mean), best, `<error>_delta` for each cultural error rated (chosen minus pool mean, 0 on a pool
whose candidates do not differ in it); first_slot = 1[the pick of order k sat in slot A] for the
policy `order<k>`. Judge-level, policy `all orders`: first_slot = Σ slot-A calls / Σ valid calls of
each judge over the prompts where both have a valid call (the difference of the two ratios), and
flip_rate over the prompts where every order of both parsed (`position.flips`).

Intervals (95% percentile) resample prompts, the two judges' values of a prompt together. Up to
`poisson.POISSON_ABOVE` prompts (`paired_differences`): a mean of per-prompt differences at fixed n
(`bootstrap.FixedNMeans`; n ≤ EXACT_DRAWS_UP_TO: resample b averages the prompts at row b of
`default_rng(seed).integers(0, n, size=(B, n))`), the first-slot ratio difference over joint draws
of all its prompts as ratios of resampled sums (`bootstrap.resampled_sums`). Above it
(`poisson_path`, the same rows from `paired_cells`): Poisson weights w_pb of (seed, prompt id, b),
a mean of differences d over the prompts where it is defined Σ_p w_pb·d_p / Σ_p w_pb in resample b,
the first-slot difference the two judges' ratios Σ w·slot-A / Σ w·valid in the same resample
(`poisson.PoissonMeans`). Point estimates are the same on both paths.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from audit_core.selection import metrics
from audit_core.selection.gate_compose import ComposedGate
from audit_core.selection.judge_change.pairing import JudgePair, judge_policies
from audit_core.selection.position import flips
from audit_core.selection.votes import valid_picks
from audit_core.stats import bootstrap
from audit_core.stats.poisson import PoissonMeans
from audit_core.stats.resampling import Resampling
from audit_core.store.schema import ERROR_OUTCOMES

COMPARE_COLUMNS = ["measure", "policy", "baseline", "candidate", "difference", "difference_lo", "difference_hi", "n"]
POLICY_MEASURES = ("gain", "regret", "bmr", "best")
ALL_ORDERS = "all orders"
PICKS_DIFFER = "order0 where picks differ"
LEVEL = 0.95


@dataclass(frozen=True)
class Disagreement:
    """The prompts where both judges' order-0 picks exist and differ: `n` of the `both` prompts
    where both picked; each judge's gain there and the difference, each (value, lo, hi)."""

    n: int
    both: int
    baseline_gain: tuple[float, float, float]
    candidate_gain: tuple[float, float, float]
    difference: tuple[float, float, float]

    def to_summary(self) -> dict:
        """JSON-ready: counts and each gain with its interval."""
        def entry(v: tuple[float, float, float]) -> dict:
            return {"gain": _json(v[0]), "gain_ci": [_json(v[1]), _json(v[2])]}
        return {"n": self.n, "both_picked": self.both, "baseline": entry(self.baseline_gain),
                "candidate": entry(self.candidate_gain), "difference": _json(self.difference[0]),
                "difference_ci": [_json(self.difference[1]), _json(self.difference[2])]}


def _json(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def prompt_values(pair: JudgePair, judge: str, gates: Sequence[ComposedGate],
                  pools: metrics.PoolMeasures) -> dict[str, dict[str, np.ndarray]]:
    """Policy label -> measure -> (P,) per-prompt value of `judge`, NaN where undefined (module docstring);
    pools: `metrics.pool_measures` of the pair's outcomes."""
    data = pair.data
    deltas = [f"{o}_delta" for o in ERROR_OUTCOMES if o in data.outcomes]
    out = {}
    for policy, pick in judge_policies(data, judge, gates).items():
        stats = metrics.prompt_stats(pools, pick)
        out[policy] = {m: stats[m] for m in (*POLICY_MEASURES, *deltas)}
    picks, slots = data.picks[judge], data.slots[judge]
    for k in range(picks.shape[1]):
        valid = (picks[:, k] >= 0) & (slots[:, k] >= 0)
        out[f"order{k}"]["first_slot"] = np.where(valid, (slots[:, k] == 0).astype(float), np.nan)
    return out


def judge_values(pair: JudgePair, gates: Sequence[ComposedGate]) -> tuple[dict, dict]:
    """(baseline, candidate) `prompt_values`."""
    pools = metrics.pool_measures(pair.data.outcomes)
    return prompt_values(pair, pair.baseline, gates, pools), prompt_values(pair, pair.candidate, gates, pools)


@dataclass(frozen=True)
class PairedCells:
    """The COMPARE_COLUMNS rows before their intervals: a row of a mean of per-prompt differences holds
    its `cell` (its index in the means it was added to); first_slot_at: where the first-slot row goes;
    own: the cells of each judge's gain where the order-0 picks differ; both: prompts where both picked."""

    rows: list[dict[str, object]]
    first_slot_at: int
    own: tuple[int, int]
    both: int


def paired_cells(pair: JudgePair, base: dict, cand: dict, means: bootstrap.FixedNMeans | PoissonMeans) -> PairedCells:
    """Every paired difference of the `prompt_values` `base` and `cand` added to `means`: one row per
    measure and policy both judges have, then `all orders` (first_slot, flip_rate), then gain on
    `order0 where picks differ` (the last row)."""
    rows: list[dict[str, object]] = []

    def add(measure: str, policy: str, a: np.ndarray, b: np.ndarray) -> None:
        """A row for the values a (baseline) and b (candidate) on the prompts where both are defined."""
        both = ~np.isnan(a) & ~np.isnan(b)
        rows.append({"measure": measure, "policy": policy, "baseline": _mean(a[both]),
                     "candidate": _mean(b[both]), "n": int(both.sum()), "cell": means.add(np.where(both, b - a, np.nan))})

    for policy in (p for p in base if p in cand):
        for measure in (m for m in base[policy] if m in cand[policy]):
            add(measure, policy, base[policy][measure], cand[policy][measure])
    first_slot_at = len(rows)
    add("flip_rate", ALL_ORDERS, *(flips(valid_picks(pair.data.picks[j])) for j in (pair.baseline, pair.candidate)))
    first, second = (valid_picks(pair.data.picks[j][:, 0]) for j in (pair.baseline, pair.candidate))
    differ = (first >= 0) & (second >= 0) & (first != second)
    gains = [np.where(differ, values["order0"]["gain"], np.nan) for values in (base, cand)]
    own = [means.add(np.where(~np.isnan(gains[1 - i]), gains[i], np.nan)) for i in range(2)]
    add("gain", PICKS_DIFFER, *gains)
    return PairedCells(rows, first_slot_at, (own[0], own[1]), int(((first >= 0) & (second >= 0)).sum()))


def finished(cells: PairedCells, first_slot: dict[str, object], estimate: np.ndarray, lo: np.ndarray,
             hi: np.ndarray) -> tuple[pd.DataFrame, Disagreement]:
    """(COMPARE_COLUMNS frame, the order-0 disagreement) of `cells` with the `first_slot` row, each cell's
    difference, difference_lo and difference_hi read from the means' `estimate`, `lo` and `hi`."""
    rows = [{**row, "difference": estimate[row["cell"]], "difference_lo": lo[row["cell"]],
             "difference_hi": hi[row["cell"]]} for row in cells.rows]
    difference, own = cells.rows[-1]["cell"], cells.own
    disagreement = Disagreement(
        n=rows[-1]["n"], both=cells.both,
        baseline_gain=(estimate[own[0]], lo[own[0]], hi[own[0]]),
        candidate_gain=(estimate[own[1]], lo[own[1]], hi[own[1]]),
        difference=(estimate[difference], lo[difference], hi[difference]),
    )
    rows.insert(cells.first_slot_at, first_slot)
    return pd.DataFrame(rows, columns=COMPARE_COLUMNS), disagreement


def paired_differences(pair: JudgePair, gates: Sequence[ComposedGate],
                       resampling: Resampling) -> tuple[pd.DataFrame, Disagreement]:
    """(COMPARE_COLUMNS frame, the order-0 disagreement) with the fixed-n intervals of the module
    docstring: one row per measure and policy both judges have, then `all orders` (first_slot,
    flip_rate), then gain on `order0 where picks differ` (`compare_judges` takes
    `poisson_path.poisson_comparison` instead above POISSON_ABOVE prompts)."""
    means = bootstrap.FixedNMeans()
    cells = paired_cells(pair, *judge_values(pair, gates), means)
    x = first_slot_calls(pair)[1]
    lo = hi = float("nan")
    if len(x) and resampling.resamples:
        sums = bootstrap.resampled_sums(x, resampling).totals
        (lo,), (hi,) = bootstrap.percentile_interval(first_slot_difference(sums), LEVEL)
    (low, high), = means.intervals(resampling, (LEVEL,))
    return finished(cells, first_slot_row(x, lo, hi), means.means(), low, high)


def first_slot_calls(pair: JudgePair) -> tuple[np.ndarray, np.ndarray]:
    """(keep, x): keep (P,) True where both judges have a valid call; x (keep.sum(), 4) each kept prompt's
    slot-A calls and valid calls of the baseline, then of the candidate."""
    columns = []
    for judge in (pair.baseline, pair.candidate):
        valid = (pair.data.picks[judge] >= 0) & (pair.data.slots[judge] >= 0)
        columns += [(valid & (pair.data.slots[judge] == 0)).sum(axis=1), valid.sum(axis=1)]
    x = np.column_stack(columns).astype(float)
    keep = (x[:, 1] > 0) & (x[:, 3] > 0)
    return keep, x[keep]


def first_slot_difference(sums: np.ndarray) -> np.ndarray:
    """The candidate's minus the baseline's slot-A share from (..., 4) sums laid out as `first_slot_calls`."""
    return bootstrap.ratio(sums[..., 2], sums[..., 3]) - bootstrap.ratio(sums[..., 0], sums[..., 1])


def first_slot_row(x: np.ndarray, lo: float, hi: float) -> dict[str, object]:
    """first_slot over all orders from `first_slot_calls`' x: each judge's Σ slot-A calls / Σ valid calls
    on the prompts where both have a valid call, and the difference of the two ratios, within (lo, hi)."""
    totals = x.sum(axis=0)
    ratios = bootstrap.ratio(totals[[0, 2]], totals[[1, 3]])
    return {"measure": "first_slot", "policy": ALL_ORDERS, "baseline": ratios[0], "candidate": ratios[1],
            "difference": float(first_slot_difference(totals[None, :])[0]), "difference_lo": lo, "difference_hi": hi,
            "n": len(x)}


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if len(values) else float("nan")
