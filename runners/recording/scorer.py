"""A scorer's recording (a content score per candidate image, e.g. CLIP): one pool per backend
call, committed per pool into `scores`, on the shared run lifecycle of `runners.recording.recorder`.
Scores serve every judge kind (the selector's scorer policies, the rubric next to a scorer)."""

from __future__ import annotations

import time
from pathlib import Path

import duckdb
from tqdm import tqdm

from audit_core import store
from audit_core.store.records import ScoreRecord
from runners.backends.base import ScorerBackend
from runners.recording.recorder import (
    RunIdentity,
    RunSummary,
    check_history,
    check_images,
    open_run,
    require_dataset,
    run_lifecycle,
)
from runners.recording.sessions import Database, as_database


def record_scorer(
    db: Database | duckdb.DuckDBPyConnection | str | Path,
    *,
    dataset: str,
    scorer: str,
    backend: ScorerBackend,
    backend_name: str,
    model: str,
    progress: bool = True,
    replace: bool = False,
    config: dict | None = None,
) -> RunSummary:
    """Score every candidate of `dataset`, one pool per backend call, committed per pool.

    `db` is taken as by `record_selector`. Candidates already scored under
    this scorer name are skipped. A pool whose scoring raises twice (one
    identical retry) stops the run with status 'failed'; pools scored before
    it are kept.
    """
    started = time.perf_counter()
    db = as_database(db)
    with db.claim(dataset, scorer):
        with db.session() as con:
            row = require_dataset(con, dataset)
            prompts = store.load_prompts(con, dataset)
            candidates = store.load_candidates(con, dataset)
        check_images(candidates)
        identity = RunIdentity(dataset, scorer, "scorer", backend_name, model, None, row["manifest_sha256"])
        with db.session() as con:
            check_history(con, identity, replace=replace)
            scored = {
                r[0]
                for r in con.execute(
                    "SELECT s.candidate_id FROM scores s JOIN runs r USING (run_id) "
                    "WHERE r.dataset_id = ? AND r.judge = ?",
                    [dataset, scorer],
                ).fetchall()
            }
        text = dict(zip(prompts["prompt_id"], prompts["prompt"]))
        pools = [(pid, group) for pid, group in candidates.groupby("prompt_id", sort=True)
                 if not set(group["candidate_id"]) <= scored]
        skipped = len(scored & set(candidates["candidate_id"]))
        if not pools:
            return RunSummary(None, dataset, scorer, "scorer", len(candidates), skipped, 0,
                              seconds=time.perf_counter() - started)
        revision = backend.model_revision()
        with db.session() as con:
            run_id = open_run(con, identity, model_revision=revision, config=dict(config or {}))
        written = 0
        bar = tqdm(total=len(candidates), initial=skipped, unit="image", disable=not progress,
                   desc=scorer, dynamic_ncols=True)
        with run_lifecycle(db, run_id, bar) as counted:
            for pid, group in pools:
                group = group.sort_values("canonical_index")
                todo = group[~group["candidate_id"].isin(scored)]
                values = _score_pool(backend, text[pid], list(todo["image_path"]), pid)
                with db.session() as con, store.transaction(con):
                    store.insert_records(con, "scores", [
                        ScoreRecord(run_id, cid, float(v)) for cid, v in zip(todo["candidate_id"], values)
                    ])
                written += len(todo)
                counted.statuses["scored"] = written
                bar.update(len(todo))
    return RunSummary(run_id, dataset, scorer, "scorer", len(candidates), skipped, written,
                      {"scored": written}, "finished", time.perf_counter() - started,
                      counted.throughput["calls_per_second"])

def _score_pool(backend: ScorerBackend, prompt: str, paths: list[str], prompt_id: str) -> list[float]:
    try:
        values = backend.score(prompt, paths)
    except Exception:  # one identical retry, as for selectors
        values = backend.score(prompt, paths)
    if len(values) != len(paths):
        raise RuntimeError(f"scorer returned {len(values)} scores for {len(paths)} images of prompt {prompt_id!r}")
    return list(values)
