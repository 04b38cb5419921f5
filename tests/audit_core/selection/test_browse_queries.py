"""audit_core.selection.browse's DuckDB queries (`pool_table`, `count_pools`, `pool_page`, `pool_place`): the
same pools, in the same order, as the pandas filter `filter_pools` and `neighbours`, for every kind of filter,
sort and policy, on the app's test database."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from audit_core.selection import browse
from audit_core.selection.outcomes import prompt_outcomes
from audit_core.selection.policies import policy_picks
from tests.support.app import build_app_db, load_tiny


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browse_queries")
    return load_tiny(str(build_app_db(tmp / "q.duckdb", tmp / "images")))


FILTERS = [
    browse.PoolFilter(),
    browse.PoolFilter(countries=("Japan",)),
    browse.PoolFilter(countries=("Japan", "Brazil"), categories=("greetings", "family", "etiquette")),
    browse.PoolFilter(generators=("imagegen3",)),
    browse.PoolFilter(text="  <SCRIPT>alert(1) "),
    browse.PoolFilter(text="("),
    browse.PoolFilter(text="%_"),  # no LIKE wildcards: literal
    browse.PoolFilter(outcomes=("flip",)),
    browse.PoolFilter(outcomes=("below_mean", "judges_disagree")),
    browse.PoolFilter(outcomes=("parse_fail",)),
    browse.PoolFilter(outcomes=("best",), sort="gain", descending=False),
]
SORTS = [("regret", True), ("gain", False), ("rating_range", True), ("prompt_id", False)]


def frames(data, policy: str):
    """(the pandas frame `filter_pools` reads, the Arrow table the queries read) for `policy` ("" order 0)."""
    outcomes = prompt_outcomes(data, "alpha")
    pick = policy_picks(data)[policy or "alpha"]
    table = browse.with_policy(browse.pool_table(data, outcomes), data, pick)
    frame = table.to_pandas().drop(columns="generators")
    for flag in ("below_mean", "best", "flip", "unanimous", "judges_agree", "judges_disagree"):
        frame[flag] = frame[flag].astype("boolean")
    return frame, table


@pytest.mark.parametrize("policy", ["", "alpha agree>=3/3", "alpha+beta agree rejected"])
def test_counts_pages_and_places_are_the_pandas_filters(data, policy):
    frame, table = frames(data, policy)
    assert table.num_rows == data.n_prompts and frame["row"].tolist() == list(range(data.n_prompts))
    for base, (sort, descending) in itertools.product(FILTERS, SORTS):
        flt = browse.PoolFilter(**{**base.__dict__, "sort": sort, "descending": descending, "policy": policy})
        want = browse.filter_pools(data, frame, flt)
        assert browse.count_pools(table, flt) == len(want), flt
        page = browse.pool_page(table, flt, 0, 100)
        assert list(page.index) == list(want.index), flt
        assert list(page["prompt_id"]) == list(want["prompt_id"])
        np.testing.assert_array_equal(page["regret"].to_numpy(dtype=float), want["regret"].to_numpy(dtype=float))
        assert list(browse.pool_page(table, flt, 2, 5).index) == list(want.index[2:5])
        ids = list(want["prompt_id"])
        for prompt_id in [*ids[:2], *ids[-2:], "nope"]:
            place = browse.pool_place(table, flt, prompt_id)
            assert (place.previous, place.following) == browse.neighbours(ids, prompt_id)
            assert place.place == (ids.index(prompt_id) + 1 if prompt_id in ids else None)
            assert place.count == len(ids) and place.first == (ids[0] if ids else None)


def test_a_policy_keeps_the_pools_it_acts_on_and_its_picks_outcomes(data):
    pick = policy_picks(data)["alpha agree>=3/3"]
    frame, table = frames(data, "alpha agree>=3/3")
    acting = browse.PoolFilter(policy="alpha agree>=3/3", sort="prompt_id", descending=False)
    page = browse.pool_page(table, acting, 0, 100)
    assert list(page.index) == list(np.nonzero(pick >= 0)[0]) and 0 < len(page) < data.n_prompts
    h = data.utility
    rows = page.index.to_numpy()
    np.testing.assert_allclose(page["regret"], np.nanmax(h[rows], axis=1) - h[rows, pick[rows]], atol=1e-12)
    np.testing.assert_allclose(page["gain"], h[rows, pick[rows]] - np.nanmean(h[rows], axis=1), atol=1e-12)
    assert list(page["pick"]) == list(pick[rows])
    every = browse.PoolFilter(sort="prompt_id", descending=False)  # no policy named: every pool
    assert browse.count_pools(table, every) == data.n_prompts


def test_unknown_outcome_or_sort_key_is_refused_before_any_query(data):
    _, table = frames(data, "")
    with pytest.raises(KeyError, match="unknown outcome filter"):
        browse.count_pools(table, browse.PoolFilter(outcomes=("1; DROP TABLE pools",)))
    with pytest.raises(KeyError, match="unknown sort key"):
        browse.pool_page(table, browse.PoolFilter(sort="regret; --"), 0, 10)


def test_every_policy_has_a_note(data):
    picks = browse.every_policy(data, {})
    assert set(picks.picks) == set(policy_picks(data))
    for name, kind in picks.kinds.items():
        assert browse.policy_note(name, kind) != kind, name
