"""The rating audit of one dataset (DESIGN §4b): its data as loaded, its tables, and views of it.

`load_rating_data` reads what a rating audit needs from the store: the reference
pools' votes and consensus on one outcome, every rating judge's recorded calls,
the items' attributes (the breakdown groups) and their images. `rating_audit`
runs `audit_core.rating.alignment` and `audit_core.rating.reliability` on it once;
`rating_distribution` and `item_detail` are the views the app draws beside it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import duckdb
import numpy as np
import pandas as pd

from audit_core import store
from audit_core.rating.alignment import (
    ALIGNMENT_COLUMNS,
    TILT_COLUMNS,
    WILCOXON_COLUMNS,
    alignment_tables,
    paired_wilcoxon,
    round_half_up,
)
from audit_core.rating.reliability import (
    AGREEMENT_COLUMNS,
    pool_agreement_table,
    pool_consensus,
    reliability_table,
)
from audit_core.stats.resampling import Resampling
from audit_core.store.schema import OUTCOME_SCALES

DEFAULT_OUTCOME = "rubric"
RATING_COLUMNS = ("judge", "condition", "candidate_id", "rating", "status", "raw_output", "parse_note",
                  "attempts", "seconds")
DISTRIBUTION_COLUMNS = ("source", "judge", "condition", "pool", "point", "count", "share")
ABSTAINED, FAILED = "abstained", "failed"  # the distribution's points beside the scale's


@dataclass(frozen=True)
class RatingData:
    """One dataset's rating-audit inputs on one outcome, as long frames.

    votes: candidate_id, outcome, pool, annotator, value (this outcome only).
    consensus: candidate_id, pool, value — c_p(i), the pool's consensus row, else the mean of its votes.
    ratings: RATING_COLUMNS, one row per judge × condition × item (rating NaN unless status 'ok').
    items: candidate_id plus one column per breakdown: `category` (the prompt's) and each
      candidate attribute (a candidate's own `category` attribute wins over its prompt's).
    candidates: candidate_id, prompt_id, prompt, source_model.
    image_paths: candidate_id → image file (None when there is none).
    """

    dataset_id: str
    outcome: str
    scale: tuple[int, int]
    votes: pd.DataFrame
    consensus: pd.DataFrame
    ratings: pd.DataFrame
    items: pd.DataFrame
    candidates: pd.DataFrame
    image_paths: dict[str, str | None]

    @property
    def pools(self) -> list[str]:
        """Reference pools with a consensus on some item, sorted."""
        return sorted(self.consensus["pool"].unique())

    @property
    def raters(self) -> list[tuple[str, str]]:
        """(judge, condition) pairs with recorded calls, sorted."""
        pairs = self.ratings[["judge", "condition"]].drop_duplicates().itertuples(index=False, name=None)
        return sorted(pairs)


@dataclass(frozen=True)
class RatingAudit:
    """Every table of the rating audit and how its intervals were made (item-level bootstrap under
    `resampling`).

    alignment: ALIGNMENT_COLUMNS; tilt: TILT_COLUMNS; wilcoxon: WILCOXON_COLUMNS
    (`audit_core.rating.alignment`); reliability: RELIABILITY_COLUMNS; pool_agreement:
    AGREEMENT_COLUMNS (`audit_core.rating.reliability`).
    """

    dataset_id: str
    outcome: str
    scale: tuple[int, int]
    resampling: Resampling
    alignment: pd.DataFrame
    tilt: pd.DataFrame
    reliability: pd.DataFrame
    pool_agreement: pd.DataFrame
    wilcoxon: pd.DataFrame

    def tables(self) -> dict[str, pd.DataFrame]:
        """Table name → frame, as the analyze command writes them (name.csv)."""
        return {"alignment": self.alignment, "tilt": self.tilt, "reliability": self.reliability,
                "pool_agreement": self.pool_agreement, "wilcoxon": self.wilcoxon}

    def to_summary(self) -> dict:
        """JSON-ready rows of alignment, tilt and reliability (NaN → null), with outcome, scale,
        resamples and seed."""
        return {
            "alignment": json_rows(self.alignment), "tilt": json_rows(self.tilt),
            "reliability": json_rows(self.reliability), "outcome": self.outcome, "scale": list(self.scale),
            "resamples": self.resampling.resamples, "seed": self.resampling.seed,
        }


def json_rows(frame: pd.DataFrame) -> list[dict]:
    """The frame's rows as dicts of plain JSON values: NaN → None, numpy scalars → Python."""
    return json.loads(frame.to_json(orient="records", double_precision=15))


# ---------------------------------------------------------------------------- loading


def load_rating_data(
    con: duckdb.DuckDBPyConnection, dataset_id: str, outcome: str = DEFAULT_OUTCOME
) -> RatingData | None:
    """The dataset's rating-audit inputs on `outcome` (see RatingData), or None when it has
    neither rating calls nor votes on that outcome (a selection-only dataset, say).

    Rating runs count when their recorded outcome is `outcome` (runs that record none, e.g.
    imported ones, count for the default outcome). The scale is the one those runs record,
    else `schema.OUTCOME_SCALES`; ValueError when runs disagree or no scale is known.
    """
    runs = store.load_runs(con, dataset_id)
    runs = runs[runs["kind"] == "rater"]
    configs = [json.loads(text) if isinstance(text, str) and text else {} for text in runs["config_json"]]
    ours = [c.get("outcome", DEFAULT_OUTCOME) == outcome for c in configs]
    calls = store.load_rating_calls(con, dataset_id)
    calls = calls[calls["run_id"].isin(runs["run_id"][ours])]
    votes = store.load_votes(con, dataset_id)
    votes = votes[votes["outcome"] == outcome].reset_index(drop=True)
    if calls.empty and votes.empty:
        return None
    rows = store.load_pool_ratings(con, dataset_id, outcome)
    scale = _scale(dataset_id, outcome, [c["scale"] for c, o in zip(configs, ours) if o and c.get("scale")])

    prompts = store.load_prompts(con, dataset_id)
    candidates = store.load_candidates(con, dataset_id).merge(
        prompts[["prompt_id", "prompt", "category"]], on="prompt_id", how="left")
    items = candidates[["candidate_id", "category"]]
    attributes = store.load_candidate_attributes(con, dataset_id)
    if not attributes.empty:
        wide = attributes.pivot(index="candidate_id", columns="attribute", values="value")
        wide.columns.name = None
        items = items.drop(columns=[c for c in wide.columns if c in items.columns])
        items = items.merge(wide.reset_index(), on="candidate_id", how="left")
    return RatingData(
        dataset_id=dataset_id,
        outcome=outcome,
        scale=scale,
        votes=votes,
        consensus=pool_consensus(votes, rows, outcome),
        ratings=calls[list(RATING_COLUMNS)].reset_index(drop=True),
        items=items.reset_index(drop=True),
        candidates=candidates[["candidate_id", "prompt_id", "prompt", "source_model"]],
        image_paths={cid: path if isinstance(path, str) else None
                     for cid, path in zip(candidates["candidate_id"], candidates["image_path"])},
    )


def _scale(dataset_id: str, outcome: str, recorded: list[list[float]]) -> tuple[int, int]:
    """The rubric scale of `outcome`: the one the rating runs record, else the schema's."""
    scales = {(int(lo), int(hi)) for lo, hi in recorded}
    if len(scales) > 1:
        raise ValueError(f"dataset {dataset_id!r}: the rating runs on outcome {outcome!r} record different "
                         f"scales ({', '.join(f'{lo}-{hi}' for lo, hi in sorted(scales))}); audit them apart")
    if scales:
        return scales.pop()
    if outcome not in OUTCOME_SCALES:
        raise ValueError(f"dataset {dataset_id!r}: outcome {outcome!r} has no known scale (no rating run records "
                         f"one, and it is not a built-in outcome: {', '.join(OUTCOME_SCALES)})")
    lo, hi = OUTCOME_SCALES[outcome]
    return int(lo), int(hi)


def consensus_pools(con: duckdb.DuckDBPyConnection, dataset_id: str, outcome: str = "alignment") -> list[str]:
    """Pools with consensus rows (the `ratings` table) on `outcome`, sorted: the utilities a
    selection audit can take (`audit_core.selection.data.load_selection_data(..., pool=...)`)."""
    rows = con.execute(
        "SELECT DISTINCT pool FROM ratings WHERE dataset_id = ? AND outcome = ? ORDER BY pool",
        [dataset_id, outcome],
    ).fetchall()
    return [r[0] for r in rows]


# ---------------------------------------------------------------------------- the audit


def audit_rating(data: RatingData, resampling: Resampling = Resampling()) -> RatingAudit:
    """Alignment and tilt per judge × condition × pool (× group) with item-level bootstrap intervals,
    reliability per pool, agreement between pools, and the paired Wilcoxon tests (DESIGN §4b)."""
    ratings = data.ratings[["judge", "condition", "candidate_id", "rating", "status"]]
    if data.consensus.empty:  # nothing to compare the ratings with: every table is empty
        tables = {name: pd.DataFrame(columns=list(columns)) for name, columns in (
            ("alignment", ALIGNMENT_COLUMNS), ("tilt", TILT_COLUMNS), ("wilcoxon", WILCOXON_COLUMNS),
            ("pool_agreement", AGREEMENT_COLUMNS))}
        alignment, tilt = tables["alignment"], tables["tilt"]
    else:
        both = alignment_tables(ratings, consensus=data.consensus, items=data.items, scale=data.scale,
                                outcome=data.outcome, resampling=resampling)
        alignment, tilt = both.alignment, both.tilt
        tables = {"wilcoxon": paired_wilcoxon(ratings, consensus=data.consensus, scale=data.scale,
                                              outcome=data.outcome),
                  "pool_agreement": pool_agreement_table(consensus=data.consensus, outcome=data.outcome)}
    return RatingAudit(
        dataset_id=data.dataset_id, outcome=data.outcome, scale=data.scale, resampling=resampling,
        alignment=alignment, tilt=tilt, reliability=reliability_table(data.votes),
        pool_agreement=tables["pool_agreement"], wilcoxon=tables["wilcoxon"],
    )


# ---------------------------------------------------------------------------- views


def rating_distribution(data: RatingData) -> pd.DataFrame:
    """How often each point is given (DISTRIBUTION_COLUMNS), so a positivity floor shows.

    source 'judge': one row per judge × condition × point, points lo..hi then 'abstained' and
    'failed' (parse or runtime), share = count / all the rater's calls. source 'pool': one row
    per pool × point lo..hi, counting its consensus values rounded half up (as the QWK does),
    share = count / the items with its consensus. Points are strings ('1' … '5', 'abstained').
    """
    lo, hi = data.scale
    points = [str(p) for p in range(lo, hi + 1)]
    ratings, status = data.ratings, data.ratings["status"]
    rated = ratings["rating"].fillna(lo).astype(int).astype(str)  # NaN only where the status is not 'ok'
    point = np.where(status == "ok", rated, np.where(status == "abstained", ABSTAINED, FAILED))
    judged = _counts(ratings.assign(point=point), ["judge", "condition"], [*points, ABSTAINED, FAILED])
    rounded = np.clip(round_half_up(data.consensus["value"].to_numpy()), lo, hi).astype(int).astype(str)
    pooled = _counts(data.consensus.assign(point=rounded), ["pool"], points)
    frame = pd.concat([judged.assign(source="judge", pool=None),
                       pooled.assign(source="pool", judge=None, condition=None)], ignore_index=True)
    return frame[list(DISTRIBUTION_COLUMNS)]


def _counts(frame: pd.DataFrame, keys: list[str], points: list[str]) -> pd.DataFrame:
    """keys…, point, count, share: every point of `points` per key, zeros included."""
    counts = pd.crosstab([frame[k] for k in keys], frame["point"]).reindex(columns=points, fill_value=0)
    if counts.empty:
        return pd.DataFrame(columns=[*keys, "point", "count", "share"])
    counts.columns.name = "point"
    long = counts.stack().rename("count").reset_index()
    long["share"] = long["count"] / long.groupby(keys)["count"].transform("sum")
    return long


def item_detail(data: RatingData, candidate_id: str) -> dict[str, pd.DataFrame]:
    """Everything recorded about one item; KeyError naming it when the dataset has no such item.

    item: one row (candidate_id, prompt_id, prompt, source_model and the breakdown columns);
    consensus: pool, consensus, votes (count); votes: pool, annotator, value;
    ratings: judge, condition, rating, status, raw_output, parse_note, attempts, seconds,
    plus error_<pool> = |rating − c_pool| for each pool with a consensus on the item.
    """
    item = data.candidates[data.candidates["candidate_id"] == candidate_id]
    if item.empty:
        raise KeyError(f"item {candidate_id!r} is not a candidate of dataset {data.dataset_id!r}")
    item = item.merge(data.items, on="candidate_id", how="left")
    votes = data.votes.loc[data.votes["candidate_id"] == candidate_id, ["pool", "annotator", "value"]]
    consensus = data.consensus.loc[data.consensus["candidate_id"] == candidate_id, ["pool", "value"]]
    consensus = consensus.rename(columns={"value": "consensus"}).merge(
        votes.groupby("pool").size().rename("votes").reset_index(), on="pool", how="left")
    consensus["votes"] = consensus["votes"].fillna(0).astype(int)
    ratings = data.ratings.loc[data.ratings["candidate_id"] == candidate_id].drop(columns="candidate_id")
    for pool, value in zip(consensus["pool"], consensus["consensus"]):
        ratings[f"error_{pool}"] = (ratings["rating"] - value).abs()
    return {"item": item.reset_index(drop=True), "consensus": consensus.reset_index(drop=True),
            "votes": votes.reset_index(drop=True), "ratings": ratings.reset_index(drop=True)}
