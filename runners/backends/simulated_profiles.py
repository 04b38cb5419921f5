"""What the SIMULATED attribute and rating judges share: their versioned profile files (read once;
the file's hash is the "model revision") and deterministic draws seeded by what a call is about."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path

import numpy as np


@cache
def read_profiles(path: Path) -> tuple[dict, str]:
    """(the profile file's JSON, sha256 of its bytes)."""
    data = path.read_bytes()
    return json.loads(data), hashlib.sha256(data).hexdigest()


def profile_spec(path: Path, section: str, kind: str, name: str) -> dict:
    """Profile `name` of the file's `section`; ValueError naming the known ones if there is none."""
    known = read_profiles(path)[0][section]
    if name not in known:
        raise ValueError(f"unknown simulated {kind} profile {name!r} (known: {', '.join(sorted(known))})")
    return known[name]


def profile_revision(path: Path, name: str) -> str:
    """`<file> v<version> sha256:<16 hex> profile <name>`: which profile of which file answered."""
    profiles, sha = read_profiles(path)
    return f"{path.name} v{profiles['version']} sha256:{sha[:16]} profile {name}"


def seeded(*parts: str) -> np.random.Generator:
    """A generator seeded by sha256 of the parts joined by "|": the same parts, the same draws."""
    digest = hashlib.sha256("|".join(parts).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))
