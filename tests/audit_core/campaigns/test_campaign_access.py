"""Access tokens: a fresh secret per invite, only its hash stored, one campaign per token, revocable."""

from __future__ import annotations

import hashlib

import pytest

from audit_core import campaigns as cp


def test_a_token_opens_its_campaign_as_its_annotator_until_revoked(con, tiny_db):
    first = cp.create_campaign(con, "tiny", "c1", "alignment", "crowd", "uniform", 4, 1, annotators=("ann", "bob"),
                               new_pool=True)
    second = cp.create_campaign(con, "tiny", "c2", "alignment", "crowd", "uniform", 4, 1, new_pool=True)
    token = cp.invite(con, first, "ann")
    other = cp.invite(con, second, "zoe")
    assert len(token) >= 43 and token != cp.invite(con, first, "ann")
    assert cp.token_holder(con, token) == (first, "ann")
    assert cp.token_holder(con, other) == (second, "zoe")
    for wrong in ("", token[:-1], token + "x", "x" * 10_000, other.upper()):
        assert cp.token_holder(con, wrong) is None
    stored = [r[0] for r in con.execute("SELECT token_sha256 FROM campaign_tokens").fetchall()]
    assert hashlib.sha256(token.encode()).hexdigest() in stored and token not in stored
    con.execute("CHECKPOINT")
    assert token.encode() not in tiny_db.read_bytes()
    assert cp.revoke(con, first, "ann") == 2 and cp.revoke(con, first, "ann") == 0
    assert cp.token_holder(con, token) is None and cp.token_holder(con, other) == (second, "zoe")


def test_an_invite_names_an_annotator_of_the_campaign(con):
    campaign = cp.create_campaign(con, "tiny", "c1", "alignment", "crowd", "uniform", 4, 1, annotators=("ann",),
                                  new_pool=True)
    with pytest.raises(cp.CampaignError, match="not an annotator"):
        cp.invite(con, campaign, "bob")
    with pytest.raises(cp.CampaignError, match="blank"):
        cp.invite(con, campaign, "\t")
