"""A selector judge's calls as the debiased policies read them: per (prompt, order), which image sat
in which slot, the full ranking when the judge gave one, and its label probabilities when recorded.

Arrays are aligned with `audit_core.selection.data.SelectionData`: rows are prompts sorted by id,
columns canonical candidates (0..M−1, padded where a pool is smaller), axis 1 the orders 0..K−1.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TypeVar

import duckdb
import numpy as np
import pandas as pd

from audit_core.chunks import row_chunks
from audit_core.errors import InputError
from audit_core.selection.data import SelectionData, index_dtype, release_arrow_memory
from audit_core.selection.debiased.ties import tie_order
from audit_core.store.database import has_column

ABSENT = -1  # no candidate: a slot beyond the pool, a rank past the ranking, an order without a call
CALL_CHUNK = 1 << 16  # prompts a prompt-local computation over the calls takes at once (`by_prompt_chunks`)
ENTRY_CHUNK = 1 << 22  # slot and ranking entries scattered into the arrays at once when they are loaded

Result = TypeVar("Result")


def prompt_chunks(n_prompts: int) -> list[slice]:
    """`chunks.row_chunks` of CALL_CHUNK prompts, the chunks of every prompt-local pass over the calls
    (CALL_CHUNK read at each call, so that one setting governs them all)."""
    return row_chunks(n_prompts, CALL_CHUNK)


@dataclass(frozen=True)
class OrderedCalls:
    """One judge's calls, dense.

    prompt_ids: (P,) ids; candidate_ids: (P, M) ids, "" in padding; mask: (P, M) True where a
      candidate exists.
    picks: (P, K) canonical index of each order's pick, NO_PICK or NO_CALL (as `SelectionData.picks`).
    slot_order: (P, K, M) canonical index of the image in slot s of order k; ABSENT beyond the pool
      and where no call was recorded.
    rankings: (P, K, M) canonical indices in the judge's rank order, best first; ABSENT where the call
      holds no ranking, and past the ranking's end. Both of type `data.index_dtype(M)`.
    label_probs: (P, K, M) the recorded probability of slot s's label in order k's call (0 for an
      offered label the record leaves out); NaN across a call that recorded none, and beyond the pool
      (read-only, one NaN broadcast, for a judge that recorded none).
    seconds: (P, K) the call's recorded seconds, NaN where none.
    tie_ranks: (P, M) each candidate's rank in its pool's tie order (`ties.tie_order`, the same for every
      judge of a dataset, so `ordered_calls` hashes the ids once); computed from the ids when not given.
    """

    judge: str
    prompt_ids: np.ndarray
    candidate_ids: np.ndarray
    mask: np.ndarray
    picks: np.ndarray
    slot_order: np.ndarray
    rankings: np.ndarray
    label_probs: np.ndarray
    seconds: np.ndarray
    tie_ranks: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.tie_ranks is None:
            object.__setattr__(self, "tie_ranks", tie_order(self.prompt_ids, self.candidate_ids, self.mask))

    @property
    def n_prompts(self) -> int:
        return len(self.prompt_ids)

    def rows(self, prompts: slice) -> OrderedCalls:
        """The calls of the prompts in the slice `prompts` (views: every array has a row per prompt)."""
        return replace(self, **{f.name: getattr(self, f.name)[prompts] for f in fields(self) if f.name != "judge"})

    @property
    def n_orders(self) -> int:
        """K, the number of presentation orders."""
        return self.picks.shape[1]

    @property
    def width(self) -> int:
        """M, the largest pool."""
        return self.mask.shape[1]

    @property
    def pool_sizes(self) -> np.ndarray:
        """(P,) m per prompt."""
        return self.mask.sum(axis=1)

    @property
    def valid(self) -> np.ndarray:
        """(P, K) True where the call returned a pick (status ok or recovered)."""
        return self.picks >= 0

    @property
    def pick_slots(self) -> np.ndarray:
        """(P, K) slot (0 = A) each order's pick sat in; ABSENT where the call returned no pick."""
        hit = (self.slot_order == self.picks[:, :, None]) & self.valid[:, :, None]
        return np.where(hit.any(axis=2), hit.argmax(axis=2), ABSENT)

    @property
    def slot_of(self) -> np.ndarray:
        """(P, K, M) the slot candidate i sat in in order k (inverse of `slot_order`); ABSENT where none."""
        out = np.full(self.slot_order.shape, ABSENT, dtype=self.slot_order.dtype)
        p, k, s = np.nonzero(self.slot_order >= 0)
        out[p, k, self.slot_order[p, k, s]] = s
        return out

    @property
    def full_ranking(self) -> np.ndarray:
        """(P, K) True where the call returned a pick and a ranking that lists every candidate of the pool
        exactly once, starting with the pick (anything else counts as no ranking)."""
        inside = np.arange(self.width)[None, None, :] < self.pool_sizes[:, None, None]
        listed = (self.rankings[:, :, :, None] == np.arange(self.width)) & inside[:, :, :, None]
        every_once = (listed.sum(axis=2) == self.mask[:, None, :]).all(axis=2)
        nothing_after = (inside | (self.rankings == ABSENT)).all(axis=2)
        return self.valid & every_once & nothing_after & (self.rankings[:, :, 0] == self.picks)

    @property
    def has_label_probs(self) -> np.ndarray:
        """(P, K) True where the call recorded label probabilities."""
        return ~np.isnan(self.label_probs).all(axis=2)


def by_prompt_chunks(calls: OrderedCalls, compute: Callable[[OrderedCalls], Result]) -> Result:
    """`compute(calls)` for a prompt-local `compute` (each prompt's results depend on its own calls only),
    made CALL_CHUNK prompts at a time so that its temporaries stay a chunk's size: `compute` returns a
    frozen dataclass whose every field is an array with a row per prompt, concatenated here."""
    parts = [compute(calls.rows(rows)) for rows in prompt_chunks(calls.n_prompts)]
    return replace(parts[0], **{f.name: np.concatenate([getattr(part, f.name) for part in parts])
                                for f in fields(parts[0])})


def order0_slots(pick: np.ndarray, calls: OrderedCalls) -> np.ndarray:
    """(P,) the slot of order 0 in which each prompt's pick was shown (0 = A); ABSENT where the policy
    abstains or order 0 has no call. A policy's first-slot share is the mean of (this == 0) over the
    prompts it acts on; the uniform expectation is the mean of 1/m over them."""
    hit = calls.slot_order[:, 0, :] == pick[:, None]
    return np.where((pick >= 0) & hit.any(axis=1), hit.argmax(axis=1), ABSENT)


def load_ordered_calls(
    con: duckdb.DuckDBPyConnection, data: SelectionData, judges: Sequence[str] | None = None
) -> dict[str, OrderedCalls]:
    """Judge -> its `OrderedCalls`, aligned with `data` (loaded from the same store and dataset), for
    `judges` (default every selector judge of `data`): the same arrays as `ordered_calls` of the calls
    `store.load_calls` reads (a store older than the label_probs column reads as one that recorded none),
    made in DuckDB: each judge's slot orders and rankings reach Python as integer columns (prompt row,
    order, slot, canonical index), never as a frame of id lists, so that a study of millions of calls
    loads in memory proportional to its arrays."""
    judges = list(data.judges if judges is None else judges)
    width = data.mask.shape[1]
    probs = "c.label_probs" if has_column(con, "calls", "label_probs") else "NULL::VARCHAR"
    rows = ("(SELECT prompt_id, (row_number() OVER (ORDER BY prompt_id) - 1)::INTEGER AS row "
            "FROM prompts WHERE dataset_id = $dataset)")
    calls = """(SELECT c.* FROM calls c JOIN runs r USING (run_id)
                 WHERE r.dataset_id = $dataset AND r.kind = 'selector' AND r.judge = $judge)"""
    prompt_ids = data.prompts["prompt_id"].to_numpy(dtype=object)  # one array every judge's calls share
    ties = tie_order(prompt_ids, data.candidate_ids, data.mask)
    loaded = {}
    for judge in judges:
        params = {"dataset": data.dataset_id, "judge": judge}
        shown = _columns(con, f"""
            SELECT p.row, s.order_index, (s.slot - 1)::INTEGER AS slot, k.canonical_index
            FROM (SELECT prompt_id, order_index, unnest(slot_candidate_ids) AS candidate_id,
                         generate_subscripts(slot_candidate_ids, 1) AS slot FROM {calls}) s
            JOIN {rows} p USING (prompt_id)
            JOIN candidates k ON k.dataset_id = $dataset AND k.candidate_id = s.candidate_id""", params)
        ranked = _columns(con, f"""
            SELECT p.row, s.order_index, (s.rank - 1)::INTEGER AS rank,
                   CASE WHEN length(s.label) = 1 THEN unicode(s.label) - 65 ELSE {width} END::INTEGER AS slot
            FROM (SELECT prompt_id, order_index, unnest(ranking) AS label,
                         generate_subscripts(ranking, 1) AS rank FROM {calls}) s
            JOIN {rows} p USING (prompt_id)
            WHERE s.label IS NOT NULL""", params)
        timed = _columns(con, f"""
            SELECT p.row, c.order_index, c.seconds FROM {calls} c JOIN {rows} p USING (prompt_id)""", params)
        recorded = con.execute(f"""
            SELECT p.row, c.order_index, c.prompt_id, {probs}
            FROM {calls} c JOIN {rows} p USING (prompt_id) WHERE {probs} IS NOT NULL""", params).fetchall()
        loaded[judge] = _ordered(data, judge, shown, ranked, timed, recorded, prompt_ids, ties)
    release_arrow_memory()
    return loaded


def _columns(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, object]) -> dict[str, np.ndarray]:
    """The query's columns as numpy arrays (NULL as NaN in a float column)."""
    table = con.sql(sql, params=params).to_arrow_table()
    return {name: table[name].to_numpy() for name in table.column_names}


def ordered_calls(data: SelectionData, calls: pd.DataFrame, judges: Sequence[str] | None = None
                  ) -> dict[str, OrderedCalls]:
    """Judge -> its `OrderedCalls`, aligned with `data`, from the selector calls as `store.load_calls`
    returns them (judge, prompt_id, order_index, slot_candidate_ids, seconds; ranking and label_probs
    when present, else read as none recorded), for `judges` (default every selector judge of `data`).

    Slots are read from each call's slot order as recorded and rankings from its ranking of slot labels
    (A = slot 0, …; a label beyond the pool makes the ranking unusable, left ABSENT). InputError (field
    label_probs) for a record that is not a JSON object of label -> probability in [0, 1].
    """
    judges = list(data.judges if judges is None else judges)
    judge_code = pd.Index(judges).get_indexer(calls["judge"])
    row = pd.Index(data.prompts["prompt_id"]).get_indexer(calls["prompt_id"])
    kept = (judge_code >= 0) & (row >= 0)
    calls = calls[kept].assign(judge_code=judge_code[kept], row=row[kept])
    calls = calls.assign(**{c: None for c in ("ranking", "label_probs") if c not in calls.columns})
    shown = _listed(calls, "slot_candidate_ids", "candidate_id", "slot")
    column = pd.Index(data.candidate_ids[data.mask]).get_indexer(shown["candidate_id"])
    shown = shown[column >= 0].assign(canonical_index=np.nonzero(data.mask)[1][column[column >= 0]])
    ranked = _listed(calls, "ranking", "label", "rank")
    width = data.mask.shape[1]
    ranked = ranked.assign(slot=np.array([ord(label) - ord("A") if len(label) == 1 else width
                                          for label in ranked["label"]], dtype=np.int64))
    prompt_ids = data.prompts["prompt_id"].to_numpy(dtype=object)
    ties = tie_order(prompt_ids, data.candidate_ids, data.mask)
    loaded = {}
    for j, judge in enumerate(judges):
        mine, my_shown, my_ranked = (f[f["judge_code"].to_numpy() == j] for f in (calls, shown, ranked))
        recorded = mine["label_probs"].notna().to_numpy()
        loaded[judge] = _ordered(
            data, judge,
            {c: my_shown[c].to_numpy() for c in ("row", "order_index", "slot", "canonical_index")},
            {c: my_ranked[c].to_numpy() for c in ("row", "order_index", "rank", "slot")},
            {"row": mine["row"].to_numpy(), "order_index": mine["order_index"].to_numpy(),
             "seconds": mine["seconds"].to_numpy(dtype=float, na_value=np.nan)},
            list(zip(mine["row"][recorded], mine["order_index"][recorded], mine["prompt_id"][recorded],
                     mine["label_probs"][recorded])),
            prompt_ids, ties)
    return loaded


def _listed(calls: pd.DataFrame, column: str, item: str, position: str) -> pd.DataFrame:
    """One row per (call, entry of its list `column`): judge_code, row (the prompt's), order_index, the
    entry as `item` and its 0-based place in the list as `position`; calls whose list is NULL or empty
    give none."""
    rows = calls[["judge_code", "row", "order_index", column]].reset_index(drop=True).explode(column)
    rows = rows.assign(**{position: rows.groupby(level=0).cumcount()}).rename(columns={column: item})
    return rows[rows[item].notna()].reset_index(drop=True)


def _ordered(data: SelectionData, judge: str, shown: Mapping[str, np.ndarray], ranked: Mapping[str, np.ndarray],
             timed: Mapping[str, np.ndarray], recorded: Sequence[tuple], prompt_ids: np.ndarray,
             tie_ranks: np.ndarray) -> OrderedCalls:
    """One judge's `OrderedCalls` from its calls' entries, each a column of prompt rows and orders: shown
    (slot, canonical_index: the image in each slot), ranked (rank, slot: the slot ranked at each place,
    `width` or more for a label that names none), timed (seconds per call) and recorded (row, order,
    prompt_id, label_probs text) for the calls that recorded label probabilities; `prompt_ids` and
    `tie_ranks` are every judge's. Entries are scattered ENTRY_CHUNK at a time (a large study's are
    hundreds of millions)."""
    n, width, k = data.n_prompts, data.mask.shape[1], data.n_orders(judge)
    slot_order = np.full((n, k, width), ABSENT, dtype=index_dtype(width))
    for part in row_chunks(len(shown["row"]), ENTRY_CHUNK):
        slot_order[shown["row"][part], shown["order_index"][part], shown["slot"][part]] = shown["canonical_index"][part]

    # a ranking is unusable when a label names no image of the pool: its call keeps no ranking
    r, o, rank, slot = ranked["row"], ranked["order_index"], ranked["rank"], ranked["slot"]
    canonical = np.full(len(slot), ABSENT, dtype=slot_order.dtype)
    unusable = np.zeros((n, k), dtype=bool)
    for part in row_chunks(len(slot), ENTRY_CHUNK):
        inside = (0 <= slot[part]) & (slot[part] < width) & (rank[part] < width)
        mine = canonical[part]  # a view
        mine[inside] = slot_order[r[part][inside], o[part][inside], slot[part][inside]]
        unusable[r[part][mine < 0], o[part][mine < 0]] = True
    rankings = np.full((n, k, width), ABSENT, dtype=index_dtype(width))
    for part in row_chunks(len(slot), ENTRY_CHUNK):
        keep = ~unusable[r[part], o[part]]
        rankings[r[part][keep], o[part][keep], rank[part][keep]] = canonical[part][keep]

    # a study that recorded none (most) holds a read-only view of one NaN, not P·K·M of them
    label_probs = np.full((n, k, width), np.nan) if recorded else np.broadcast_to(np.nan, (n, k, width))
    seconds = np.full((n, k), np.nan)
    seconds[timed["row"].astype(np.int64), timed["order_index"]] = timed["seconds"]
    for row, order, pid, text in recorded:
        probs = _label_probs(text, judge, pid, int(order))
        m = int((slot_order[row, order] >= 0).sum())
        label_probs[row, order, :m] = [probs.get(chr(ord("A") + s), 0.0) for s in range(m)]
    return OrderedCalls(
        judge=judge,
        prompt_ids=prompt_ids,
        candidate_ids=data.candidate_ids,
        mask=data.mask,
        picks=data.picks[judge],
        slot_order=slot_order,
        rankings=rankings,
        label_probs=label_probs,
        seconds=seconds,
        tie_ranks=tie_ranks,
    )


def _label_probs(text: str, judge: str, prompt_id: str, order: int) -> dict[str, float]:
    """A call's label_probs JSON as label -> probability; InputError unless every value is in [0, 1]."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict) or not all(
        isinstance(p, (int, float)) and not isinstance(p, bool) and 0.0 <= p <= 1.0 for p in value.values()
    ):
        raise InputError(f"judge {judge!r}, prompt {prompt_id!r}, order {order}: expected a JSON object of "
                         f"label -> probability in [0, 1], got {text[:80]!r}", field="label_probs")
    return {str(label): float(p) for label, p in value.items()}
