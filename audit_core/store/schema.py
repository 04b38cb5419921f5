"""DuckDB schema of the audit store (DESIGN.md §3).

Long tables keyed by ids: prompts, candidates, ratings and calls are rows and are
joined late. Every table carries `dataset_id` directly or through `runs`.

Only the small tables (datasets, runs, taxonomies) declare a PRIMARY KEY. The bulk tables'
keys (KEYS below) are kept by their writers, not by an index: a key index costs DuckDB several
times the insert's time and memory at millions of rows. The table ingest refuses a repeated key
before it writes, and a dataset's or run's rows are written once, in the transaction that claims
it; recorders skip a request_key already recorded and replace a runtime failure by deleting it
first, while holding the judge's claim. A store made before this keeps its indexes; it is read and
written as before (docs/table-contract.md, "Keys").
"""

OUTCOMES: tuple[str, ...] = (
    "alignment",
    "stereotype",
    "missing_explicit",
    "missing_implicit",
    "image_quality",
    "overall",
)
ERROR_OUTCOMES: tuple[str, ...] = ("stereotype", "missing_explicit", "missing_implicit")
CALL_STATUSES: tuple[str, ...] = ("ok", "recovered", "parse_fail", "runtime_fail")
RUN_KINDS: tuple[str, ...] = ("selector", "scorer", "rater", "labeler")
# the reference pool a rating or vote belongs to when none is named, and whose consensus is the
# selection audit's utility unless another pool is chosen
DEFAULT_POOL = "all"

# Scale [lo, hi] of each built-in outcome's rating values (means and votes alike):
# error outcomes are rates of annotators flagging the error, the others mean
# scores rescaled to [0, 1] (overall 1–5 as (v − 1) / 4). An outcome outside this
# table must declare its scale where it is ingested.
OUTCOME_SCALES: dict[str, tuple[float, float]] = {
    "alignment": (0.0, 1.0),
    "stereotype": (0.0, 1.0),
    "missing_explicit": (0.0, 1.0),
    "missing_implicit": (0.0, 1.0),
    "image_quality": (0.0, 1.0),
    "overall": (0.0, 1.0),
    # a rating study's rubric (votes and rating judges on 1–5; DESIGN §4b)
    "rubric": (1.0, 5.0),
}
# largest value of an INTEGER column (n, canonical_index, order_index, attempts)
INTEGER_MAX = 2**31 - 1
RATING_STATUSES: tuple[str, ...] = ("ok", "abstained", "parse_fail", "runtime_fail")
# Tables whose rows belong to a run (through run_id): what deleting a judge or a dataset must clear.
RUN_RECORD_TABLES: tuple[str, ...] = ("calls", "scores", "rating_calls", "label_calls", "label_answers")
# An attribute judge's call answers every attribute of one image at once (DESIGN §4c); the call's
# status says whether its text was JSON with exactly the taxonomy's keys, each answer's status what
# that field held: a label of the set, the abstention label, a value off the taxonomy, or nothing.
LABEL_CALL_STATUSES: tuple[str, ...] = ("ok", "parse_fail", "runtime_fail")
LABEL_ANSWER_STATUSES: tuple[str, ...] = ("ok", "abstained", "off_taxonomy", "missing")
# Columns added after a table was first released: (table, column, type). A writable open adds each
# one a database lacks (at the table's end, where SCHEMA_SQL also puts it); readers of an older file
# treat the column as absent (`audit_core.store.database.has_column`).
ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    # a selector call's label probabilities: JSON object label -> probability, NULL when not recorded
    ("calls", "label_probs", "VARCHAR"),
)
# Columns a frame written with `insert_frame` may leave out (they are then NULL).
OPTIONAL_COLUMNS: dict[str, tuple[str, ...]] = {"calls": ("label_probs",)}

# The key of each bulk table: the columns no two of its rows share, kept by the writers (module docstring).
KEYS: dict[str, tuple[str, ...]] = {
    "prompts": ("dataset_id", "prompt_id"),
    "candidates": ("dataset_id", "candidate_id"),
    "ratings": ("dataset_id", "candidate_id", "outcome", "pool"),
    "votes": ("dataset_id", "candidate_id", "outcome", "pool", "annotator"),
    "candidate_attributes": ("dataset_id", "candidate_id", "attribute"),
    "calls": ("request_key",),
    "scores": ("run_id", "candidate_id"),
    "rating_calls": ("request_key",),
    "gold_labels": ("dataset_id", "candidate_id", "attribute"),
    "label_calls": ("request_key",),
    "label_answers": ("request_key", "attribute"),
}

SCHEMA_SQL = f"""
CREATE TABLE IF NOT EXISTS datasets (
    dataset_id      VARCHAR PRIMARY KEY,
    name            VARCHAR NOT NULL,
    source          VARCHAR NOT NULL,
    source_revision VARCHAR,
    manifest_sha256 VARCHAR NOT NULL,
    created_at      TIMESTAMP NOT NULL,
    notes           VARCHAR
);

CREATE TABLE IF NOT EXISTS prompts (
    dataset_id VARCHAR NOT NULL,
    prompt_id  VARCHAR NOT NULL,
    prompt     VARCHAR NOT NULL,
    country    VARCHAR,
    category   VARCHAR,
    split      VARCHAR
);

CREATE TABLE IF NOT EXISTS candidates (
    dataset_id      VARCHAR NOT NULL,
    prompt_id       VARCHAR NOT NULL,
    candidate_id    VARCHAR NOT NULL,
    canonical_index INTEGER NOT NULL,
    source_model    VARCHAR,
    image_path      VARCHAR
);

CREATE TABLE IF NOT EXISTS ratings (
    dataset_id   VARCHAR NOT NULL,
    candidate_id VARCHAR NOT NULL,
    outcome      VARCHAR NOT NULL,
    pool         VARCHAR NOT NULL DEFAULT '{DEFAULT_POOL}',
    value        DOUBLE NOT NULL,
    n            INTEGER
);

CREATE TABLE IF NOT EXISTS votes (
    dataset_id   VARCHAR NOT NULL,
    candidate_id VARCHAR NOT NULL,
    outcome      VARCHAR NOT NULL,
    pool         VARCHAR NOT NULL DEFAULT '{DEFAULT_POOL}',
    annotator    VARCHAR NOT NULL,
    value        DOUBLE NOT NULL
);

CREATE TABLE IF NOT EXISTS candidate_attributes (
    dataset_id   VARCHAR NOT NULL,
    candidate_id VARCHAR NOT NULL,
    attribute    VARCHAR NOT NULL,
    value        VARCHAR NOT NULL
);

CREATE TABLE IF NOT EXISTS runs (
    run_id             VARCHAR PRIMARY KEY,
    dataset_id         VARCHAR NOT NULL,
    judge              VARCHAR NOT NULL,
    kind               VARCHAR NOT NULL,
    backend            VARCHAR NOT NULL,
    model              VARCHAR,
    model_revision     VARCHAR,
    instruction_sha256 VARCHAR,
    manifest_sha256    VARCHAR,
    config_json        VARCHAR,
    started_at         TIMESTAMP NOT NULL,
    finished_at        TIMESTAMP,
    status             VARCHAR NOT NULL
);

CREATE TABLE IF NOT EXISTS calls (
    run_id              VARCHAR NOT NULL,
    prompt_id           VARCHAR NOT NULL,
    order_index         INTEGER NOT NULL,
    slot_candidate_ids  VARCHAR[] NOT NULL,
    status              VARCHAR NOT NULL,
    choice_label        VARCHAR,
    chosen_candidate_id VARCHAR,
    ranking             VARCHAR[],
    raw_output          VARCHAR,
    parse_note          VARCHAR,
    attempts            INTEGER NOT NULL DEFAULT 1,
    seconds             DOUBLE,
    input_json          VARCHAR,
    request_key         VARCHAR NOT NULL,
    created_at          TIMESTAMP NOT NULL,
    label_probs         VARCHAR
);

CREATE TABLE IF NOT EXISTS scores (
    run_id       VARCHAR NOT NULL,
    candidate_id VARCHAR NOT NULL,
    score        DOUBLE NOT NULL
);

-- A rating judge's calls: one row per (item, condition). rating is NULL unless
-- status is 'ok'; DOUBLE so imported ratings on other scales fit too.
CREATE TABLE IF NOT EXISTS rating_calls (
    run_id       VARCHAR NOT NULL,
    candidate_id VARCHAR NOT NULL,
    condition    VARCHAR NOT NULL DEFAULT 'default',
    status       VARCHAR NOT NULL,
    rating       DOUBLE,
    raw_output   VARCHAR,
    parse_note   VARCHAR,
    attempts     INTEGER NOT NULL DEFAULT 1,
    seconds      DOUBLE,
    input_json   VARCHAR,
    request_key  VARCHAR NOT NULL,
    created_at   TIMESTAMP NOT NULL
);

-- Attribute judges (DESIGN §4c). The taxonomy a dataset's gold labels were checked against,
-- the gold labels, and each labeler call with one answer row per attribute. label is NULL
-- unless status is 'ok'; answer keeps the field's value as given (off-taxonomy text included).
CREATE TABLE IF NOT EXISTS taxonomies (
    dataset_id    VARCHAR PRIMARY KEY,
    name          VARCHAR NOT NULL,
    version       VARCHAR NOT NULL,
    sha256        VARCHAR NOT NULL,
    taxonomy_json VARCHAR NOT NULL
);

CREATE TABLE IF NOT EXISTS gold_labels (
    dataset_id   VARCHAR NOT NULL,
    candidate_id VARCHAR NOT NULL,
    attribute    VARCHAR NOT NULL,
    label        VARCHAR NOT NULL
);

CREATE TABLE IF NOT EXISTS label_calls (
    run_id       VARCHAR NOT NULL,
    candidate_id VARCHAR NOT NULL,
    condition    VARCHAR NOT NULL DEFAULT 'default',
    status       VARCHAR NOT NULL,
    raw_output   VARCHAR,
    parse_note   VARCHAR,
    attempts     INTEGER NOT NULL DEFAULT 1,
    seconds      DOUBLE,
    input_json   VARCHAR,
    request_key  VARCHAR NOT NULL,
    created_at   TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS label_answers (
    run_id       VARCHAR NOT NULL,
    request_key  VARCHAR NOT NULL,
    candidate_id VARCHAR NOT NULL,
    condition    VARCHAR NOT NULL DEFAULT 'default',
    attribute    VARCHAR NOT NULL,
    status       VARCHAR NOT NULL,
    label        VARCHAR,
    answer       VARCHAR,
    rationale    VARCHAR
);
"""
