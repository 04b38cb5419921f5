"""Access tokens for remote annotators: a secret per (campaign, annotator), kept only as its SHA-256.

`invite` returns a fresh secret (`secrets.token_urlsafe(32)`, 256 bits) once; the store keeps
its SHA-256, so a copy of the database gives no one a working link. `token_holder` hashes the
presented token and compares it with every valid hash of the store in constant time
(`hmac.compare_digest`), so the time taken says nothing about how close a guess was.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

import duckdb

from audit_core import store
from audit_core.campaigns.loading import find_campaign
from audit_core.campaigns.records import Campaign, CampaignError
from audit_core.campaigns.schema import has_tables
from audit_core.store.records import utc_now
from audit_core.user_text import BLANK, blank, shown

TOKEN_BYTES = 32


def token_sha256(token: str) -> str:
    """SHA-256 of the token's UTF-8 bytes, in hex: what the store keeps."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def invite(con: duckdb.DuckDBPyConnection, campaign: Campaign, annotator: str) -> str:
    """A fresh secret that opens `campaign` as `annotator` (a named annotator of it, when it names any);
    only its SHA-256 is stored. Earlier tokens of the annotator stay valid until revoked."""
    if not isinstance(annotator, str) or blank(annotator):
        raise CampaignError(BLANK, field="--annotator")
    if campaign.annotators and annotator not in campaign.annotators:
        raise CampaignError(f"{shown(annotator)} is not an annotator of campaign {shown(campaign.name)} "
                            f"(annotators: {', '.join(campaign.annotators)})", field="--annotator")
    token = secrets.token_urlsafe(TOKEN_BYTES)
    with store.transaction(con):
        con.execute("INSERT INTO campaign_tokens VALUES (?, ?, ?, ?, ?, NULL)",
                    [token_sha256(token), campaign.dataset, campaign.name, annotator, utc_now()])
    return token


def revoke(con: duckdb.DuckDBPyConnection, campaign: Campaign, annotator: str) -> int:
    """Revoke every valid token of `annotator` on `campaign`; returns how many were revoked."""
    with store.transaction(con):
        (count,) = con.execute("SELECT count(*) FROM campaign_tokens WHERE dataset_id = ? AND campaign = ? AND "
                               "annotator = ? AND revoked_at IS NULL",
                               [campaign.dataset, campaign.name, annotator]).fetchone()
        con.execute("UPDATE campaign_tokens SET revoked_at = ? WHERE dataset_id = ? AND campaign = ? AND "
                    "annotator = ? AND revoked_at IS NULL", [utc_now(), campaign.dataset, campaign.name, annotator])
    return int(count)


def token_holder(con: duckdb.DuckDBPyConnection, token: str) -> tuple[Campaign, str] | None:
    """(campaign, annotator) of a valid, unrevoked token, else None (an unknown, revoked or malformed token)."""
    if not isinstance(token, str) or not token or len(token) > 4 * TOKEN_BYTES or not has_tables(con):
        return None
    presented = token_sha256(token)
    rows = con.execute("SELECT token_sha256, dataset_id, campaign, annotator FROM campaign_tokens "
                       "WHERE revoked_at IS NULL").fetchall()
    held = None
    for digest, dataset, name, annotator in rows:
        if hmac.compare_digest(digest, presented):
            held = (dataset, name, annotator)
    if held is None:
        return None
    campaign = find_campaign(con, held[0], held[1])
    return None if campaign is None else (campaign, held[2])
