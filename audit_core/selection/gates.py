"""Gates: rules that let a judge act only when its orders, or two judges, agree.

A gate acts on a prompt or abstains; what it rejects is reported as the base
judge's order-0 pick on the declined prompts (`rejected`), so every gate can be
shown with what it keeps and what it rejects. Gates built from several conditions
are in `audit_core.selection.gate_compose`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from audit_core.selection.votes import ABSTAIN, all_parsed, majority_vote


def order_agreement(picks: np.ndarray, width: int) -> np.ndarray:
    """q = (votes for the most frequent pick) / K; NaN unless every order parsed."""
    _, top = majority_vote(picks, width)
    return np.where(all_parsed(picks), top / picks.shape[1], np.nan)


def agreement_gate(picks: np.ndarray, width: int, k: int) -> np.ndarray:
    """Majority pick where every order parsed and at least k of K orders agree (q ≥ k/K).

    Ties in the majority go to the lowest canonical index; k = 1 is plain majority voting.
    """
    winner, top = majority_vote(picks, width)
    return np.where(top >= k, winner, ABSTAIN)


def pair_agreement(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """`first` where both picks are valid and equal, else ABSTAIN."""
    return np.where((first >= 0) & (first == second), first, ABSTAIN)


def rejected(base: np.ndarray, gate: np.ndarray) -> np.ndarray:
    """`base` on the prompts where the gate abstains (and base itself acts)."""
    return np.where(gate < 0, base, ABSTAIN)


GATE_KINDS = {
    "order_gate": "order_gate_rejected",
    "judge_gate": "judge_gate_rejected",
    "scorer_gate": "scorer_gate_rejected",
    "composed_gate": "composed_gate_rejected",  # audit_core.selection.gate_compose
}


GATE_COLUMNS = [
    "gate", "base_judge", "kind", "threshold", "partner", "side", "n", "coverage",
    "regret", "regret_lo", "regret_hi", "gain", "gain_lo", "gain_hi", "bmr", "bmr_lo", "bmr_hi", "bmr_random",
    "best", "random_regret", "random_utility", "utility", "ungated_regret", "ungated_gain", "ungated_bmr",
    "regret_vs_ungated", "regret_vs_ungated_lo", "regret_vs_ungated_hi",
    "gain_vs_rejected", "gain_vs_rejected_lo", "gain_vs_rejected_hi",
    "regret_vs_rejected", "regret_vs_rejected_lo", "regret_vs_rejected_hi",
]
PAIRED = ("gain_vs_rejected", "regret_vs_rejected")  # kept minus rejected side, on the kept row


def gate_table(policies: pd.DataFrame, ungated: pd.DataFrame) -> pd.DataFrame:
    """Every gate's kept and rejected prompts, each next to random and the ungated judge.

    One row per (gate, side). side = kept: the gate's own picks; ungated_* is the
    judge's order-0 pick on the same kept prompts and regret_vs_ungated (with its
    paired interval) the gate's regret minus it. side = rejected: the judge's
    order-0 pick on the declined prompts, which is the ungated judge itself.
    random_* is exact random choice on the same prompts in both sides.
    gain_vs_rejected / regret_vs_rejected (with their joint-bootstrap intervals, from
    the policies table) are the kept side's mean minus the rejected side's, on the kept
    row; NaN on the rejected row.
    """
    by_name = policies.set_index("policy")
    rows = []
    for gate in policies[policies["kind"].isin(list(GATE_KINDS))].to_dict("records"):
        name = gate["policy"]
        for side, record in (("kept", gate), ("rejected", by_name.loc[f"{name} rejected"].to_dict())):
            base = {
                "gate": name,
                "base_judge": gate["base_judge"],
                "kind": gate["kind"],
                "threshold": gate["threshold"],
                "partner": gate["partner"],
                "side": side,
            }
            for key in ("n", "coverage", "regret", "regret_lo", "regret_hi", "gain", "gain_lo", "gain_hi",
                        "bmr", "bmr_lo", "bmr_hi", "bmr_random", "best", "random_regret", "random_utility", "utility"):
                base[key] = record[key]
            if side == "kept" and f"{name} ungated" in ungated.index:
                other = ungated.loc[f"{name} ungated"]
                base.update(ungated_regret=other["regret"], ungated_gain=other["gain"], ungated_bmr=other["bmr"],
                            regret_vs_ungated=gate.get("regret_vs_ungated"),
                            regret_vs_ungated_lo=gate.get("regret_vs_ungated_lo"),
                            regret_vs_ungated_hi=gate.get("regret_vs_ungated_hi"))
            else:
                base.update(ungated_regret=record["regret"], ungated_gain=record["gain"], ungated_bmr=record["bmr"],
                            regret_vs_ungated=0.0 if record["n"] else np.nan,
                            regret_vs_ungated_lo=np.nan, regret_vs_ungated_hi=np.nan)
            for stat in PAIRED:
                for key in (stat, f"{stat}_lo", f"{stat}_hi"):
                    base[key] = gate.get(key, np.nan) if side == "kept" else np.nan
            rows.append(base)
    return pd.DataFrame(rows, columns=GATE_COLUMNS)
