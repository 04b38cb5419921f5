"""Validated pools and recorded calls, written to the store idempotently.

Every importer builds a `PoolSet` (and optionally `ImportedRun`s,
`ImportedScores`, `ImportedRatings` and attribute judges' runs) in memory; `write_dataset` validates all
of it before it opens the database, then writes everything in one transaction:
either all of it lands or the database is left exactly as it was.

Frames may carry an optional `line` column (the source line or row of each
record), a `file` column (the source file, when it is not the PoolSet's
`source`: votes read from a file of their own) and ratings and votes a `field`
column (the source's name for the value); validation errors then name them.
Extra columns are never written.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import duckdb
import pandas as pd

from audit_core import store
from audit_core.attributes.taxonomy import Taxonomy
from audit_core.errors import InputError
from audit_core.ingest import input_files
from audit_core.ingest.values import name
from audit_core.selection.orders import slot_labels
from audit_core.store.records import DatasetRecord, RunRecord, TaxonomyRecord, utc_now
from audit_core.store.schema import CALL_STATUSES, OUTCOME_SCALES, RATING_STATUSES
from audit_core.user_text import excerpt, shown

MIN_POOL_SIZE = 2
CHOSEN_STATUSES = ("ok", "recovered")
UTILITY = "alignment"  # the selection audit's utility h (DESIGN §4)
RATING_KEYS = ["candidate_id", "outcome", "pool"]


@dataclass
class PoolSet:
    """Prompts, candidates and ratings of one dataset, before writing.

    prompts: prompt_id, prompt, country, category, split
    candidates: prompt_id, candidate_id, source_model, image_path
    ratings: candidate_id, outcome, pool, value, n
    votes: candidate_id, outcome, pool, annotator, value
    attributes: candidate_id, attribute, value (item attributes for breakdowns, e.g. culture)
    gold_labels: candidate_id, attribute, label (attribute judges' reference, DESIGN §4c)
    (each optionally with `line`, the source line or row, for error messages)
    scales: [lo, hi] of each outcome beyond schema.OUTCOME_SCALES, as the source declares it
    taxonomy: the taxonomy the gold labels belong to (required with gold labels)
    """

    dataset_id: str
    source: str
    prompts: pd.DataFrame
    candidates: pd.DataFrame
    ratings: pd.DataFrame
    votes: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(
            columns=["candidate_id", "outcome", "pool", "annotator", "value"]
        )
    )
    attributes: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=["candidate_id", "attribute", "value"])
    )
    source_revision: str | None = None
    notes: str | None = None
    scales: dict[str, tuple[float, float]] = field(default_factory=dict)
    gold_labels: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=["candidate_id", "attribute", "label"])
    )
    taxonomy: Taxonomy | None = None

    def manifest_sha256(self) -> str:
        return store.manifest_sha256(self.candidates, self.prompts)

    def hashes(self, con: duckdb.DuckDBPyConnection) -> tuple[str, str]:
        """(manifest, content) hashes, as `write_pools` compares them with a stored dataset's."""
        return self.manifest_sha256(), self.content_sha256()

    def insert_rows(self, con: duckdb.DuckDBPyConnection) -> None:
        """Insert the prompts, candidates, ratings, votes, attributes and gold labels (with their taxonomy)."""
        ds = self.dataset_id
        store.insert_frame(con, "prompts", self.prompts.assign(dataset_id=ds))
        store.insert_frame(con, "candidates", with_canonical_index(self.candidates).assign(dataset_id=ds))
        store.insert_frame(con, "ratings", self.ratings.assign(dataset_id=ds))
        store.insert_frame(con, "votes", self.votes.assign(dataset_id=ds))
        store.insert_frame(con, "candidate_attributes", self.attributes.assign(dataset_id=ds))
        if len(self.gold_labels):
            store.insert_frame(con, "gold_labels", self.gold_labels.assign(dataset_id=ds))
            tax = self.taxonomy
            store.insert_records(con, "taxonomies", [TaxonomyRecord(ds, tax.name, tax.version, tax.sha256, tax.to_json())])

    def content_sha256(self) -> str:
        """Hash of everything written for the pools (metadata, ratings, votes), order-free."""
        parts = [
            _frame_sha256(self.prompts, "prompts", ["prompt_id"]),
            _frame_sha256(self.candidates, "candidates", ["candidate_id"]),
            _frame_sha256(self.ratings, "ratings", ["candidate_id", "outcome", "pool"]),
            _frame_sha256(self.votes, "votes", ["candidate_id", "outcome", "pool", "annotator"]),
        ]
        if len(self.attributes):  # absent attributes leave the hash of earlier datasets as it was
            parts.append(_frame_sha256(self.attributes, "candidate_attributes", ["candidate_id", "attribute"]))
        if len(self.gold_labels):  # likewise: a dataset without gold labels hashes as before
            parts.append(_frame_sha256(self.gold_labels, "gold_labels", ["candidate_id", "attribute"]))
            parts.append(self.taxonomy.sha256 if self.taxonomy is not None else "")
        return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


@dataclass
class ImportedRun:
    """Calls recorded elsewhere, for one judge.

    calls: prompt_id, order_index, slot_candidate_ids, status, choice_label,
    chosen_candidate_id, ranking, raw_output, parse_note, attempts, seconds,
    input_json (optionally `line`). `fields` maps these column names to the
    source's own field names, so errors speak the source's language.
    """

    judge: str
    source_file: str
    calls: pd.DataFrame
    kind: str = "selector"
    backend: str = "import"
    model: str | None = None
    config: dict = field(default_factory=dict)
    fields: dict[str, str] = field(default_factory=dict)


@dataclass
class ImportedScores:
    """Content-scorer outputs recorded elsewhere: candidate_id, score."""

    scorer: str
    source_file: str
    scores: pd.DataFrame
    model: str | None = None
    model_revision: str | None = None


@dataclass
class ImportedRatings:
    """A rating judge's calls recorded elsewhere, one per (item, condition).

    calls: candidate_id, condition, status (schema.RATING_STATUSES), rating
    (NaN/None unless 'ok'), raw_output, parse_note, attempts, seconds,
    input_json (optionally `line`). `outcome` is what the judge rates and
    `scale` its integer points lo..hi, both recorded in the run's config.
    """

    judge: str
    source_file: str
    calls: pd.DataFrame
    outcome: str = "rubric"
    scale: tuple[int, int] = (1, 5)


def with_votes(pools: PoolSet, votes: pd.DataFrame) -> PoolSet:
    """`pools` with `votes`, plus a consensus rating for every (candidate, outcome, pool) that
    has votes but no rating row: c = mean of those votes, n = their count (DESIGN §4b).

    A rating row that is given wins over the mean of its votes. The derived rows carry
    the `line` and `file` of their first vote, so errors about them point at the votes.
    """
    grouped = votes.groupby(RATING_KEYS, sort=True)
    derived = grouped["value"].agg(["mean", "min", "max", "size"]).reset_index()
    # a float mean can round one ulp past its votes' range (and so past the scale's end)
    derived["value"] = derived["mean"].clip(derived["min"], derived["max"])
    derived["n"] = derived["size"].astype("Int64")
    located = [c for c in ("line", "file") if c in votes.columns]
    if located:
        derived = derived.merge(grouped[located].first().reset_index(), on=RATING_KEYS)
    given = pools.ratings[RATING_KEYS].drop_duplicates()
    new = derived.merge(given, on=RATING_KEYS, how="left", indicator=True)
    new = new.loc[new["_merge"] == "left_only", [*RATING_KEYS, "value", "n", *located]]
    ratings = pd.concat([pools.ratings, new.assign(field="value")], ignore_index=True) if len(new) else pools.ratings
    return dataclasses.replace(pools, votes=votes, ratings=ratings.astype({"n": "Int64"}))


def utility_pools(pools: PoolSet) -> list[str]:
    """Reference pools holding the selection audit's utility (alignment ratings), sorted."""
    ratings = pools.ratings
    return sorted(ratings.loc[ratings["outcome"] == UTILITY, "pool"].unique())


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a table's bytes (the file checked again as `input_files` checks every input)."""
    digest = hashlib.sha256()
    with input_files.opened(path, input_files.TABLE) as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def with_canonical_index(candidates: pd.DataFrame) -> pd.DataFrame:
    """Add canonical_index: rank of the candidate id within its pool (ids sorted)."""
    out = candidates.sort_values(["prompt_id", "candidate_id"]).reset_index(drop=True)
    out["canonical_index"] = out.groupby("prompt_id").cumcount().astype("int32")
    return out


def _line(frame: pd.DataFrame, mask: pd.Series) -> int | None:
    """Source line of the first row where `mask` holds, when the frame records lines."""
    if "line" not in frame.columns or not mask.any():
        return None
    return int(frame.loc[mask.to_numpy(), "line"].iloc[0])


def _file(frame: pd.DataFrame, mask: pd.Series, default: str) -> str:
    """Source file of the first row where `mask` holds: its `file` column when set, else `default`."""
    if "file" not in frame.columns or not mask.any():
        return default
    named = frame.loc[mask.to_numpy(), "file"].iloc[0]
    return named if isinstance(named, str) else default


def check_pools(pools: PoolSet, *, selector_calls: bool = True) -> None:
    """Raise InputError unless the pools are well formed.

    Every prompt id is unique and has a candidate, ≥ MIN_POOL_SIZE of them where a selection
    audit applies: the dataset comes with selector decisions (`selector_calls`) or has
    alignment ratings, the selection audit's utility (a one-image prompt would count as a
    pick with no regret). Rating and attribute judges see one image at a time, so their
    datasets may have one image per prompt; every candidate
    id is unique and belongs to a known prompt; there is some rating, vote or gold label;
    every rating and vote value is a finite number on its outcome's scale
    (schema.OUTCOME_SCALES, or `pools.scales` for other outcomes); a vote's
    annotator appears once per (candidate, outcome, pool); every pool holding
    alignment ratings (the selection audit's utility) rates every candidate;
    gold labels name known candidates, once per attribute, with a label of the taxonomy's answers.
    """
    source, prompts, candidates = pools.source, pools.prompts, pools.candidates

    def fail(message: str, frame: pd.DataFrame, mask: pd.Series, fld: str) -> None:
        raise InputError(message, file=_file(frame, mask, source), line=_line(frame, mask), field=fld)

    dup = prompts["prompt_id"].duplicated()
    if dup.any():
        fail(f"prompt id {shown(prompts.loc[dup, 'prompt_id'].iloc[0])} appears twice", prompts, dup, "prompt_id")
    dup = candidates["candidate_id"].duplicated()
    if dup.any():
        cid = candidates.loc[dup, "candidate_id"].iloc[0]
        fail(f"candidate id {shown(cid)} appears twice", candidates, dup, "candidate_id")
    orphan = ~candidates["prompt_id"].isin(prompts["prompt_id"])
    if orphan.any():
        pid = candidates.loc[orphan, "prompt_id"].iloc[0]
        fail(f"candidate of unknown prompt {shown(pid)}", candidates, orphan, "prompt_id")
    sizes = candidates.groupby("prompt_id").size().reindex(prompts["prompt_id"], fill_value=0)
    selection = ["selector decisions"] if selector_calls else []
    selection += [f"{UTILITY} ratings, the selection audit's utility"] if utility_pools(pools) else []
    small = prompts["prompt_id"].map(sizes) < (MIN_POOL_SIZE if selection else 1)
    if small.any():
        pid = prompts.loc[small, "prompt_id"].iloc[0]
        need = (f"a pool needs at least {MIN_POOL_SIZE} where a selection audit applies (this dataset has "
                f"{' and '.join(selection)}; without them, one image per prompt suits rating and attribute judges)"
                if selection else "a prompt needs at least one")
        fail(f"prompt {shown(pid)} has {int(sizes[pid])} candidate(s); {need}", prompts, small, "candidates")
    if pools.ratings.empty and pools.votes.empty and pools.gold_labels.empty:
        raise InputError("no ratings and no votes (nor gold labels): nothing to audit the judges against "
                         "(give an alignment rating per candidate, votes, or gold labels)", file=source)
    # votes first: a bad vote makes its derived consensus bad too, and the error should
    # name the vote's own line
    for table, frame in (("votes", pools.votes), ("ratings", pools.ratings)):
        stray = ~frame["candidate_id"].isin(candidates["candidate_id"])
        if stray.any():
            fail(f"{table} for unknown candidate {shown(frame.loc[stray, 'candidate_id'].iloc[0])}", frame, stray, "candidate_id")
        values = pd.to_numeric(frame["value"], errors="coerce").astype(float)
        bad = ~values.map(math.isfinite).astype(bool)
        if bad.any():
            row = frame.loc[bad.to_numpy()].iloc[0]
            fail(f"{row['outcome']} rating {shown(row['value'])} of {shown(row['candidate_id'])} is not a finite number", frame, bad, _field(row))
        scales = {**pools.scales, **OUTCOME_SCALES}
        undeclared = ~frame["outcome"].isin(list(scales))
        if undeclared.any():
            row = frame.loc[undeclared.to_numpy()].iloc[0]
            fail(f"outcome {shown(row['outcome'])} has no declared scale", frame, undeclared, _field(row))
        low = frame["outcome"].map(lambda o: scales[o][0]).astype(float)
        high = frame["outcome"].map(lambda o: scales[o][1]).astype(float)
        off = (values < low) | (values > high)
        if off.any():
            row = frame.loc[off.to_numpy()].iloc[0]
            lo, hi = scales[row["outcome"]]
            fail(
                f"{row['outcome']} rating {shown(float(row['value']))} of {shown(row['candidate_id'])} is off its scale [{lo:g}, {hi:g}]",
                frame,
                off,
                _field(row),
            )
    dup = pools.votes.duplicated(["candidate_id", "outcome", "pool", "annotator"])
    if dup.any():
        row = pools.votes.loc[dup.to_numpy()].iloc[0]
        fail(
            f"annotator {shown(row['annotator'])} rated {shown(row['candidate_id'])} twice for {row['outcome']} in pool {shown(row['pool'])}",
            pools.votes,
            dup,
            "annotator",
        )
    attributes = pools.attributes
    stray = ~attributes["candidate_id"].isin(candidates["candidate_id"])
    if stray.any():
        cid = attributes.loc[stray, "candidate_id"].iloc[0]
        fail(f"attribute of unknown candidate {shown(cid)}", attributes, stray, "candidate_id")
    dup = attributes.duplicated(["candidate_id", "attribute"])
    if dup.any():
        row = attributes.loc[dup.to_numpy()].iloc[0]
        fail(f"candidate {shown(row['candidate_id'])} has attribute {shown(row['attribute'])} twice", attributes, dup,
             excerpt(row["attribute"]))
    _check_gold_labels(pools, fail)
    ratings = pools.ratings
    for pool in utility_pools(pools):
        aligned = ratings.loc[(ratings["outcome"] == UTILITY) & (ratings["pool"] == pool), "candidate_id"]
        unrated = ~candidates["candidate_id"].isin(aligned)
        if unrated.any():
            cid = candidates.loc[unrated, "candidate_id"].iloc[0]
            fail(
                f"candidate {shown(cid)} has no {UTILITY} rating in pool {shown(pool)} ({int((~unrated).sum())} of "
                f"{len(candidates)} candidates have one): a pool's {UTILITY}, the selection audit's utility, "
                "rates every candidate or none",
                candidates,
                unrated,
                UTILITY,
            )


def _check_gold_labels(pools: PoolSet, fail: Callable[[str, pd.DataFrame, pd.Series, str], None]) -> None:
    """`fail(message, frame, mask, field)` unless every gold label is of a known candidate, once per
    attribute, and one of its attribute's answers in `pools.taxonomy`."""
    gold = pools.gold_labels
    if gold.empty:
        return
    if pools.taxonomy is None:
        raise InputError("gold labels without a taxonomy to check them against", file=pools.source)
    stray = ~gold["candidate_id"].isin(pools.candidates["candidate_id"])
    if stray.any():
        fail(f"gold label of unknown candidate {shown(gold.loc[stray, 'candidate_id'].iloc[0])}", gold, stray, "candidate_id")
    dup = gold.duplicated(["candidate_id", "attribute"])
    if dup.any():
        row = gold.loc[dup.to_numpy()].iloc[0]
        fail(f"candidate {shown(row['candidate_id'])} has two gold labels for {shown(row['attribute'])}", gold, dup, "attribute")
    answers = {a.name: set(a.answers()) for a in pools.taxonomy.attributes}
    unknown = ~gold["attribute"].isin(list(answers))
    if unknown.any():
        fail(f"attribute {shown(gold.loc[unknown, 'attribute'].iloc[0])} is not in taxonomy {shown(pools.taxonomy.name)} "
             f"({', '.join(answers)})", gold, unknown, "attribute")
    off = ~pd.Series([label in answers[a] for a, label in zip(gold["attribute"], gold["label"])], index=gold.index)
    if off.any():
        row = gold.loc[off.to_numpy()].iloc[0]
        fail(f"{shown(row['label'])} is not a label of {shown(row['attribute'])} "
             f"({', '.join(sorted(answers[row['attribute']]))})", gold, off, "label")


def _field(row: pd.Series) -> str:
    """The source's name for a rating or vote value: its `field` column when present, else the outcome."""
    named = row.get("field")
    return named if isinstance(named, str) else row["outcome"]


def check_calls(run: ImportedRun, candidates: pd.DataFrame) -> None:
    """Raise InputError unless every call is consistent with the pools.

    Each call names a known prompt; its slots show every candidate of that pool
    exactly once; an ok/recovered call chooses a shown candidate whose slot
    label (A, B, …) matches `choice_label`; a failed call chooses nothing; a
    ranking lists shown labels at most once; (prompt, order) is not repeated.
    """
    calls = run.calls.reset_index(drop=True)
    lines = calls["line"] if "line" in calls.columns else pd.Series(range(1, len(calls) + 1))
    members = candidates.groupby("prompt_id")["candidate_id"].agg(lambda ids: sorted(ids)).to_dict()

    def fail(i: int, column: str, message: str) -> None:
        raise InputError(message, file=run.source_file, line=int(lines.iloc[i]), field=run.fields.get(column, column))

    seen: dict[tuple[str, int], int] = {}
    for i, call in enumerate(calls.itertuples(index=False)):
        key = (call.prompt_id, int(call.order_index))
        problem = call_problem(call, members.get(call.prompt_id), seen.get(key))
        if problem:
            fail(i, *problem)
        seen[key] = int(lines.iloc[i])


def call_problem(call: object, pool: list[str] | None, earlier: int | None) -> tuple[str, str] | None:
    """(column, message) of the first check one recorded call fails, or None (`check_calls`' rules).

    `call` has the calls frame's fields as attributes; `pool` is its prompt's candidate ids sorted (None:
    an unknown prompt); `earlier` the line of an earlier call of the same (prompt, order), if any.
    """
    pid, slots = call.prompt_id, list(call.slot_candidate_ids)
    if pool is None:
        return "prompt_id", f"unknown prompt id {shown(pid)}"
    for cid in slots:
        if cid not in pool:
            return "slot_candidate_ids", f"{shown(cid)} is not a candidate of prompt {shown(pid)} (candidates: {excerpt(', '.join(pool))})"
    if sorted(slots) != pool:
        missing = sorted(set(pool) - set(slots))
        problem = f"misses {', '.join(missing)}" if missing else "shows a candidate twice"
        return "slot_candidate_ids", f"the slot order {problem}; every call shows the whole pool once"
    if call.status not in CALL_STATUSES:
        return "status", f"status {shown(call.status)} is not one of {', '.join(CALL_STATUSES)}"
    labels = slot_labels(len(slots))
    chosen, label = call.chosen_candidate_id, call.choice_label
    if call.status in CHOSEN_STATUSES:
        if not isinstance(chosen, str):
            return "chosen_candidate_id", f"a call with status {shown(call.status)} must name the chosen candidate"
        if chosen not in slots:
            return "chosen_candidate_id", f"{shown(chosen)} is not among the images shown ({excerpt(', '.join(slots))})"
        if label != labels[slots.index(chosen)]:
            return "choice_label", f"label {shown(label)} does not show {shown(chosen)} (slot {labels[slots.index(chosen)]})"
    elif isinstance(chosen, str) or isinstance(label, str):
        return "chosen_candidate_id", f"a call with status {shown(call.status)} chooses nothing"
    ranking = call.ranking
    if isinstance(ranking, (list, tuple)) and (len(set(ranking)) != len(ranking) or not set(ranking) <= set(labels)):
        return "ranking", f"ranking {shown(list(ranking))} must list shown labels ({', '.join(labels)}) at most once"
    if earlier is not None:
        return "order_index", (f"duplicate call: prompt {shown(pid)} order {int(call.order_index)} was already "
                               f"recorded on line {earlier}")
    return None


def check_scores(imported: ImportedScores, candidates: pd.DataFrame) -> None:
    """Raise InputError unless there is exactly one finite score per candidate."""
    where = {"file": imported.source_file, "field": "scores"}
    ids = imported.scores["candidate_id"]
    if ids.duplicated().any():
        raise InputError(f"candidate {shown(ids[ids.duplicated()].iloc[0])} is scored twice", **where)
    unknown = sorted(set(ids) - set(candidates["candidate_id"]))
    if unknown:
        raise InputError(f"unknown candidate id {shown(unknown[0])} ({len(unknown)} unknown in all)", **where)
    missing = sorted(set(candidates["candidate_id"]) - set(ids))
    if missing:
        raise InputError(f"no score for candidate {shown(missing[0])} ({len(missing)} missing in all)", **where)


def check_ratings(imported: ImportedRatings, candidates: pd.DataFrame) -> None:
    """Raise InputError unless every rating call is consistent with the pools.

    Each call rates a known candidate, once per condition; its status is one of
    schema.RATING_STATUSES; an 'ok' call carries an integer rating on the scale
    and any other call none. A judge may rate a subset of the candidates.
    """
    calls = imported.calls.reset_index(drop=True)
    lines = calls["line"] if "line" in calls.columns else pd.Series(range(1, len(calls) + 1))
    lo, hi = imported.scale

    def fail(i: int, column: str, message: str) -> None:
        raise InputError(message, file=imported.source_file, line=int(lines.iloc[i]), field=column)

    unknown = ~calls["candidate_id"].isin(candidates["candidate_id"])
    if unknown.any():
        i = int(unknown.to_numpy().argmax())
        fail(i, "candidate_id", f"unknown candidate id {shown(calls['candidate_id'].iloc[i])}")
    bad = ~calls["status"].isin(RATING_STATUSES)
    if bad.any():
        i = int(bad.to_numpy().argmax())
        fail(i, "status", f"status {shown(calls['status'].iloc[i])} is not one of {', '.join(RATING_STATUSES)}")
    rating = pd.to_numeric(calls["rating"], errors="coerce").astype(float)
    ok = (calls["status"] == "ok").to_numpy()
    unrated = ok & rating.isna().to_numpy()
    if unrated.any():
        fail(int(unrated.argmax()), "rating", "status 'ok' needs a rating")
    off = ok & ~(rating.between(lo, hi) & (rating % 1 == 0)).to_numpy()
    if off.any():
        i = int(off.argmax())
        fail(i, "rating", f"expected an integer from {lo} to {hi}, got {shown(calls['rating'].iloc[i])}")
    stray = ~ok & rating.notna().to_numpy()
    if stray.any():
        i = int(stray.argmax())
        fail(i, "rating", f"a call with status {shown(calls['status'].iloc[i])} has no rating (only 'ok' calls carry one)")
    dup = calls.duplicated(["candidate_id", "condition"]).to_numpy()
    if dup.any():
        i = int(dup.argmax())
        cid, condition = calls["candidate_id"].iloc[i], calls["condition"].iloc[i]
        first = (calls["candidate_id"] == cid) & (calls["condition"] == condition)
        fail(i, "candidate_id", f"duplicate call: candidate {shown(cid)} under condition {shown(condition)} was already "
                                f"recorded on line {int(lines[first.to_numpy()].iloc[0])}")


class PoolsToWrite(Protocol):
    """What `write_pools` writes: a PoolSet, or pools staged in DuckDB (`staged.StagedPools`)."""

    dataset_id: str
    source: str
    source_revision: str | None
    notes: str | None

    def hashes(self, con: duckdb.DuckDBPyConnection) -> tuple[str, str]: ...

    def insert_rows(self, con: duckdb.DuckDBPyConnection) -> None: ...


def write_pools(con: duckdb.DuckDBPyConnection, pools: PoolsToWrite, *, replace: bool = False,
                selector_calls: bool = True) -> str:
    """Write a dataset's pools (a PoolSet is checked by `check_pools` here, staged pools before the store
    was opened); returns 'created', 'replaced' or 'unchanged'.

    Idempotent: the same prompts, candidates, ratings and votes again is a no-op (same manifest and
    content hashes, `hashes`). Different content under an existing dataset id is refused unless
    `replace` (which drops the dataset's recorded runs too). Call inside a transaction.
    """
    if isinstance(pools, PoolSet):
        check_pools(pools, selector_calls=selector_calls)
    manifest, content_sha = pools.hashes(con)
    existing = store.dataset_row(con, pools.dataset_id)
    outcome = "created"
    if existing is not None:
        if existing["manifest_sha256"] == manifest and (existing["notes"] or "").endswith(content_sha):
            return "unchanged"
        if not replace:
            raise InputError(
                f"dataset {shown(pools.dataset_id)} already exists with different pools or ratings; "
                "pass --replace to overwrite it (its recorded runs are dropped)",
                file=pools.source,
            )
        store.delete_dataset(con, pools.dataset_id)
        outcome = "replaced"
    notes = f"{pools.notes + '; ' if pools.notes else ''}content sha256 {content_sha}"
    store.insert_records(
        con,
        "datasets",
        [
            DatasetRecord(
                dataset_id=pools.dataset_id,
                name=pools.dataset_id,
                source=pools.source,
                source_revision=pools.source_revision,
                manifest_sha256=manifest,
                notes=notes,
            )
        ],
    )
    pools.insert_rows(con)
    return outcome


def _claim_judge(
    con: duckdb.DuckDBPyConnection, dataset_id: str, judge: str, run_id: str, source: str, replace: bool
) -> str | None:
    """'unchanged' if `run_id` is already the judge's only run, else clear the way.

    Returns None (create) or 'replaced'; refuses another run under the same name
    unless `replace`.
    """
    existing = con.execute(
        "SELECT run_id FROM runs WHERE dataset_id = ? AND judge = ?", [dataset_id, judge]
    ).fetchall()
    if [r[0] for r in existing] == [run_id]:
        return "unchanged"
    if not existing:
        return None
    if not replace:
        raise InputError(
            f"judge {shown(judge)} already has recorded calls or scores on dataset {shown(dataset_id)}; "
            "choose another name or pass --replace",
            file=source,
        )
    store.delete_judge(con, dataset_id, judge)
    return "replaced"


def _record_import_run(
    con: duckdb.DuckDBPyConnection,
    dataset_id: str,
    run_id: str,
    judge: str,
    kind: str,
    config: dict,
    *,
    backend: str = "import",
    model: str | None = None,
    model_revision: str | None = None,
) -> dt.datetime:
    """Insert the `runs` row of an imported run (status 'imported'); returns its timestamp."""
    now = utc_now()
    store.insert_records(
        con,
        "runs",
        [
            RunRecord(
                run_id=run_id,
                dataset_id=dataset_id,
                judge=judge,
                kind=kind,
                backend=backend,
                status="imported",
                model=model,
                model_revision=model_revision,
                manifest_sha256=store.dataset_row(con, dataset_id)["manifest_sha256"],
                config_json=json.dumps(config, sort_keys=True),
                started_at=now,
                finished_at=now,
            )
        ],
    )
    return now


def write_imported_run(
    con: duckdb.DuckDBPyConnection,
    dataset_id: str,
    run: ImportedRun,
    *,
    replace: bool = False,
) -> str:
    """Record an imported judge's calls; returns 'created', 'replaced' or 'unchanged'.

    The run id derives from (dataset, judge, file hash), so importing the same file
    again is a no-op; a different file under an existing judge name is refused
    unless `replace`. Call inside a transaction.
    """
    check_calls(run, store.load_candidates(con, dataset_id))
    source_sha = file_sha256(run.source_file)
    run_id = f"{dataset_id}:{run.judge}:import:{source_sha[:16]}"
    claimed = _claim_judge(con, dataset_id, run.judge, run_id, run.source_file, replace)
    if claimed == "unchanged":
        return claimed
    config = {"source_file": str(run.source_file), "source_sha256": source_sha, **run.config}
    now = _record_import_run(con, dataset_id, run_id, run.judge, run.kind, config, backend=run.backend, model=run.model)
    store.insert_frame(con, "calls", _stamped(run.calls, run_id, now, ("prompt_id", "order_index")))
    return claimed or "created"


def write_imported_scores(
    con: duckdb.DuckDBPyConnection,
    dataset_id: str,
    imported: ImportedScores,
    *,
    replace: bool = False,
) -> str:
    """Record a content scorer's per-candidate scores; same idempotence as runs."""
    check_scores(imported, store.load_candidates(con, dataset_id))
    source_sha = file_sha256(imported.source_file)
    run_id = f"{dataset_id}:{imported.scorer}:import:{source_sha[:16]}"
    claimed = _claim_judge(con, dataset_id, imported.scorer, run_id, imported.source_file, replace)
    if claimed == "unchanged":
        return claimed
    config = {"source_file": str(imported.source_file), "source_sha256": source_sha}
    _record_import_run(con, dataset_id, run_id, imported.scorer, "scorer", config,
                       model=imported.model, model_revision=imported.model_revision)
    store.insert_frame(con, "scores", imported.scores.assign(run_id=run_id))
    return claimed or "created"


def write_imported_ratings(
    con: duckdb.DuckDBPyConnection,
    dataset_id: str,
    imported: ImportedRatings,
    *,
    replace: bool = False,
) -> str:
    """Record an imported rating judge's calls (a 'rater' run); returns 'created', 'replaced' or 'unchanged'.

    The run id derives from (dataset, judge, outcome, file hash), so the same file again
    is a no-op; a different file or outcome under an existing judge name is refused
    unless `replace`. The run's config records the outcome and scale, as a rating run's
    does. Call inside a transaction.
    """
    check_ratings(imported, store.load_candidates(con, dataset_id))
    source_sha = file_sha256(imported.source_file)
    run_id = f"{dataset_id}:{imported.judge}:import:{imported.outcome}:{source_sha[:16]}"
    claimed = _claim_judge(con, dataset_id, imported.judge, run_id, imported.source_file, replace)
    if claimed == "unchanged":
        return claimed
    config = {"source_file": str(imported.source_file), "source_sha256": source_sha,
              "outcome": imported.outcome, "scale": list(imported.scale)}
    now = _record_import_run(con, dataset_id, run_id, imported.judge, "rater", config)
    store.insert_frame(con, "rating_calls", _stamped(imported.calls, run_id, now, ("candidate_id", "condition")))
    return claimed or "created"


def _stamped(calls: pd.DataFrame, run_id: str, now: object, key_columns: tuple[str, str]) -> pd.DataFrame:
    """A copy of imported `calls` with run_id, created_at and request_key = sha256("run_id|a|b")
    over the two columns that identify a call within its run."""
    out = calls.copy()
    out["run_id"] = run_id
    out["created_at"] = now
    first, second = key_columns
    out["request_key"] = [
        hashlib.sha256(f"{run_id}|{a}|{b}".encode()).hexdigest() for a, b in zip(out[first], out[second])
    ]
    return out


class AttachedRun(Protocol):
    """An imported run of another judge kind (e.g. `audit_core.ingest.labelers.ImportedLabeler`) that
    `write_dataset` validates and writes with the rest: `check` raises InputError, `write` returns a report line."""

    judge: str

    def check(self, candidates: pd.DataFrame) -> None: ...

    def write(self, con: duckdb.DuckDBPyConnection, dataset_id: str, *, replace: bool) -> str: ...


def write_dataset(
    db: str | Path,
    pools: PoolSet,
    runs: Sequence[ImportedRun] = (),
    scores: Sequence[ImportedScores] = (),
    ratings: Sequence[ImportedRatings] = (),
    *,
    replace: bool = False,
    attached: Sequence[AttachedRun] = (),
) -> list[str]:
    """Validate everything, then write pools, runs, scores, ratings and `attached` runs in one transaction.

    Validation happens before the database is opened, so bad input never even
    creates the file; a failure after this call created it removes it again
    (see `store.writing`). Returns one report line per part written. Prompts
    need ≥ MIN_POOL_SIZE candidates only when selector decisions (`runs`) come with them.
    """
    names = [r.judge for r in runs] + [s.scorer for s in scores] + [r.judge for r in ratings] + [a.judge for a in attached]
    for given, what in ((pools.dataset_id, "dataset"), *((n, "judge") for n in names)):
        name(given, what)
    check_pools(pools, selector_calls=bool(runs))
    for other in attached:
        other.check(pools.candidates)
    for run in runs:
        check_calls(run, pools.candidates)
    for imported in scores:
        check_scores(imported, pools.candidates)
    for rated in ratings:
        check_ratings(rated, pools.candidates)
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InputError(f"judge name {shown(repeated[0])} is given twice; every run needs its own name")
    with store.writing(db) as con, store.transaction(con):
        report = [f"pools: {write_pools(con, pools, replace=replace, selector_calls=bool(runs))}"]
        for run in runs:
            outcome = write_imported_run(con, pools.dataset_id, run, replace=replace)
            counts = run.calls["status"].value_counts().to_dict()
            report.append(f"judge {run.judge}: {outcome}, {len(run.calls)} calls {counts}")
        for imported in scores:
            outcome = write_imported_scores(con, pools.dataset_id, imported, replace=replace)
            report.append(f"scorer {imported.scorer}: {outcome}, {len(imported.scores)} scores")
        for rated in ratings:
            outcome = write_imported_ratings(con, pools.dataset_id, rated, replace=replace)
            counts = rated.calls["status"].value_counts().to_dict()
            report.append(f"rater {rated.judge}: {outcome}, {len(rated.calls)} ratings of {rated.outcome} {counts}")
        report.extend(other.write(con, pools.dataset_id, replace=replace) for other in attached)
    return report


def _frame_sha256(frame: pd.DataFrame, table: str, keys: list[str]) -> str:
    """Order-free hash of the columns `table` stores (dataset_id and derived ones aside)."""
    columns = [c for c in store.TABLE_COLUMNS[table] if c in frame.columns]
    ordered = frame.loc[:, columns].sort_values(keys).reset_index(drop=True)
    return hashlib.sha256(ordered.to_csv(index=False).encode()).hexdigest()[:16]
