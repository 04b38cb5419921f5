"""Creating a campaign: check every setting, draw the items, assign them, and store it all in one transaction.

Named annotators (`annotators`) share the items round-robin: the item at draw position i goes to
annotators[(i·R + j) mod A] for j = 0..R−1 (R = overlap ≤ A annotators), so every item has R
different annotators and the loads differ by at most one. A campaign open to any name has no
assignments: every item is offered until R annotators have rated it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from audit_core import store
from audit_core.attributes.taxonomy import Taxonomy
from audit_core.campaigns import plans
from audit_core.campaigns.loading import find_campaign, load_campaign
from audit_core.campaigns.records import DEFAULT_INSTRUCTIONS, SCALES, TASK_OUTCOMES, TASKS, Campaign, CampaignError
from audit_core.campaigns.schema import ensure_tables
from audit_core.errors import InputError
from audit_core.ingest import input_files
from audit_core.store.records import TaxonomyRecord, utc_now
from audit_core.store.schema import INTEGER_MAX
from audit_core.user_text import BLANK, blank, shown


def read_instructions(path: str | Path) -> str:
    """The text of an instructions file (UTF-8, a bounded read of `input_files.CONFIG`); InputError naming the file."""
    raw = input_files.read_bytes(path, input_files.CONFIG, what="the instructions")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text (byte {err.start})", file=path, field="--instructions") from None
    if blank(text):
        raise InputError("the instructions are blank", file=path, field="--instructions")
    return text


def _name(value: str, flag: str) -> str:
    if not isinstance(value, str) or blank(value):
        raise CampaignError(BLANK, field=flag)
    return value


def _whole(value: int, flag: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= INTEGER_MAX:
        raise CampaignError(f"expected a whole number from {low} to {INTEGER_MAX}, got {shown(value)}", field=flag)
    return value


def _pools(con: duckdb.DuckDBPyConnection, dataset: str, outcome: str) -> list[str]:
    rows = con.execute("SELECT DISTINCT pool FROM ratings WHERE dataset_id = ? AND outcome = ? UNION "
                       "SELECT DISTINCT pool FROM votes WHERE dataset_id = ? AND outcome = ? ORDER BY pool",
                       [dataset, outcome, dataset, outcome]).fetchall()
    return [r[0] for r in rows]


def _labels_taxonomy(con: duckdb.DuckDBPyConnection, dataset: str, given: Taxonomy | None) -> tuple[Taxonomy, bool]:
    """(the taxonomy a labels campaign uses, whether it must be stored with the dataset)."""
    stored = store.load_taxonomy(con, dataset)
    if stored is None and given is None:
        raise CampaignError(f"dataset {shown(dataset)} has no taxonomy; give the label sets with --taxonomy FILE",
                            field="--taxonomy")
    if stored is not None and given is not None and stored.sha256 != given.sha256:
        raise CampaignError(f"dataset {shown(dataset)} already has taxonomy {shown(stored.name)} version "
                            f"{shown(stored.version)}, and its gold labels follow it; leave --taxonomy out or give "
                            "that file", field="--taxonomy")
    taxonomy = stored or given
    abstains = {a.abstain for a in taxonomy.attributes}
    if len(abstains) != 1:
        raise CampaignError(f"taxonomy {shown(taxonomy.name)} has several abstention labels "
                            f"({', '.join(sorted(abstains))}); a campaign needs one", field="--taxonomy")
    return taxonomy, stored is None


def create_campaign(
    con: duckdb.DuckDBPyConnection,
    dataset: str,
    name: str,
    task: str,
    pool: str,
    plan: str,
    size: int,
    overlap: int,
    *,
    seed: int = 0,
    annotators: Sequence[str] = (),
    instructions: str | None = None,
    taxonomy: Taxonomy | None = None,
    new_pool: bool = False,
) -> Campaign:
    """Check the settings, draw `size` items by `plan` under `seed`, assign them and store the campaign,
    all in one transaction; CampaignError naming the flag otherwise, the database unchanged.

    `pool` must be a pool the dataset has on the task's outcome unless `new_pool` (labels campaigns
    name their annotator group freely); `instructions` default to the task's text (records.DEFAULT_INSTRUCTIONS).
    """
    for value, flag in ((dataset, "--dataset"), (name, "--campaign"), (pool, "--pool")):
        _name(value, flag)
    if task not in TASKS:
        raise CampaignError(f"unknown task {shown(task)}; expected one of {', '.join(TASKS)}", field="--task")
    _whole(size, "--size", 1)
    _whole(overlap, "--overlap", 1)
    _whole(seed, "--seed", 0)
    names = tuple(_name(a, "--annotators") for a in annotators)
    if len(set(names)) != len(names):
        repeated = next(a for a in names if names.count(a) > 1)
        raise CampaignError(f"annotator {shown(repeated)} is named twice", field="--annotators")
    if names and overlap > len(names):
        raise CampaignError(f"overlap {overlap} needs at least {overlap} annotators, {len(names)} named",
                            field="--overlap")
    if store.dataset_row(con, dataset) is None:
        known = ", ".join(store.list_datasets(con)["dataset_id"]) or "none"
        raise CampaignError(f"no dataset {shown(dataset)} (datasets: {known})", field="--dataset")
    if find_campaign(con, dataset, name) is not None:
        raise CampaignError(f"dataset {shown(dataset)} already has a campaign {shown(name)}; choose another name",
                            field="--campaign")
    outcome = TASK_OUTCOMES[task]
    if task != "labels" and not new_pool and pool not in (known := _pools(con, dataset, outcome)):
        raise CampaignError(f"dataset {shown(dataset)} has no {outcome} pool {shown(pool)} (pools: "
                            f"{', '.join(known) or 'none'}); add --new-pool to collect a new one", field="--pool")
    labels, store_taxonomy = _labels_taxonomy(con, dataset, taxonomy) if task == "labels" else (None, False)
    if instructions is not None and blank(instructions):
        raise CampaignError("the instructions are blank", field="--instructions")
    text = instructions if instructions is not None else DEFAULT_INSTRUCTIONS[task]
    drawn, record = plans.draw(con, dataset, task, plan, size, seed)
    taxonomy_json = None if labels is None else json.dumps(
        {"name": labels.name, "version": labels.version, "sha256": labels.sha256,
         "labels": {a.name: list(a.labels) for a in labels.attributes}, "abstain": labels.attributes[0].abstain})
    scale_json = json.dumps([[p.value, p.label, p.key] for p in SCALES[task]])
    with store.transaction(con):
        ensure_tables(con)
        con.execute("INSERT INTO campaigns VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
            dataset, name, task, pool, outcome, plan, size, overlap, seed, json.dumps(list(names)), scale_json,
            taxonomy_json, text, hashlib.sha256(text.encode()).hexdigest(), json.dumps(record), utc_now()])
        items = pd.DataFrame({"dataset_id": dataset, "campaign": name, "item_id": [d.item_id for d in drawn],
                              "position": np.arange(len(drawn), dtype=np.int32),
                              "prompt_id": [d.prompt_id for d in drawn],
                              "candidate_ids_json": [json.dumps(list(d.candidate_ids)) for d in drawn],
                              "stratum": [d.stratum for d in drawn]})
        _insert(con, "campaign_items", items)
        if names:
            position, slot = np.divmod(np.arange(len(drawn) * overlap), overlap)
            _insert(con, "campaign_assignments", pd.DataFrame({
                "dataset_id": dataset, "campaign": name, "item_id": items["item_id"].to_numpy()[position],
                "annotator": np.array(names, dtype=object)[(position * overlap + slot) % len(names)]}))
        if store_taxonomy:
            store.insert_records(con, "taxonomies", [TaxonomyRecord(dataset, labels.name, labels.version,
                                                                     labels.sha256, labels.to_json())])
    return load_campaign(con, dataset, name)


def _insert(con: duckdb.DuckDBPyConnection, table: str, frame: pd.DataFrame) -> None:
    """Append `frame` (columns in the table's order) to one of the campaign tables in one statement."""
    con.register("_campaign_rows", frame)
    try:
        con.execute(f"INSERT INTO {table} SELECT * FROM _campaign_rows")
    finally:
        con.unregister("_campaign_rows")


def draw_record(con: duckdb.DuckDBPyConnection, campaign: Campaign) -> dict:
    """The recorded draw of a campaign: plan, seed, size and each stratum's population and quota."""
    (text,) = con.execute("SELECT draw_json FROM campaigns WHERE dataset_id = ? AND campaign = ?",
                          [campaign.dataset, campaign.name]).fetchone()
    return json.loads(text)
