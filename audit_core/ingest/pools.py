"""Validated pools and recorded calls, written to the store idempotently.

Every importer builds a `PoolSet` (and optionally `ImportedRun`s) in memory,
validates it, then writes everything in one transaction: either all of it lands
or the database is left exactly as it was.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pandas as pd

from audit_core import store
from audit_core.errors import InputError
from audit_core.records import DatasetRecord, RunRecord, utc_now

MIN_POOL_SIZE = 2


@dataclass
class PoolSet:
    """Prompts, candidates and ratings of one dataset, before writing.

    prompts: prompt_id, prompt, country, category, split
    candidates: prompt_id, candidate_id, source_model, image_path
    ratings: candidate_id, outcome, pool, value, n
    votes: candidate_id, outcome, pool, annotator, value
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
    source_revision: str | None = None
    notes: str | None = None

    def manifest_sha256(self) -> str:
        return store.manifest_sha256(self.candidates, self.prompts)


@dataclass
class ImportedRun:
    """Calls recorded elsewhere, for one judge.

    calls: prompt_id, order_index, slot_candidate_ids, status, choice_label,
    chosen_candidate_id, ranking, raw_output, parse_note, attempts, seconds,
    input_json.
    """

    judge: str
    source_file: str
    calls: pd.DataFrame
    kind: str = "selector"
    backend: str = "import"
    model: str | None = None
    config: dict = field(default_factory=dict)


@dataclass
class ImportedScores:
    """Content-scorer outputs recorded elsewhere: candidate_id, score."""

    scorer: str
    source_file: str
    scores: pd.DataFrame
    model: str | None = None
    model_revision: str | None = None


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def with_canonical_index(candidates: pd.DataFrame) -> pd.DataFrame:
    """Add canonical_index: rank of the candidate id within its pool (ids sorted)."""
    out = candidates.sort_values(["prompt_id", "candidate_id"]).reset_index(drop=True)
    out["canonical_index"] = out.groupby("prompt_id").cumcount().astype("int32")
    return out


def check_pools(pools: PoolSet) -> None:
    """Raise InputError unless every prompt has ≥2 candidates rated for alignment."""
    source = pools.source
    duplicated = pools.candidates["candidate_id"].duplicated()
    if duplicated.any():
        cid = pools.candidates.loc[duplicated, "candidate_id"].iloc[0]
        raise InputError(f"candidate id {cid!r} appears twice", file=source, field="candidate_id")
    sizes = pools.candidates.groupby("prompt_id").size()
    small = sizes[sizes < MIN_POOL_SIZE]
    if not small.empty:
        raise InputError(
            f"prompt {small.index[0]!r} has {int(small.iloc[0])} candidate(s); "
            f"a pool needs at least {MIN_POOL_SIZE}",
            file=source,
            field="candidates",
        )
    no_pool = set(pools.prompts["prompt_id"]) - set(sizes.index)
    if no_pool:
        raise InputError(
            f"prompt {sorted(no_pool)[0]!r} has no candidates", file=source, field="candidates"
        )
    aligned = pools.ratings.loc[
        (pools.ratings["outcome"] == "alignment") & (pools.ratings["pool"] == "all"), "candidate_id"
    ]
    unrated = sorted(set(pools.candidates["candidate_id"]) - set(aligned))
    if unrated:
        raise InputError(
            f"candidate {unrated[0]!r} has no alignment rating", file=source, field="alignment"
        )


def write_pools(con: duckdb.DuckDBPyConnection, pools: PoolSet, *, replace: bool = False) -> str:
    """Write a dataset's pools; returns 'created', 'replaced' or 'unchanged'.

    Idempotent: the same manifest and ratings again is a no-op. A different one
    under an existing dataset id is refused unless `replace` (which drops the
    dataset's recorded runs too). Call inside a transaction.
    """
    check_pools(pools)
    manifest = pools.manifest_sha256()
    ratings_sha = _frame_sha256(pools.ratings, ["candidate_id", "outcome", "pool"])
    existing = store.dataset_row(con, pools.dataset_id)
    outcome = "created"
    if existing is not None:
        same = existing["manifest_sha256"] == manifest and (existing["notes"] or "").endswith(
            ratings_sha
        )
        if same:
            return "unchanged"
        if not replace:
            raise InputError(
                f"dataset {pools.dataset_id!r} already exists with different pools or ratings; "
                "pass --replace to overwrite it (its recorded runs are dropped)",
                file=pools.source,
            )
        store.delete_dataset(con, pools.dataset_id)
        outcome = "replaced"
    notes = f"{pools.notes + '; ' if pools.notes else ''}ratings sha256 {ratings_sha}"
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
    ds = pools.dataset_id
    store.insert_frame(con, "prompts", pools.prompts.assign(dataset_id=ds))
    store.insert_frame(con, "candidates", with_canonical_index(pools.candidates).assign(dataset_id=ds))
    store.insert_frame(con, "ratings", pools.ratings.assign(dataset_id=ds))
    store.insert_frame(con, "votes", pools.votes.assign(dataset_id=ds))
    return outcome


def check_calls(run: ImportedRun, candidates: pd.DataFrame) -> None:
    """Raise InputError for calls naming unknown prompts/candidates or repeated (prompt, order)."""
    calls = run.calls.reset_index(drop=True)
    lines = calls["line"] if "line" in calls.columns else pd.Series(range(1, len(calls) + 1))

    def fail(i: int, field: str, message: str) -> None:
        raise InputError(message, file=run.source_file, line=int(lines.iloc[i]), field=field)

    unknown = ~calls["prompt_id"].isin(candidates["prompt_id"])
    if unknown.any():
        i = int(unknown.to_numpy().nonzero()[0][0])
        fail(i, "prompt_id", f"unknown prompt id {calls['prompt_id'].iloc[i]!r}")
    shown = calls[["prompt_id", "slot_candidate_ids"]].explode("slot_candidate_ids")
    pool_of = candidates.set_index("candidate_id")["prompt_id"]
    stray = shown["slot_candidate_ids"].map(pool_of) != shown["prompt_id"]
    if stray.any():
        i = int(shown.index[stray.to_numpy()][0])
        cid, pid = shown.loc[stray, "slot_candidate_ids"].iloc[0], calls["prompt_id"].iloc[i]
        members = ", ".join(candidates.loc[candidates["prompt_id"] == pid, "candidate_id"])
        fail(i, "mapping", f"{cid!r} is not a candidate of prompt {pid!r} (candidates: {members})")
    for i, (chosen, slots) in enumerate(zip(calls["chosen_candidate_id"], calls["slot_candidate_ids"])):
        if isinstance(chosen, str) and chosen not in slots:
            fail(i, "selected_id", f"{chosen!r} is not among the images shown ({', '.join(slots)})")
    repeated = calls.duplicated(["prompt_id", "order_index"], keep="first")
    if repeated.any():
        i = int(repeated.to_numpy().nonzero()[0][0])
        fail(
            i,
            "permutation",
            f"duplicate call: prompt {calls['prompt_id'].iloc[i]!r} order "
            f"{int(calls['order_index'].iloc[i])} was already recorded earlier in this file",
        )


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
    candidates = store.load_candidates(con, dataset_id)
    check_calls(run, candidates)
    source_sha = file_sha256(run.source_file)
    run_id = f"{dataset_id}:{run.judge}:import:{source_sha[:16]}"
    existing = con.execute(
        "SELECT run_id FROM runs WHERE dataset_id = ? AND judge = ?", [dataset_id, run.judge]
    ).fetchall()
    if [r[0] for r in existing] == [run_id]:
        return "unchanged"
    outcome = "created"
    if existing:
        if not replace:
            raise InputError(
                f"judge {run.judge!r} already has recorded calls on dataset {dataset_id!r}; "
                "choose another judge name or pass --replace",
                file=run.source_file,
            )
        store.delete_judge(con, dataset_id, run.judge)
        outcome = "replaced"
    manifest = store.dataset_row(con, dataset_id)["manifest_sha256"]
    config = {"source_file": str(run.source_file), "source_sha256": source_sha, **run.config}
    now = utc_now()
    store.insert_records(
        con,
        "runs",
        [
            RunRecord(
                run_id=run_id,
                dataset_id=dataset_id,
                judge=run.judge,
                kind=run.kind,
                backend=run.backend,
                status="imported",
                model=run.model,
                manifest_sha256=manifest,
                config_json=json.dumps(config, sort_keys=True),
                started_at=now,
                finished_at=now,
            )
        ],
    )
    calls = run.calls.copy()
    calls["run_id"] = run_id
    calls["created_at"] = now
    calls["request_key"] = [
        hashlib.sha256(f"{run_id}|{p}|{o}".encode()).hexdigest()
        for p, o in zip(calls["prompt_id"], calls["order_index"])
    ]
    store.insert_frame(con, "calls", calls)
    return outcome


def write_imported_scores(
    con: duckdb.DuckDBPyConnection,
    dataset_id: str,
    imported: ImportedScores,
    *,
    replace: bool = False,
) -> str:
    """Record a content scorer's per-candidate scores; same idempotence as runs."""
    candidates = set(store.load_candidates(con, dataset_id)["candidate_id"])
    scored = set(imported.scores["candidate_id"])
    unknown = sorted(scored - candidates)
    if unknown:
        raise InputError(
            f"unknown candidate id {unknown[0]!r} ({len(unknown)} unknown in all)",
            file=imported.source_file,
            field="scores",
        )
    missing = sorted(candidates - scored)
    if missing:
        raise InputError(
            f"no score for candidate {missing[0]!r} ({len(missing)} missing in all)",
            file=imported.source_file,
            field="scores",
        )
    source_sha = file_sha256(imported.source_file)
    run_id = f"{dataset_id}:{imported.scorer}:import:{source_sha[:16]}"
    existing = con.execute(
        "SELECT run_id FROM runs WHERE dataset_id = ? AND judge = ?", [dataset_id, imported.scorer]
    ).fetchall()
    if [r[0] for r in existing] == [run_id]:
        return "unchanged"
    outcome = "created"
    if existing:
        if not replace:
            raise InputError(
                f"scorer {imported.scorer!r} already has scores on dataset {dataset_id!r}; "
                "choose another name or pass --replace",
                file=imported.source_file,
            )
        store.delete_judge(con, dataset_id, imported.scorer)
        outcome = "replaced"
    now = utc_now()
    store.insert_records(
        con,
        "runs",
        [
            RunRecord(
                run_id=run_id,
                dataset_id=dataset_id,
                judge=imported.scorer,
                kind="scorer",
                backend="import",
                status="imported",
                model=imported.model,
                model_revision=imported.model_revision,
                manifest_sha256=store.dataset_row(con, dataset_id)["manifest_sha256"],
                config_json=json.dumps(
                    {"source_file": str(imported.source_file), "source_sha256": source_sha}
                ),
                started_at=now,
                finished_at=now,
            )
        ],
    )
    store.insert_frame(con, "scores", imported.scores.assign(run_id=run_id))
    return outcome


def _frame_sha256(frame: pd.DataFrame, keys: list[str]) -> str:
    ordered = frame.sort_values(keys).reset_index(drop=True)
    return hashlib.sha256(ordered.to_csv(index=False).encode()).hexdigest()[:16]
