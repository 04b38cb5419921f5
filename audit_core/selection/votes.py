"""Votes across presentation orders: the primitives every order-based policy uses.

picks are (P, K) canonical indices per (prompt, order); negative values (no pick,
no call) never count as a vote.
"""

from __future__ import annotations

import numpy as np

ABSTAIN = -1


def valid_picks(picks: np.ndarray) -> np.ndarray:
    """Picks with NO_PICK and NO_CALL both mapped to ABSTAIN."""
    return np.where(picks >= 0, picks, ABSTAIN)


def all_parsed(picks: np.ndarray) -> np.ndarray:
    """(P,) True where every order returned a valid pick."""
    return (picks >= 0).all(axis=1)


def vote_counts(picks: np.ndarray, width: int) -> np.ndarray:
    """(P, width) number of orders whose valid pick is each canonical index."""
    return (picks[:, :, None] == np.arange(width)[None, None, :]).sum(axis=1)


def majority_vote(picks: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Majority pick and its vote count per prompt.

    Ties are broken by canonical order (lowest index wins). The pick is ABSTAIN and
    the count 0 unless every order parsed.
    """
    counts = vote_counts(picks, width)
    parsed = all_parsed(picks)
    winner = np.where(parsed, counts.argmax(axis=1), ABSTAIN)
    top = np.where(parsed, counts.max(axis=1), 0)
    return winner, top
