"""Browsing recorded decisions: explorer filters, paging and one pool's detail frames.

Pure selection and reshaping over `SelectionData`, the per-prompt outcome frame of
`audit_core.selection.outcomes.prompt_outcomes` and a few bound-parameter queries. No
statistic is computed here; the app only draws what these functions return.

The app's explorer and pool detail query a `pool_table` (one Arrow row per prompt, built once
per judge and policy) in DuckDB: `count_pools`, `pool_page` and `pool_place` return a count, one
page of rows or one pool's place in the filter, never every prompt's rows. `filter_pools` is the
same filter and order over the pandas frame.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from audit_core.selection import metrics
from audit_core.selection.data import SelectionData
from audit_core.selection.debiased.calls import OrderedCalls
from audit_core.selection.debiased.names import BORDA, CALIBRATED, PLACKETT_LUCE, PRIOR_CORRECTED
from audit_core.selection.debiased.specs import DEBIASED_KIND, with_debiased
from audit_core.selection.orders import slot_labels
from audit_core.selection.outcomes import prompt_outcomes
from audit_core.selection.policies import PolicyPicks, picks_of, policy_specs
from audit_core.store import audit_cache
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
    case-insensitively. `policy` names the policy whose picks the pick outcomes
    (below_mean, best, regret, gain) are about and keeps only the pools it acts on;
    "" is the focus judge's order-0 pick on every pool.
    """

    countries: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    generators: tuple[str, ...] = ()
    text: str = ""
    outcomes: tuple[str, ...] = ()
    sort: str = "regret"
    descending: bool = True
    policy: str = ""

# What a policy is, in a few words: kind (`policies.PolicySpec.kind`) or debiased method -> note.
POLICY_NOTES: dict[str, str] = {
    "judge": "the order-0 pick",
    "order": "the pick in one other order",
    "majority": "vote over all orders; acts when every order parsed",
    "order_gate": "majority pick; acts when at least that many orders agree",
    "order_gate_rejected": "order-0 pick where that gate abstains",
    "judge_gate": "order-0 pick; acts when both judges' order-0 picks match",
    "judge_gate_rejected": "order-0 pick where the two judges differ",
    "scorer": "highest content score",
    "scorer_gate": "order-0 pick; acts when the scorer picks the same image",
    "scorer_gate_rejected": "order-0 pick where the scorer picks another image",
    BORDA: "debiased: Borda count over every order's ranking",
    CALIBRATED: "debiased: each order's pick weighted by 1 / the judge's prior for its slot (cross-fitted)",
    PLACKETT_LUCE: "debiased: strongest image of a Plackett–Luce fit with slot effects",
    PRIOR_CORRECTED: "debiased: one order's label probabilities divided by the slot prior",
}


def every_policy(data: SelectionData, ordered: Mapping[str, OrderedCalls]) -> PolicyPicks:
    """The picks of every policy the selection audit evaluates on `data` but random and oracle: the naming
    contract's (`policies.policy_specs`) and the debiased policies of the judges in `ordered` (judge -> its
    calls, `debiased.load_ordered_calls`) after each judge's majority (`debiased.specs.with_debiased`)."""
    return picks_of(with_debiased(policy_specs(data), ordered))


def picks_key(content: str, dataset_id: str, pool: str) -> dict[str, object]:
    """The audit cache's key of `every_policy` on the dataset whose content fingerprint is `content`, with
    the reference pool `pool`'s data (`audit_core.store.audit_cache`)."""
    return audit_cache.cache_key(content, dataset_id, "picks", pool=pool)


def policy_note(name: str, kind: str) -> str:
    """A few words on what the policy `name` of kind `kind` returns (POLICY_NOTES; a debiased policy by
    its method, the last word of its name)."""
    return POLICY_NOTES.get(name.rsplit(" ", 1)[-1] if kind == DEBIASED_KIND else kind, kind)


def filter_pools(data: SelectionData, outcomes: pd.DataFrame, flt: PoolFilter) -> pd.DataFrame:
    """Rows of `outcomes` (aligned with `data.prompts`) matching `flt`, sorted.

    The index keeps the prompt row of `data`. Sorting puts missing values (a
    judge that abstained has no regret) last and breaks ties by prompt id. With a
    `policy`, rows whose `acts` column is False are left out.
    """
    keep = np.ones(len(outcomes), dtype=bool)
    if flt.policy and "acts" in outcomes:
        keep &= outcomes["acts"].to_numpy(dtype=bool)
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


def load_image_paths(
    con: duckdb.DuckDBPyConnection, dataset_id: str, candidate_ids: Sequence[str] | None = None
) -> dict[str, str | None]:
    """candidate_id → image path (None when the dataset has no image for it), of every candidate or of
    `candidate_ids` only (a page's)."""
    if candidate_ids is None:
        return dict(con.execute("SELECT candidate_id, image_path FROM candidates WHERE dataset_id = ?",
                                [dataset_id]).fetchall())
    rows = con.execute("SELECT candidate_id, image_path FROM candidates WHERE dataset_id = ? "
                       "AND list_contains(?::VARCHAR[], candidate_id)", [dataset_id, list(candidate_ids)]).fetchall()
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


def pool_outcomes(data: SelectionData, judges: Sequence[str], row: int) -> pd.DataFrame:
    """One row per judge of `judges`: its `outcomes.prompt_outcomes` row for the pool at `row`, computed on
    that pool alone (every column is the prompt's own)."""
    columns = ["pick_id", "regret", "gain", "below_mean", "best", "flip", "agreement", "parse_fail"]
    pool = data.rows(slice(row, row + 1))
    records = {judge: prompt_outcomes(pool, judge).iloc[0] for judge in judges}
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



# ------------------------------------------------------------ the explorer's queries (DuckDB over Arrow)

# What `pool_page` returns of each pool (the page draws these), besides its `row` as the index.
PAGE_COLUMNS = ("prompt_id", "prompt", "country", "category", "m", "regret", "gain", "below_mean", "best", "flip",
                "parse_fail", "rating_range")


def pool_table(data: SelectionData, outcomes: pd.DataFrame) -> pa.Table:
    """One Arrow row per prompt of `data` for the explorer's queries: the columns of `outcomes` (a judge's
    `prompt_outcomes`, missing values as nulls) but pick_id, `row` (the prompt's row of `data`) and
    `generators` (the pool's generators, a list). `with_policy` adds a policy's picks."""
    table = pa.Table.from_pandas(outcomes.drop(columns="pick_id"), preserve_index=False)
    offsets = np.concatenate([[0], np.cumsum(data.mask.sum(axis=1))]).astype(np.int64)
    generators = pa.LargeListArray.from_arrays(pa.array(offsets),
                                               pa.array(data.source_models[data.mask], type=pa.string()))
    return table.append_column("row", pa.array(np.arange(len(outcomes), dtype=np.int64))).append_column(
        "generators", generators)


def with_policy(table: pa.Table, data: SelectionData, pick: np.ndarray) -> pa.Table:
    """`table` (`pool_table`) with regret, gain, below_mean and best those of the policy whose (P,) canonical
    index per prompt is `pick` (−1 where it abstains: nulls), and its `pick` and `acts` (pick ≥ 0)."""
    h = data.utility
    chosen = metrics.picked(h, pick)
    acts = pick >= 0
    columns = {
        "regret": pa.array(metrics.regret(h, pick), from_pandas=True),
        "gain": pa.array(metrics.gain_over_random(h, pick), from_pandas=True),
        "below_mean": pa.array(metrics.below_mean(h, pick) == 1, mask=np.isnan(chosen)),
        "best": pa.array(metrics.is_best(h, pick) == 1, mask=np.isnan(chosen)),
        "pick": pa.array(np.where(acts, pick, -1).astype(np.int64)),
        "acts": pa.array(acts),
    }
    for name, column in columns.items():
        at = table.schema.get_field_index(name)
        table = table.set_column(at, name, column) if at >= 0 else table.append_column(name, column)
    return table


def _where(flt: PoolFilter) -> tuple[str, list[object]]:
    """The SQL condition of `flt` over a `pool_table` and its parameters (column names only from the
    filters' own lists; every value a parameter)."""
    conditions, params = ["TRUE"], []
    if flt.policy:
        conditions.append("acts")
    for column, values in (("country", flt.countries), ("category", flt.categories)):
        if values:
            conditions.append(f"list_contains(?::VARCHAR[], {column})")
            params.append(list(values))
    if flt.generators:
        conditions.append("list_has_any(generators, ?::VARCHAR[])")
        params.append(list(flt.generators))
    if flt.text.strip():
        conditions.append("contains(upper(prompt), ?)")
        params.append(flt.text.strip().upper())
    for key in flt.outcomes:
        if key not in OUTCOME_FILTERS:
            raise KeyError(f"unknown outcome filter {key!r} (known: {', '.join(OUTCOME_FILTERS)})")
        conditions.append(f"coalesce({OUTCOME_FILTERS[key][1]}, FALSE)")
    return " AND ".join(conditions), params


def _order(flt: PoolFilter) -> str:
    """The SQL order of `flt`: its sort key (missing values last), ties by prompt id ascending."""
    if flt.sort not in SORT_KEYS:
        raise KeyError(f"unknown sort key {flt.sort!r} (known: {', '.join(SORT_KEYS)})")
    direction = "DESC" if flt.descending else "ASC"
    if flt.sort == "prompt_id":
        return f"prompt_id {direction}"
    return f"{flt.sort} {direction} NULLS LAST, prompt_id ASC"


def _query(table: pa.Table, sql: str, params: Sequence[object]) -> duckdb.DuckDBPyRelation:
    """`sql` over `table` as the view `pools`, on a connection of its own (sessions query at once)."""
    con = duckdb.connect()
    con.register("pools", table)
    return con.execute(sql, list(params))


def count_pools(table: pa.Table, flt: PoolFilter) -> int:
    """How many pools of `table` (`pool_table`) match `flt`."""
    where, params = _where(flt)
    return int(_query(table, f"SELECT count(*) FROM pools WHERE {where}", params).fetchone()[0])


def pool_page(table: pa.Table, flt: PoolFilter, start: int, stop: int) -> pd.DataFrame:
    """The pools at places [start, stop) of `flt`'s order (as `filter_pools` sorts): PAGE_COLUMNS and
    `pick`, indexed by the prompt's row of the data."""
    where, params = _where(flt)
    columns = ", ".join(("row", *PAGE_COLUMNS, "pick"))
    sql = f"SELECT {columns} FROM pools WHERE {where} ORDER BY {_order(flt)} LIMIT ? OFFSET ?"
    page = _query(table, sql, [*params, max(stop - start, 0), start]).df()
    for flag in ("below_mean", "best", "flip", "parse_fail"):
        page[flag] = page[flag].astype("boolean")
    return page.set_index("row").rename_axis(None)


@dataclass(frozen=True)
class PoolPlace:
    """Where one pool sits in a filter's order: `count` pools match; `place` is the pool's 1-based place
    (None outside the filter); `previous` and `following` its neighbours' prompt ids (None at the ends or
    outside); `first` the first pool's prompt id (None when nothing matches)."""

    count: int
    place: int | None
    previous: str | None
    following: str | None
    first: str | None


def pool_place(table: pa.Table, flt: PoolFilter, prompt_id: str) -> PoolPlace:
    """`prompt_id`'s `PoolPlace` in `flt`'s order over `table` (`pool_table`), without sorting the matches:
    each row's place in the order is the ascending tuple (missing key, ±key, prompt id), and the pool's
    place is one plus the count of tuples before its own, its neighbours the nearest tuple on each side."""
    where, params = _where(flt)
    if flt.sort not in SORT_KEYS:
        raise KeyError(f"unknown sort key {flt.sort!r} (known: {', '.join(SORT_KEYS)})")
    by_id = flt.sort == "prompt_id"
    missing, value = ("FALSE", "0.0") if by_id else \
        (f"{flt.sort} IS NULL", f"coalesce({'-' if flt.descending else ''}{flt.sort}, 0.0)")
    down = by_id and flt.descending  # the only order in which prompt ids descend
    ids, back = ("DESC", "ASC") if down else ("ASC", "DESC")

    def side(op: str, id_op: str) -> str:
        return (f"(m.n {op} t.n OR (m.n = t.n AND (m.v {op} t.v OR (m.v = t.v AND m.prompt_id {id_op} t.prompt_id))))")

    before, after = side("<", ">" if down else "<"), side(">", "<" if down else ">")
    sql = f"""
        WITH matched AS (SELECT prompt_id, {missing} AS n, {value} AS v FROM pools WHERE {where}),
             target AS (SELECT n, v, prompt_id FROM matched WHERE prompt_id = ?)
        SELECT (SELECT count(*) FROM matched),
               (SELECT prompt_id FROM matched ORDER BY n, v, prompt_id {ids} LIMIT 1),
               (SELECT count(*) FROM target),
               (SELECT count(*) FROM matched m, target t WHERE {before}),
               (SELECT m.prompt_id FROM matched m, target t WHERE {before} ORDER BY m.n DESC, m.v DESC,
                       m.prompt_id {back} LIMIT 1),
               (SELECT m.prompt_id FROM matched m, target t WHERE {after} ORDER BY m.n, m.v, m.prompt_id {ids} LIMIT 1)"""
    count, first, found, ahead, previous, following = _query(table, sql, [*params, prompt_id]).fetchone()
    if not found:
        return PoolPlace(int(count), None, None, None, first)
    return PoolPlace(int(count), int(ahead) + 1, previous, following, first)
