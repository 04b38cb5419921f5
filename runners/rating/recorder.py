"""Record a rating judge: every item (candidate image) alone, under each condition, into `rating_calls`.

The crash-safe machinery is the selectors' (`runners.recording.recorder`): the judge
name is claimed for the run, the store is opened per unit of work, calls run
on a bounded thread pool, in batches of `batch_size` (`runners.recording.engines`),
with one identical retry on a runtime exception, and
each finished batch is committed at once, so a SIGKILL loses only calls in
flight. What is the rater's own: its requests (`runners.rating.protocol`),
its parser (`runners.rating.parsing`) and its call table.

Resume: a call whose request key is recorded is skipped (a `runtime_fail` is
tried again and replaced). Keys hash every text shown, per condition, so each
condition resumes on its own and a new condition joins an existing judge. A
condition whose texts changed since its records were made (persona, language,
demonstrations or their consensus) is refused, as is a judge whose backend,
model, instruction or dataset changed, unless `replace`.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa

from audit_core import store
from audit_core.errors import InputError
from audit_core.rating import reliability
from audit_core.store.records import RatingCallRecord
from runners.rating.parsing import Scale, parse_rating
from runners.rating.protocol import (
    DEFAULT_CONDITION,
    DEFAULT_CONDITIONS,
    DEFAULT_INSTRUCTION,
    Condition,
    Demonstration,
    RatingBackend,
    RatingRequest,
    RubricInstruction,
    load_rubric,
    rating_request_key,
    select_conditions,
)
from runners.recording.condition_history import check_condition_keys
from runners.recording.engines import Generated
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

KIND = "rater"
TABLE = "rating_calls"


def pool_consensus(con: duckdb.DuckDBPyConnection, dataset: str, outcome: str) -> pd.DataFrame:
    """candidate_id, pool, consensus: `audit_core.rating.reliability.pool_consensus` of the dataset's
    `ratings` rows and `votes` on `outcome` (a pool's ratings row, or else the mean of its votes)."""
    consensus = reliability.pool_consensus(
        store.load_votes(con, dataset), store.load_pool_ratings(con, dataset, outcome), outcome)
    return consensus.rename(columns={"value": "consensus"})


@dataclass(frozen=True)
class RatingScope:
    """What a rating run covers: the dataset's items (all, for demonstrations) and the first `limit` to rate."""

    dataset: str
    manifest_sha256: str
    items: pd.DataFrame  # every candidate: prompt_id, candidate_id, prompt, image_path
    rated: pd.DataFrame  # the items to rate, in store order
    consensus: pd.DataFrame  # pool_consensus for the instruction's outcome


def load_rating_scope(
    con: duckdb.DuckDBPyConnection, *, dataset: str, outcome: str, limit: int | None
) -> RatingScope:
    """Read the items (candidates with their prompts) and pool consensus; InputError for an unknown dataset."""
    row = require_dataset(con, dataset)
    prompts = store.load_prompts(con, dataset)[["prompt_id", "prompt"]]
    items = store.load_candidates(con, dataset).merge(prompts, on="prompt_id", how="left")
    rated = items if limit is None else items.head(limit)
    return RatingScope(dataset, row["manifest_sha256"], items, rated, pool_consensus(con, dataset, outcome))


def demonstrations_for(
    scope: RatingScope, condition: Condition, scale: Scale, outcome: str
) -> Callable[[str], tuple[Demonstration, ...]]:
    """For a condition with demonstrations: candidate id -> its k demonstrations, never the item itself.

    Deterministic: the pool's items with a consensus are ordered by
    sha256(dataset, pool, candidate id), and an item gets the first k others,
    each shown with the consensus rounded half up. Raises InputError for a pool
    without consensus, one with too few items, or consensus off the scale.
    """
    spec = condition.demonstrations
    if spec is None:
        return lambda candidate_id: ()
    where = {"field": f"conditions.{condition.name}.demonstrations.pool"}
    pooled = scope.consensus[scope.consensus["pool"] == spec.pool]
    if pooled.empty:
        pools = ", ".join(sorted(scope.consensus["pool"].unique())) or "none"
        raise InputError(f"condition {condition.name!r}: pool {spec.pool!r} has no consensus for outcome {outcome!r} "
                         f"on dataset {scope.dataset!r} (pools with consensus: {pools})", **where)
    off = pooled[(pooled["consensus"] < scale.lo) | (pooled["consensus"] > scale.hi)]
    if not off.empty:
        first = off.iloc[0]
        raise InputError(
            f"condition {condition.name!r}: pool {spec.pool!r}'s consensus for outcome {outcome!r} lies outside "
            f"the rubric scale {scale.lo}-{scale.hi} (e.g. {first['candidate_id']!r}: {first['consensus']:g}; "
            f"{len(off)} items); demonstrations need ratings on the rubric's scale", **where)
    if len(pooled) < spec.k + 1:
        raise InputError(f"condition {condition.name!r}: pool {spec.pool!r} has consensus on {len(pooled)} items, "
                         f"too few for k={spec.k} demonstrations that exclude the rated item (needs {spec.k + 1})",
                         field=f"conditions.{condition.name}.demonstrations.k")
    order = sorted(pooled["candidate_id"],
                   key=lambda cid: hashlib.sha256(f"{scope.dataset}\0{spec.pool}\0{cid}".encode()).hexdigest())
    head = order[: spec.k + 1]
    values = dict(zip(pooled["candidate_id"], pooled["consensus"]))
    prompts = dict(zip(scope.items["candidate_id"], scope.items["prompt"]))
    shown = {cid: Demonstration(cid, prompts[cid], int(values[cid] + 0.5)) for cid in head}

    def pick(candidate_id: str) -> tuple[Demonstration, ...]:
        return tuple(shown[cid] for cid in head if cid != candidate_id)[: spec.k]

    return pick


def plan_ratings(
    scope: RatingScope,
    *,
    judge: str,
    instruction: RubricInstruction,
    conditions: Sequence[Condition],
) -> tuple[list[RatingRequest], dict[str, tuple[int, int]]]:
    """Every request in scope (condition by condition, items in store order) and each shown image's size.

    Raises InputError for a missing translation, unusable demonstrations, or a
    missing or unreadable image (rated or shown as a demonstration).
    """
    paths = dict(zip(scope.items["candidate_id"], scope.items["image_path"]))
    requests: list[RatingRequest] = []
    shown_ids: set[str] = set(scope.rated["candidate_id"])
    for condition in conditions:
        text = instruction.translation(condition.language)
        demos_of = demonstrations_for(scope, condition, instruction.scale, instruction.outcome)
        for cid, prompt in zip(scope.rated["candidate_id"], scope.rated["prompt"]):
            demos = demos_of(cid)
            shown_ids.update(d.candidate_id for d in demos)
            content = text.render(prompt, cid, condition.persona, demos)
            requests.append(RatingRequest(
                request_key=rating_request_key(
                    dataset=scope.dataset, judge=judge, condition=condition.name, candidate_id=cid,
                    manifest_sha256=scope.manifest_sha256, instruction_sha256=text.sha256,
                    condition_sha256=condition.sha256, content=content,
                ),
                dataset=scope.dataset,
                candidate_id=cid,
                condition=condition.name,
                prompt=prompt,
                scale=text.scale,
                content=content,
                image_files=tuple((d.candidate_id, paths[d.candidate_id]) for d in demos) + ((cid, paths[cid]),),
                demonstration_pool=condition.demonstrations.pool if condition.demonstrations else None,
                structured=text.structured,
            ))
    sizes = check_images(scope.items[scope.items["candidate_id"].isin(shown_ids)])
    return requests, sizes


def check_condition_history(
    con: duckdb.DuckDBPyConnection,
    dataset: str,
    judge: str,
    requests: Sequence[RatingRequest],
    conditions: Sequence[Condition],
) -> None:
    """Refuse a condition whose recorded calls were made from other texts than those planned now.

    Such records would sit next to new ones for the same items and condition.
    The message says whether the condition's definition changed or, with the
    same definition, what it shows (the demonstrations' consensus).
    """

    def cause(name: str, mine: pd.DataFrame) -> str:
        condition = next(c for c in conditions if c.name == name)
        before = {json.loads(j).get("condition_sha256") for j in mine["input_json"] if j}
        return ("its definition (persona, language or demonstrations) changed since"
                if before != {condition.sha256}
                else "the texts it shows changed since (the demonstrations' consensus or the items' prompts)")

    check_condition_keys(con, TABLE, dataset, judge, requests, cause)


def rating_record(request: RatingRequest, generated: Generated, *, run_id: str, input_json: str) -> RatingCallRecord:
    """The record of one answered rating request: parsed strictly, or its runtime failure."""
    fields = dict(run_id=run_id, candidate_id=request.candidate_id, condition=request.condition,
                  request_key=request.request_key, attempts=generated.attempts, seconds=generated.seconds,
                  input_json=input_json)
    if generated.raw is None:
        return RatingCallRecord(status="runtime_fail", parse_note=generated.error,
                                raw_output=generated.failed_output, **fields)
    parsed = parse_rating(generated.raw, request.scale)
    rating = float(parsed.rating) if parsed.rating is not None else None
    return RatingCallRecord(status=parsed.status, rating=rating, raw_output=generated.raw, parse_note=parsed.note,
                            **fields)


_ARROW_SCHEMA = arrow_schema(TABLE, {
    "rating": pa.float64(), "attempts": pa.int32(), "seconds": pa.float64(), "created_at": pa.timestamp("us"),
})


def write_rating_calls(con: duckdb.DuckDBPyConnection, calls: Sequence[RatingCallRecord], retried: set[str]) -> None:
    """Commit a batch of rating calls (see `runners.recording.recorder.write_records`)."""
    write_records(con, TABLE, calls, retried, _ARROW_SCHEMA)


def record_rater(
    db: Database | duckdb.DuckDBPyConnection | str | Path,
    *,
    dataset: str,
    judge: str,
    backend: RatingBackend,
    backend_name: str,
    model: str,
    conditions: Sequence[str] = (DEFAULT_CONDITION,),
    conditions_file: str | Path = DEFAULT_CONDITIONS,
    instruction_file: str | Path = DEFAULT_INSTRUCTION,
    structured: bool = False,
    limit: int | None = None,
    concurrency: int = 1,
    batch_size: int = 1,
    progress: bool = True,
    replace: bool = False,
    config: dict | None = None,
) -> RunSummary:
    """Rate every item of `dataset` (the first `limit`) under each named condition; see the module docstring.

    `db` is a held connection, a path or a `Database`, as for
    `runners.selection.recorder.record_selector`. Raises InputError before any call for
    an unknown dataset, condition or language, unusable demonstrations, a
    missing or unreadable image, a bad instruction or conditions file, or a
    judge or condition whose records were made differently (unless `replace`);
    DatabaseBusy when another process records this judge or holds the file. A
    KeyboardInterrupt is recorded (run 'interrupted', finished calls kept) and re-raised.
    """
    engine = local_engine(backend, concurrency=concurrency, batch_size=batch_size, name=f"rater-{judge}")
    started = time.perf_counter()
    instruction = load_rubric(instruction_file, structured)  # structured output: its own hash, so its own keys
    chosen = select_conditions(conditions_file, conditions)
    db = as_database(db)
    with db.claim(dataset, judge):
        with db.session() as con:
            scope = load_rating_scope(con, dataset=dataset, outcome=instruction.outcome, limit=limit)
        requests, sizes = plan_ratings(scope, judge=judge, instruction=instruction, conditions=chosen)
        identity = RunIdentity(dataset, judge, KIND, backend_name, model, instruction.sha256, scope.manifest_sha256)
        run_config = {
            **(config or {}),
            "instruction_file": str(instruction.file), "outcome": instruction.outcome,
            "scale": [instruction.scale.lo, instruction.scale.hi], "abstain": instruction.scale.abstain,
            "structured": structured,
            "conditions_file": str(conditions_file),
            "conditions": {c.name: {"sha256": c.sha256, "persona": c.persona, "language": c.language,
                                    "demonstrations": vars(c.demonstrations) if c.demonstrations else None}
                           for c in chosen},
            "limit": limit, "concurrency": concurrency,
        }
        shas = {c.name: {"condition_sha256": c.sha256,
                         "instruction_sha256": instruction.translation(c.language).sha256} for c in chosen}

        def build(run_id: str, request: RatingRequest, generated: Generated) -> RatingCallRecord:
            shown = {
                **shas[request.condition],
                "demonstrations": [cid for cid, _ in request.image_files[:-1]],
                "image_size": list(sizes[request.candidate_id]),
                "prompt_chars": len(request.prompt),
            }
            return rating_record(request, generated, run_id=run_id, input_json=json.dumps(shown))

        return record_planned(
            db, identity, requests, engine=engine, build=build, write=write_rating_calls, config=run_config,
            replace=replace, progress=progress, started=started, table=TABLE,
            check=lambda con: check_condition_history(con, dataset, judge, requests, chosen),
        )
