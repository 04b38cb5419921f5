"""Deterministic SIMULATED judges and scorer for the built-in demo.

Profiles live in runners/judges/simulated.json (versioned; its hash is the
"model revision"). A simulated selector reads each image's content signal from
its pixels (`runners.demo.images.content_signal`), adds its slot prior and
noise drawn from a generator seeded by the request key, and writes raw text in
the requested contract, so the same call always returns the same text and the
text goes through the same recorder and parser as a real judge's. The weak
profile sometimes answers with a bare label or with prose.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

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

    def generate(self, request: JudgeRequest) -> str:
        """Deterministic raw text for `request`, in its contract (or a scripted format error)."""
        rng = _seeded(self.profile, request.request_key)
        m = len(request.labels)
        prior = np.array([self.slot_prior[j] if j < len(self.slot_prior) else 0.0 for j in range(m)])
        content = np.array([self.signal(path, request.prompt) for path in request.image_paths])
        utility = self.content_weight * content + prior + self.noise * rng.normal(size=m)
        order = np.argsort(-utility, kind="stable")
        ranking = [request.labels[j] for j in order]
        u = rng.random()
        if u < self.bare_label_rate:
            return f" {ranking[0]}"
        if u < self.bare_label_rate + self.prose_rate:
            best = int(order[0])
            ordinal = ORDINALS[best] if best < len(ORDINALS) else f"number {best + 1}"
            return f"I think the {ordinal} image is best."
        if request.contract == "choice":
            return json.dumps({"choice": ranking[0]})
        return json.dumps({"choice": ranking[0], "ranking": ranking})

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
