"""Selection policies: which canonical candidate each policy returns per prompt.

A policy's action on prompt p is a canonical candidate index, or ABSTAIN (−1)
when it declines to act. Every policy here is deterministic given the recorded
picks and scores. `random` (the exact expectation over the pool) and `oracle`
(h* = max h) are not picks and are not listed by `policy_picks`: they are
computed analytically by `audit_core.selection.metrics` and added as rows by
`audit_core.selection.audit`.

Names are a contract shared with the analyze output and the app:

- `<judge>`                       order-0 pick
- `<judge> order <k>`             pick in order k (k = 1..K−1)
- `<judge> majority`              vote over all K orders; acts only when every order parsed
- `<judge> agree>=<k>/<K>`        majority pick when every order parsed and at least k of K
                                  orders agree (k = 2..K; k = 1 is the majority policy)
- `<judge> agree>=<k>/<K> rejected`  order-0 pick on the prompts that gate declines
- `<judge>+<other> agree`         order-0 pick where both judges' order-0 picks match
- `<judge>+<other> agree rejected`   `<judge>`'s order-0 pick where they do not
  (including prompts where `<other>` returned nothing); one entry per ordered pair
- `<scorer>`                      argmax content score, ties to the lowest canonical index
- `<judge>+<scorer> agree` / `<judge>+<scorer> agree rejected`
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audit_core.selection.data import SelectionData, compact_indices
from audit_core.selection.gates import agreement_gate, pair_agreement, rejected
from audit_core.selection.votes import ABSTAIN, all_parsed, majority_vote, valid_picks

__all__ = [
    "ABSTAIN", "PolicySpec", "all_parsed", "majority_vote", "policy_picks", "policy_specs", "scorer_pick",
    "valid_picks",
]


@dataclass(frozen=True)
class PolicySpec:
    """One evaluated policy: its contract name, kind, the judge it rests on and its picks.

    kind ∈ judge, order, majority, order_gate, order_gate_rejected, judge_gate,
    judge_gate_rejected, scorer, scorer_gate, scorer_gate_rejected.
    threshold: k of an order gate (1 for majority, None otherwise); orders: K for both;
    partner: the other judge or scorer of an agreement gate. pick is kept as `data.compact_indices`
    makes it (int8 for pools under 128 images: a study's ~60 policies at ten million prompts).
    """

    name: str
    kind: str
    base_judge: str | None
    pick: np.ndarray
    threshold: int | None = None
    orders: int | None = None
    partner: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "pick", compact_indices(self.pick))


def scorer_pick(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """argmax of the content score over existing candidates; ties to the lowest index.

    ABSTAIN where no candidate of the pool has a score.
    """
    filled = np.where(mask & ~np.isnan(scores), scores, -np.inf)
    best = filled.argmax(axis=1)
    return np.where(np.isfinite(filled.max(axis=1)), best, ABSTAIN)


def policy_specs(data: SelectionData) -> list[PolicySpec]:
    """Every policy of the naming contract, in display order (see module docstring)."""
    width = data.mask.shape[1]
    specs: list[PolicySpec] = []
    base = {j: valid_picks(data.picks[j][:, 0]) for j in data.judges}
    for judge in data.judges:
        picks = valid_picks(data.picks[judge])
        n_orders = picks.shape[1]
        specs.append(PolicySpec(judge, "judge", judge, base[judge]))
        for k in range(1, n_orders):
            specs.append(PolicySpec(f"{judge} order {k}", "order", judge, picks[:, k]))
        winner, _ = majority_vote(picks, width)
        specs.append(PolicySpec(f"{judge} majority", "majority", judge, winner, 1, n_orders))
        for k in range(2, n_orders + 1):
            gate = agreement_gate(picks, width, k)
            name = f"{judge} agree>={k}/{n_orders}"
            specs.append(PolicySpec(name, "order_gate", judge, gate, k, n_orders))
            specs.append(
                PolicySpec(f"{name} rejected", "order_gate_rejected", judge, rejected(base[judge], gate), k, n_orders)
            )
        for other in data.judges:
            if other == judge:
                continue
            gate = pair_agreement(base[judge], base[other])
            name = f"{judge}+{other} agree"
            specs.append(PolicySpec(name, "judge_gate", judge, gate, partner=other))
            specs.append(
                PolicySpec(f"{name} rejected", "judge_gate_rejected", judge, rejected(base[judge], gate), partner=other)
            )
    content = {s: scorer_pick(data.scores[s], data.mask) for s in data.scorers}
    for scorer, pick in content.items():
        specs.append(PolicySpec(scorer, "scorer", None, pick))
    for judge in data.judges:
        for scorer, pick in content.items():
            gate = pair_agreement(base[judge], pick)
            name = f"{judge}+{scorer} agree"
            specs.append(PolicySpec(name, "scorer_gate", judge, gate, partner=scorer))
            specs.append(
                PolicySpec(f"{name} rejected", "scorer_gate_rejected", judge, rejected(base[judge], gate), partner=scorer)
            )
    return specs


def policy_picks(data: SelectionData) -> dict[str, np.ndarray]:
    """Policy name -> (P,) canonical index returned per prompt, −1 where it abstains.

    Covers every name of the contract except `random` and `oracle`, which have no
    single pick (see the module docstring).
    """
    return {spec.name: spec.pick for spec in policy_specs(data)}


@dataclass(frozen=True)
class PolicyPicks:
    """Every policy's picks with what each policy is, as the app browses them (and keeps them in the audit
    cache): picks: name -> (P,) canonical index, −1 where it abstains; kinds: name -> `PolicySpec.kind`;
    base_judges: name -> the judge it rests on ("" for a scorer). Names in display order."""

    picks: dict[str, np.ndarray]
    kinds: dict[str, str]
    base_judges: dict[str, str]


def picks_of(specs: list[PolicySpec]) -> PolicyPicks:
    """The `PolicyPicks` of `specs` (e.g. `policy_specs` with the debiased policies added)."""
    return PolicyPicks(picks={s.name: s.pick for s in specs}, kinds={s.name: s.kind for s in specs},
                       base_judges={s.name: s.base_judge or "" for s in specs})
