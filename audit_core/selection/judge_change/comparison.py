"""A judge change audited: paired differences, gate verdicts and the checks over them.

`compare_judges(pair, ...)` computes both tables for a `JudgePair` and returns a `JudgeChange`,
whose `tables()` are compare.csv and gates.csv and `to_summary()` compare.json (without checks,
which `check` evaluates one at a time). Up to `poisson.POISSON_ABOVE` prompts its intervals are the
fixed-n and joint bootstraps of `paired` and `verdicts`; above it they come from one pass of Poisson
weights (`poisson_path`), so a million prompts take seconds rather than minutes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from audit_core.selection.gate_compose import ComposedGate
from audit_core.selection.judge_change.checks import Check, CheckOutcome, Tables, evaluate_check
from audit_core.selection.judge_change.paired import LEVEL, Disagreement, paired_differences
from audit_core.selection.judge_change.pairing import JudgePair, gate_label, standard_gates
from audit_core.selection.judge_change.poisson_path import poisson_comparison
from audit_core.selection.judge_change.verdicts import GATE_COLUMNS, VerdictRule, gate_verdicts
from audit_core.stats.poisson import POISSON_ABOVE
from audit_core.stats.resampling import Resampling


@dataclass(frozen=True)
class JudgeChange:
    """baseline, candidate: the judges' keys; datasets: role -> dataset id; prompts: P;
    compare: `paired.COMPARE_COLUMNS` rows; disagreement: the prompts where the order-0 picks
    differ; gates: `verdicts.GATE_DETAIL_COLUMNS` rows (baseline then candidate per gate);
    rule: the verdict rule applied; resampling: how intervals were drawn."""

    baseline: str
    candidate: str
    datasets: dict[str, str]
    prompts: int
    compare: pd.DataFrame
    disagreement: Disagreement
    gates: pd.DataFrame
    rule: VerdictRule
    resampling: Resampling
    level: float = LEVEL

    @property
    def gate_labels(self) -> list[str]:
        return list(dict.fromkeys(self.gates["gate"]))

    def tables(self) -> dict[str, pd.DataFrame]:
        """File stem -> frame: compare (paired differences), gates (verdicts per gate and judge)."""
        return {"compare": self.compare, "gates": self.gates[GATE_COLUMNS]}

    def check(self, check: Check) -> CheckOutcome:
        """Whether `check` holds here; InputError naming it for a name these tables lack."""
        return evaluate_check(check, Tables(self.compare, self.gates, {"baseline": self.baseline,
                                                                       "candidate": self.candidate}))

    def to_summary(self) -> dict:
        """JSON-ready: who was compared, how, every paired difference, the disagreement and the gates."""
        return {
            "baseline": {"judge": self.baseline, "dataset": self.datasets["baseline"]},
            "candidate": {"judge": self.candidate, "dataset": self.datasets["candidate"]},
            "prompts": self.prompts,
            "resamples": self.resampling.resamples,
            "seed": self.resampling.seed,
            "level": self.level,
            "rule": dataclasses.asdict(self.rule),
            "differences": _records(self.compare),
            "picks_differ": self.disagreement.to_summary(),
            "gates": _records(self.gates),
        }


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows as plain JSON values (NaN -> None, numpy scalars -> Python)."""
    def plain(value: object) -> object:
        if isinstance(value, (np.integer,)):
            return int(value)
        if isinstance(value, (float, np.floating)):
            return None if math.isnan(value) else float(value)
        return value
    return [{k: plain(v) for k, v in row.items()} for row in frame.to_dict("records")]


def compare_judges(pair: JudgePair, gates: Sequence[ComposedGate] = (), resampling: Resampling = Resampling(),
                   rule: VerdictRule = VerdictRule(), standard: bool = True) -> JudgeChange:
    """The judge change of `pair` under `gates` (after the standard gates when `standard`; a gate
    given twice, or also standard, counts once), intervals drawn as `resampling` says: fixed-n up to
    `poisson.POISSON_ABOVE` prompts (`paired_differences`, `gate_verdicts`), above it the Poisson
    bootstrap's (`poisson_path.poisson_comparison`), with the same point estimates."""
    chosen = {gate_label(g): g for g in [*(standard_gates(pair) if standard else []), *gates]}
    every = list(chosen.values())
    if pair.data.n_prompts > POISSON_ABOVE:
        compare, disagreement, verdicts = poisson_comparison(pair, every, resampling, rule)
    else:
        compare, disagreement = paired_differences(pair, every, resampling)
        verdicts = gate_verdicts(pair, every, resampling, rule)
    return JudgeChange(
        baseline=pair.baseline, candidate=pair.candidate, datasets=dict(pair.datasets), prompts=pair.data.n_prompts,
        compare=compare, disagreement=disagreement, gates=verdicts, rule=rule, resampling=resampling,
    )

