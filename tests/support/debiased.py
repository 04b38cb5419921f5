"""Calls for the debiased-selector tests: built without a store (orders are cyclic rotations: order k
shows canonical candidate (s + k) mod m in slot s, and what each call answered is given in slots), or
read from one (`stored_calls`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from audit_core import store
from audit_core.selection.data import NO_CALL, NO_PICK, SelectionData, load_selection_data
from audit_core.selection.debiased.calls import ABSENT, OrderedCalls, load_ordered_calls


def stored_calls(db: Path, dataset: str) -> tuple[SelectionData, dict[str, OrderedCalls]]:
    """(the dataset's SelectionData, judge -> its OrderedCalls) as the audit loads them from the store at `db`."""
    con = store.connect(db, read_only=True)
    try:
        data = load_selection_data(con, dataset)
        return data, load_ordered_calls(con, data)
    finally:
        con.close()


def rotated_calls(
    pool_sizes: Sequence[int],
    n_orders: int,
    *,
    slot_picks: Sequence[Sequence[int | None]] | None = None,
    slot_rankings: Sequence[Sequence[Sequence[int] | None]] | None = None,
    slot_probs: Sequence[Sequence[Sequence[float] | None]] | None = None,
    seconds: np.ndarray | None = None,
    prompt_ids: Sequence[str] | None = None,
    judge: str = "j",
) -> OrderedCalls:
    """OrderedCalls of len(pool_sizes) prompts in `n_orders` rotations.

    slot_rankings[p][k]: the slots in rank order (the pick is its first), or None for no ranking;
    slot_picks[p][k]: the picked slot, None for a call without a pick, or -2 (NO_CALL) for no call
    (default: the ranking's first slot); slot_probs[p][k]: each slot's label probability, or None.
    """
    n, width = len(pool_sizes), max(pool_sizes)
    ids = list(prompt_ids) if prompt_ids is not None else [f"p{p:04d}" for p in range(n)]
    mask = np.arange(width)[None, :] < np.asarray(pool_sizes)[:, None]
    candidates = np.where(mask, np.array([[f"{pid}_{c}" for c in range(width)] for pid in ids], dtype=object), "")
    slot_order = np.full((n, n_orders, width), ABSENT, dtype=np.int64)
    picks = np.full((n, n_orders), NO_PICK, dtype=np.int64)
    rankings = np.full((n, n_orders, width), ABSENT, dtype=np.int64)
    probs = np.full((n, n_orders, width), np.nan)
    for p, m in enumerate(pool_sizes):
        for k in range(n_orders):
            shown = [(s + k) % m for s in range(m)]
            slot_order[p, k, :m] = shown
            ranking = slot_rankings[p][k] if slot_rankings is not None else None
            if ranking is not None:
                rankings[p, k, : len(ranking)] = [shown[s] for s in ranking]
            pick = slot_picks[p][k] if slot_picks is not None else (ranking[0] if ranking is not None else None)
            if pick == NO_CALL:
                picks[p, k] = NO_CALL
                slot_order[p, k] = ABSENT
            elif pick is not None:
                picks[p, k] = shown[pick]
            if slot_probs is not None and slot_probs[p][k] is not None:
                probs[p, k, :m] = slot_probs[p][k]
    return OrderedCalls(
        judge=judge,
        prompt_ids=np.array(ids, dtype=object),
        candidate_ids=candidates,
        mask=mask,
        picks=picks,
        slot_order=slot_order,
        rankings=rankings,
        label_probs=probs,
        seconds=np.full((n, n_orders), np.nan) if seconds is None else seconds,
    )


def plackett_luce_rankings(utilities: np.ndarray, rng: np.random.Generator) -> list[int]:
    """One ranking drawn from a Plackett–Luce model with these utilities (Gumbel trick: sort u + Gumbel)."""
    return [int(i) for i in np.argsort(-(utilities + rng.gumbel(size=len(utilities))), kind="stable")]
