"""Typed records for everything written to the store.

One dataclass per kind of row written record by record (datasets, runs, calls, scores, rating
and label calls, taxonomies, gold labels); field names equal the column names in
`audit_core.store.schema`, so `dataclasses.asdict(record)` is an insertable row. Prompts,
candidates, ratings and votes arrive as whole frames (`store.insert_frame`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field


def utc_now() -> dt.datetime:
    """Naive UTC timestamp (DuckDB TIMESTAMP has no zone)."""
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


@dataclass(frozen=True)
class DatasetRecord:
    dataset_id: str
    name: str
    source: str
    manifest_sha256: str
    source_revision: str | None = None
    notes: str | None = None
    created_at: dt.datetime = field(default_factory=utc_now)


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    dataset_id: str
    judge: str
    kind: str
    backend: str
    status: str
    model: str | None = None
    model_revision: str | None = None
    instruction_sha256: str | None = None
    manifest_sha256: str | None = None
    config_json: str | None = None
    started_at: dt.datetime = field(default_factory=utc_now)
    finished_at: dt.datetime | None = None


@dataclass(frozen=True)
class CallRecord:
    """One judge call: what was shown (slot order) and what came back.

    label_probs: JSON object offered label -> the judge's probability of that label at the position
    where its choice was generated (`runners.backends.base.LabelStep`), None when not recorded.
    """

    run_id: str
    prompt_id: str
    order_index: int
    slot_candidate_ids: list[str]
    status: str
    request_key: str
    choice_label: str | None = None
    chosen_candidate_id: str | None = None
    ranking: list[str] | None = None
    raw_output: str | None = None
    parse_note: str | None = None
    attempts: int = 1
    seconds: float | None = None
    input_json: str | None = None
    created_at: dt.datetime = field(default_factory=utc_now)
    label_probs: str | None = None


@dataclass(frozen=True)
class ScoreRecord:
    run_id: str
    candidate_id: str
    score: float


@dataclass(frozen=True)
class RatingCallRecord:
    """One rating-judge call: one item (candidate image) under one condition, and what came back.

    rating is set only when status is 'ok'; an abstention is status 'abstained', never a number.
    """

    run_id: str
    candidate_id: str
    condition: str
    status: str
    request_key: str
    rating: float | None = None
    raw_output: str | None = None
    parse_note: str | None = None
    attempts: int = 1
    seconds: float | None = None
    input_json: str | None = None
    created_at: dt.datetime = field(default_factory=utc_now)


@dataclass(frozen=True)
class TaxonomyRecord:
    """The taxonomy a dataset's gold labels were validated against (`audit_core.attributes.taxonomy`)."""

    dataset_id: str
    name: str
    version: str
    sha256: str
    taxonomy_json: str


@dataclass(frozen=True)
class GoldLabelRecord:
    dataset_id: str
    candidate_id: str
    attribute: str
    label: str


@dataclass(frozen=True)
class LabelCallRecord:
    """One attribute-judge call: one image under one condition, answering every attribute at once.

    status: 'ok' when the text was JSON with exactly the taxonomy's keys (each field then has its
    own answer status), 'parse_fail' otherwise, 'runtime_fail' when the backend raised.
    """

    run_id: str
    candidate_id: str
    condition: str
    status: str
    request_key: str
    raw_output: str | None = None
    parse_note: str | None = None
    attempts: int = 1
    seconds: float | None = None
    input_json: str | None = None
    created_at: dt.datetime = field(default_factory=utc_now)


@dataclass(frozen=True)
class LabelAnswerRecord:
    """One field of a labeler call: status ok (label set), abstained (the abstention label),
    off_taxonomy (a value outside the set: kept in `answer`, never coerced) or missing."""

    run_id: str
    request_key: str
    candidate_id: str
    condition: str
    attribute: str
    status: str
    label: str | None = None
    answer: str | None = None
    rationale: str | None = None
