"""The campaign tables (DESIGN §6, rating campaigns), beside the store's own and made by the writers.

A campaign is keyed by (dataset_id, campaign). Its drawn items, their assignment to named
annotators, every submission or skip, the label votes of a labels campaign and the hashes of
its access tokens each have a table. Every table carries `dataset_id`, so the audit cache's
content fingerprint (`audit_core.store.audit_cache.dataset_fingerprint`) covers them as it covers
`votes` and `ratings`. The writers of this package call `ensure_tables` inside their transaction;
readers treat absent tables as no campaign at all (`has_tables`).
"""

from __future__ import annotations

import duckdb

TABLES: tuple[str, ...] = (
    "campaigns", "campaign_items", "campaign_assignments", "campaign_submissions", "campaign_labels",
    "campaign_tokens",
)

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS campaigns (
    dataset_id          VARCHAR NOT NULL,
    campaign            VARCHAR NOT NULL,
    task                VARCHAR NOT NULL,
    pool                VARCHAR NOT NULL,
    outcome             VARCHAR NOT NULL,
    plan                VARCHAR NOT NULL,
    size                INTEGER NOT NULL,
    overlap             INTEGER NOT NULL,
    seed                BIGINT NOT NULL,
    annotators_json     VARCHAR NOT NULL,
    scale_json          VARCHAR NOT NULL,
    taxonomy_json       VARCHAR,
    instructions        VARCHAR NOT NULL,
    instructions_sha256 VARCHAR NOT NULL,
    draw_json           VARCHAR NOT NULL,
    created_at          TIMESTAMP NOT NULL,
    PRIMARY KEY (dataset_id, campaign)
);

-- item_id: the prompt id (alignment: the whole pool) or the candidate id (rubric, labels);
-- position: its place in the seeded draw; stratum: its stratum or gate side under the plan
CREATE TABLE IF NOT EXISTS campaign_items (
    dataset_id         VARCHAR NOT NULL,
    campaign           VARCHAR NOT NULL,
    item_id            VARCHAR NOT NULL,
    position           INTEGER NOT NULL,
    prompt_id          VARCHAR NOT NULL,
    candidate_ids_json VARCHAR NOT NULL,
    stratum            VARCHAR NOT NULL,
    PRIMARY KEY (dataset_id, campaign, item_id)
);

CREATE TABLE IF NOT EXISTS campaign_assignments (
    dataset_id VARCHAR NOT NULL,
    campaign   VARCHAR NOT NULL,
    item_id    VARCHAR NOT NULL,
    annotator  VARCHAR NOT NULL,
    PRIMARY KEY (dataset_id, campaign, item_id, annotator)
);

-- status: rated or skipped; seq orders one annotator's acts (revise_last replaces the highest rated)
CREATE TABLE IF NOT EXISTS campaign_submissions (
    dataset_id   VARCHAR NOT NULL,
    campaign     VARCHAR NOT NULL,
    annotator    VARCHAR NOT NULL,
    item_id      VARCHAR NOT NULL,
    status       VARCHAR NOT NULL,
    answer_json  VARCHAR,
    shown_json   VARCHAR,
    seconds      DOUBLE,
    seq          INTEGER NOT NULL,
    submitted_at TIMESTAMP NOT NULL,
    PRIMARY KEY (dataset_id, campaign, annotator, item_id)
);

CREATE TABLE IF NOT EXISTS campaign_labels (
    dataset_id   VARCHAR NOT NULL,
    campaign     VARCHAR NOT NULL,
    annotator    VARCHAR NOT NULL,
    candidate_id VARCHAR NOT NULL,
    attribute    VARCHAR NOT NULL,
    label        VARCHAR NOT NULL,
    PRIMARY KEY (dataset_id, campaign, annotator, candidate_id, attribute)
);

-- only the SHA-256 of a token is kept; revoked_at is NULL while it is valid
CREATE TABLE IF NOT EXISTS campaign_tokens (
    token_sha256 VARCHAR PRIMARY KEY,
    dataset_id   VARCHAR NOT NULL,
    campaign     VARCHAR NOT NULL,
    annotator    VARCHAR NOT NULL,
    created_at   TIMESTAMP NOT NULL,
    revoked_at   TIMESTAMP
);
"""


def ensure_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Create the campaign tables a writable store lacks (CREATE TABLE IF NOT EXISTS)."""
    con.execute(SCHEMA_SQL)


def has_tables(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the store holds the campaign tables (a store no campaign was ever created in does not)."""
    (count,) = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = current_schema() AND list_contains(?, table_name)",
        [list(TABLES)],
    ).fetchone()
    return count == len(TABLES)
