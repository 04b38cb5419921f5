"""The organiser's measures: Krippendorff's alpha equal to the `krippendorff` package's on the stored votes,
its bootstrap interval, each annotator's agreement with the rest, median seconds, progress."""

from __future__ import annotations

import krippendorff
import numpy as np
import pandas as pd
import pytest

from audit_core import campaigns as cp
from audit_core.campaigns.measures import alpha_from_sums, alpha_sums
from audit_core.stats.resampling import Resampling

NAMES = ("ann", "bob", "cy", "dee")


def stable(text: str) -> int:
    """A number from a text, the same in every process (Python's str hash is salted per process)."""
    return sum(map(ord, text))


def rate_everything(con, campaign, answer, seconds=lambda a, k: 1.0):
    """Every annotator answers every item offered, answer(annotator, item); returns the votes as stored."""
    for annotator in campaign.annotators:
        k = 0
        while (item := cp.next_item(con, campaign, annotator)) is not None:
            cp.submit(con, campaign, annotator, item.item_id, answer(annotator, item),
                      cp.shown_order(campaign, annotator, item), seconds(annotator, k))
            k += 1
    return cp.campaign_votes(con, campaign)


def reliability_matrix(votes, coded=None):
    """(annotators × units) matrix of the votes, NaN where missing, as the krippendorff package takes it."""
    wide = votes.pivot(index="annotator", columns="unit", values="value")
    return wide.map(coded).to_numpy(dtype=float) if coded else wide.to_numpy(dtype=float)


@pytest.fixture
def alignment(con):
    campaign = cp.create_campaign(con, "tiny", "rel", "alignment", "crowd", "uniform", 8, 3, annotators=NAMES,
                                  new_pool=True)
    rng = np.random.default_rng(7)

    def answer(annotator, item):  # agreement with noise: each candidate has a true value, annotators stray
        return {c: float(np.clip(0.5 * (stable(c) % 3 + rng.choice([-1, 0, 0, 1])), 0, 1)) for c in item.candidate_ids}

    votes = rate_everything(con, campaign, answer, seconds=lambda a, k: 2.0 + k + NAMES.index(a))
    return campaign, votes


def test_alpha_equals_the_krippendorff_package_on_the_stored_votes(con, alignment):
    campaign, votes = alignment
    table = cp.reliability(con, campaign, Resampling(500, 3))
    expected = krippendorff.alpha(reliability_data=reliability_matrix(votes), level_of_measurement="interval")
    assert table.loc[0, "alpha"] == pytest.approx(expected, abs=1e-12)
    assert table.loc[0, "items_with_overlap"] == 8 and table.loc[0, "pool"] == "crowd"
    assert table.loc[0, "alpha_lo"] <= expected <= table.loc[0, "alpha_hi"]
    assert table.equals(cp.reliability(con, campaign, Resampling(500, 3)))
    assert np.isnan(cp.reliability(con, campaign, Resampling(0, 3)).loc[0, "alpha_lo"])


def test_the_interval_resamples_items_as_a_direct_bootstrap_does(con, alignment):
    campaign, votes = alignment
    sums, items = alpha_sums(votes, "interval")
    b = 200
    rng = np.random.default_rng(3)  # the study's draws: default_rng(seed).integers(0, n, size=(B, n))
    draws = rng.integers(0, len(items), size=(b, len(items)))
    direct = []
    for row in draws:  # a resample of items, units renamed per draw so repeated items count twice
        parts = [votes[votes["item_id"] == items[i]].assign(unit=lambda f, k=k: f["unit"] + f"#{k}")
                 for k, i in enumerate(row)]
        resample = pd.concat(parts)
        direct.append(krippendorff.alpha(reliability_data=reliability_matrix(resample), level_of_measurement="interval"))
    table = cp.reliability(con, campaign, Resampling(b, 3))
    lo, hi = np.percentile(direct, [2.5, 97.5])
    assert table.loc[0, "alpha_lo"] == pytest.approx(lo, abs=1e-9)
    assert table.loc[0, "alpha_hi"] == pytest.approx(hi, abs=1e-9)


def test_nominal_alpha_of_labels_equals_the_krippendorff_package(labels_con):
    con = labels_con
    campaign = cp.create_campaign(con, "tiny", "lab", "labels", "crowd", "uniform", 10, 3, annotators=NAMES[:3])
    rng = np.random.default_rng(5)

    def answer(annotator, item):
        return {a: (labels[stable(item.item_id + a) % len(labels)] if rng.random() < 0.7 else
                    str(rng.choice([*labels, campaign.abstain_label]))) for a, labels in campaign.taxonomy.items()}

    votes = rate_everything(con, campaign, answer)
    codes = {label: k for k, label in enumerate(sorted(votes["value"].unique()))}
    table = cp.reliability(con, campaign, Resampling(200, 0))
    expected = krippendorff.alpha(reliability_data=reliability_matrix(votes, codes.get),
                                  level_of_measurement="nominal")
    assert table.loc[0, "alpha"] == pytest.approx(expected, abs=1e-12)
    assert table.loc[0, "alpha_lo"] <= expected <= table.loc[0, "alpha_hi"]


def test_alpha_is_undefined_without_pairable_votes_or_variation():
    assert np.isnan(alpha_from_sums(np.array([1.0, 0.5, 0.25, 0.0]), "interval")[0])
    assert np.isnan(alpha_from_sums(np.array([4.0, 2.0, 1.0, 0.0]), "interval")[0])  # all values 0.5
    assert np.isnan(alpha_from_sums(np.array([4.0, 0.0, 4.0]), "nominal")[0])  # one label only


def test_agreement_with_the_rest_and_median_seconds(con, alignment):
    campaign, votes = alignment
    table = cp.annotator_agreement(con, campaign).set_index("annotator")
    for annotator in NAMES:
        own = votes[votes["annotator"] == annotator].set_index("unit")["value"]
        rest = votes[(votes["annotator"] != annotator) & votes["unit"].isin(own.index)].groupby("unit")["value"].mean()
        assert table.loc[annotator, "n"] == len(rest) > 0
        expected = 1 - np.mean([abs(own[u] - rest[u]) for u in rest.index])  # alignment's scale is [0, 1]
        assert table.loc[annotator, "agreement_with_rest"] == pytest.approx(expected, abs=1e-12)
    seconds = cp.median_seconds(con, campaign).set_index("annotator")["median_seconds"]
    progress = cp.progress(con, campaign).set_index("annotator")
    for annotator in NAMES:  # k-th item of annotator i took 2 + k + i seconds
        n = progress.loc[annotator, "rated"]
        assert n == progress.loc[annotator, "target"] == 6  # 8 items · 3 / 4
        assert seconds[annotator] == pytest.approx(np.median(2.0 + np.arange(n) + NAMES.index(annotator)))
