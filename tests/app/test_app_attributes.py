"""The Attributes page on the attribute demo, driven by Streamlit's AppTest, with one more judge
that abstains on everything (its excluded accuracy is undefined) and writes HTML as its rationale."""

from __future__ import annotations

import hashlib

import pytest
from streamlit.testing.v1 import AppTest

from audit_core import store
from audit_core.attributes.taxonomy import load_taxonomy
from audit_core.store.records import LabelAnswerRecord, LabelCallRecord, RunRecord
from runners.demo import attributes as demo_attributes
from tests.support.app import build_app_db, open_app

pytestmark = pytest.mark.usefixtures("data_folder")  # the app may open the test databases (tests/conftest.py)

HTML = '<img src=x onerror="alert(1)"> <b>bold</b>'
DATASET = demo_attributes.DATASET


@pytest.fixture(scope="module")
def attributes_db(tmp_path_factory) -> str:
    db = tmp_path_factory.mktemp("app_attributes") / "attributes.duckdb"
    demo_attributes.build_attribute_demo(db, n_prompts=4)
    taxonomy = load_taxonomy()
    con = store.connect(db)
    try:
        images = store.load_candidates(con, DATASET)["candidate_id"]
        run_id = f"{DATASET}:silent"
        calls, answers = [], []
        for cid in images:
            key = hashlib.sha256(f"{run_id}|{cid}".encode()).hexdigest()
            calls.append(LabelCallRecord(run_id, cid, "default", "ok", key, raw_output=HTML))
            answers += [LabelAnswerRecord(run_id, key, cid, "default", a.name, "abstained", answer=a.abstain,
                                          rationale=HTML) for a in taxonomy.attributes]
        with store.transaction(con):
            store.insert_records(con, "runs", [RunRecord(run_id, DATASET, "silent", "labeler", "simulated", "finished")])
            store.insert_records(con, "label_calls", calls)
            store.insert_records(con, "label_answers", answers)
    finally:
        con.close()
    return str(db)


def open_page(db: str, **params: str) -> AppTest:
    at = open_app({"db": db, "page": "attributes", "dataset": DATASET, "resamples": "1000", **params})
    assert not [e.value for e in at.error]
    return at


def test_the_page_renders_every_section_and_says_undefined(attributes_db):
    at = open_page(attributes_db)
    assert any("SIMULATED" in w.value for w in at.warning)
    macro = at.dataframe[0].value.set_index(["judge", "condition"])
    assert macro.loc[("silent", "default"), "accuracy (excluded)"] == "undefined"
    assert macro.loc[("silent", "default"), "coverage"] == "0%"
    assert set(macro.index.get_level_values("condition")) == set(demo_attributes.CONDITIONS)
    cells = at.dataframe[1].value
    silent = cells[cells["judge"] == "silent"]
    assert (silent["accuracy (excluded) [95%]"] == "undefined").all() and (silent["coverage"] == "0%").all()
    assert len(at.get("plotly_chart")) == 4  # accuracy, confusion, abstained, off the taxonomy
    assert len(at.code) >= 1  # the gallery's raw outputs


def test_the_gallery_shows_rationale_and_raw_output_as_text(attributes_db):
    at = open_page(attributes_db, labeler="silent", attribute="religion", abstentions="1")
    assert at.selectbox(key="labeler").value == "silent" and at.checkbox(key="abstentions").value
    assert HTML in [c.value for c in at.code]  # raw output verbatim, in a code block
    assert f"rationale: {HTML}" in [t.value for t in at.text]  # plain text, never rendered
    assert not any(HTML in m.value for m in at.markdown)


def test_an_ablation_condition_is_addressable_by_url(attributes_db):
    at = open_page(attributes_db, condition="no_label_list", labeler="careful-labeler", attribute="gender")
    assert at.selectbox(key="condition").value == "no_label_list"
    answered = {m.value for m in at.markdown if "answered" in m.value}
    assert answered  # the gallery lists the judges' disagreements under that condition


def test_a_dataset_without_attribute_judges_says_how_to_record_one(tmp_path):
    db = build_app_db(tmp_path / "plain.duckdb", tmp_path / "images", n_prompts=4, images=False)
    at = open_page(str(db), dataset="tiny")
    assert any("no attribute judge" in i.value and "run_labeler" in i.value for i in at.info)
    assert not at.get("plotly_chart")
