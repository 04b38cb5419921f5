"""The Judge comparison page's gain-against-cost chart on the demo, driven by Streamlit's AppTest: one
chart per cost (calls, and seconds since the demo records them), each naming every judge's cheapest best
policy as `audit_core.selection.costs.cost_front` finds it on the audit's policies."""

from __future__ import annotations

import json

import pytest

from audit_core import Resampling, audit_selection, load_selection_data, store
from audit_core.selection.costs import cost_front
from runners import demo
from tests.support.app import UNEXPECTED, open_app

pytestmark = pytest.mark.usefixtures("data_folder")  # the app may open the test databases (tests/conftest.py)

TITLE = "Gain against cost, judge by judge"


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    assert demo.main(["--db", str(path), "--prompts", "40", "--rating-prompts", "4", "--attribute-prompts", "2",
                      "--quiet"]) == 0
    return str(path)


def test_the_page_draws_gain_against_calls_and_seconds_with_each_judges_cheapest_best(db):
    at = open_app({"db": db, "page": "judges", "dataset": "demo", "resamples": "200"})
    assert not at.exception and not [e.value for e in at.error if UNEXPECTED in e.value]
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    charts = [s for s in specs if s["layout"]["title"]["text"] == TITLE]
    assert [c["layout"]["xaxis"]["title"]["text"] for c in charts] == ["judge calls per prompt",
                                                                       "judge seconds per prompt"]
    con = store.connect(db, read_only=True)
    try:
        data = load_selection_data(con, "demo")
        calls = store.load_calls(con, "demo", ok_outputs=False)
    finally:
        con.close()
    policies = audit_selection(data, Resampling(0), calls=calls).policies
    for chart, cost in zip(charts, ("calls_per_prompt", "seconds_per_prompt")):
        front = cost_front(policies, cost)
        expected = sorted(f"best: {p}" for p in front.loc[front["best"], "policy"])
        assert sorted(a["text"] for a in chart["layout"]["annotations"] if a["text"].startswith("best")) == expected
        assert len(expected) == len(data.judges)
