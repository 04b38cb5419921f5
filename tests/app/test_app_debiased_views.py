"""The debiased selectors in the app (issue 24, item 4): the pool detail lists every policy's pick, the
debiased ones included, as `audit_core` computes them, and the explorer's `policy` filter keeps the pools a
policy acts on and judges its picks; on the built-in demo, whose judges rank every image in 3 orders and
record label probabilities."""

from __future__ import annotations

import numpy as np
import pytest

from audit_core.selection.debiased import METHODS
from audit_core.selection.debiased.specs import debiased_specs
from runners import demo
from tests.support.app import UNEXPECTED, open_app
from tests.support.debiased import stored_calls

pytestmark = pytest.mark.usefixtures("data_folder")  # the app may open the test databases (tests/conftest.py)

JUDGE = "slot-a-judge"


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> str:
    db = tmp_path_factory.mktemp("debiased_views") / "demo.duckdb"
    demo.build_demo(db, n_prompts=24, progress=False)
    return str(db)


@pytest.fixture(scope="module")
def expected(demo_db):
    """(data, debiased policy name -> its (P,) picks), from audit_core alone."""
    data, ordered = stored_calls(demo_db, "demo")
    picks = {spec.name: spec.pick for judge in data.judges for spec in debiased_specs(ordered[judge])}
    return data, picks


def page(db: str, name: str, **params: str) -> object:
    at = open_app({"db": db, "dataset": "demo", "page": name, **params})
    assert not at.exception and not [e.value for e in at.error if UNEXPECTED in e.value]
    return at


def test_the_demo_has_every_debiased_policy_of_every_judge(expected):
    data, picks = expected
    assert set(picks) == {f"{judge} {method}" for judge in data.judges for method in METHODS}


@pytest.mark.parametrize("prompt_row", [0, 7])
def test_the_detail_page_lists_every_debiased_pick_as_audit_core_computes_it(demo_db, expected, prompt_row):
    data, picks = expected
    prompt_id = data.prompts["prompt_id"].iat[prompt_row]
    at = page(demo_db, "detail", prompt=prompt_id)
    table = next(d.value for d in at.dataframe if "policy" in d.value.columns and "what it is" in d.value.columns)
    shown = table.set_index("policy")
    for name, pick in picks.items():
        index = int(pick[prompt_row])
        want = data.candidate_ids[prompt_row, index] if index >= 0 else "abstains"
        assert shown.loc[name, "candidate id"] == want, name
        assert shown.loc[name, "what it is"].startswith("debiased:"), name
    assert shown.loc[JUDGE, "what it is"] == "the order-0 pick"


def acted_below_mean(data, pick: np.ndarray) -> np.ndarray:
    """Rows where the policy acts and its pick's mean alignment is below the pool mean (numpy, by hand)."""
    h = data.utility
    rows = np.nonzero(pick >= 0)[0]
    chosen = h[rows, pick[rows]]
    pool_mean = np.nanmean(h[rows], axis=1)
    return rows[chosen < pool_mean - 1e-9]


@pytest.mark.parametrize("method", ["borda", "calibrated", "plackett-luce", "prior-corrected"])
def test_an_explorer_link_naming_a_debiased_policy_filters_by_its_picks(demo_db, expected, method):
    data, picks = expected
    name = f"{JUDGE} {method}"
    pick = picks[name]
    at = page(demo_db, "explorer", judge=JUDGE, policy=name, per="50")
    assert at.selectbox(key="policy").value == name and not [w for w in at.warning if "does not exist" in w.value]
    counted = next(m.value for m in at.markdown if "pools match" in m.value)
    assert counted.startswith(f"**{int((pick >= 0).sum())}** of {data.n_prompts} pools match")
    listed = [link.value.removeprefix("Open pool ") for link in at.get("page_link")]
    assert sorted(listed) == sorted(data.prompts["prompt_id"].to_numpy()[pick >= 0])

    at = page(demo_db, "explorer", judge=JUDGE, policy=name, outcome="below_mean", sort="prompt_id", desc="0", per="50")
    listed = sorted(link.value.removeprefix("Open pool ") for link in at.get("page_link"))  # the grid: 2 columns
    assert listed == sorted(data.prompts["prompt_id"].to_numpy()[acted_below_mean(data, pick)])
    opened = {link.value: link for link in at.get("page_link")}
    if listed:  # a pool's link keeps the policy, so the detail page walks the same filter
        assert f"policy={name.replace(' ', '+')}" in opened[f"Open pool {listed[0]}"].proto.query_string


def test_the_detail_page_walks_the_policys_filter(demo_db, expected):
    data, picks = expected
    name = f"{JUDGE} borda"
    rows = acted_below_mean(data, picks[name])
    if len(rows) < 3:
        pytest.skip("the demo's borda picks are below the mean on fewer than 3 pools")
    ids = sorted(data.prompts["prompt_id"].to_numpy()[rows])
    at = page(demo_db, "detail", judge=JUDGE, policy=name, outcome="below_mean", sort="prompt_id", desc="0",
              prompt=ids[1])
    links = {link.value: link.proto.query_string for link in at.get("page_link")}
    assert f"prompt={ids[0]}" in links["Previous pool"] and f"prompt={ids[2]}" in links["Next pool"]
    assert any(c.value == f"Pool 2 of the {len(ids)} in the explorer's current filter." for c in at.caption)


def test_a_policy_of_another_judge_is_refused_and_the_order0_pick_shown(demo_db):
    at = page(demo_db, "explorer", judge=JUDGE, policy="strong-judge borda")
    assert at.selectbox(key="policy").value == JUDGE
    assert any("`policy`" in w.value and "does not exist" in w.value for w in at.warning)
