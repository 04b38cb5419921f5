"""Deterministic SIMULATED judges and scorer for the built-in demo.

Profiles live in runners/judges/simulated.json (versioned; its hash is the
"model revision"). A simulated selector reads each image's content signal from
its pixels (`runners.demo.images.content_signal`), adds its slot prior and
noise drawn from a generator seeded by the request key, and writes raw text in
the requested contract, so the same call always returns the same text and the
text goes through the same recorder and parser as a real judge's. The weak
profile sometimes answers with a bare label or with prose.

Label probabilities (`reply`): P(ℓ) = softmax(u / σ) over the call's utilities u
(content, slot prior and this call's noise; the ranking's own) at temperature
σ = noise, so the largest is at the pick, as a greedy model's is at the token it
writes. The reply's one label step is at its choice; prose has none.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy.special import softmax

from runners.backends.base import LabelStep, Reply
from runners.demo.images import content_signal
from runners.selection.protocol import JudgeRequest

PROFILE_FILE = Path(__file__).resolve().parent.parent / "judges" / "simulated.json"
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")

SignalFn = Callable[[str, str], float]


@lru_cache(maxsize=1)
def _profiles() -> tuple[dict, str]:
    data = PROFILE_FILE.read_bytes()
    return json.loads(data), hashlib.sha256(data).hexdigest()


def profile_descriptions(section: str) -> dict[str, str]:
    """Profile name -> its description, for one section ("selectors" or "scorers") of the profile file."""
    profiles, _ = _profiles()
    return {name: str(spec.get("description", "")) for name, spec in sorted(profiles[section].items())}


def _profile(section: str, name: str) -> dict:
    profiles, _ = _profiles()
    known = profiles[section]
    if name not in known:
        raise ValueError(f"unknown simulated {section[:-1]} profile {name!r} (known: {', '.join(sorted(known))})")
    return known[name]


def _revision(name: str) -> str:
    profiles, sha = _profiles()
    return f"simulated.json v{profiles['version']} sha256:{sha[:16]} profile {name}"


def _seeded(*parts: str) -> np.random.Generator:
    digest = hashlib.sha256("|".join(parts).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


@lru_cache(maxsize=65536)
def _cached_signal(path: str, prompt: str) -> float:
    return content_signal(path, prompt)


@dataclass(frozen=True)
class SimulatedSelector:
    """A simulated judge; see runners/judges/simulated.json for the profile fields."""

    profile: str
    slot_prior: tuple[float, ...]
    content_weight: float
    noise: float
    bare_label_rate: float
    prose_rate: float
    signal: SignalFn = _cached_signal

    def draws(self, request: JudgeRequest) -> tuple[np.ndarray, float]:
        """(the call's N(0, 1) noise per slot, its U(0, 1) format draw), in this order from one generator
        seeded by the request key."""
        rng = _seeded(self.profile, request.request_key)
        return rng.normal(size=len(request.labels)), float(rng.random())

    def utility(self, request: JudgeRequest) -> np.ndarray:
        """The call's utility per slot: content_weight · content signal + slot prior + noise · its N(0, 1) draw."""
        m = len(request.labels)
        prior = np.array([self.slot_prior[j] if j < len(self.slot_prior) else 0.0 for j in range(m)])
        content = np.array([self.signal(path, request.prompt) for path in request.image_paths])
        return self.content_weight * content + prior + self.noise * self.draws(request)[0]

    def label_probs(self, request: JudgeRequest) -> dict[str, float]:
        """P(ℓ) = softmax(u / noise) per offered label (module docstring); the pick alone without noise."""
        u = self.utility(request)
        probs = softmax(u / self.noise) if self.noise > 0 else (np.arange(len(u)) == np.argmax(u)).astype(float)
        return {label: float(p) for label, p in zip(request.labels, probs)}

    def reply(self, request: JudgeRequest) -> Reply:
        """`generate`'s text (called, so that a wrapper of it applies) with one label step at its choice."""
        text = self.generate(request)
        choice = self._answer(request)[1]
        return Reply(text, () if choice is None else (LabelStep(choice, self.label_probs(request)),))

    def generate(self, request: JudgeRequest) -> str:
        """Deterministic raw text for `request`, in its contract (or a scripted format error)."""
        return self._answer(request)[0]

    def _answer(self, request: JudgeRequest) -> tuple[str, str | None]:
        """(raw text, the label it gives as its choice; None for prose)."""
        order = np.argsort(-self.utility(request), kind="stable")
        ranking = [request.labels[j] for j in order]
        u = self.draws(request)[1]
        if u < self.bare_label_rate:
            return f" {ranking[0]}", ranking[0]
        if u < self.bare_label_rate + self.prose_rate:
            best = int(order[0])
            ordinal = ORDINALS[best] if best < len(ORDINALS) else f"number {best + 1}"
            return f"I think the {ordinal} image is best.", None
        if request.contract == "choice":
            return json.dumps({"choice": ranking[0]}), ranking[0]
        return json.dumps({"choice": ranking[0], "ranking": ranking}), ranking[0]

    def model_revision(self) -> str:
        return _revision(self.profile)


@dataclass(frozen=True)
class SimulatedScorer:
    """A content-only scorer: signal of each image alone plus noise seeded by (prompt, image name).

    The file name, not the full path, seeds the noise so a copy of the data scores the same.
    """

    profile: str
    content_weight: float
    noise: float
    signal: SignalFn = _cached_signal

    def score(self, prompt: str, image_paths: list[str]) -> list[float]:
        """One score per image; independent of the other images and of their order."""
        return [
            self.content_weight * self.signal(path, prompt) + self.noise * float(_seeded(self.profile, prompt, Path(path).name).normal())
            for path in image_paths
        ]

    def model_revision(self) -> str:
        return _revision(self.profile)


def simulated_selector(profile: str) -> SimulatedSelector:
    """The simulated judge `profile` (slot_a, strong, weak, …); ValueError if unknown."""
    spec = _profile("selectors", profile)
    errors = spec.get("format_errors", {})
    return SimulatedSelector(
        profile=profile,
        slot_prior=tuple(float(v) for v in spec["slot_prior"]),
        content_weight=float(spec["content_weight"]),
        noise=float(spec["noise"]),
        bare_label_rate=float(errors.get("bare_label", 0.0)),
        prose_rate=float(errors.get("prose", 0.0)),
    )


def simulated_scorer(profile: str = "content") -> SimulatedScorer:
    """The simulated content-only scorer `profile`; ValueError if unknown."""
    spec = _profile("scorers", profile)
    return SimulatedScorer(profile=profile, content_weight=float(spec["content_weight"]), noise=float(spec["noise"]))
