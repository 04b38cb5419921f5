"""Cultural-error deltas: the chosen image's error rate minus the pool's random average.

Negative = the policy returns images with fewer errors than random choice on the
same prompts. The *sensitive* subset keeps the pools whose candidates differ in
that error, where a choice can matter at all. Error types carry Bonferroni
intervals across the three of them (level 1 − 0.05/3).
"""

from __future__ import annotations

import pandas as pd

from audit_core.store.schema import ERROR_OUTCOMES

CULTURAL_COLUMNS = [
    "policy", "kind", "outcome", "subset", "n", "chosen", "random",
    "delta", "delta_lo", "delta_hi", "delta_lo_bonf", "delta_hi_bonf",
]


def cultural_table(policies: pd.DataFrame, outcomes: list[str]) -> pd.DataFrame:
    """Long frame: policy, outcome, subset (all | sensitive), n, chosen, random, delta,
    delta_lo, delta_hi, delta_lo_bonf, delta_hi_bonf (Bonferroni only for error types).

    chosen / random: the chosen image's mean rating and the pool mean over the subset's n
    prompts (those the policy acts on where the chosen image is rated; sensitive: of
    them, the pools whose candidates differ in that error), so delta = chosen − random.
    """
    rows = []
    for record in policies.to_dict("records"):
        for outcome in outcomes:
            subsets = [("all", f"{outcome}_delta", outcome)]
            if outcome in ERROR_OUTCOMES:
                subsets.append(("sensitive", f"{outcome}_sensitive_delta", f"{outcome}_sensitive"))
            for subset, key, prefix in subsets:
                rows.append({
                    "policy": record["policy"],
                    "kind": record["kind"],
                    "outcome": outcome,
                    "subset": subset,
                    "n": record.get(f"{prefix}_n"),
                    "chosen": record.get(f"{prefix}_chosen"),
                    "random": record.get(f"{prefix}_random"),
                    "delta": record.get(key),
                    "delta_lo": record.get(f"{key}_lo"),
                    "delta_hi": record.get(f"{key}_hi"),
                    "delta_lo_bonf": record.get(f"{key}_lo_bonf"),
                    "delta_hi_bonf": record.get(f"{key}_hi_bonf"),
                })
    return pd.DataFrame(rows, columns=CULTURAL_COLUMNS)
