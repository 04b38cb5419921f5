"""A selector judge's recording: its requests (every prompt in each presentation order), its
call records and the `calls` table, on the shared machinery of `runners.recording.recorder`.

Check the dataset, pools and images, refuse to mix request keys under one judge name, open a
`runs` row, then for every (prompt, order) not yet recorded build the request, call the
backend (one identical retry on a runtime exception; invalid text is never resampled), parse
strictly (or leniently) and commit the call. A `runtime_fail` is tried again on resume and
replaced; every other recorded request key is skipped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa

from audit_core import store
from audit_core.errors import InputError
from audit_core.ingest.pools import MIN_POOL_SIZE
from audit_core.selection.orders import presentation_orders, slot_labels
from audit_core.store.records import CallRecord
from runners.backends.base import LabelStep, SelectorBackend
from runners.recording.engines import Engine, Generated
from runners.recording.recorder import (
    RunIdentity,
    RunSummary,
    arrow_schema,
    check_images,
    local_engine,
    record_planned,
    require_dataset,
    write_records,
)
from runners.recording.sessions import Database, as_database
from runners.selection.parsing import parse_output
from runners.selection.protocol import JudgeRequest, load_instruction, request_key


@dataclass(frozen=True)
class Scope:
    """What a selector run covers, as read from the store: the dataset's manifest hash, prompts and candidates."""

    dataset: str
    manifest_sha256: str
    prompts: pd.DataFrame
    candidates: pd.DataFrame

def load_scope(con: duckdb.DuckDBPyConnection, *, dataset: str, limit: int | None) -> Scope:
    """The prompts in scope (by id, first `limit`) and their candidates; InputError for an unknown dataset."""
    row = require_dataset(con, dataset)
    prompts = store.load_prompts(con, dataset)
    if limit is not None:
        prompts = prompts.head(limit)
    candidates = store.load_candidates(con, dataset)
    candidates = candidates[candidates["prompt_id"].isin(prompts["prompt_id"])]
    return Scope(dataset, row["manifest_sha256"], prompts, candidates)

def plan_requests(
    con: duckdb.DuckDBPyConnection,
    *,
    dataset: str,
    judge: str,
    orders: int,
    contract: str,
    limit: int | None,
    structured: bool = False,
) -> tuple[list[JudgeRequest], dict[str, tuple[int, int]], str, str]:
    """Every request in scope (prompts by id, first `limit`), image sizes, instruction and manifest hashes.

    Raises InputError for an unknown dataset, a pool smaller than `orders`, or a
    missing or unreadable image.
    """
    scope = load_scope(con, dataset=dataset, limit=limit)
    return plan_scope(scope, judge=judge, orders=orders, contract=contract, structured=structured)

def plan_scope(
    scope: Scope, *, judge: str, orders: int, contract: str, structured: bool = False
) -> tuple[list[JudgeRequest], dict[str, tuple[int, int]], str, str]:
    """`plan_requests` on a scope already read (no database needed: image checks can take a while).

    Raises InputError for a pool smaller than `orders` or a missing or unreadable image.
    """
    dataset, manifest, prompts, candidates = scope.dataset, scope.manifest_sha256, scope.prompts, scope.candidates
    instruction = load_instruction(contract, structured)  # structured output: its own hash, so its own keys
    if orders < 1:
        raise InputError(f"--orders must be at least 1, got {orders}", field="--orders")
    pools = candidates.groupby("prompt_id")["candidate_id"].apply(list).to_dict()
    single = sorted(pid for pid, ids in pools.items() if len(ids) < MIN_POOL_SIZE)
    if single:  # a dataset of single images, for rating or attribute judges (`audit_core.ingest.pools`)
        raise InputError(
            f"prompt {single[0]!r} has one candidate ({len(single)} such prompts): a selector judge needs at least "
            f"{MIN_POOL_SIZE} to choose from; this dataset is for rating and attribute judges",
            field="--dataset",
        )
    small = {pid: len(ids) for pid, ids in pools.items() if len(ids) < orders}
    if small:
        pid = min(small)
        raise InputError(
            f"prompt {pid!r} has {small[pid]} candidates, too few for {orders} distinct orders "
            f"({len(small)} such prompts); lower --orders to at most {min(small.values())}",
            field="--orders",
        )
    sizes = check_images(candidates)
    paths = dict(zip(candidates["candidate_id"], candidates["image_path"]))
    requests = []
    for pid, text in zip(prompts["prompt_id"], prompts["prompt"]):
        for order_index, slots in enumerate(presentation_orders(pools[pid], orders)):
            labels = tuple(slot_labels(len(slots)))
            before, after = instruction.render(text, labels)
            requests.append(
                JudgeRequest(
                    request_key=request_key(
                        dataset=dataset,
                        judge=judge,
                        prompt_id=pid,
                        order_index=order_index,
                        slot_candidate_ids=slots,
                        instruction_sha256=instruction.sha256,
                        manifest_sha256=manifest,
                    ),
                    dataset=dataset,
                    prompt_id=pid,
                    order_index=order_index,
                    prompt=text,
                    contract=contract,
                    labels=labels,
                    slot_candidate_ids=tuple(slots),
                    image_paths=tuple(paths[c] for c in slots),
                    text_before_images=before,
                    text_after_images=after,
                    structured=structured,
                )
            )
    return requests, sizes, instruction.sha256, manifest

def label_probs_of_choice(steps: Sequence[LabelStep] | None, choice: str | None) -> dict[str, float] | None:
    """The label probabilities at the position where the choice was generated: those of the first label
    step whose label is `choice`; None without a choice, without steps, or when no step spells it."""
    if steps is None or choice is None:
        return None
    return next((dict(step.probs) for step in steps if step.label == choice), None)

def selector_record(
    request: JudgeRequest,
    generated: Generated,
    *,
    run_id: str,
    lenient: bool,
    input_json: str,
) -> CallRecord:
    """The call record of one answered request: parsed strictly (or leniently), or its runtime failure.

    label_probs: the JSON of `label_probs_of_choice` for the parsed choice, None when there is none
    (or when the backend gave no probability at that step).
    """
    fields = dict(
        run_id=run_id,
        prompt_id=request.prompt_id,
        order_index=request.order_index,
        slot_candidate_ids=list(request.slot_candidate_ids),
        request_key=request.request_key,
        attempts=generated.attempts,
        seconds=generated.seconds,
        input_json=input_json,
    )
    if generated.raw is None:
        return CallRecord(status="runtime_fail", parse_note=generated.error, raw_output=generated.failed_output,
                          **fields)
    parsed = parse_output(generated.raw, request.labels, request.contract, lenient=lenient)
    chosen = request.slot_candidate_ids[request.labels.index(parsed.choice)] if parsed.choice else None
    probs = label_probs_of_choice(generated.label_steps, parsed.choice)
    return CallRecord(
        status=parsed.status,
        choice_label=parsed.choice,
        chosen_candidate_id=chosen,
        ranking=list(parsed.ranking) if parsed.ranking else None,
        raw_output=generated.raw,
        parse_note=parsed.note,
        label_probs=json.dumps(probs, sort_keys=True) if probs else None,
        **fields,
    )

_CALL_ARROW_SCHEMA = arrow_schema("calls", {
    "slot_candidate_ids": pa.list_(pa.string()), "ranking": pa.list_(pa.string()),
    "order_index": pa.int32(), "attempts": pa.int32(), "seconds": pa.float64(), "created_at": pa.timestamp("us"),
})

def write_calls(con: duckdb.DuckDBPyConnection, calls: Sequence[CallRecord], retried: set[str]) -> None:
    """Commit a batch of selector calls (see `write_records`)."""
    write_records(con, "calls", calls, retried, _CALL_ARROW_SCHEMA)

def record_selector(
    db: Database | duckdb.DuckDBPyConnection | str | Path,
    *,
    dataset: str,
    judge: str,
    backend: SelectorBackend | None,
    backend_name: str,
    model: str,
    orders: int = 3,
    contract: str = "ranking",
    lenient: bool = False,
    structured: bool = False,
    limit: int | None = None,
    concurrency: int = 1,
    batch_size: int = 1,
    engine: Engine[JudgeRequest] | None = None,
    progress: bool = True,
    replace: bool = False,
    config: dict | None = None,
) -> RunSummary:
    """Record a selector judge on `dataset`; see the module docstring for the guarantees.

    `db` is a held connection, a path (opened per unit of work and released in
    between) or a `Database`. Calls run on `engine`, by default this process's
    `concurrency` threads calling `backend` in batches of `batch_size`
    (`runners.recording.engines.LocalEngine`; backend None only with an engine).
    `config` (e.g. the CLI flags) is stored in the run's config_json with the
    library versions. Calls already recorded under the same request keys are
    skipped (resume). Raises InputError before any call for an unknown
    dataset, pools smaller than `orders`, missing or unreadable images, or a
    judge name already used with another instruction, manifest, backend or
    model (unless `replace`), and DatabaseBusy when another process records
    this judge or keeps the file locked; a KeyboardInterrupt is recorded (run
    status 'interrupted', finished calls kept) and re-raised.
    """
    engine = engine or local_engine(backend, concurrency=concurrency, batch_size=batch_size, name=f"judge-{judge}")
    started = time.perf_counter()
    db = as_database(db)
    with db.claim(dataset, judge):
        with db.session() as con:
            scope = load_scope(con, dataset=dataset, limit=limit)
        requests, sizes, instruction_sha, manifest = plan_scope(scope, judge=judge, orders=orders, contract=contract,
                                                                structured=structured)
        identity = RunIdentity(dataset, judge, "selector", backend_name, model, instruction_sha, manifest)
        run_config = {
            **(config or {}),
            "orders": orders, "contract": contract, "lenient": lenient, "structured": structured, "limit": limit,
            "concurrency": concurrency, "instruction_file": load_instruction(contract).file,
        }

        def build(run_id: str, request: JudgeRequest, generated: Generated) -> CallRecord:
            shown = {"image_sizes": [list(sizes[c]) for c in request.slot_candidate_ids],
                     "prompt_chars": len(request.prompt)}
            return selector_record(request, generated, run_id=run_id, lenient=lenient, input_json=json.dumps(shown))

        return record_planned(db, identity, requests, engine=engine, build=build, write=write_calls,
                              config=run_config, replace=replace, progress=progress, started=started)
