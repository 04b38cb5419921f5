"""One colour per judge and per policy kind, the same on every page, figure and dataset.

A name (judge, scorer, rating judge) gets its colour from a hash of the name, so
`qwen` is drawn alike in every dataset and report; only when two names of one
figure hash to the same colour does the later one (in sorted order) move to the
next free colour. Random, the oracle and a gate's kept and rejected sides have
fixed colours that no name can take.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

# Okabe–Ito (without black, grey and yellow) and four of Paul Tol's muted colours:
# distinguishable for colour-blind readers, and none of them reserved below.
NAME_PALETTE: tuple[str, ...] = (
    "#E69F00", "#0072B2", "#009E73", "#CC79A7", "#D55E00", "#56B4E9",
    "#332288", "#999933", "#44AA99", "#882255",
)
RANDOM = "#888888"
ORACLE = "#222222"
KEPT = "#1B5E20"
REJECTED = "#B71C1C"
STAR = "#FFC20A"
KIND_COLOURS: dict[str, str] = {"random": RANDOM, "oracle": ORACLE}
SIDE_COLOURS: dict[str, str] = {"kept": KEPT, "rejected": REJECTED}
# a policy resting on a judge takes the judge's colour; its kind shows as the marker
KIND_SYMBOLS: dict[str, str] = {
    "random": "line-ns-open", "oracle": "star", "judge": "circle", "order": "circle-open", "majority": "square",
    "debiased": "pentagon", "order_gate": "diamond", "order_gate_rejected": "diamond-open", "judge_gate": "triangle-up",
    "judge_gate_rejected": "triangle-up-open", "scorer": "star-square", "scorer_gate": "cross",
    "scorer_gate_rejected": "x", "composed_gate": "hexagram", "composed_gate_rejected": "hexagram-open",
}


def preferred_index(name: str) -> int:
    """Index into NAME_PALETTE chosen by the SHA-256 of `name` (stable across runs and machines)."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:4], "big") % len(NAME_PALETTE)


def name_colours(names: Iterable[str]) -> dict[str, str]:
    """name -> colour: each name's hashed colour, the next free one on a clash within `names`
    (sorted order decides), cycling only beyond len(NAME_PALETTE) names."""
    out: dict[str, str] = {}
    taken: set[int] = set()
    for name in sorted(set(names)):
        index = preferred_index(name)
        if len(taken) < len(NAME_PALETTE):
            while index in taken:
                index = (index + 1) % len(NAME_PALETTE)
        taken.add(index)
        out[name] = NAME_PALETTE[index]
    return out


def policy_colour(kind: str, base_judge: str | None, names: dict[str, str], policy: str | None = None) -> str:
    """The colour a policy row is drawn in: fixed for random and the oracle, its judge's (or,
    for a scorer, its own name's) colour otherwise, grey when neither is known."""
    if kind in KIND_COLOURS:
        return KIND_COLOURS[kind]
    key = base_judge if base_judge is not None else policy
    return names.get(key, RANDOM) if key is not None else RANDOM
