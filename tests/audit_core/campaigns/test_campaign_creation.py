"""Creating a campaign: the labels task's taxonomy, and settings refused before anything is written."""

from __future__ import annotations

import dataclasses

import pytest

from audit_core import campaigns as cp
from audit_core import store
from audit_core.attributes.taxonomy import load_taxonomy, parse_taxonomy


def test_labels_take_the_given_taxonomy_when_the_dataset_has_none_and_store_it(con):
    with pytest.raises(cp.CampaignError, match="has no taxonomy") as err:
        cp.create_campaign(con, "tiny", "lab", "labels", "crowd", "uniform", 4, 1)
    assert err.value.field == "--taxonomy"
    taxonomy = load_taxonomy()
    campaign = cp.create_campaign(con, "tiny", "lab", "labels", "crowd", "uniform", 4, 1, taxonomy=taxonomy)
    assert store.load_taxonomy(con, "tiny").sha256 == taxonomy.sha256
    assert campaign.taxonomy == {a.name: a.labels for a in taxonomy.attributes}
    assert campaign.abstain_label == "unspecified" and campaign.scale == ()


def test_a_taxonomy_other_than_the_datasets_is_refused(labels_con):
    other = parse_taxonomy(b'{"name": "mine", "attributes": [{"name": "mood", "labels": ["calm", "busy"]}]}', "mine.json")
    with pytest.raises(cp.CampaignError, match="already has taxonomy"):
        cp.create_campaign(labels_con, "tiny", "lab", "labels", "crowd", "uniform", 4, 1, taxonomy=other)


def test_a_taxonomy_with_two_abstention_labels_is_refused(con):
    one = parse_taxonomy(b'{"name": "mine", "attributes": [{"name": "mood", "labels": ["calm", "busy"]}]}', "mine.json")
    mixed = dataclasses.replace(one, attributes=(one.attributes[0],
                                                 dataclasses.replace(one.attributes[0], name="x", abstain="none")))
    with pytest.raises(cp.CampaignError, match="several abstention labels"):
        cp.create_campaign(con, "tiny", "lab", "labels", "crowd", "uniform", 4, 1, taxonomy=mixed)
    assert store.load_taxonomy(con, "tiny") is None


@pytest.mark.parametrize("changes, field", [
    ({"size": 0}, "--size"), ({"overlap": 0}, "--overlap"), ({"seed": -1}, "--seed"), ({"size": True}, "--size"),
    ({"annotators": ("a", "b"), "overlap": 3}, "--overlap"), ({"annotators": ("a", "a")}, "--annotators"),
    ({"instructions": " \n\u200b"}, "--instructions"), ({"task": "votes"}, "--task"), ({"pool": "\u3000"}, "--pool"),
    ({"new_pool": False}, "--pool"),
])
def test_bad_settings_are_refused_naming_the_flag_and_nothing_is_written(con, changes, field):
    settings = {"dataset": "tiny", "name": "c", "task": "alignment", "pool": "crowd", "plan": "uniform", "size": 4,
                "overlap": 1, "new_pool": True, **changes}
    with pytest.raises(cp.CampaignError) as err:
        cp.create_campaign(con, **settings)
    assert err.value.field == field
    assert cp.list_campaigns(con) == []


def test_deleting_the_dataset_deletes_its_campaigns(con):
    campaign = cp.create_campaign(con, "tiny", "c", "alignment", "crowd", "uniform", 4, 2, annotators=("ann", "bob"),
                                  new_pool=True)
    cp.invite(con, campaign, "ann")
    tables = [row[0] for row in con.execute("SELECT DISTINCT table_name FROM duckdb_columns() "
                                            "WHERE column_name = 'dataset_id'").fetchall()]
    rows = {t: con.execute(f'SELECT count(*) FROM "{t}" WHERE dataset_id = ?', ["tiny"]).fetchone()[0] for t in tables}
    assert {"campaigns", "campaign_items", "campaign_assignments", "campaign_tokens"} <= {t for t, n in rows.items() if n}
    store.delete_dataset(con, "tiny")
    assert all(con.execute(f'SELECT count(*) FROM "{t}" WHERE dataset_id = ?', ["tiny"]).fetchone()[0] == 0
               for t in tables)
    assert cp.list_campaigns(con) == []
