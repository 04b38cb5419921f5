"""Reading campaigns and their items back from the store (read-only connections welcome)."""

from __future__ import annotations

import json

import duckdb

from audit_core.campaigns.records import Campaign, CampaignError, Item, ScalePoint
from audit_core.campaigns.schema import has_tables
from audit_core.user_text import shown

_COLUMNS = ("dataset_id, campaign, task, pool, outcome, plan, size, overlap, seed, annotators_json, scale_json, "
            "taxonomy_json, instructions, instructions_sha256, created_at")


def _campaign(row: tuple) -> Campaign:
    (dataset, name, task, pool, outcome, plan, size, overlap, seed, annotators, scale, taxonomy, text, sha,
     created) = row
    labels = json.loads(taxonomy) if taxonomy else None
    return Campaign(
        dataset=dataset, name=name, task=task, pool=pool, outcome=outcome, plan=plan, size=int(size),
        overlap=int(overlap), seed=int(seed), annotators=tuple(json.loads(annotators)),
        scale=tuple(ScalePoint(float(v), str(label), str(key)) for v, label, key in json.loads(scale)),
        taxonomy={a: tuple(ls) for a, ls in labels["labels"].items()} if labels else None,
        abstain_label=labels["abstain"] if labels else None,
        instructions=text, instructions_sha256=sha, created_at=created.isoformat(timespec="seconds") + "Z",
    )


def list_campaigns(con: duckdb.DuckDBPyConnection, dataset: str | None = None) -> list[Campaign]:
    """Every campaign (of `dataset` when given), by dataset and name; [] in a store without campaigns."""
    if not has_tables(con):
        return []
    sql = f"SELECT {_COLUMNS} FROM campaigns"
    params: list[object] = []
    if dataset is not None:
        sql += " WHERE dataset_id = ?"
        params.append(dataset)
    return [_campaign(r) for r in con.execute(sql + " ORDER BY dataset_id, campaign", params).fetchall()]


def find_campaign(con: duckdb.DuckDBPyConnection, dataset: str, name: str) -> Campaign | None:
    """The campaign `name` of `dataset`, or None."""
    if not has_tables(con):
        return None
    row = con.execute(f"SELECT {_COLUMNS} FROM campaigns WHERE dataset_id = ? AND campaign = ?",
                      [dataset, name]).fetchone()
    return None if row is None else _campaign(row)


def load_campaign(con: duckdb.DuckDBPyConnection, dataset: str, name: str) -> Campaign:
    """The campaign `name` of `dataset`; CampaignError naming --campaign (and the known ones) when absent."""
    found = find_campaign(con, dataset, name)
    if found is None:
        known = [c.name for c in list_campaigns(con, dataset)]
        raise CampaignError(f"no campaign {shown(name)} on dataset {shown(dataset)} "
                            f"(campaigns: {', '.join(known) or 'none'})", field="--campaign")
    return found


def load_item(con: duckdb.DuckDBPyConnection, campaign: Campaign, item_id: str) -> Item:
    """The drawn item `item_id` with its prompt text and image paths; CampaignError when the campaign has no such item."""
    items = load_items(con, campaign, [item_id])
    if not items:
        raise CampaignError(f"campaign {shown(campaign.name)} has no item {shown(item_id)}", field="item_id")
    return items[0]


def load_items(con: duckdb.DuckDBPyConnection, campaign: Campaign, item_ids: list[str] | None = None) -> list[Item]:
    """The campaign's items (all, in draw order, or those of `item_ids`, in that order)."""
    sql = ("SELECT i.item_id, i.prompt_id, p.prompt, i.candidate_ids_json FROM campaign_items i "
           "JOIN prompts p ON p.dataset_id = i.dataset_id AND p.prompt_id = i.prompt_id "
           "WHERE i.dataset_id = ? AND i.campaign = ?")
    params: list[object] = [campaign.dataset, campaign.name]
    if item_ids is not None:
        sql += " AND list_contains(?, i.item_id)"
        params.append(list(item_ids))
    rows = con.execute(sql + " ORDER BY i.position", params).fetchall()
    paths = dict(con.execute(
        "SELECT candidate_id, image_path FROM candidates WHERE dataset_id = ? AND list_contains(?, prompt_id)",
        [campaign.dataset, sorted({r[1] for r in rows})]).fetchall())
    items = {r[0]: Item(campaign.name, r[0], r[1], r[2], tuple(json.loads(r[3])),
                        tuple(paths.get(c) for c in json.loads(r[3]))) for r in rows}
    order = item_ids if item_ids is not None else [r[0] for r in rows]
    return [items[i] for i in order if i in items]
