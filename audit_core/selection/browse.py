"""Browsing recorded decisions: explorer filters, paging and one pool's detail frames.

Pure selection and reshaping over `SelectionData`, the per-prompt outcome frame of
`audit_core.selection.outcomes.prompt_outcomes` and a few bound-parameter queries. No
statistic is computed here; the app only draws what these functions return.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
import pandas as pd

from audit_core.selection.data import SelectionData
from audit_core.selection.orders import slot_labels
from audit_core.store.schema import OUTCOMES

# Outcome filters: URL key -> (label shown, boolean column of prompt_outcomes).
OUTCOME_FILTERS: dict[str, tuple[str, str]] = {
    "below_mean": ("below-mean pick", "below_mean"),
    "best": ("best pick", "best"),
    "flip": ("orders disagree (flip)", "flip"),
    "unanimous": ("all orders agree", "unanimous"),
    "judges_agree": ("judges agree", "judges_agree"),
    "judges_disagree": ("judges disagree", "judges_disagree"),
    "parse_fail": ("parse failures", "parse_fail"),
}
# Sort keys: URL key -> label shown (each key is a column of prompt_outcomes).
SORT_KEYS: dict[str, str] = {
    "regret": "regret",
    "gain": "gain",
    "rating_range": "rating range",
    "prompt_id": "prompt id",
}


@dataclass(frozen=True)
class PoolFilter:
    """What the explorer shows: every non-empty field narrows the pools (AND).

    Within one field the values are alternatives (OR), except `outcomes`, where
    every listed outcome must hold. `text` matches the prompt literally,
    case-insensitively.
    """

    countries: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    generators: tuple[str, ...] = ()
    text: str = ""
    outcomes: tuple[str, ...] = ()
    sort: str = "regret"
    descending: bool = True


def filter_pools(data: SelectionData, outcomes: pd.DataFrame, flt: PoolFilter) -> pd.DataFrame:
    """Rows of `outcomes` (aligned with `data.prompts`) matching `flt`, sorted.

    The index keeps the prompt row of `data`. Sorting puts missing values (a
    judge that abstained has no regret) last and breaks ties by prompt id.
    """
    keep = np.ones(len(outcomes), dtype=bool)
    if flt.countries:
        keep &= outcomes["country"].isin(flt.countries).to_numpy()
    if flt.categories:
        keep &= outcomes["category"].isin(flt.categories).to_numpy()
    if flt.generators:
        keep &= np.isin(data.source_models, list(flt.generators)).any(axis=1)
    if flt.text.strip():
        keep &= outcomes["prompt"].str.contains(flt.text.strip(), case=False, regex=False, na=False).to_numpy()
    for key in flt.outcomes:
        if key not in OUTCOME_FILTERS:
            raise KeyError(f"unknown outcome filter {key!r} (known: {', '.join(OUTCOME_FILTERS)})")
        keep &= outcomes[OUTCOME_FILTERS[key][1]].fillna(False).astype(bool).to_numpy()
    if flt.sort not in SORT_KEYS:
        raise KeyError(f"unknown sort key {flt.sort!r} (known: {', '.join(SORT_KEYS)})")
    chosen = outcomes.loc[keep]
    if flt.sort == "prompt_id":
        return chosen.sort_values("prompt_id", ascending=not flt.descending, kind="stable")
    return chosen.sort_values(
        [flt.sort, "prompt_id"], ascending=[not flt.descending, True], na_position="last", kind="stable"
    )


def page_bounds(n_items: int, page: int, page_size: int) -> tuple[int, int, int]:
    """(start, stop, n_pages) of 1-based `page`, clamped into 1..n_pages (n_pages ≥ 1)."""
    n_pages = max(1, math.ceil(n_items / page_size))
    page = min(max(page, 1), n_pages)
    start = (page - 1) * page_size
    return start, min(start + page_size, n_items), n_pages


def neighbours(prompt_ids: Sequence[str], prompt_id: str) -> tuple[str | None, str | None]:
    """(previous, next) prompt ids around `prompt_id` in `prompt_ids`; None at the ends or if absent."""
    ids = list(prompt_ids)
    if prompt_id not in ids:
        return None, None
    i = ids.index(prompt_id)
    return (ids[i - 1] if i > 0 else None), (ids[i + 1] if i + 1 < len(ids) else None)


def judge_marks(judges: Sequence[str]) -> dict[str, str]:
    """Short upper-case marks for judges: first letter or digit plus any digits of the name ("qwen8b" → "Q8").

    Where two judges would share a mark, each of them gets its shortest prefix
    that no other judge name starts with (the whole name if none).
    """
    short = {j: (next((ch for ch in j if ch.isalnum()), j[:1]) + "".join(ch for ch in j if ch.isdigit())).upper()
             for j in judges}
    marks: dict[str, str] = {}
    for judge in judges:
        if list(short.values()).count(short[judge]) == 1:
            marks[judge] = short[judge]
            continue
        rivals = [r.upper() for r in judges if r != judge]
        n = 1
        while n < len(judge) and any(r.startswith(judge[:n].upper()) for r in rivals):
            n += 1
        marks[judge] = judge[:n].upper()
    return marks


def prompt_row(data: SelectionData, prompt_id: str) -> int:
    """Row of `prompt_id` in `data` (prompts are sorted by id)."""
    ids = data.prompts["prompt_id"].to_numpy()
    i = int(np.searchsorted(ids, prompt_id))
    if i >= len(ids) or ids[i] != prompt_id:
        raise KeyError(f"prompt {prompt_id!r} is not in dataset {data.dataset_id!r}")
    return i


def pool_tiles(
    data: SelectionData, rows: Sequence[int], judges: Sequence[str], image_paths: Mapping[str, str | None]
) -> pd.DataFrame:
    """One row per candidate of the pools at `rows`, in canonical order.

    Columns: row, prompt_id, canonical_index, candidate_id, generator,
    alignment (mean rating), best (alignment equals the pool's maximum; ties all
    best), picked_by (tuple of the judges whose order-0 pick it is), image_path.
    """
    records = []
    utility = data.utility
    for row in rows:
        m = int(data.mask[row].sum())
        best = np.nanmax(utility[row, :m]) if np.isfinite(utility[row, :m]).any() else np.nan
        for i in range(m):
            cid = data.candidate_ids[row, i]
            records.append(
                {
                    "row": int(row),
                    "prompt_id": data.prompts["prompt_id"].iat[row],
                    "canonical_index": i,
                    "candidate_id": cid,
                    "generator": data.source_models[row, i],
                    "alignment": utility[row, i],
                    "best": bool(utility[row, i] == best),
                    "picked_by": tuple(j for j in judges if data.picks[j][row, 0] == i),
                    "image_path": image_paths.get(cid),
                }
            )
    return pd.DataFrame.from_records(
        records,
        columns=["row", "prompt_id", "canonical_index", "candidate_id", "generator", "alignment", "best", "picked_by", "image_path"],
    )


def load_image_paths(con: duckdb.DuckDBPyConnection, dataset_id: str) -> dict[str, str | None]:
    """candidate_id → image path (None when the dataset has no image for it)."""
    rows = con.execute(
        "SELECT candidate_id, image_path FROM candidates WHERE dataset_id = ?", [dataset_id]
    ).fetchall()
    return dict(rows)


def load_pool_calls(con: duckdb.DuckDBPyConnection, dataset_id: str, prompt_id: str) -> pd.DataFrame:
    """Every selector call on one prompt: judge, order_index, slot_candidate_ids, status,
    choice_label, chosen_candidate_id, raw_output, parse_note, attempts, seconds."""
    return con.execute(
        """
        SELECT r.judge, c.order_index, c.slot_candidate_ids, c.status, c.choice_label,
               c.chosen_candidate_id, c.raw_output, c.parse_note, c.attempts, c.seconds
        FROM calls c JOIN runs r USING (run_id)
        WHERE r.dataset_id = ? AND r.kind = 'selector' AND c.prompt_id = ?
        ORDER BY c.order_index, r.judge
        """,
        [dataset_id, prompt_id],
    ).df()


def pool_grid(calls: pd.DataFrame) -> pd.DataFrame:
    """The presentation grid of one pool: one row per (order, slot arrangement), one per slot.

    Judges shown the same arrangement in the same order share a grid row.
    Columns: order_index, arrangement (0-based row of the grid), judges (tuple
    shown this arrangement), slot (0 = A), slot_label, candidate_id, picked_by
    (tuple of the judges whose call in this row chose it).
    """
    columns = ["order_index", "arrangement", "judges", "slot", "slot_label", "candidate_id", "picked_by"]
    if calls.empty:
        return pd.DataFrame(columns=columns)
    keyed = calls.assign(shown=calls["slot_candidate_ids"].map(tuple))
    records = []
    groups = keyed.groupby(["order_index", "shown"], sort=True)
    for arrangement, ((order, shown), part) in enumerate(groups):
        labels = slot_labels(len(shown))
        for slot, cid in enumerate(shown):
            picked = part.loc[part["chosen_candidate_id"] == cid, "judge"]
            records.append(
                {
                    "order_index": int(order),
                    "arrangement": arrangement,
                    "judges": tuple(part["judge"]),
                    "slot": slot,
                    "slot_label": labels[slot],
                    "candidate_id": cid,
                    "picked_by": tuple(picked),
                }
            )
    return pd.DataFrame.from_records(records, columns=columns)


def choices_by_order(calls: pd.DataFrame) -> pd.DataFrame:
    """Judge × order table of what each call returned: "B → <candidate>", or its failure status."""
    if calls.empty:
        return pd.DataFrame()
    text = np.where(
        calls["chosen_candidate_id"].notna(),
        calls["choice_label"].fillna("?") + " → " + calls["chosen_candidate_id"].fillna(""),
        calls["status"],
    )
    table = calls.assign(choice=text).pivot(index="judge", columns="order_index", values="choice")
    table.columns = [f"order {k}" for k in table.columns]
    table.columns.name = None
    return table


def candidate_table(data: SelectionData, row: int, votes: pd.DataFrame) -> pd.DataFrame:
    """Per-candidate ratings of the pool at `row`, in canonical order.

    Columns: candidate_id, generator, best, the rating outcomes present in the
    dataset (means), alignment_votes (the individual alignment ratings, from
    `votes` as returned by `store.load_votes`; "" when the source has none) and
    one column per content scorer.
    """
    m = int(data.mask[row].sum())
    ids = list(data.candidate_ids[row, :m])
    utility = data.utility[row, :m]
    table = pd.DataFrame(
        {
            "candidate_id": ids,
            "generator": list(data.source_models[row, :m]),
            "best": utility == np.nanmax(utility) if np.isfinite(utility).any() else False,
        }
    )
    for outcome in (*OUTCOMES, *sorted(set(data.outcomes) - set(OUTCOMES))):
        if outcome in data.outcomes:
            table[outcome] = data.outcomes[outcome][row, :m]
    alignment_votes = votes.loc[votes["outcome"] == "alignment"] if not votes.empty else votes
    listed = (
        alignment_votes.groupby("candidate_id")["value"].agg(lambda v: ", ".join(f"{x + 0.0:g}" for x in v))  # + 0.0: no "-0"
        if not alignment_votes.empty
        else pd.Series(dtype=str)
    )
    table["alignment_votes"] = [listed.get(cid, "") for cid in ids]
    for scorer in data.scorers:
        table[f"score: {scorer}"] = data.scores[scorer][row, :m]
    return table


def pool_outcomes(frames: Mapping[str, pd.DataFrame], row: int) -> pd.DataFrame:
    """One row per judge: that judge's prompt_outcomes row for the pool at `row`."""
    columns = ["pick_id", "regret", "gain", "below_mean", "best", "flip", "agreement", "parse_fail"]
    records = {judge: frame.iloc[row] for judge, frame in frames.items()}
    table = pd.DataFrame.from_dict(records, orient="index")
    return table.loc[:, [c for c in columns if c in table.columns]]


def gate_decisions(data: SelectionData, picks: Mapping[str, np.ndarray], row: int) -> pd.DataFrame:
    """Every policy's decision on the pool at `row`.

    Columns: policy, acts (False = abstains), candidate_id, generator and
    alignment of the returned image (empty when abstaining).
    """
    records = []
    for policy, chosen in picks.items():
        index = int(chosen[row])
        acts = index >= 0
        records.append(
            {
                "policy": policy,
                "acts": acts,
                "candidate_id": data.candidate_ids[row, index] if acts else "",
                "generator": data.source_models[row, index] if acts else "",
                "alignment": data.utility[row, index] if acts else np.nan,
            }
        )
    return pd.DataFrame.from_records(records, columns=["policy", "acts", "candidate_id", "generator", "alignment"])

