"""Cultural-error deltas: the chosen image's error rate minus the pool's random average.

Negative = the policy returns images with fewer errors than random choice on the
same prompts. The *sensitive* subset keeps the pools whose candidates differ in
that error, where a choice can matter at all. Error types carry Bonferroni
intervals across the three of them (level 1 − 0.05/3).
"""

from __future__ import annotations

import pandas as pd

from audit_core.schema import ERROR_OUTCOMES


CULTURAL_COLUMNS = [
    "policy", "kind", "outcome", "subset", "n", "chosen", "random",
    "delta", "delta_lo", "delta_hi", "delta_lo_bonf", "delta_hi_bonf",
]


def cultural_table(policies: pd.DataFrame, outcomes: list[str]) -> pd.DataFrame:
    """Long frame: policy, outcome, subset (all | sensitive), n, chosen, random, delta,
    delta_lo, delta_hi, delta_lo_bonf, delta_hi_bonf (Bonferroni only for error types)."""
    rows = []
    for record in policies.to_dict("records"):
        for outcome in outcomes:
            subsets = [("all", f"{outcome}_delta", f"{outcome}_n")]
            if outcome in ERROR_OUTCOMES:
                subsets.append(("sensitive", f"{outcome}_sensitive_delta", f"{outcome}_sensitive_n"))
            for subset, key, n_key in subsets:
                rows.append({
                    "policy": record["policy"],
                    "kind": record["kind"],
                    "outcome": outcome,
                    "subset": subset,
                    "n": record.get(n_key),
                    "chosen": record.get(f"{outcome}_chosen") if subset == "all" else None,
                    "random": record.get(f"{outcome}_random") if subset == "all" else None,
                    "delta": record.get(key),
                    "delta_lo": record.get(f"{key}_lo"),
                    "delta_hi": record.get(f"{key}_hi"),
                    "delta_lo_bonf": record.get(f"{key}_lo_bonf"),
                    "delta_hi_bonf": record.get(f"{key}_hi_bonf"),
                })
    return pd.DataFrame(rows, columns=CULTURAL_COLUMNS)
