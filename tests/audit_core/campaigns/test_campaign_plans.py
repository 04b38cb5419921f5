"""Sampling plans: the documented proportions with the recorded seed, the same draw for the same seed,
and both sides of a gate; checked on the published main split (10 countries, two judges)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit_core import campaigns as cp
from audit_core import store
from audit_core.campaigns.plans import draw, proportional_quotas
from audit_core.selection.data import load_selection_data


@pytest.fixture(scope="module")
def main(main_db):
    con = store.connect(main_db, read_only=True)
    yield con
    con.close()


@given(st.dictionaries(st.text(min_size=1, max_size=3), st.integers(1, 50), min_size=1, max_size=8), st.data())
def test_largest_remainder_quotas_sum_to_size_and_stay_within_one_of_the_share(sizes, data):
    size = data.draw(st.integers(1, sum(sizes.values())))
    quotas = proportional_quotas(sizes, size)
    total = sum(sizes.values())
    assert sum(quotas.values()) == size
    for stratum, n in sizes.items():
        share = size * n / total
        assert math.floor(share) <= quotas[stratum] <= math.ceil(share) and quotas[stratum] <= n


def test_stratified_by_country_draws_the_proportional_quotas_with_the_recorded_seed(main):
    prompts = store.load_prompts(main, "main")
    drawn, record = draw(main, "main", "alignment", "stratified:country", 47, 11)
    counts = prompts.set_index("prompt_id").loc[[d.item_id for d in drawn], "country"].value_counts().to_dict()
    population = prompts["country"].value_counts()
    # independent: 47 of 300 over 10 countries of 30 prompts is 4.7 each: 4 everywhere, and the 7 left go to the
    # largest remainders, all equal (0.7), so by country name
    assert set(population) == {30}
    countries = sorted(population.index)
    assert counts == {c: 5 if i < 7 else 4 for i, c in enumerate(countries)}
    assert record["seed"] == 11 and record["strata"][countries[0]] == {"population": 30, "quota": 5}
    again, _ = draw(main, "main", "alignment", "stratified:country", 47, 11)
    other, _ = draw(main, "main", "alignment", "stratified:country", 47, 12)
    assert again == drawn and {d.item_id for d in other} != {d.item_id for d in drawn}
    assert all(d.stratum == prompts.set_index("prompt_id").loc[d.item_id, "country"] for d in drawn)


def test_a_gate_plan_draws_both_sides_in_the_given_proportion(main):
    data = load_selection_data(main, "main")
    picks = data.picks["qwen"]
    kept_prompts = set(data.prompts["prompt_id"][(picks >= 0).all(axis=1) & (picks == picks[:, :1]).all(axis=1)])
    drawn, record = draw(main, "main", "alignment", "gate:qwen agree>=3/3:kept=0.3", 40, 0)
    sides = {d.item_id: d.stratum for d in drawn}
    assert sum(s == "kept" for s in sides.values()) == 12 and sum(s == "rejected" for s in sides.values()) == 28
    assert all((pid in kept_prompts) == (side == "kept") for pid, side in sides.items())
    assert record["strata"]["kept"]["population"] == len(kept_prompts)
    assert draw(main, "main", "alignment", "gate:qwen agree>=3/3:kept=0.3", 40, 0)[0] == drawn
    single, _ = draw(main, "main", "rubric", "gate:qwen agree>=3/3", 9, 0)  # kept ⌊4.5 + ½⌋ = 5
    assert [d.stratum for d in single].count("kept") == 5
    for d in single:  # the image the side returns: the gate's majority pick or qwen's order-0 pick
        row = int(np.nonzero(data.prompts["prompt_id"].to_numpy() == d.prompt_id)[0][0])
        assert d.candidate_ids == (data.candidate_ids[row, picks[row, 0]],)


def test_picks_differ_draws_prompts_where_the_two_judges_order0_picks_differ(main):
    data = load_selection_data(main, "main")
    a, b = data.picks["qwen"][:, 0], data.picks["smol"][:, 0]
    differ = set(data.prompts["prompt_id"][(a >= 0) & (b >= 0) & (a != b)])
    drawn, record = draw(main, "main", "alignment", "picks-differ:qwen,smol", 20, 4)
    assert {d.item_id for d in drawn} <= differ and record["strata"]["differ"]["population"] == len(differ)
    images, _ = draw(main, "main", "labels", "picks-differ:qwen,smol", 20, 4)
    assert all(d.prompt_id in differ for d in images) and len({d.item_id for d in images}) == 20


@pytest.mark.parametrize("plan, size, field, message", [
    ("stratified:planet", 5, "--sample", "no attribute 'planet'"),
    ("gate:qwen agree>=9/9", 5, "--sample", "no gate"),
    ("gate:qwen agree>=3/3:kept=1", 5, "--sample", "strictly between 0 and 1"),
    ("gate:qwen agree>=3/3:kept=abc", 5, "--sample", "strictly between 0 and 1"),
    ("gate:qwen agree>=3/3", 1, "--size", "rejected side without items"),
    ("picks-differ:qwen,gpt", 5, "--sample", "two different judges"),
    ("picks-differ:qwen,qwen", 5, "--sample", "two different judges"),
    ("random", 5, "--sample", "unknown plan"),
    ("uniform", 301, "--size", "only 300"),
])
def test_a_plan_that_cannot_be_drawn_is_refused_naming_the_flag(main, plan, size, field, message):
    with pytest.raises(cp.CampaignError, match=message) as err:
        draw(main, "main", "alignment", plan, size, 0)
    assert err.value.field == field
