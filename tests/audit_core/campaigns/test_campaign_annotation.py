"""Annotating a campaign: the next item, the shown order, submit (idempotent, also across connections),
skip, revise, and where the votes land (votes and the pool's consensus, gold labels)."""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest

from audit_core import campaigns as cp
from audit_core import store
from audit_core.store.audit_cache import dataset_fingerprint

NAMES = ("ann", "bob", "cy")


def alignment_campaign(con, **kwargs):
    settings = {"annotators": NAMES, "new_pool": True, **kwargs}
    return cp.create_campaign(con, "tiny", "c1", "alignment", "crowd", "uniform", 6, 2, **settings)


def answer_for(item, value=0.5):
    return {c: value for c in item.candidate_ids}


def table_state(con) -> dict[str, list]:
    """Every row of the tables an act may write, sorted: what 'nothing changed' compares."""
    tables = ("votes", "ratings", "gold_labels", "campaign_submissions", "campaign_labels")
    return {t: sorted(map(repr, con.execute(f"SELECT * FROM {t}").fetchall())) for t in tables}


def test_next_item_stays_until_the_annotator_acts_and_ends_with_none(con):
    campaign = alignment_campaign(con)
    first = cp.next_item(con, campaign, "ann")
    assert cp.next_item(con, campaign, "ann") == first
    seen = []
    while (item := cp.next_item(con, campaign, "ann")) is not None:
        seen.append(item.item_id)
        cp.submit(con, campaign, "ann", item.item_id, answer_for(item), cp.shown_order(campaign, "ann", item), 1.0)
    assigned = con.execute("SELECT item_id FROM campaign_assignments WHERE annotator = 'ann'").fetchall()
    assert sorted(seen) == sorted(r[0] for r in assigned) and len(seen) == len(set(seen)) == 4  # 6 · 2 / 3


def test_each_item_goes_to_overlap_different_annotators(con):
    alignment_campaign(con)
    per_item = con.execute("SELECT item_id, count(DISTINCT annotator) FROM campaign_assignments GROUP BY item_id").fetchall()
    assert len(per_item) == 6 and {n for _, n in per_item} == {2}


def test_the_shown_order_is_a_deterministic_shuffle_per_annotator_and_item(con):
    campaign = alignment_campaign(con)
    items = cp.load_items(con, campaign)
    orders = {(a, i.item_id): cp.shown_order(campaign, a, i) for a in NAMES for i in items}
    assert all(sorted(o) == sorted(i.candidate_ids) for (a, iid), o in orders.items() for i in items if i.item_id == iid)
    assert orders == {(a, i.item_id): cp.shown_order(campaign, a, i) for a in NAMES for i in items}
    assert len(set(orders.values())) > len(items)  # not one order for everyone


def test_a_submission_stores_votes_and_the_pool_consensus_and_a_second_changes_nothing(con):
    campaign = alignment_campaign(con)
    item = cp.next_item(con, campaign, "ann")
    values = dict(zip(item.candidate_ids, [0.0, 0.5, 1.0, 1.0]))
    shown = cp.shown_order(campaign, "ann", item)
    assert cp.submit(con, campaign, "ann", item.item_id, values, shown, 4.5) is True
    before = table_state(con)
    assert cp.submit(con, campaign, "ann", item.item_id, answer_for(item, 0.0), shown, 9.0) is False
    assert table_state(con) == before
    votes = store.load_votes(con, "tiny", list(item.candidate_ids))
    assert dict(zip(votes["candidate_id"], votes["value"])) == values
    assert set(votes["annotator"]) == {"ann"} and set(votes["pool"]) == {"crowd"}
    row = con.execute("SELECT answer_json, shown_json, seconds FROM campaign_submissions").fetchone()
    assert row[1] == '["' + '", "'.join(shown) + '"]' and row[2] == 4.5


def test_the_consensus_is_the_mean_of_the_pools_votes(con):
    campaign = alignment_campaign(con)
    rng = np.random.default_rng(1)
    for annotator in NAMES:
        while (item := cp.next_item(con, campaign, annotator)) is not None:
            answer = {c: float(rng.choice([0.0, 0.5, 1.0])) for c in item.candidate_ids}
            cp.submit(con, campaign, annotator, item.item_id, answer, cp.shown_order(campaign, annotator, item), 2.0)
    votes = store.load_votes(con, "tiny").query("pool == 'crowd'")
    expected = votes.groupby("candidate_id")["value"].agg(["mean", "size"])
    ratings = con.execute("SELECT candidate_id, value, n FROM ratings WHERE pool = 'crowd'").df().set_index("candidate_id")
    assert len(ratings) == len(expected) == len(votes) / 2
    np.testing.assert_allclose(ratings.loc[expected.index, "value"], expected["mean"], rtol=0, atol=1e-12)
    assert (ratings.loc[expected.index, "n"] == expected["size"]).all() and set(expected["size"]) == {2}


def test_two_connections_submitting_the_same_item_store_one_vote(tiny_db):
    first = store.connect(tiny_db)
    campaign = alignment_campaign(first)
    item = cp.next_item(first, campaign, "ann")
    shown = cp.shown_order(campaign, "ann", item)
    cursors = [first.cursor() for _ in range(4)]
    start = threading.Barrier(len(cursors))
    results = []

    def post(cursor):
        start.wait()
        results.append(cp.submit(cursor, campaign, "ann", item.item_id, answer_for(item), shown, 1.0))

    threads = [threading.Thread(target=post, args=(c,)) for c in cursors]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False, False, False, True]
    (count,) = first.execute("SELECT count(*) FROM votes WHERE pool = 'crowd'").fetchone()
    assert count == len(item.candidate_ids)
    assert first.execute("SELECT count(*) FROM campaign_submissions").fetchone()[0] == 1
    first.close()


def test_a_skip_moves_on_without_a_vote_and_the_item_can_still_be_rated(con):
    campaign = alignment_campaign(con)
    item = cp.next_item(con, campaign, "bob")
    cp.skip(con, campaign, "bob", item.item_id)
    cp.skip(con, campaign, "bob", item.item_id)
    assert cp.next_item(con, campaign, "bob").item_id != item.item_id
    assert con.execute("SELECT count(*) FROM votes WHERE pool = 'crowd'").fetchone()[0] == 0
    assert cp.submit(con, campaign, "bob", item.item_id, answer_for(item), cp.shown_order(campaign, "bob", item), 1.0)
    assert cp.progress(con, campaign).set_index("annotator").loc["bob", ["rated", "skipped"]].tolist() == [1, 0]


def test_revise_last_replaces_the_latest_answer_and_its_consensus(con):
    campaign = alignment_campaign(con)
    with pytest.raises(cp.CampaignError, match="no answer to revise"):
        cp.revise_last(con, campaign, "cy", {}, 1.0)
    done = []
    for _ in range(2):
        item = cp.next_item(con, campaign, "cy")
        cp.submit(con, campaign, "cy", item.item_id, answer_for(item, 0.5), cp.shown_order(campaign, "cy", item), 1.0)
        done.append(item)
    revised = cp.revise_last(con, campaign, "cy", answer_for(done[-1], 1.0), 7.0)
    assert revised == done[-1]
    votes = store.load_votes(con, "tiny").set_index("candidate_id")["value"]
    assert all(votes[c] == 1.0 for c in done[-1].candidate_ids)
    assert all(votes[c] == 0.5 for c in done[0].candidate_ids)
    ratings = con.execute("SELECT candidate_id, value, n FROM ratings WHERE pool = 'crowd'").df()
    assert len(ratings) == len(votes) and (ratings.set_index("candidate_id")["value"] == votes[ratings["candidate_id"]].to_numpy()).all()
    assert con.execute("SELECT seconds FROM campaign_submissions WHERE item_id = ?", [revised.item_id]).fetchone() == (7.0,)


@pytest.mark.parametrize("answer, field", [
    (lambda item: {**answer_for(item), item.candidate_ids[0]: 0.7}, "answer["),
    (lambda item: {c: 1.0 for c in item.candidate_ids[1:]}, "answer"),
    (lambda item: {**answer_for(item), "stranger": 1.0}, "answer"),
    (lambda item: 1.0, "answer"),
    (lambda item: {**answer_for(item), item.candidate_ids[0]: True}, "answer["),
])
def test_a_bad_answer_is_refused_naming_it_and_changes_nothing(con, answer, field):
    campaign = alignment_campaign(con)
    item = cp.next_item(con, campaign, "ann")
    before = table_state(con)
    with pytest.raises(cp.CampaignError) as err:
        cp.submit(con, campaign, "ann", item.item_id, answer(item), cp.shown_order(campaign, "ann", item), 1.0)
    assert str(err.value).startswith(field) and "\n" not in str(err.value)
    assert table_state(con) == before


def test_items_of_others_strangers_bad_orders_and_seconds_are_refused(con):
    campaign = alignment_campaign(con)
    mine = {r[0] for r in con.execute("SELECT item_id FROM campaign_assignments WHERE annotator = 'ann'").fetchall()}
    other = next(i for i in cp.load_items(con, campaign) if i.item_id not in mine)
    item = cp.next_item(con, campaign, "ann")
    shown = cp.shown_order(campaign, "ann", item)
    before = table_state(con)
    for call, message in [
        (lambda: cp.submit(con, campaign, "ann", other.item_id, answer_for(other), other.candidate_ids, 1.0),
         "not assigned"),
        (lambda: cp.submit(con, campaign, "zoe", item.item_id, answer_for(item), shown, 1.0), "not an annotator"),
        (lambda: cp.submit(con, campaign, " \u200b", item.item_id, answer_for(item), shown, 1.0), "blank"),
        (lambda: cp.submit(con, campaign, "ann", item.item_id, answer_for(item), shown[:-1], 1.0), "shown order"),
        (lambda: cp.submit(con, campaign, "ann", item.item_id, answer_for(item), shown, float("nan")), "seconds"),
        (lambda: cp.submit(con, campaign, "ann", "nope", {}, (), 1.0), "no item"),
    ]:
        with pytest.raises(cp.CampaignError, match=message):
            call()
    assert table_state(con) == before


def test_an_open_campaign_offers_an_item_until_overlap_annotators_rated_it(con):
    campaign = cp.create_campaign(con, "tiny", "open", "alignment", "crowd", "uniform", 2, 2, new_pool=True)
    rated = {}
    for annotator in ("u1", "u2", "u3"):
        while (item := cp.next_item(con, campaign, annotator)) is not None:
            cp.submit(con, campaign, annotator, item.item_id, answer_for(item),
                      cp.shown_order(campaign, annotator, item), 1.0)
            rated.setdefault(annotator, []).append(item.item_id)
    assert len(rated["u1"]) == len(rated["u2"]) == 2 and "u3" not in rated
    progress = cp.progress(con, campaign)
    assert progress.to_dict("records") == [
        {"annotator": "u1", "pool": "crowd", "rated": 2, "skipped": 0, "target": 2},
        {"annotator": "u2", "pool": "crowd", "rated": 2, "skipped": 0, "target": 2}]


def test_an_annotator_with_a_vote_in_the_pool_is_not_offered_that_item(con):
    campaign = cp.create_campaign(con, "tiny", "again", "alignment", "all", "uniform", 8, 1, annotators=("ann",))
    item = cp.next_item(con, campaign, "ann")
    store.insert_frame(con, "votes", pd.DataFrame({"dataset_id": "tiny", "candidate_id": [item.candidate_ids[0]],
                                                   "outcome": "alignment", "pool": "all", "annotator": "ann",
                                                   "value": 1.0}))
    assert cp.next_item(con, campaign, "ann").item_id != item.item_id
    with pytest.raises(cp.CampaignError, match="already has a vote"):
        cp.submit(con, campaign, "ann", item.item_id, answer_for(item), cp.shown_order(campaign, "ann", item), 1.0)


def test_each_act_changes_the_dataset_fingerprint_the_audit_cache_is_keyed_by(con):
    campaign = alignment_campaign(con)
    before = dataset_fingerprint(con, "tiny")
    item = cp.next_item(con, campaign, "ann")
    cp.submit(con, campaign, "ann", item.item_id, answer_for(item), cp.shown_order(campaign, "ann", item), 1.0)
    rated = dataset_fingerprint(con, "tiny")
    cp.revise_last(con, campaign, "ann", answer_for(item, 1.0), 1.0)
    assert len({before, rated, dataset_fingerprint(con, "tiny")}) == 3


def test_a_rubric_campaign_rates_one_image_per_item_on_1_to_5(con):
    campaign = cp.create_campaign(con, "tiny", "r", "rubric", "crowd", "uniform", 5, 1, annotators=("ann",),
                                  new_pool=True)
    item = cp.next_item(con, campaign, "ann")
    assert len(item.candidate_ids) == 1 and item.item_id == item.candidate_ids[0]
    with pytest.raises(cp.CampaignError, match="not a point of the scale"):
        cp.submit(con, campaign, "ann", item.item_id, 3.5, item.candidate_ids, 1.0)
    assert cp.submit(con, campaign, "ann", item.item_id, 4, item.candidate_ids, 1.0)
    assert con.execute("SELECT outcome, value, n FROM ratings WHERE pool = 'crowd'").fetchall() == [("rubric", 4.0, 1)]
    assert [p.key for p in campaign.scale] == ["1", "2", "3", "4", "5"]


def test_label_votes_make_the_gold_label_by_majority_and_a_tie_abstains(labels_con):
    con = labels_con
    campaign = cp.create_campaign(con, "tiny", "lab", "labels", "crowd", "uniform", 3, 3,
                                  annotators=("ann", "bob", "cy"))
    assert campaign.abstain_label == "unspecified" and "gender" in campaign.taxonomy
    item = cp.load_items(con, campaign)[0]
    base = {a: labels[0] for a, labels in campaign.taxonomy.items()}
    answers = {"ann": {**base, "gender": "male", "age": "child"}, "bob": {**base, "gender": "male", "age": "elderly"},
               "cy": {**base, "gender": "female"}}
    for annotator in ("ann", "bob"):
        assert cp.submit(con, campaign, annotator, item.item_id, answers[annotator], item.candidate_ids, 1.0)
    gold = dict(con.execute("SELECT attribute, label FROM gold_labels WHERE candidate_id = ?",
                            [item.item_id]).fetchall())
    assert gold["gender"] == "male" and gold["age"] == "unspecified"  # one vote each: a tie
    assert cp.submit(con, campaign, "cy", item.item_id, answers["cy"], item.candidate_ids, 1.0)
    gold = dict(con.execute("SELECT attribute, label FROM gold_labels WHERE candidate_id = ?",
                            [item.item_id]).fetchall())
    assert gold["gender"] == "male" and gold["age"] == base["age"] == "child"  # child twice, elderly once
    with pytest.raises(cp.CampaignError, match="not a label of gender"):
        cp.submit(con, campaign, "ann", cp.load_items(con, campaign)[1].item_id, {**base, "gender": "Male"},
                  (cp.load_items(con, campaign)[1].item_id,), 1.0)


def test_annotators_submitting_at_once_store_every_vote_once_and_one_consensus(tiny_db):
    con = store.connect(tiny_db)
    campaign = cp.create_campaign(con, "tiny", "rush", "alignment", "crowd", "uniform", 8, 6, new_pool=True)
    items = cp.load_items(con, campaign)
    names = [f"u{i}" for i in range(6)]
    start = threading.Barrier(2 * len(names))
    results, errors = [], []

    def annotate(name, cursor):  # two sessions (cursors) of every annotator post every item at the same time
        for item in items:
            start.wait()
            try:
                results.append(cp.submit(cursor, campaign, name, item.item_id, answer_for(item, 1.0),
                                          item.candidate_ids, 1.0))
            except Exception as err:  # noqa: BLE001 - collected to fail the test with the reason
                errors.append(err)

    threads = [threading.Thread(target=annotate, args=(n, con.cursor())) for n in names for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and results.count(True) == len(names) * len(items) == results.count(False)
    candidates = sum(len(i.candidate_ids) for i in items)
    assert con.execute("SELECT count(*) FROM votes WHERE pool = 'crowd'").fetchone() == (candidates * len(names),)
    assert con.execute("SELECT count(*), min(n), max(n) FROM ratings WHERE pool = 'crowd'").fetchone() == (
        candidates, len(names), len(names))
    con.close()


def test_last_rated_gives_the_latest_item_and_its_shown_order_and_revise_checks_the_item(con):
    campaign = alignment_campaign(con)
    assert cp.last_rated(con, campaign, "ann") is None
    first = cp.next_item(con, campaign, "ann")
    cp.submit(con, campaign, "ann", first.item_id, answer_for(first), cp.shown_order(campaign, "ann", first), 1.0)
    second = cp.next_item(con, campaign, "ann")
    shown = tuple(reversed(second.candidate_ids))
    cp.submit(con, campaign, "ann", second.item_id, answer_for(second), shown, 1.0)
    cp.skip(con, campaign, "ann", cp.next_item(con, campaign, "ann").item_id)
    assert cp.last_rated(con, campaign, "ann") == (second, shown)
    before = table_state(con)
    with pytest.raises(cp.CampaignError, match="only the last answer") as err:
        cp.revise_last(con, campaign, "ann", answer_for(first, 1.0), 1.0, item_id=first.item_id)
    assert err.value.field == "item_id" and table_state(con) == before
    assert cp.revise_last(con, campaign, "ann", answer_for(second, 0.0), 1.0, item_id=second.item_id) == second


def test_progress_of_an_open_campaign_before_anyone_acted_is_empty(con):
    campaign = cp.create_campaign(con, "tiny", "open", "alignment", "crowd", "uniform", 2, 2, new_pool=True)
    progress = cp.progress(con, campaign)
    assert progress.empty and list(progress.columns) == ["annotator", "pool", "rated", "skipped", "target"]
