"""Two selector judges on the same pools, held as one `SelectionData`, and the gates applied to both.

The baseline and the candidate come from one dataset, or from two datasets (in one database or
two) that hold the same pools: the same prompt ids, the same candidate ids per prompt and the
same alignment ratings. From a second dataset only the candidate judge's calls are taken; the
pools, every rating, the scorers and the other judges are the baseline dataset's. A candidate
whose name the baseline dataset already uses is keyed `<name>@candidate`.

A gate is a `gate_compose.ComposedGate` kept on the baseline judge and applied to either judge by
`rebased`; its label (`gate_label`) is its condition text without the base judge, e.g.
`orders>=3/3` (the unanimity gate when K = 3), `scorer(clip)`, `judge(smol)`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from audit_core.errors import InputError
from audit_core.selection.data import SelectionData
from audit_core.selection.gate_compose import (
    ComposedGate,
    Condition,
    check,
    format_condition,
    gate_picks,
    parse_gate,
)
from audit_core.selection.votes import majority_vote, valid_picks
from audit_core.user_text import shown

ROLES = ("baseline", "candidate")
RENAMED = "{name}@candidate"  # the candidate's key when the baseline dataset has a judge of its name


@dataclass(frozen=True)
class JudgePair:
    """data: the baseline dataset with the candidate's calls; baseline, candidate: their keys in
    data.picks (equal when a judge is compared with itself); datasets: role -> dataset id."""

    data: SelectionData
    baseline: str
    candidate: str
    datasets: dict[str, str]

    def judge(self, role: str) -> str:
        """The key of the judge in `role` (ROLES)."""
        return self.baseline if role == "baseline" else self.candidate


def pair_judges(baseline_data: SelectionData, baseline: str, candidate: str,
                candidate_data: SelectionData | None = None) -> JudgePair:
    """The pair (module docstring); `candidate_data` None: the candidate is in `baseline_data`.

    InputError for a judge its dataset lacks, or two datasets whose pools differ (naming the
    first prompt, candidate or rating that differs).
    """
    _known_judge(baseline_data, baseline, "baseline")
    if candidate_data is None:
        _known_judge(baseline_data, candidate, "candidate")
        return JudgePair(baseline_data, baseline, candidate, {role: baseline_data.dataset_id for role in ROLES})
    _known_judge(candidate_data, candidate, "candidate")
    _same_pools(baseline_data, candidate_data)
    key = RENAMED.format(name=candidate) if candidate in baseline_data.picks else candidate
    data = dataclasses.replace(
        baseline_data,
        picks={**baseline_data.picks, key: candidate_data.picks[candidate]},
        slots={**baseline_data.slots, key: candidate_data.slots[candidate]},
        statuses={**baseline_data.statuses, key: candidate_data.statuses[candidate]},
    )
    return JudgePair(data, baseline, key, {"baseline": baseline_data.dataset_id, "candidate": candidate_data.dataset_id})


def default_pair(judges: Sequence[str]) -> tuple[str, str] | None:
    """(baseline, candidate) a judge change opens with, as the Judge comparison page does: the first
    judge, then the first other one; None with fewer than two judges."""
    return (judges[0], judges[1]) if len(judges) >= 2 else None


def _known_judge(data: SelectionData, judge: str, role: str) -> None:
    if judge not in data.picks:
        raise InputError(f"{role} judge {shown(judge)} is not a selector judge of dataset {shown(data.dataset_id)} "
                         f"(judges: {', '.join(data.judges) or 'none'})")


def _same_pools(first: SelectionData, second: SelectionData) -> None:
    """InputError unless both datasets hold the same prompts, candidates and alignment ratings."""
    where = f"datasets {shown(first.dataset_id)} and {shown(second.dataset_id)} do not hold the same pools"
    ids = (set(first.prompts["prompt_id"]), set(second.prompts["prompt_id"]))
    if ids[0] != ids[1]:
        only = sorted(ids[0] ^ ids[1])[0]
        side = first if only in ids[0] else second
        raise InputError(f"{where}: prompt {shown(only)} is only in {shown(side.dataset_id)} "
                         f"({len(ids[0])} and {len(ids[1])} prompts)")
    if first.candidate_ids.shape != second.candidate_ids.shape or (first.candidate_ids != second.candidate_ids).any():
        row = _first_row(first.candidate_ids, second.candidate_ids)
        raise InputError(f"{where}: prompt {shown(first.prompts['prompt_id'].iloc[row])} has candidates "
                         f"{_candidates(first, row)} in one and {_candidates(second, row)} in the other")
    h1, h2 = first.utility, second.utility
    differs = ~((h1 == h2) | (np.isnan(h1) & np.isnan(h2)))
    if differs.any():
        row, col = np.argwhere(differs)[0]
        raise InputError(f"{where}: candidate {shown(first.candidate_ids[row, col])} has alignment rating "
                         f"{h1[row, col]} in one and {h2[row, col]} in the other")


def _first_row(a: np.ndarray, b: np.ndarray) -> int:
    """The first row where two candidate matrices differ (in width or in an id)."""
    width = min(a.shape[1], b.shape[1])
    for row in range(min(len(a), len(b))):
        if (a[row, :width] != b[row, :width]).any() or a[row, width:].any() or b[row, width:].any():
            return row
    return 0


def _candidates(data: SelectionData, row: int) -> str:
    return ", ".join(str(c) for c in data.candidate_ids[row] if c) if row < data.n_prompts else "none"


# ------------------------------------------------------------ gates on both judges


def gate_label(gate: ComposedGate) -> str:
    """The gate's condition text without its base judge: `orders>=3/3 and scorer(clip)`."""
    return " or ".join(" and ".join(format_condition(c, gate.judge) for c in clause) for clause in gate.clauses)


def standard_gates(pair: JudgePair) -> list[ComposedGate]:
    """The gates both judges have, on the baseline: orders>=k/K for k = 2..K when both judges have
    K orders, scorer(S) for every content scorer, judge(J) for every other selector judge."""
    data, base = pair.data, pair.baseline
    gates = []
    orders = data.n_orders(base)
    if data.n_orders(pair.candidate) == orders:
        gates += [ComposedGate(base, ((Condition("orders", base, k=k, of=orders),),)) for k in range(2, orders + 1)]
    gates += [ComposedGate(base, ((Condition("scorer", s),),)) for s in data.scorers]
    gates += [ComposedGate(base, ((Condition("judge", j),),)) for j in data.judges if j not in (base, pair.candidate)]
    return gates


def parse_pair_gate(pair: JudgePair, text: str, names: Sequence[str]) -> ComposedGate:
    """The gate written as `text` in gate_compose's syntax, its base judge one of `names` (how the
    baseline and candidate were named), moved onto the baseline; InputError when it cannot apply
    to both judges."""
    try:
        gate = parse_gate(text)
    except InputError as err:  # without the Gate lab's field name
        raise InputError(err.message) from None
    if gate.judge not in names:
        raise InputError(f"gate {shown(text)}: its base judge must be the baseline or the candidate "
                         f"({', '.join(dict.fromkeys(names))}), not {shown(gate.judge)}")
    base = gate.rebased(pair.baseline)
    for judge in (pair.baseline, pair.candidate):
        try:
            check(base.rebased(judge), pair.data)
        except InputError as err:
            raise InputError(f"gate {shown(text)} cannot apply to {shown(judge)}: {err.message}") from None
    return base


def judge_policies(data: SelectionData, judge: str, gates: Sequence[ComposedGate]) -> dict[str, np.ndarray]:
    """Policy label -> (P,) picks of `judge` (ABSTAIN where it does not act): `order<k>` for each
    order, `majority`, and for each gate its label (kept side) and `<label> rejected`."""
    picks = valid_picks(data.picks[judge])
    out = {f"order{k}": picks[:, k] for k in range(picks.shape[1])}
    out["majority"] = majority_vote(picks, data.mask.shape[1])[0]
    for gate in gates:
        kept, declined = gate_picks(gate.rebased(judge), data)
        out[gate_label(gate)], out[f"{gate_label(gate)} rejected"] = kept, declined
    return out
