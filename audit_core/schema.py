"""DuckDB schema of the audit store (DESIGN.md §3).

Long tables keyed by ids: prompts, candidates, ratings and calls are rows and are
joined late. Every table carries `dataset_id` directly or through `runs`.
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
RUN_KINDS: tuple[str, ...] = ("selector", "scorer", "rater")

SCHEMA_SQL = """
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
    split      VARCHAR,
    PRIMARY KEY (dataset_id, prompt_id)
);

CREATE TABLE IF NOT EXISTS candidates (
    dataset_id      VARCHAR NOT NULL,
    prompt_id       VARCHAR NOT NULL,
    candidate_id    VARCHAR NOT NULL,
    canonical_index INTEGER NOT NULL,
    source_model    VARCHAR,
    image_path      VARCHAR,
    PRIMARY KEY (dataset_id, candidate_id)
);

CREATE TABLE IF NOT EXISTS ratings (
    dataset_id   VARCHAR NOT NULL,
    candidate_id VARCHAR NOT NULL,
    outcome      VARCHAR NOT NULL,
    pool         VARCHAR NOT NULL DEFAULT 'all',
    value        DOUBLE NOT NULL,
    n            INTEGER,
    PRIMARY KEY (dataset_id, candidate_id, outcome, pool)
);

CREATE TABLE IF NOT EXISTS votes (
    dataset_id   VARCHAR NOT NULL,
    candidate_id VARCHAR NOT NULL,
    outcome      VARCHAR NOT NULL,
    pool         VARCHAR NOT NULL DEFAULT 'all',
    annotator    VARCHAR NOT NULL,
    value        DOUBLE NOT NULL,
    PRIMARY KEY (dataset_id, candidate_id, outcome, pool, annotator)
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
    request_key         VARCHAR NOT NULL UNIQUE,
    created_at          TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS scores (
    run_id       VARCHAR NOT NULL,
    candidate_id VARCHAR NOT NULL,
    score        DOUBLE NOT NULL,
    PRIMARY KEY (run_id, candidate_id)
);
"""
