"""Dense arrays of one dataset, the input of every measure.

Prompts are rows 0..P−1 (sorted by prompt id); candidates sit in canonical order
in columns 0..M−1 (M = largest pool), padded where a pool is smaller. A judge's
picks are canonical candidate indices per (prompt, order), so the same image has
the same column whatever slot it was shown in.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
from numpy.dtypes import StringDType

from audit_core import store
from audit_core.chunks import row_chunks
from audit_core.store.schema import DEFAULT_POOL

NO_PICK = -1  # the call ran but returned no valid pick (parse or runtime failure)
NO_CALL = -2  # no call recorded for this (prompt, order)
STRING_CHUNK = 1 << 20  # candidate ids converted from Arrow at once


def index_dtype(width: int) -> np.dtype:
    """The integer type of canonical indices 0..width−1 and the negative codes (NO_CALL, NO_PICK,
    ABSENT): int8 for pools of up to 127 images, int64 beyond. A million prompts' picks are 1 MB a
    column as int8, where int64 made most of a large study's memory."""
    return np.dtype(np.int8 if width <= np.iinfo(np.int8).max else np.int64)


def compact_indices(indices: np.ndarray) -> np.ndarray:
    """`indices` (canonical indices or negative codes) in the smallest type `index_dtype` gives for
    their range; the array itself when it has that type already."""
    values = np.asarray(indices)
    if values.dtype.kind not in "iu":
        raise TypeError(f"expected integer indices, got {values.dtype}")
    low, high = (int(values.min()), int(values.max())) if values.size else (0, 0)
    fits = np.iinfo(np.int8).min <= low and high <= np.iinfo(np.int8).max
    return values.astype(np.int8 if fits else np.int64, copy=False)


@dataclass(frozen=True)
class SelectionData:
    """Everything the statistics need, as aligned arrays.

    prompts: frame with rows aligned to axis 0 (prompt_id, prompt, country,
      category, split, m).
    candidate_ids: (P, M) ids (numpy `StringDType`: a short id is held in the array itself, not as a
      Python object), "" in padding.
    source_models: (P, M) object array of generator names (one string per distinct name), "" in padding.
    mask: (P, M) bool, True where a candidate exists.
    outcomes: outcome name -> (P, M) float ratings, NaN where absent or unrated.
    picks: judge -> (P, K) canonical index of the pick, NO_PICK or NO_CALL (`index_dtype(M)`).
    slots: judge -> (P, K) slot position of the pick (0 = A), −1 if none (`index_dtype(M)`).
    statuses: judge -> (P, K) object call status, "" where no call.
    scores: scorer -> (P, M) float content scores, NaN in padding.
    vote_variance: (P, M) population variance of a candidate's individual alignment votes
      (reference pool), NaN for candidates with fewer than two; None when not loaded.
    """

    dataset_id: str
    prompts: pd.DataFrame
    candidate_ids: np.ndarray
    source_models: np.ndarray
    mask: np.ndarray
    outcomes: dict[str, np.ndarray]
    picks: dict[str, np.ndarray] = field(default_factory=dict)
    slots: dict[str, np.ndarray] = field(default_factory=dict)
    statuses: dict[str, np.ndarray] = field(default_factory=dict)
    scores: dict[str, np.ndarray] = field(default_factory=dict)
    vote_variance: np.ndarray | None = None

    @property
    def n_prompts(self) -> int:
        return len(self.prompts)

    @property
    def pool_sizes(self) -> np.ndarray:
        """m per prompt."""
        return self.mask.sum(axis=1)

    @property
    def judges(self) -> list[str]:
        """Selector judges, sorted by name."""
        return sorted(self.picks)

    @property
    def scorers(self) -> list[str]:
        """Content-only scorers, sorted by name."""
        return sorted(self.scores)

    @property
    def utility(self) -> np.ndarray:
        """(P, M) mean alignment rating h_i (NaN in padding)."""
        return self.outcomes["alignment"]

    def n_orders(self, judge: str) -> int:
        """K, the number of presentation orders recorded for `judge`."""
        return self.picks[judge].shape[1]

    def rows(self, prompts: slice) -> SelectionData:
        """The prompts in the slice `prompts` alone: views of every array, the prompts frame's rows
        renumbered from 0."""
        def each(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            return {name: values[prompts] for name, values in arrays.items()}

        return replace(self, prompts=self.prompts.iloc[prompts].reset_index(drop=True),
                       candidate_ids=self.candidate_ids[prompts], source_models=self.source_models[prompts],
                       mask=self.mask[prompts], outcomes=each(self.outcomes), picks=each(self.picks),
                       slots=each(self.slots), statuses=each(self.statuses), scores=each(self.scores),
                       vote_variance=None if self.vote_variance is None else self.vote_variance[prompts])


def load_selection_data(con: duckdb.DuckDBPyConnection, dataset_id: str, pool: str = DEFAULT_POOL, *,
                        partition: bool = False) -> SelectionData:
    """Read one dataset's pools, ratings (reference pool `pool`), calls and scores; KeyError when it has no
    alignment ratings in `pool`, unless `partition` (a connection on one partition of a study,
    `store.partitions.open_partition`, whose prompts may all be unrated).

    Every long table reaches Python as numeric columns (a prompt's row, a candidate's column, a value
    or a code), one query per array, so that a study of millions of calls never passes through a frame
    with a string per call; the strings kept are the candidate ids (in a `StringDType` array) and one
    object per distinct generator or status.
    """
    prompts = store.load_prompts(con, dataset_id)
    if prompts.empty:
        raise KeyError(f"dataset {dataset_id!r} has no prompts (known: {_known(con)})")
    n = len(prompts)
    cands = _arrow(con, f"""
        SELECT p.row, c.canonical_index AS col, c.candidate_id, coalesce(c.source_model, '') AS source_model
        FROM candidates c JOIN {_ROWS} p USING (prompt_id) WHERE c.dataset_id = ?""", [dataset_id, dataset_id])
    rows, cols = _ints(cands["row"]), _ints(cands["col"])
    width = int(cols.max()) + 1
    candidate_ids = np.full((n, width), "", dtype=StringDType())
    source_models = np.full((n, width), "", dtype=object)
    mask = np.zeros((n, width), dtype=bool)
    for part in row_chunks(len(rows), STRING_CHUNK):  # a Python string per id for a chunk only
        candidate_ids[rows[part], cols[part]] = cands["candidate_id"][part].to_numpy(zero_copy_only=False)
    source_models[rows, cols] = _shared_strings(cands["source_model"])
    mask[rows, cols] = True
    del cands
    prompts = prompts.assign(m=mask.sum(axis=1))

    outcomes: dict[str, np.ndarray] = {}
    names = con.execute("SELECT DISTINCT outcome FROM ratings WHERE dataset_id = ? AND pool = ? ORDER BY 1",
                        [dataset_id, pool]).fetchall()
    for (outcome,) in names:
        matrix = _cell_matrix(con, f"""
            SELECT p.row, c.canonical_index AS col, r.value
            FROM ratings r JOIN candidates c USING (dataset_id, candidate_id) JOIN {_ROWS} p USING (prompt_id)
            WHERE r.dataset_id = ? AND r.pool = ? AND r.outcome = ?""",
            [dataset_id, dataset_id, pool, outcome], (n, width))
        if matrix is not None:
            outcomes[str(outcome)] = matrix
    if "alignment" not in outcomes and not partition:
        raise KeyError(f"dataset {dataset_id!r} has no alignment ratings in pool {pool!r}")

    picks, slots, statuses = {}, {}, {}
    judges = con.execute("SELECT DISTINCT judge FROM runs WHERE dataset_id = ? AND kind = 'selector' ORDER BY 1",
                         [dataset_id]).fetchall()
    for (judge,) in judges:
        calls = _arrow(con, f"""
            SELECT p.row, c.order_index, c.status,
                   coalesce(k.canonical_index, -1) AS pick,
                   coalesce(list_position(c.slot_candidate_ids, c.chosen_candidate_id) - 1, -1) AS slot
            FROM calls c
            JOIN runs r USING (run_id)
            JOIN {_ROWS} p USING (prompt_id)
            LEFT JOIN candidates k ON k.dataset_id = r.dataset_id AND k.candidate_id = c.chosen_candidate_id
            WHERE r.dataset_id = ? AND r.kind = 'selector' AND r.judge = ?""", [dataset_id, dataset_id, judge])
        if calls.num_rows == 0:
            continue
        r, o = _ints(calls["row"]), _ints(calls["order_index"])
        k = int(o.max()) + 1
        pick = np.full((n, k), NO_CALL, dtype=index_dtype(width))
        slot = np.full((n, k), -1, dtype=index_dtype(width))
        status = np.full((n, k), "", dtype=object)
        pick[r, o] = _ints(calls["pick"])
        slot[r, o] = _ints(calls["slot"])
        status[r, o] = _shared_strings(calls["status"])
        picks[str(judge)], slots[str(judge)], statuses[str(judge)] = pick, slot, status

    scores = {}
    scorers = con.execute("SELECT DISTINCT judge FROM runs WHERE dataset_id = ? AND kind = 'scorer' ORDER BY 1",
                          [dataset_id]).fetchall()
    for (scorer,) in scorers:
        matrix = _cell_matrix(con, f"""
            SELECT p.row, c.canonical_index AS col, s.score AS value
            FROM scores s JOIN runs r USING (run_id)
            JOIN candidates c ON c.dataset_id = r.dataset_id AND c.candidate_id = s.candidate_id
            JOIN {_ROWS} p USING (prompt_id)
            WHERE r.dataset_id = ? AND r.kind = 'scorer' AND r.judge = ?""",
            [dataset_id, dataset_id, scorer], (n, width))
        if matrix is not None:
            scores[str(scorer)] = matrix

    votes = _arrow(con, f"""
        SELECT p.row * {width} + c.canonical_index AS cell, v.value
        FROM votes v JOIN candidates c USING (dataset_id, candidate_id) JOIN {_ROWS} p USING (prompt_id)
        WHERE v.dataset_id = ? AND v.outcome = 'alignment' AND v.pool = ?
        ORDER BY c.prompt_id, c.canonical_index, v.annotator""", [dataset_id, dataset_id, pool])

    loaded = SelectionData(
        dataset_id=dataset_id,
        prompts=prompts,
        candidate_ids=candidate_ids,
        source_models=source_models,
        mask=mask,
        outcomes=outcomes,
        picks=picks,
        slots=slots,
        statuses=statuses,
        scores=scores,
        vote_variance=cell_variances(_ints(votes["cell"]), votes["value"].to_numpy().astype(float), (n, width)),
    )
    del votes
    release_arrow_memory()
    return loaded


# Each prompt's row: its place in prompt-id order, as `store.load_prompts` sorts them (one bound parameter).
_ROWS = "(SELECT prompt_id, row_number() OVER (ORDER BY prompt_id) - 1 AS row FROM prompts WHERE dataset_id = ?)"


def release_arrow_memory() -> None:
    """Return to the system the memory Arrow's allocator kept from freed query results (it keeps freed
    pages for reuse: about 0.25 GiB after loading a million prompts' arrays)."""
    pa.default_memory_pool().release_unused()


def _arrow(con: duckdb.DuckDBPyConnection, sql: str, params: list[object]) -> pa.Table:
    return con.sql(sql, params=params).to_arrow_table()


def _ints(column: pa.ChunkedArray) -> np.ndarray:
    return column.to_numpy().astype(np.int64, copy=False)


def _shared_strings(column: pa.ChunkedArray) -> np.ndarray:
    """An object array of the column's strings with one Python string per distinct value (not per row)."""
    encoded = column.combine_chunks().dictionary_encode()
    return np.asarray(encoded.dictionary.to_pylist(), dtype=object)[encoded.indices.to_numpy()]


def _cell_matrix(con: duckdb.DuckDBPyConnection, sql: str, params: list[object], shape: tuple[int, int]
                 ) -> np.ndarray | None:
    """(P, M) float matrix of the query's (row, col, value) rows, NaN elsewhere; None when it has no rows."""
    cells = _arrow(con, sql, params)
    if cells.num_rows == 0:
        return None
    matrix = np.full(shape, np.nan)
    matrix[_ints(cells["row"]), _ints(cells["col"])] = cells["value"].to_numpy().astype(float)
    return matrix


def cell_variances(cells: np.ndarray, values: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Population variance of the votes of each cell (flat index into `shape`), computed as
    numpy's var does (mean of squared deviations from the mean); NaN below two votes (read-only, one NaN
    broadcast to `shape`, when there are no votes at all: a large study rarely records each vote)."""
    if len(cells) == 0:
        return np.broadcast_to(np.nan, shape)
    size = shape[0] * shape[1]
    count = np.bincount(cells, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(cells, weights=values, minlength=size) / count
        variance = np.bincount(cells, weights=(values - mean[cells]) ** 2, minlength=size) / count
    return np.where(count >= 2, variance, np.nan).reshape(shape)


def _known(con: duckdb.DuckDBPyConnection) -> str:
    names = [r[0] for r in con.execute("SELECT dataset_id FROM datasets ORDER BY 1").fetchall()]
    return ", ".join(names) or "none"
