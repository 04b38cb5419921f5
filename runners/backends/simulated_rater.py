"""Deterministic SIMULATED rating judges for the built-in demo.

Profiles live in runners/judges/simulated_raters.json (versioned; its hash is
the "model revision"; its note gives the formula). A simulated rater is given
the reference pools' consensus per item as its hidden view of the images: it
is a model of a judge whose sense of quality blends the pools' in set
proportions, which is what lets a demo show a positivity floor, a tilt toward
one pool, a persona that moves the tilt part of the way and a rater that
abstains on contested items. Real judges never see ratings. Its answers are
raw text in the rubric's format, parsed and recorded like a real judge's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from runners.backends.simulated_profiles import profile_revision, profile_spec, seeded
from runners.rating.protocol import RatingRequest

PROFILE_FILE = Path(__file__).resolve().parent.parent / "judges" / "simulated_raters.json"
ANY_POOL = "*"


def _pulled(weights: dict[str, float], toward: str | None, fraction: float) -> dict[str, float]:
    """Normalised weights moved `fraction` of the way to all weight on pool `toward` (unchanged if it is absent)."""
    if toward is None or toward not in weights or fraction == 0:
        return weights
    return {p: (1 - fraction) * w + (fraction if p == toward else 0.0) for p, w in weights.items()}


@dataclass(frozen=True)
class SimulatedRater:
    """A simulated rating judge; see runners/judges/simulated_raters.json for the profile fields."""

    profile: str
    consensus: Mapping[str, Mapping[str, float]]  # candidate id -> pool -> consensus on the rubric's scale
    pool_weights: Mapping[str, float]
    offset: float
    noise: float
    floor: int | None
    floor_leak: float
    abstain_spread: float | None
    demonstration_pull: float
    conditions: Mapping[str, tuple[str, float]]  # condition -> (pool, fraction of the way toward it)
    json_rate: float
    prose_rate: float

    def view(self, request: RatingRequest) -> float:
        """The rater's sense of the item under the request's condition: a weighted mean of the pools' consensus."""
        pools = self.consensus.get(request.candidate_id)
        if not pools:
            raise RuntimeError(f"simulated rater {self.profile!r}: no pool consensus for item {request.candidate_id!r}")
        raw = {p: self.pool_weights.get(p, self.pool_weights.get(ANY_POOL, 0.0)) for p in pools}
        total = sum(raw.values())
        if total <= 0:
            raise RuntimeError(f"simulated rater {self.profile!r}: no weighted pool rated item {request.candidate_id!r}")
        weights = {p: w / total for p, w in raw.items()}
        toward, fraction = self.conditions.get(request.condition, (None, 0.0))
        weights = _pulled(weights, toward, fraction)
        weights = _pulled(weights, request.demonstration_pool, self.demonstration_pull)
        return sum(w * pools[p] for p, w in weights.items())

    def rating(self, request: RatingRequest) -> int | None:
        """The point on the scale this rater gives, or None when it abstains."""
        scale = request.scale
        pools = self.consensus.get(request.candidate_id, {})
        if (self.abstain_spread is not None and scale.abstain and pools
                and max(pools.values()) - min(pools.values()) >= self.abstain_spread):
            return None
        draws = seeded(self.profile, request.dataset, request.candidate_id)  # same draw under every condition
        z, leak = draws.normal(), draws.random()
        value = int(np.clip(np.floor(self.view(request) + self.offset + self.noise * z + 0.5), scale.lo, scale.hi))
        if self.floor is not None and value < self.floor and leak >= self.floor_leak:
            value = self.floor
        return value

    def generate(self, request: RatingRequest) -> str:
        """Deterministic raw text: the rating, the abstention label, or a scripted format variant."""
        value = self.rating(request)
        answer = request.scale.abstain if value is None else str(value)
        u = seeded(self.profile, request.request_key).random()
        if u < self.prose_rate:
            return f"I would rate this image {answer}."
        if u < self.prose_rate + self.json_rate:
            return json.dumps({"rating": answer if value is None else value})
        return answer

    def model_revision(self) -> str:
        return profile_revision(PROFILE_FILE, self.profile)


def consensus_by_item(consensus: pd.DataFrame) -> dict[str, dict[str, float]]:
    """{candidate id: {pool: consensus}} from a (candidate_id, pool, consensus) frame."""
    out: dict[str, dict[str, float]] = {}
    for cid, pool, value in zip(consensus["candidate_id"], consensus["pool"], consensus["consensus"]):
        out.setdefault(cid, {})[pool] = float(value)
    return out


def simulated_rater(profile: str, consensus: pd.DataFrame) -> SimulatedRater:
    """The simulated rater `profile` (floor, tilted, unsure, …) seeing `consensus`; ValueError if unknown.

    `consensus` has columns candidate_id, pool, consensus on the rubric's scale
    (`runners.rating.recorder.pool_consensus`).
    """
    spec = profile_spec(PROFILE_FILE, "raters", "rater", profile)
    errors = spec.get("format_errors", {})
    return SimulatedRater(
        profile=profile,
        consensus=consensus_by_item(consensus),
        pool_weights={str(k): float(v) for k, v in spec["pool_weights"].items()},
        offset=float(spec["offset"]),
        noise=float(spec["noise"]),
        floor=None if spec["floor"] is None else int(spec["floor"]),
        floor_leak=float(spec["floor_leak"]),
        abstain_spread=None if spec["abstain_spread"] is None else float(spec["abstain_spread"]),
        demonstration_pull=float(spec["demonstration_pull"]),
        conditions={name: (str(s["toward"]), float(s["fraction"])) for name, s in spec["conditions"].items()},
        json_rate=float(errors.get("json", 0.0)),
        prose_rate=float(errors.get("prose", 0.0)),
    )
