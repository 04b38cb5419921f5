"""`{judge} borda`: the Borda count over the K orders' rankings (DESIGN §4d).

In an order whose call ranked every candidate (`OrderedCalls.full_ranking`), the image at rank r
(0 = first) gets m − 1 − r points. The policy picks the image with the most points summed over the
orders; ties follow `ties.best_of` (a fixed order of the candidate ids, no rating).

Prompts without a full ranking in every order (the rule, and the count reported): an order that
returned a pick but no full ranking is a ballot naming only its first place, scored as such ballots
usually are: m − 1 points to the pick and the mean of the remaining points, (m − 2)/2, to every other
image; an order without a pick gives every image the mean, (m − 1)/2. So a judge answering with
choices only (no ranking anywhere) gets the plurality of its orders' picks. A prompt where no order
returned a pick gets NO_PICK.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audit_core.selection.debiased.calls import OrderedCalls, by_prompt_chunks
from audit_core.selection.debiased.ties import best_of


@dataclass(frozen=True)
class BordaPicks:
    """pick: (P,) canonical index or NO_PICK; points: (P, M) summed Borda points (NaN in padding);
    full: (P,) every order gave a full ranking; fallback: (P,) some order did not but one returned a
    pick (the rule of the module docstring); abstained: (P,) no order returned a pick."""

    pick: np.ndarray
    points: np.ndarray
    full: np.ndarray
    fallback: np.ndarray
    abstained: np.ndarray

    def counts(self) -> dict[str, int]:
        """Prompts by how they were handled: full, fallback, abstained."""
        return {"full": int(self.full.sum()), "fallback": int(self.fallback.sum()),
                "abstained": int(self.abstained.sum())}


def borda_points(calls: OrderedCalls) -> np.ndarray:
    """(P, M) Borda points summed over the orders (module docstring), NaN in padding."""
    m = calls.pool_sizes.astype(float)[:, None, None]
    full, valid = calls.full_ranking, calls.valid
    ballot = np.broadcast_to((m - 1) / 2, (calls.n_prompts, calls.n_orders, calls.width)).copy()
    ballot[valid & ~full] = np.broadcast_to((m - 2) / 2, ballot.shape)[valid & ~full]
    p, k = np.nonzero(valid & ~full)
    ballot[p, k, calls.picks[p, k]] = m[p, 0, 0] - 1
    p, k, r = np.nonzero(full[:, :, None] & (calls.rankings >= 0))
    ballot[p, k, calls.rankings[p, k, r]] = m[p, 0, 0] - 1 - r
    return np.where(calls.mask, ballot.sum(axis=1), np.nan)


def borda_picks(calls: OrderedCalls) -> BordaPicks:
    """The Borda policy's pick per prompt (module docstring), a chunk of prompts at a time."""
    return by_prompt_chunks(calls, _borda_of)


def _borda_of(calls: OrderedCalls) -> BordaPicks:
    points = borda_points(calls)
    acted = calls.valid.any(axis=1)
    full = calls.full_ranking.all(axis=1)
    pick = best_of(points, calls.mask & acted[:, None], calls.tie_ranks)
    return BordaPicks(pick=pick, points=points, full=full, fallback=acted & ~full, abstained=~acted)
