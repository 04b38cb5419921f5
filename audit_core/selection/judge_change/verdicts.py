"""Gate verdicts: what a gate does for a judge, in words, by a rule that is data (DESIGN §4e).

For a gate applied to a judge (`gate_compose.evaluate`, the numbers the audit gives a gate):
coverage (kept share of all prompts), the kept and the rejected side's gain over random with
fixed-n intervals over each side's prompts, and kept − rejected with an interval from a joint
resample of all prompts. Above `poisson.POISSON_ABOVE` prompts (`poisson_path`) the same numbers
come from Poisson-weighted sums: each side's gain Σ_p w_pb·gain_p / Σ_p w_pb·acted_p in resample b,
kept − rejected the difference of the two sides' ratios in the same resample, as the audit's
Poisson path (`partials`) makes them; the point estimates are the same. The verdict, first rule
that applies:

1. "keeps nothing": the gate keeps no prompt;
2. "rejects nothing": it rejects none;
3. "filters failures": rejected_gain_lo ≤ filters_rejected_lo_at_most (the rejected side's
   interval reaches random or falls below it) and kept_minus_rejected_lo >
   filters_kept_minus_rejected_lo_above (kept beats rejected);
4. "discards good decisions": rejected_gain_lo > discards_rejected_lo_above (the rejected side's
   interval lies above random);
5. "no evidence either way" (also when an interval is undefined, e.g. with 0 resamples).

The thresholds are `VerdictRule`'s fields, all 0 by default.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from audit_core.errors import InputError
from audit_core.selection.gate_compose import ComposedGate, evaluate
from audit_core.selection.judge_change.pairing import ROLES, JudgePair, gate_label
from audit_core.stats.resampling import Resampling
from audit_core.user_text import shown

KEEPS_NOTHING = "keeps nothing"
REJECTS_NOTHING = "rejects nothing"
FILTERS = "filters failures"
DISCARDS = "discards good decisions"
NO_EVIDENCE = "no evidence either way"
VERDICTS = (FILTERS, DISCARDS, NO_EVIDENCE, KEEPS_NOTHING, REJECTS_NOTHING)
GATE_COLUMNS = [
    "gate", "judge", "coverage", "kept_gain", "kept_gain_lo", "kept_gain_hi",
    "rejected_gain", "rejected_gain_lo", "rejected_gain_hi",
    "kept_minus_rejected", "kept_minus_rejected_lo", "kept_minus_rejected_hi", "verdict",
]
GATE_DETAIL_COLUMNS = [*GATE_COLUMNS[:2], "role", "kept_n", "rejected_n", *GATE_COLUMNS[2:]]


@dataclass(frozen=True)
class VerdictRule:
    """The thresholds of the verdict rules (module docstring), on the gain scale."""

    filters_rejected_lo_at_most: float = 0.0
    filters_kept_minus_rejected_lo_above: float = 0.0
    discards_rejected_lo_above: float = 0.0

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if not math.isfinite(getattr(self, f.name)):
                raise InputError(f"verdict rule {f.name} must be a finite number, got {getattr(self, f.name)!r}")

    def replaced(self, settings: Sequence[str]) -> VerdictRule:
        """This rule with `NAME=VALUE` settings applied; InputError naming a setting that is not
        `NAME=number` with NAME a field."""
        names = [f.name for f in dataclasses.fields(self)]
        changes = {}
        for setting in settings:
            name, sep, value = setting.partition("=")
            if not sep or name.strip() not in names:
                raise InputError(f"rule {shown(setting)}: write NAME=VALUE with NAME one of {', '.join(names)}")
            try:
                changes[name.strip()] = float(value)
            except ValueError:
                raise InputError(f"rule {shown(setting)}: {shown(value)} is not a number") from None
        return dataclasses.replace(self, **changes)

    def describe(self) -> list[str]:
        """The rule in words, one line per verdict, with this rule's thresholds."""
        return [
            f"{KEEPS_NOTHING!r} / {REJECTS_NOTHING!r}: the gate keeps no prompt / rejects none",
            f"{FILTERS!r}: rejected_gain_lo <= {self.filters_rejected_lo_at_most:g} and "
            f"kept_minus_rejected_lo > {self.filters_kept_minus_rejected_lo_above:g}",
            f"{DISCARDS!r}: rejected_gain_lo > {self.discards_rejected_lo_above:g}",
            f"{NO_EVIDENCE!r}: otherwise",
        ]


def gate_verdict(kept_n: int, rejected_n: int, rejected_gain_lo: float, kept_minus_rejected_lo: float,
                 rule: VerdictRule = VerdictRule()) -> str:
    """The verdict of the module docstring's rules (NaN bounds meet no threshold)."""
    if kept_n == 0:
        return KEEPS_NOTHING
    if rejected_n == 0:
        return REJECTS_NOTHING
    reaches_random = rejected_gain_lo <= rule.filters_rejected_lo_at_most
    if reaches_random and kept_minus_rejected_lo > rule.filters_kept_minus_rejected_lo_above:
        return FILTERS
    if rejected_gain_lo > rule.discards_rejected_lo_above:
        return DISCARDS
    return NO_EVIDENCE


def gate_verdicts(pair: JudgePair, gates: Sequence[ComposedGate], resampling: Resampling,
                  rule: VerdictRule = VerdictRule()) -> pd.DataFrame:
    """GATE_DETAIL_COLUMNS: per gate, a row for the baseline then the candidate (role), with
    each side's prompt count; intervals as the audit makes them up to POISSON_ABOVE prompts
    (`compare_judges` takes `poisson_path.poisson_comparison` above)."""
    rows = []
    for gate in gates:
        for role in ROLES:
            judge = pair.judge(role)
            result = evaluate(gate.rebased(judge), pair.data, resampling)
            kept, rejected = (result.gates[result.gates["side"] == side].iloc[0] for side in ("kept", "rejected"))
            sides = {side: (int(record["n"]), *(float(record[f"gain{suffix}"]) for suffix in ("", "_lo", "_hi")))
                     for side, record in (("kept", kept), ("rejected", rejected))}
            difference = tuple(float(kept[f"gain_vs_rejected{suffix}"]) for suffix in ("", "_lo", "_hi"))
            rows.append(verdict_row(gate_label(gate), judge, role, float(kept["coverage"]), sides, difference, rule))
    return verdict_frame(rows)


def verdict_row(gate: str, judge: str, role: str, coverage: float, sides: Mapping[str, tuple[int, float, float, float]],
                kept_minus_rejected: tuple[float, float, float], rule: VerdictRule) -> dict[str, object]:
    """A GATE_DETAIL_COLUMNS row with its verdict under `rule`; sides: "kept" and "rejected" -> (n, gain,
    gain_lo, gain_hi); kept_minus_rejected: (value, lo, hi)."""
    row: dict[str, object] = {"gate": gate, "judge": judge, "role": role, "kept_n": sides["kept"][0],
                              "rejected_n": sides["rejected"][0], "coverage": coverage}
    for side in ("kept", "rejected"):
        for suffix, value in zip(("", "_lo", "_hi"), sides[side][1:]):
            row[f"{side}_gain{suffix}"] = value
    for suffix, value in zip(("", "_lo", "_hi"), kept_minus_rejected):
        row[f"kept_minus_rejected{suffix}"] = value
    row["verdict"] = gate_verdict(row["kept_n"], row["rejected_n"], row["rejected_gain_lo"],
                                  row["kept_minus_rejected_lo"], rule)
    return row


def verdict_frame(rows: Sequence[Mapping[str, object]]) -> pd.DataFrame:
    """The GATE_DETAIL_COLUMNS frame of `verdict_row` rows (counts as int64, also without rows)."""
    return pd.DataFrame(rows, columns=GATE_DETAIL_COLUMNS).astype({"kept_n": np.int64, "rejected_n": np.int64})
