"""The Gate lab driven by Streamlit's AppTest: the composer in the URL, its cards, marked charts."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from audit_core import Resampling
from audit_core.selection import gate_compose as gc
from audit_core.selection.audit import audit_selection
from findings import figures, numbers
from tests.support.app import build_app_db, cards, load_tiny, open_app

pytestmark = pytest.mark.usefixtures("data_folder")  # the app may open the test databases (tests/conftest.py)

GATE = "alpha: orders>=2/3 and scorer(scorer) or judge(beta)"


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("gates")
    return str(build_app_db(tmp / "gates.duckdb", tmp / "images"))


@pytest.fixture(scope="module")
def data(db):
    return load_tiny(db)


def open_gates(db: str, **params: str) -> AppTest:
    return open_app({"db": db, "page": "gates", "resamples": "1000", **params})


def charts(at: AppTest) -> dict[str, dict]:
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return {spec["layout"]["title"]["text"]: spec for spec in specs}


def trace(spec: dict, name: str) -> dict:
    """The trace called `name`, its x and y as lists (Plotly sends numeric arrays as base64 `bdata`)."""
    (found,) = [t for t in spec["data"] if t.get("name") == name]
    return {**found, **{axis: _values(found[axis]) for axis in ("x", "y") if axis in found}}


def _values(column: object) -> list:
    if isinstance(column, dict) and "bdata" in column:
        return np.frombuffer(base64.b64decode(column["bdata"]), dtype=column["dtype"]).tolist()
    return list(column)


def test_a_link_with_a_composed_gate_shows_its_audit_and_marks_it_in_every_chart(db, data):
    at = open_gates(db, compose=GATE, gate="beta agree>=3/3")
    assert at.text_input(key="compose").value == GATE
    composed = gc.evaluate(gc.parse_gate(GATE), data, Resampling(1000, 0))
    kept, rejected = (composed.gates.set_index("side").loc[s] for s in ("kept", "rejected"))
    sides = cards(at)
    assert len(sides) == 4  # the selected standard gate's two sides, then the composed gate's
    assert sides[2] == (f"Kept (the gate acts): {kept['n']} prompts ({numbers.percent(kept['coverage'])})",
                        f"gain {numbers.estimate(kept['gain'], kept['gain_lo'], kept['gain_hi'], signed=True)}")
    assert sides[3][0].startswith(f"Rejected (the gate abstains): {rejected['n']} prompts")
    difference = numbers.estimate(kept["gain_vs_rejected"], kept["gain_vs_rejected_lo"], kept["gain_vs_rejected_hi"],
                                  signed=True)
    assert any(m.value.startswith(f"**Kept − rejected:** gain {difference}") for m in at.markdown)

    shown = charts(at)
    bars = trace(shown["What each gate keeps and rejects"], "gate's pick, kept prompts")
    label = f"<b>{figures.plain(f'composed: {GATE}')} ({numbers.percent(kept['coverage'])} of prompts)</b>"
    assert label in bars["y"] and bars["x"][bars["y"].index(label)] == pytest.approx(kept["gain"])
    assert sum(y.startswith("<b>beta agree&gt;=3/3 (") for y in bars["y"]) == 1  # the selected gate, bold
    assert all(y.removesuffix("</b>").endswith(" of prompts)") for y in bars["y"])  # coverage beside every gate
    by_country = trace(shown["Coverage by country"], f"composed: {figures.plain(GATE)}")
    assert by_country["y"] == pytest.approx(list(composed.countries["coverage"]))
    risk = shown["Risk–coverage"]
    point = trace(risk, "composed gate")
    assert (point["x"][0], point["y"][0]) == pytest.approx((kept["coverage"], kept["regret"]))
    selected = audit_selection(data, Resampling(1000, 0)).risk_coverage.set_index("policy").loc["beta agree>=3/3"]
    ring = trace(risk, "selected gate")
    assert (ring["x"][0], ring["y"][0]) == pytest.approx((selected["coverage"], selected["regret"]))


def test_the_composer_builds_a_gate_into_the_url_and_the_link_restores_it(db):
    at = open_gates(db)
    assert not at.text_input(key="compose").value and "compose" not in at.query_params
    at.selectbox(key="cg_judge").set_value("beta").run()
    at.selectbox(key="cg_kind").set_value("orders").run()
    at.number_input(key="cg_k_beta").set_value(2).run()
    at.button(key="cg_add").click().run()
    assert at.query_params["compose"] == "beta: orders>=2/3"
    at.selectbox(key="cg_joint").set_value("or").run()
    at.selectbox(key="cg_kind").set_value("scorer").run()
    at.button(key="cg_add").click().run()
    at.selectbox(key="cg_joint").set_value("and").run()
    at.selectbox(key="cg_kind").set_value("entropy").run()
    at.selectbox(key="cg_name_entropy_beta").set_value("alpha").run()
    at.number_input(key="cg_x_entropy").set_value(0.25).run()
    at.button(key="cg_add").click().run()
    built = "beta: orders>=2/3 or scorer(scorer) and entropy(alpha)<=0.25"
    assert at.query_params["compose"] == built and at.text_input(key="compose").value == built
    assert len(cards(at)) == 4

    again = open_gates(db, compose=at.query_params["compose"])
    assert again.text_input(key="compose").value == built
    assert again.selectbox(key="cg_judge").value == "beta"
    assert [label for label, _ in cards(again)] == [label for label, _ in cards(at)]

    at.selectbox(key="cg_judge").set_value("alpha").run()  # the gate moves to the other judge, its own orders too
    assert at.query_params["compose"] == "alpha: orders>=2/3 or scorer(scorer) and entropy<=0.25"
    at.button(key="cg_drop").click().run()
    assert at.query_params["compose"] == "alpha: orders>=2/3 or scorer(scorer)"
    at.button(key="cg_clear").click().run()
    assert "compose" not in at.query_params and len(cards(at)) == 2


@pytest.mark.parametrize("bad", ["alpha: orders>=9/3", "nobody: judge(alpha)", "alpha: <b>judge</b>(beta)"])
def test_a_link_with_a_bad_composed_gate_warns_naming_it(db, bad):
    at = open_gates(db, compose=bad)
    (warning,) = [w.value for w in at.warning if "does not exist" in w.value]
    assert "`compose`" in warning and f"`{bad}`" in warning
    assert len(cards(at)) == 2  # the standard gate's cards still draw
    assert not [t for t in charts(at)["Risk–coverage"]["data"] if t.get("name") == "composed gate"]
    assert any(c.value.startswith("Why: ") for c in at.caption)
