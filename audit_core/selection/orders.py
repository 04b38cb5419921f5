"""Presentation orders: canonical order, cyclic rotations and slot labels.

Order 0 is canonical (candidate ids sorted). Other orders are distinct cyclic
rotations of it. Imported logs keep their recorded slot order; these helpers are
only for new runs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np


def slot_labels(m: int) -> list[str]:
    """Slot labels A, B, C, … for a pool of `m` images."""
    if not 1 <= m <= 26:
        raise ValueError(f"pool size {m} is outside 1..26")
    return [chr(ord("A") + i) for i in range(m)]


def canonical(candidate_ids: Sequence[str]) -> list[str]:
    """Canonical order: the candidate ids sorted."""
    return sorted(candidate_ids)


def rotate(items: Sequence[str], shift: int) -> list[str]:
    """Cyclic rotation: slot j shows items[(j + shift) mod m]."""
    m = len(items)
    return [items[(j + shift) % m] for j in range(m)]


def rotation_shifts(m: int, n_orders: int, seed: int | None = None, key: str = "") -> list[int]:
    """Shifts for `n_orders` distinct orders of a pool of size m; shift 0 first.

    Without a seed: 0, 1, …, n_orders−1. With a seed: 0 then a choice of distinct
    non-zero shifts drawn from a generator seeded by (seed, key), so each pool
    (key = prompt id) gets its own reproducible draw.
    """
    if n_orders < 1:
        raise ValueError("need at least one order")
    if n_orders > m:
        raise ValueError(f"{n_orders} distinct orders need a pool of at least {n_orders} images; got {m}")
    if seed is None:
        return list(range(n_orders))
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    others = rng.choice(np.arange(1, m), size=n_orders - 1, replace=False)
    return [0, *sorted(int(s) for s in others)]


def presentation_orders(
    candidate_ids: Sequence[str], n_orders: int, seed: int | None = None, key: str = ""
) -> list[list[str]]:
    """The slot orders to show: canonical first, then distinct rotations of it."""
    base = canonical(candidate_ids)
    return [rotate(base, s) for s in rotation_shifts(len(base), n_orders, seed, key)]
