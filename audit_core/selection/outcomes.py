"""Per-prompt outcome of one judge: the frame the explorer filters on."""

from __future__ import annotations

import numpy as np
import pandas as pd

from audit_core.selection import gates, metrics, policies
from audit_core.selection.data import SelectionData


def _nullable(values: np.ndarray, known: np.ndarray) -> pd.array:
    """Boolean array with NA where `known` is False."""
    out = pd.array(values.astype(bool), dtype="boolean")
    out[~known] = pd.NA
    return out


def prompt_outcomes(data: SelectionData, judge: str) -> pd.DataFrame:
    """One row per prompt (aligned with data.prompts) describing `judge`'s action.

    Columns: prompt_id, prompt, country, category, m; pick_id (order-0 pick's
    candidate id, None when it failed); regret R = h* − h_pick, gain G = h_pick − h̄,
    below_mean 1[h_pick < h̄], best 1[h_pick = h*] (ties count) — NaN/NA without a
    valid pick; all_parsed (every order returned a pick); flip (the returned image
    differs across orders) and unanimous (all orders return the same image), NA
    unless all parsed; agreement q (share of orders on the most frequent pick, NaN
    unless all parsed); parse_fail (some recorded call failed: parse or runtime
    failure — a call not yet made is not a failure, but leaves all_parsed False); judges_agree /
    judges_disagree (all selector judges' order-0 picks equal / not; NA with fewer
    than two judges or when one is missing); rating_range = h* − min h, h_mean = h̄,
    h_max = h*.
    """
    if judge not in data.picks:
        raise KeyError(f"judge {judge!r} has no selector calls (known: {', '.join(data.judges) or 'none'})")
    h = data.utility
    width = data.mask.shape[1]
    picks = policies.valid_picks(data.picks[judge])
    first = picks[:, 0]
    has_pick = first >= 0
    parsed = policies.all_parsed(picks)
    agreement = gates.order_agreement(picks, width)
    unanimous = agreement == 1.0

    rows = np.arange(len(first))
    pick_id = np.where(has_pick, data.candidate_ids[rows, np.clip(first, 0, None)], None)

    others = np.stack([policies.valid_picks(data.picks[j][:, 0]) for j in data.judges], axis=1)
    comparable = (others >= 0).all(axis=1) & (others.shape[1] >= 2)
    same = (others == others[:, :1]).all(axis=1)

    frame = data.prompts.loc[:, ["prompt_id", "prompt", "country", "category", "m"]].copy()
    frame["pick_id"] = pick_id
    frame["regret"] = metrics.regret(h, first)
    frame["gain"] = metrics.gain_over_random(h, first)
    frame["below_mean"] = _nullable(metrics.below_mean(h, first) == 1, has_pick)
    frame["best"] = _nullable(metrics.is_best(h, first) == 1, has_pick)
    frame["all_parsed"] = parsed
    frame["flip"] = _nullable(~unanimous, parsed)
    frame["unanimous"] = _nullable(unanimous, parsed)
    frame["agreement"] = agreement
    frame["parse_fail"] = np.isin(data.statuses[judge], ["parse_fail", "runtime_fail"]).any(axis=1)
    frame["judges_agree"] = _nullable(same, comparable)
    frame["judges_disagree"] = _nullable(~same, comparable)
    frame["rating_range"] = metrics.value_range(h)
    frame["h_mean"] = metrics.random_value(h)
    frame["h_max"] = metrics.oracle_value(h)
    return frame.reset_index(drop=True)
