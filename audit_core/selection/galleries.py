"""Example galleries for the report, chosen by fixed rules over the data (never by hand).

Each rule is a pure function of `SelectionData` and returns a frame with one row per chosen
pool: `judge`, `partner` (the scorer of rule d, else None), `row` (the prompt's index on
axis 0), `prompt_id`, `key` (the value the rule ranks by), `picks` (a tuple of canonical
indices: the images the rule is about) and `slot` (rule b's slot, else −1). Every rule
takes at most `limit` pools per judge (per judge and scorer for rule d), ranked by `key`
descending with ties broken by prompt id; judges and scorers in sorted order.

a) `largest_regret_below_mean`: the judge's order-0 pick is below the pool mean
   (h_pick < h̄, `metrics.below_mean`); ranked by regret h* − h_pick.
b) `same_slot_every_order`: every one of the judge's K ≥ 2 orders parsed, all K picks sit
   in the same slot and are K different images (so the returned image changes with the
   order); ranked by the spread (max − min alignment) of the images returned.
c) `unanimity_keeps_below_mean`: the unanimity gate `<judge> agree>=K/K` (K ≥ 2) acts and
   its pick is below the pool mean; ranked by its regret.
d) `judge_scorer_disagreement`: the judge's order-0 pick and the scorer's top image differ;
   key = (s_top − s_judge) / (s_max − s_min), the scorer's margin against the judge's pick
   as a share of the pool's score range (1 = the judge took the scorer's lowest image);
   pools whose scores are all equal are skipped; ties by |h_judge − h_scorer| descending.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from audit_core.selection import metrics
from audit_core.selection.data import SelectionData
from audit_core.selection.gates import agreement_gate
from audit_core.selection.policies import scorer_pick
from audit_core.selection.votes import valid_picks

GALLERY_COLUMNS = ["judge", "partner", "row", "prompt_id", "key", "picks", "slot"]
LIMIT = 4
RULES = {
    "largest_regret_below_mean": "The largest-regret below-mean picks: the judge's order-0 pick is below the pool "
                                 "mean; the pools where its regret is largest.",
    "same_slot_every_order": "Same slot, different image: in every order the judge picks the same slot, so it "
                             "returns a different image each time; the pools where those images differ most in alignment.",
    "unanimity_keeps_below_mean": "The unanimity gate keeps a below-mean pick: all orders agree on an image rated "
                                  "below the pool mean; the pools where its regret is largest.",
    "judge_scorer_disagreement": "Judge and content scorer disagree most: the judge's order-0 pick against the "
                                 "scorer's top image, ranked by the scorer's margin over the judge's pick as a share "
                                 "of the pool's score range.",
}


def _top(data: SelectionData, judge: str, partner: str | None, rows: np.ndarray, key: np.ndarray, picks: list[tuple],
         limit: int, slot: np.ndarray | None = None, tie: np.ndarray | None = None) -> pd.DataFrame:
    """The `limit` rows with the largest key (then the largest tie-breaker, then prompt id)."""
    ids = data.prompts["prompt_id"].to_numpy()[rows]
    tie = np.zeros(len(rows)) if tie is None else tie
    order = np.lexsort((ids, -tie, -key))[:limit]
    return pd.DataFrame({
        "judge": judge, "partner": partner, "row": rows[order].astype(int), "prompt_id": ids[order],
        "key": key[order], "picks": [picks[i] for i in order],
        "slot": (np.full(len(rows), -1) if slot is None else slot)[order].astype(int),
    }, columns=GALLERY_COLUMNS)


def _stack(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=GALLERY_COLUMNS)


def largest_regret_below_mean(data: SelectionData, limit: int = LIMIT) -> pd.DataFrame:
    """Rule a (module docstring): each judge's below-mean order-0 picks with the largest regret."""
    h = data.utility
    out = []
    for judge in data.judges:
        pick = valid_picks(data.picks[judge][:, 0])
        rows = np.flatnonzero(metrics.below_mean(h, pick) == 1)
        out.append(_top(data, judge, None, rows, metrics.regret(h, pick)[rows], [(int(pick[r]),) for r in rows], limit))
    return _stack(out)


def same_slot_every_order(data: SelectionData, limit: int = LIMIT) -> pd.DataFrame:
    """Rule b: prompts where every order's pick is in one slot and no two orders return the same image."""
    h = data.utility
    out = []
    for judge in data.judges:
        picks, slots = data.picks[judge], data.slots[judge]
        if picks.shape[1] < 2:
            continue
        parsed = (picks >= 0).all(axis=1)
        one_slot = (slots == slots[:, :1]).all(axis=1)
        distinct = np.array([len(set(p)) == len(p) for p in picks.tolist()])
        rows = np.flatnonzero(parsed & one_slot & distinct)
        returned = h[rows[:, None], picks[rows]]
        spread = returned.max(axis=1) - returned.min(axis=1) if len(rows) else np.zeros(0)
        out.append(_top(data, judge, None, rows, spread, [tuple(int(x) for x in picks[r]) for r in rows], limit,
                        slot=slots[rows, 0]))
    return _stack(out)


def unanimity_keeps_below_mean(data: SelectionData, limit: int = LIMIT) -> pd.DataFrame:
    """Rule c: prompts where `<judge> agree>=K/K` acts on an image below the pool mean, largest regret first."""
    h = data.utility
    out = []
    for judge in data.judges:
        picks = valid_picks(data.picks[judge])
        k = picks.shape[1]
        if k < 2:
            continue
        gate = agreement_gate(picks, data.mask.shape[1], k)
        rows = np.flatnonzero(metrics.below_mean(h, gate) == 1)
        out.append(_top(data, judge, None, rows, metrics.regret(h, gate)[rows], [(int(gate[r]),) for r in rows], limit))
    return _stack(out)


def judge_scorer_disagreement(data: SelectionData, limit: int = LIMIT) -> pd.DataFrame:
    """Rule d: per judge and scorer, the pools where the scorer's margin over the judge's pick is largest."""
    h = data.utility
    out = []
    for scorer in data.scorers:
        scores = np.where(data.mask, data.scores[scorer], np.nan)
        top = scorer_pick(scores, data.mask)
        with np.errstate(invalid="ignore"):
            span = np.nanmax(np.where(np.isnan(scores), -np.inf, scores), axis=1) - \
                np.nanmin(np.where(np.isnan(scores), np.inf, scores), axis=1)
        for judge in data.judges:
            pick = valid_picks(data.picks[judge][:, 0])
            s_judge, s_top = metrics.picked(scores, pick), metrics.picked(scores, top)
            usable = (pick >= 0) & (top >= 0) & (pick != top) & np.isfinite(span) & (span > 0) & ~np.isnan(s_judge)
            rows = np.flatnonzero(usable)
            key = (s_top[rows] - s_judge[rows]) / span[rows]
            tie = np.abs(metrics.picked(h, pick) - metrics.picked(h, top))[rows]
            out.append(_top(data, judge, scorer, rows, key, [(int(pick[r]), int(top[r])) for r in rows], limit,
                            tie=np.nan_to_num(tie)))
    return _stack(out)


GALLERY_RULES = {
    "largest_regret_below_mean": largest_regret_below_mean,
    "same_slot_every_order": same_slot_every_order,
    "unanimity_keeps_below_mean": unanimity_keeps_below_mean,
    "judge_scorer_disagreement": judge_scorer_disagreement,
}


def galleries(data: SelectionData, limit: int = LIMIT) -> dict[str, pd.DataFrame]:
    """Rule name → its chosen pools (see the module docstring), in the order of `RULES`."""
    return {name: rule(data, limit) for name, rule in GALLERY_RULES.items()}
