"""An annotator's acts on a campaign: the next item, the order it is shown in, submit, skip, revise.

Each act is one transaction (BEGIN … COMMIT) and leaves the store unchanged when it fails.
A submission is idempotent per (campaign, annotator, item): the first one stores the votes and
returns True; any later one (a refresh, a double click, another connection racing it) returns
False and changes nothing. Votes land where the audits read them:

- alignment, rubric: one `votes` row per rated candidate (outcome alignment or rubric, the
  campaign's pool, the annotator), and the pool's consensus of every touched candidate is
  recomputed by the ingest's rule (`audit_core.ingest.pools.with_votes`): c = mean of all the
  pool's votes on it, kept within their range, n = their count. A consensus row imported
  without its votes is thereby replaced for the candidates a campaign rates.
- labels: one `campaign_labels` row per attribute, and the gold label of every touched
  (candidate, attribute) becomes the most frequent label among all campaigns' label votes on
  it; a tie between labels gives the abstention label (the annotators do not agree on what the
  image shows).

The store's content fingerprint (`audit_core.store.audit_cache.dataset_fingerprint`) hashes every
row of `votes`, `ratings`, `gold_labels` and the campaign tables, so each act gives the dataset a
new fingerprint and cached audits are recomputed, with no stamp of our own to bump.

An annotator who already has a vote on a candidate in the pool (imported, or from another
campaign) is not offered items holding it, and submitting one is refused: `votes` keeps one
vote per (candidate, outcome, pool, annotator).

The acts of one process run one at a time (a lock around each transaction), so cursors used by
several threads (the app's sessions) never interleave two recomputations of one consensus; the
submissions table's primary key keeps a submission single against any other connection too.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping

import duckdb

from audit_core import store
from audit_core.campaigns.loading import load_item
from audit_core.campaigns.records import Campaign, CampaignError, Item
from audit_core.stats.id_hash import id_hash
from audit_core.store.records import utc_now
from audit_core.user_text import BLANK, blank, excerpt, shown

# One act at a time in a process (DuckDB lets one process write a file): under snapshot isolation two
# concurrent recomputations of one consensus would each insert it, the bulk tables keeping their keys by
# their writers rather than an index (`store.schema`).
_WRITES = threading.Lock()
ORDER_PURPOSE = "campaign-order"
SHOWN_PURPOSE = "campaign-shown"
Answer = Mapping[str, float] | float | Mapping[str, str]


class _AlreadyRated(Exception):
    """Raised inside a submission's transaction to roll it back: the annotator had rated the item."""


def _annotator(campaign: Campaign, annotator: str) -> str:
    if not isinstance(annotator, str) or blank(annotator):
        raise CampaignError(BLANK, field="annotator")
    if campaign.annotators and annotator not in campaign.annotators:
        raise CampaignError(f"{shown(annotator)} is not an annotator of campaign {shown(campaign.name)}",
                            field="annotator")
    return annotator


def item_candidates_sql(campaign: Campaign) -> str:
    """SQL condition on candidates `c` that are part of item `i` (the whole pool for alignment)."""
    return "c.prompt_id = i.prompt_id" if campaign.task == "alignment" else "c.candidate_id = i.item_id"


def open_items(con: duckdb.DuckDBPyConnection, campaign: Campaign, annotator: str) -> list[str]:
    """Ids of the items still open to `annotator`, in the annotator's order: assigned to them (or, in an
    open campaign, rated by fewer than `overlap` annotators), neither rated nor skipped by them,
    holding no candidate they already have a vote on in the pool. Order: id_hash of
    "dataset|campaign|annotator|item" (ORDER_PURPOSE)."""
    annotator = _annotator(campaign, annotator)
    params: dict[str, object] = {"d": campaign.dataset, "c": campaign.name, "a": annotator}
    if not campaign.annotators:
        params["r"] = campaign.overlap
    if campaign.task != "labels":
        params.update(o=campaign.outcome, p=campaign.pool)
    offered = ("EXISTS (SELECT 1 FROM campaign_assignments x WHERE x.dataset_id = i.dataset_id "
               "AND x.campaign = i.campaign AND x.item_id = i.item_id AND x.annotator = $a)" if campaign.annotators
               else "(SELECT count(*) FROM campaign_submissions s WHERE s.dataset_id = i.dataset_id AND "
                    "s.campaign = i.campaign AND s.item_id = i.item_id AND s.status = 'rated') < $r")
    voted = ("" if campaign.task == "labels" else
             f" AND NOT EXISTS (SELECT 1 FROM candidates c JOIN votes v ON v.dataset_id = c.dataset_id AND "
             f"v.candidate_id = c.candidate_id WHERE c.dataset_id = i.dataset_id AND {item_candidates_sql(campaign)} "
             "AND v.outcome = $o AND v.pool = $p AND v.annotator = $a)")
    rows = con.execute(
        "SELECT i.item_id FROM campaign_items i WHERE i.dataset_id = $d AND i.campaign = $c AND NOT EXISTS "
        "(SELECT 1 FROM campaign_submissions s WHERE s.dataset_id = i.dataset_id AND s.campaign = i.campaign AND "
        f"s.item_id = i.item_id AND s.annotator = $a) AND {offered}{voted}", params).fetchall()
    key = f"{campaign.dataset}|{campaign.name}|{annotator}|"
    return sorted((r[0] for r in rows), key=lambda i: (id_hash(key + i, ORDER_PURPOSE), i))


def next_item(con: duckdb.DuckDBPyConnection, campaign: Campaign, annotator: str) -> Item | None:
    """The first of `open_items` (the same one until the annotator acts), or None when none is left."""
    remaining = open_items(con, campaign, annotator)
    return load_item(con, campaign, remaining[0]) if remaining else None


def shown_order(campaign: Campaign, annotator: str, item: Item) -> tuple[str, ...]:
    """The item's candidate ids sorted by id_hash("dataset|campaign|annotator|item|candidate", SHOWN_PURPOSE):
    a shuffle of its own for every (campaign, annotator, item)."""
    key = f"{campaign.dataset}|{campaign.name}|{annotator}|{item.item_id}|"
    return tuple(sorted(item.candidate_ids, key=lambda c: (id_hash(key + c, SHOWN_PURPOSE), c)))


def _scale_value(campaign: Campaign, value: object, what: str) -> float:
    points = [p.value for p in campaign.scale]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) not in points:
        allowed = ", ".join(f"{p.value:g} ({p.label.split(' = ')[0]})" for p in campaign.scale)
        raise CampaignError(f"{shown(value)} is not a point of the scale ({allowed})", field=what)
    return float(value)


def checked_answer(campaign: Campaign, item: Item, answer: Answer) -> dict[str, float] | dict[str, str]:
    """The answer as stored (candidate -> value, or attribute -> label); CampaignError naming what is wrong."""
    if campaign.task == "rubric":
        return {item.candidate_ids[0]: _scale_value(campaign, answer, "answer")}
    expected = list(item.candidate_ids) if campaign.task == "alignment" else list(campaign.taxonomy or {})
    what = "candidate" if campaign.task == "alignment" else "attribute"
    if not isinstance(answer, Mapping):
        raise CampaignError(f"expected one answer per {what}, got {shown(answer)}", field="answer")
    missing = [k for k in expected if k not in answer]
    extra = [k for k in answer if k not in expected]
    if missing or extra:
        wrong = f"no answer for {what} {shown(missing[0])}" if missing else f"unknown {what} {shown(extra[0])}"
        raise CampaignError(wrong, field="answer")
    if campaign.task == "alignment":
        return {c: _scale_value(campaign, answer[c], f"answer[{c!r}]") for c in expected}
    out = {}
    for attribute, labels in (campaign.taxonomy or {}).items():
        label = answer[attribute]
        if label not in (*labels, campaign.abstain_label):
            raise CampaignError(f"{shown(label)} is not a label of {attribute} ({', '.join(labels)}, or "
                                f"{campaign.abstain_label})", field=f"answer[{attribute!r}]")
        out[attribute] = label
    return out


def _seconds(seconds: float) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
        raise CampaignError(f"expected a finite number of seconds at least 0, got {shown(seconds)}", field="seconds")
    return float(seconds)


def _assigned_item(con: duckdb.DuckDBPyConnection, campaign: Campaign, annotator: str, item_id: str) -> Item:
    item = load_item(con, campaign, item_id)
    if campaign.annotators and con.execute(
            "SELECT count(*) FROM campaign_assignments WHERE dataset_id = ? AND campaign = ? AND item_id = ? "
            "AND annotator = ?", [campaign.dataset, campaign.name, item_id, annotator]).fetchone()[0] == 0:
        raise CampaignError(f"item {shown(item_id)} is not assigned to {shown(annotator)}", field="item_id")
    return item


def _status(con: duckdb.DuckDBPyConnection, campaign: Campaign, annotator: str, item_id: str) -> str | None:
    row = con.execute("SELECT status FROM campaign_submissions WHERE dataset_id = ? AND campaign = ? AND "
                      "annotator = ? AND item_id = ?", [campaign.dataset, campaign.name, annotator, item_id]).fetchone()
    return None if row is None else row[0]


def _next_seq(con: duckdb.DuckDBPyConnection, campaign: Campaign, annotator: str) -> int:
    (last,) = con.execute("SELECT coalesce(max(seq), 0) FROM campaign_submissions WHERE dataset_id = ? AND "
                          "campaign = ? AND annotator = ?", [campaign.dataset, campaign.name, annotator]).fetchone()
    return int(last) + 1


def _write_votes(con: duckdb.DuckDBPyConnection, campaign: Campaign, annotator: str, item: Item,
                 answer: dict) -> None:
    """Insert the answer's votes (or labels) and recompute the touched consensus (module docstring)."""
    ds = campaign.dataset
    if campaign.task == "labels":
        (cid,) = item.candidate_ids
        con.executemany("INSERT INTO campaign_labels VALUES (?, ?, ?, ?, ?, ?)",
                        [[ds, campaign.name, annotator, cid, a, label] for a, label in answer.items()])
        _recompute_gold(con, campaign, cid)
        return
    taken = con.execute("SELECT candidate_id FROM votes WHERE dataset_id = ? AND outcome = ? AND pool = ? AND "
                        "annotator = ? AND list_contains(?, candidate_id) ORDER BY candidate_id",
                        [ds, campaign.outcome, campaign.pool, annotator, list(answer)]).fetchall()
    if taken:
        raise CampaignError(f"{shown(annotator)} already has a vote on {shown(taken[0][0])} in pool "
                            f"{shown(campaign.pool)}", field="annotator")
    con.executemany("INSERT INTO votes (dataset_id, candidate_id, outcome, pool, annotator, value) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    [[ds, cid, campaign.outcome, campaign.pool, annotator, v] for cid, v in answer.items()])
    _recompute_consensus(con, campaign, list(answer))


def _recompute_consensus(con: duckdb.DuckDBPyConnection, campaign: Campaign, candidate_ids: list[str]) -> None:
    """ratings of the touched candidates = mean of the pool's votes, within their range; n = their count.
    Delete-then-insert: the store's writers keep the bulk tables' keys (`store.schema.KEYS`), not an index."""
    params = [campaign.dataset, campaign.outcome, campaign.pool, candidate_ids]
    where = "dataset_id = ? AND outcome = ? AND pool = ? AND list_contains(?, candidate_id)"
    con.execute(f"DELETE FROM ratings WHERE {where}", params)
    con.execute(
        "INSERT INTO ratings (dataset_id, candidate_id, outcome, pool, value, n) "
        "SELECT dataset_id, candidate_id, outcome, pool, least(greatest(avg(value), min(value)), max(value)), "
        f"CAST(count(*) AS INTEGER) FROM votes WHERE {where} GROUP BY dataset_id, candidate_id, outcome, pool",
        params)


def _recompute_gold(con: duckdb.DuckDBPyConnection, campaign: Campaign, candidate_id: str) -> None:
    """gold label of each labelled attribute of the candidate = its most frequent label among every campaign's
    label votes; a tie gives the abstention label. Other attributes' gold labels are left as they are."""
    params = [campaign.dataset, candidate_id]
    con.execute("DELETE FROM gold_labels WHERE dataset_id = ? AND candidate_id = ? AND attribute IN (SELECT "
                "attribute FROM campaign_labels WHERE dataset_id = ? AND candidate_id = ?)", params + params)
    con.execute(
        "INSERT INTO gold_labels (dataset_id, candidate_id, attribute, label) "
        "SELECT dataset_id, candidate_id, attribute, CASE WHEN count(*) FILTER (WHERE n = top) > 1 THEN ? "
        "ELSE max(label) FILTER (WHERE n = top) END FROM ("
        "  SELECT *, max(n) OVER (PARTITION BY attribute) AS top FROM ("
        "    SELECT dataset_id, candidate_id, attribute, label, count(*) AS n FROM campaign_labels "
        "    WHERE dataset_id = ? AND candidate_id = ? GROUP BY ALL)) GROUP BY dataset_id, candidate_id, attribute",
        [campaign.abstain_label, *params])


def submit(con: duckdb.DuckDBPyConnection, campaign: Campaign, annotator: str, item_id: str, answer: Answer,
           shown: tuple[str, ...], seconds: float) -> bool:
    """Store the annotator's answer on the item with its shown order and seconds, in one transaction;
    True when stored, False when this annotator had already rated the item (nothing changes).
    CampaignError for an item not theirs, a value off the scale, a shown order that is not the item's
    candidates, a vote they already have in the pool."""
    annotator = _annotator(campaign, annotator)
    item = _assigned_item(con, campaign, annotator, item_id)
    stored = checked_answer(campaign, item, answer)
    shown_ids = tuple(shown)
    if sorted(shown_ids) != sorted(item.candidate_ids):
        raise CampaignError(f"the shown order {excerpt(repr(shown_ids))} is not the item's candidates", field="shown")
    seconds = _seconds(seconds)
    try:
        with _WRITES, store.transaction(con):
            status = _status(con, campaign, annotator, item_id)
            if status == "rated":
                raise _AlreadyRated
            values = [json.dumps(stored), json.dumps(list(shown_ids)), seconds,
                      _next_seq(con, campaign, annotator), utc_now()]
            key = [campaign.dataset, campaign.name, annotator, item_id]
            if status == "skipped":
                con.execute("UPDATE campaign_submissions SET status = 'rated', answer_json = ?, shown_json = ?, "
                            "seconds = ?, seq = ?, submitted_at = ? WHERE dataset_id = ? AND campaign = ? AND "
                            "annotator = ? AND item_id = ?", values + key)
            else:
                con.execute("INSERT INTO campaign_submissions VALUES (?, ?, ?, ?, 'rated', ?, ?, ?, ?, ?)",
                            key + values)
            _write_votes(con, campaign, annotator, item, stored)
    except _AlreadyRated:
        return False
    except (duckdb.ConstraintException, duckdb.TransactionException):
        # another connection stored the same submission first (write-write conflict or duplicate key)
        if _status(con, campaign, annotator, item_id) == "rated":
            return False
        raise
    return True


def skip(con: duckdb.DuckDBPyConnection, campaign: Campaign, annotator: str, item_id: str) -> None:
    """Record that the annotator skipped the item (no vote); nothing changes when they already rated or skipped it."""
    annotator = _annotator(campaign, annotator)
    _assigned_item(con, campaign, annotator, item_id)
    try:
        with _WRITES, store.transaction(con):
            if _status(con, campaign, annotator, item_id) is None:
                con.execute("INSERT INTO campaign_submissions VALUES (?, ?, ?, ?, 'skipped', NULL, NULL, NULL, ?, ?)",
                            [campaign.dataset, campaign.name, annotator, item_id,
                             _next_seq(con, campaign, annotator), utc_now()])
    except (duckdb.ConstraintException, duckdb.TransactionException):
        if _status(con, campaign, annotator, item_id) is None:
            raise


def last_rated(con: duckdb.DuckDBPyConnection, campaign: Campaign, annotator: str) -> tuple[Item, tuple[str, ...]] | None:
    """The item of the annotator's most recent rated submission and the order it was shown in, or None."""
    annotator = _annotator(campaign, annotator)
    row = con.execute("SELECT item_id, shown_json FROM campaign_submissions WHERE dataset_id = ? AND campaign = ? AND "
                      "annotator = ? AND status = 'rated' ORDER BY seq DESC LIMIT 1",
                      [campaign.dataset, campaign.name, annotator]).fetchone()
    return None if row is None else (load_item(con, campaign, row[0]), tuple(json.loads(row[1])))


def revise_last(con: duckdb.DuckDBPyConnection, campaign: Campaign, annotator: str, answer: Answer,
                seconds: float, item_id: str | None = None) -> Item:
    """Replace the annotator's most recent rated submission and its votes with `answer`, in one
    transaction; returns its item. CampaignError when they have rated nothing yet, or when `item_id`
    is given and their most recent rated item is another (a second tab must not revise what it did not show)."""
    annotator = _annotator(campaign, annotator)
    seconds = _seconds(seconds)
    ds, name = campaign.dataset, campaign.name
    with _WRITES, store.transaction(con):
        last = last_rated(con, campaign, annotator)
        if last is None:
            raise CampaignError(f"{shown(annotator)} has no answer to revise in campaign {shown(campaign.name)}",
                                field="annotator")
        item = last[0]
        if item_id is not None and item_id != item.item_id:
            raise CampaignError(f"{shown(annotator)}'s last answer is on item {shown(item.item_id)}, not "
                                f"{shown(item_id)}; only the last answer can be revised", field="item_id")
        stored = checked_answer(campaign, item, answer)
        if campaign.task == "labels":
            con.execute("DELETE FROM campaign_labels WHERE dataset_id = ? AND campaign = ? AND annotator = ? AND "
                        "candidate_id = ?", [ds, name, annotator, item.candidate_ids[0]])
        else:
            con.execute("DELETE FROM votes WHERE dataset_id = ? AND outcome = ? AND pool = ? AND annotator = ? AND "
                        "list_contains(?, candidate_id)", [ds, campaign.outcome, campaign.pool, annotator,
                                                           list(item.candidate_ids)])
        con.execute("UPDATE campaign_submissions SET answer_json = ?, seconds = ?, submitted_at = ? WHERE "
                    "dataset_id = ? AND campaign = ? AND annotator = ? AND item_id = ?",
                    [json.dumps(stored), seconds, utc_now(), ds, name, annotator, item.item_id])
        _write_votes(con, campaign, annotator, item, stored)
    return item
