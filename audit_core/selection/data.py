"""Dense arrays of one dataset, the input of every measure.

Prompts are rows 0..P−1 (sorted by prompt id); candidates sit in canonical order
in columns 0..M−1 (M = largest pool), padded where a pool is smaller. A judge's
picks are canonical candidate indices per (prompt, order), so the same image has
the same column whatever slot it was shown in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb
import numpy as np
import pandas as pd

from audit_core import store
from audit_core.store.schema import DEFAULT_POOL

NO_PICK = -1  # the call ran but returned no valid pick (parse or runtime failure)
NO_CALL = -2  # no call recorded for this (prompt, order)


@dataclass(frozen=True)
class SelectionData:
    """Everything the statistics need, as aligned arrays.

    prompts: frame with rows aligned to axis 0 (prompt_id, prompt, country,
      category, split, m).
    candidate_ids, source_models: (P, M) object arrays, "" in padding.
    mask: (P, M) bool, True where a candidate exists.
    outcomes: outcome name -> (P, M) float ratings, NaN where absent or unrated.
    picks: judge -> (P, K) int canonical index of the pick, NO_PICK or NO_CALL.
    slots: judge -> (P, K) int slot position of the pick (0 = A), −1 if none.
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


def load_selection_data(con: duckdb.DuckDBPyConnection, dataset_id: str, pool: str = DEFAULT_POOL) -> SelectionData:
    """Read one dataset's pools, ratings (reference pool `pool`), calls and scores."""
    prompts = store.load_prompts(con, dataset_id)
    if prompts.empty:
        raise KeyError(f"dataset {dataset_id!r} has no prompts (known: {_known(con)})")
    row_of = pd.Series(np.arange(len(prompts)), index=prompts["prompt_id"])
    cands = store.load_candidates(con, dataset_id)
    rows = row_of.loc[cands["prompt_id"]].to_numpy()
    cols = cands["canonical_index"].to_numpy()
    n, width = len(prompts), int(cols.max()) + 1
    candidate_ids = np.full((n, width), "", dtype=object)
    source_models = np.full((n, width), "", dtype=object)
    mask = np.zeros((n, width), dtype=bool)
    candidate_ids[rows, cols] = cands["candidate_id"].to_numpy()
    source_models[rows, cols] = cands["source_model"].fillna("").to_numpy()
    mask[rows, cols] = True
    prompts = prompts.assign(m=mask.sum(axis=1))

    ratings = con.execute(
        """
        SELECT c.prompt_id, c.canonical_index, r.outcome, r.value
        FROM ratings r JOIN candidates c USING (dataset_id, candidate_id)
        WHERE r.dataset_id = ? AND r.pool = ?
        """,
        [dataset_id, pool],
    ).df()
    outcomes: dict[str, np.ndarray] = {}
    for outcome, part in ratings.groupby("outcome"):
        matrix = np.full((n, width), np.nan)
        matrix[row_of.loc[part["prompt_id"]].to_numpy(), part["canonical_index"].to_numpy()] = part["value"].to_numpy()
        outcomes[str(outcome)] = matrix
    if "alignment" not in outcomes:
        raise KeyError(f"dataset {dataset_id!r} has no alignment ratings in pool {pool!r}")

    calls = con.execute(
        """
        SELECT r.judge, c.prompt_id, c.order_index, c.status,
               coalesce(k.canonical_index, -1) AS pick,
               coalesce(list_position(c.slot_candidate_ids, c.chosen_candidate_id) - 1, -1) AS slot
        FROM calls c
        JOIN runs r USING (run_id)
        LEFT JOIN candidates k ON k.dataset_id = r.dataset_id AND k.candidate_id = c.chosen_candidate_id
        WHERE r.dataset_id = ? AND r.kind = 'selector'
        """,
        [dataset_id],
    ).df()
    picks, slots, statuses = {}, {}, {}
    for judge, part in calls.groupby("judge"):
        k = int(part["order_index"].max()) + 1
        r = row_of.loc[part["prompt_id"]].to_numpy()
        o = part["order_index"].to_numpy()
        pick = np.full((n, k), NO_CALL, dtype=np.int64)
        slot = np.full((n, k), -1, dtype=np.int64)
        status = np.full((n, k), "", dtype=object)
        pick[r, o] = part["pick"].to_numpy()
        slot[r, o] = part["slot"].to_numpy()
        status[r, o] = part["status"].to_numpy()
        picks[str(judge)], slots[str(judge)], statuses[str(judge)] = pick, slot, status

    scores = {}
    score_rows = con.execute(
        """
        SELECT r.judge AS scorer, c.prompt_id, c.canonical_index, s.score
        FROM scores s JOIN runs r USING (run_id)
        JOIN candidates c ON c.dataset_id = r.dataset_id AND c.candidate_id = s.candidate_id
        WHERE r.dataset_id = ? AND r.kind = 'scorer'
        """,
        [dataset_id],
    ).df()
    for scorer, part in score_rows.groupby("scorer"):
        matrix = np.full((n, width), np.nan)
        matrix[row_of.loc[part["prompt_id"]].to_numpy(), part["canonical_index"].to_numpy()] = part["score"].to_numpy()
        scores[str(scorer)] = matrix

    votes = con.execute(
        """
        SELECT c.prompt_id, c.canonical_index, v.value
        FROM votes v JOIN candidates c USING (dataset_id, candidate_id)
        WHERE v.dataset_id = ? AND v.outcome = 'alignment' AND v.pool = ?
        ORDER BY c.prompt_id, c.canonical_index, v.annotator
        """,
        [dataset_id, pool],
    ).df()
    cells = (row_of.loc[votes["prompt_id"]].to_numpy() * width + votes["canonical_index"].to_numpy()).astype(np.int64)

    return SelectionData(
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
        vote_variance=cell_variances(cells, votes["value"].to_numpy(dtype=float), (n, width)),
    )


def cell_variances(cells: np.ndarray, values: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Population variance of the votes of each cell (flat index into `shape`), computed as
    numpy's var does (mean of squared deviations from the mean); NaN below two votes."""
    size = shape[0] * shape[1]
    count = np.bincount(cells, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(cells, weights=values, minlength=size) / count
        variance = np.bincount(cells, weights=(values - mean[cells]) ** 2, minlength=size) / count
    return np.where(count >= 2, variance, np.nan).reshape(shape)


def _known(con: duckdb.DuckDBPyConnection) -> str:
    names = [r[0] for r in con.execute("SELECT dataset_id FROM datasets ORDER BY 1").fetchall()]
    return ", ".join(names) or "none"
