"""The pick of a score: argmax over a pool, ties broken by a fixed order of the candidate ids.

Tie order: among candidates within TIE_TOLERANCE (relative) of the best score, the one with the
smallest id_hash("<prompt id>/<candidate id>", "tie") wins. Neither the order-0 pick nor the
lowest canonical index would do: both point at the image shown in slot A of order 0 (order 0 is
canonical), which would hand the ties of a judge with a pure slot preference back to that slot.
No rating enters the rule.
"""

from __future__ import annotations

import numpy as np
from numpy.dtypes import StringDType

from audit_core.chunks import row_chunks
from audit_core.selection.data import NO_PICK, index_dtype
from audit_core.stats.id_hash import id_hashes

TIE_TOLERANCE = 1e-9
TIE_CHUNK = 1 << 16  # prompts whose tie keys are hashed at once


def tie_order(prompt_ids: np.ndarray, candidate_ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """(P, M) rank of each candidate in its pool's tie order (0 wins a tie); −1 in padding; of type
    `data.index_dtype(M)`. The "<prompt id>/<candidate id>" texts are made TIE_CHUNK prompts at a time,
    so a study of millions of prompts never holds them all."""
    order = np.full(np.shape(mask), -1, dtype=index_dtype(np.shape(mask)[1]))
    prompts = np.asarray(prompt_ids, dtype=StringDType())
    for rows in row_chunks(len(order), TIE_CHUNK):
        texts = np.char.add(np.char.add(prompts[rows, None], "/"), np.asarray(candidate_ids[rows], dtype=StringDType()))
        keys = np.where(mask[rows], id_hashes(texts, "tie"), np.iinfo(np.uint64).max)
        rank = np.argsort(np.argsort(keys, axis=1, kind="stable"), axis=1, kind="stable")
        order[rows] = np.where(mask[rows], rank, -1)
    return order


def best_of(scores: np.ndarray, eligible: np.ndarray, order: np.ndarray,
            tolerance: float = TIE_TOLERANCE) -> np.ndarray:
    """(P,) the eligible candidate with the highest score; candidates within tolerance·max(1, |best|)
    of the best tie, and the tie goes to the lowest `order` (`tie_order`). NO_PICK where no candidate
    is eligible or the best score is not finite."""
    filled = np.where(eligible, scores, -np.inf)
    top = filled.max(axis=1, initial=-np.inf)
    with np.errstate(invalid="ignore"):
        tied = eligible & (filled >= top[:, None] - tolerance * np.maximum(1.0, np.abs(top[:, None])))
    order = np.asarray(order)
    ranked = np.where(tied, order, np.iinfo(order.dtype).max)  # above every rank of a pool
    pick = ranked.argmin(axis=1)
    return np.where(np.isfinite(top) & eligible.any(axis=1), pick, NO_PICK)
