"""Deterministic SIMULATED attribute judges for the built-in demo and the tests.

Profiles live in runners/judges/simulated_labelers.json (versioned; its hash is the
"model revision"; its note gives the rule). As a simulation device only, a simulated
labeler is handed the dataset's gold labels as its hidden view of each image, which is
what lets a demo show a judge that is accurate on visible attributes and abstains on
weakly visible ones, a judge that always guesses, drift off the taxonomy when the label
lists are withheld and guessing when the abstention option is. Real judges never see
gold labels. Its answers are raw text in the instruction's JSON contract (rationales say
SIMULATED), parsed and recorded like a real judge's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from audit_core.attributes.taxonomy import Attribute
from runners.backends.simulated_profiles import profile_revision, profile_spec, seeded
from runners.labels.protocol import LabelRequest

PROFILE_FILE = Path(__file__).resolve().parent.parent / "judges" / "simulated_labelers.json"
ANY_ATTRIBUTE = "*"


def _rate(rates: Mapping[str, float], attribute: str) -> float:
    return rates.get(attribute, rates.get(ANY_ATTRIBUTE, 0.0))


def free_text(label: str) -> str:
    """How a label drifts when no list is shown: lower case, else capitalised, else with " (free text)": never the label."""
    for variant in (label.lower(), label.capitalize()):
        if variant != label:
            return variant
    return f"{label} (free text)"


@dataclass(frozen=True)
class SimulatedLabeler:
    """A simulated attribute judge; see runners/judges/simulated_labelers.json for the profile fields."""

    profile: str
    gold: Mapping[str, Mapping[str, str]]  # candidate id -> attribute -> gold label (the simulation's peek)
    accuracy: Mapping[str, float]
    abstain: Mapping[str, float]
    drift: float
    prose_rate: float

    def answer(self, request: LabelRequest, attribute: Attribute) -> tuple[str, str]:
        """(the answer as written, its rationale) for one attribute of one image under the request's condition."""
        draws = seeded(self.profile, request.dataset, request.candidate_id, attribute.name)
        u_abstain, u_correct, u_drift = draws.random(3)
        truth = self.gold.get(request.candidate_id, {}).get(attribute.name)
        if request.abstention and u_abstain < _rate(self.abstain, attribute.name):
            return attribute.abstain, "SIMULATED: no evidence it trusts for this attribute"
        if truth in attribute.labels and u_correct < _rate(self.accuracy, attribute.name):
            label, why = truth, "SIMULATED: answered from the gold label"
        else:
            others = [x for x in attribute.labels if x != truth] or list(attribute.labels)
            label, why = others[int(draws.integers(len(others)))], "SIMULATED: a guess"
        if not request.label_list and u_drift < self.drift:
            return free_text(label), f"{why}, written as free text"
        return label, why

    def generate(self, request: LabelRequest) -> str:
        """Deterministic raw text: the JSON contract, or (at the profile's rate) prose."""
        answers = {a.name: self.answer(request, a) for a in request.taxonomy.attributes}
        if seeded(self.profile, request.request_key).random() < self.prose_rate:
            return "The image shows " + ", ".join(f"{name} {label}" for name, (label, _) in answers.items()) + "."
        return json.dumps({name: {"label": label, "rationale": why} for name, (label, why) in answers.items()},
                          ensure_ascii=False)

    def model_revision(self) -> str:
        return profile_revision(PROFILE_FILE, self.profile)


def simulated_labeler(profile: str, gold: pd.DataFrame) -> SimulatedLabeler:
    """The simulated labeler `profile` (careful, guesser, …) peeking at `gold`
    (candidate_id, attribute, label); ValueError if the profile is unknown."""
    spec = profile_spec(PROFILE_FILE, "labelers", "labeler", profile)
    by_image: dict[str, dict[str, str]] = {}
    for cid, attribute, label in zip(gold["candidate_id"], gold["attribute"], gold["label"]):
        by_image.setdefault(cid, {})[attribute] = label
    return SimulatedLabeler(
        profile=profile,
        gold=by_image,
        accuracy={str(k): float(v) for k, v in spec["accuracy"].items()},
        abstain={str(k): float(v) for k, v in spec["abstain"].items()},
        drift=float(spec["drift"]),
        prose_rate=float(spec.get("format_errors", {}).get("prose", 0.0)),
    )
