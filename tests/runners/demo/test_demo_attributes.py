"""The attribute demo: labelled simulated, deterministic, every call recorded, and the findings it exists to show."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from streamlit.testing.v1 import AppTest

from audit_core import Resampling, store
from audit_core.attributes.audit import audit_attributes, load_attribute_data
from audit_core.attributes.taxonomy import load_taxonomy
from runners import demo
from runners.backends.simulated_labeler import simulated_labeler
from runners.demo import attributes as demo_attributes
from runners.labels.protocol import DEFAULT_CONDITIONS, load_label_instruction, select_label_conditions
from runners.labels.recorder import load_label_scope, plan_labels, record_labeler
from tests.support.paths import APP

N_PROMPTS = 30  # 90 images
RESAMPLES = 200
VISIBLE, WEAK = demo_attributes.VISIBLE, demo_attributes.WEAK


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    paths = []
    for name in ("a", "b"):
        db = tmp_path_factory.mktemp(name) / "demo.duckdb"
        demo_attributes.build_attribute_demo(db, n_prompts=N_PROMPTS, seed=0)
        paths.append(db)
    return paths


@pytest.fixture(scope="module")
def audited(built):
    con = store.connect(built[0], read_only=True)
    try:
        data = load_attribute_data(con, demo_attributes.DATASET)
        row = store.dataset_row(con, demo_attributes.DATASET)
        runs = store.load_runs(con, demo_attributes.DATASET)
    finally:
        con.close()
    return data, audit_attributes(data, Resampling(RESAMPLES)), row, runs


def recorded(db):
    con = store.connect(db, read_only=True)
    try:
        return (con.execute("SELECT candidate_id, condition, attribute, status, label, answer, rationale FROM "
                            "label_answers ORDER BY ALL").fetchall(),
                con.execute("SELECT candidate_id, attribute, label FROM gold_labels ORDER BY ALL").fetchall(),
                con.execute("SELECT candidate_id, condition, status, raw_output, request_key FROM label_calls "
                            "ORDER BY ALL").fetchall())
    finally:
        con.close()


def test_labelled_simulated_complete_and_deterministic(built, audited):
    data, _, row, runs = audited
    assert row["source"] == "demo" and "SIMULATED" in row["notes"]
    assert recorded(built[0]) == recorded(built[1])  # same seed, same content
    n_images = N_PROMPTS * len(demo_attributes.GENERATORS)
    assert len(data.gold) == n_images * len(data.taxonomy.attributes)
    assert demo_attributes.is_built(built[0], 0, N_PROMPTS) and not demo_attributes.is_built(built[0], 1, N_PROMPTS)
    assert len(data.answers) == demo_attributes.expected_calls(N_PROMPTS) * len(data.taxonomy.attributes)
    assert set(runs["kind"]) == {"labeler"} and set(runs["judge"]) == set(demo_attributes.JUDGES)
    backends = dict(zip(runs["judge"], runs["backend"]))
    assert backends == {"careful-labeler": "simulated", "guessing-labeler": "simulated", "clip-zero-shot": "clip"}
    clip = runs[runs["backend"] == "clip"].iloc[0]
    assert "SIMULATED" in clip["model"] and "SIMULATED" in clip["model_revision"]
    simulated = data.answers[data.answers["backend"] == "simulated"]
    assert simulated["rationale"].dropna().str.startswith("SIMULATED").all()
    path = data.candidates["image_path"].iloc[0]
    assert Image.open(path).size == (demo_attributes.SIZE, demo_attributes.SIZE)


def test_careful_abstains_on_weakly_visible_attributes_and_the_policy_changes_the_ranking(audited):
    _, result, _, _ = audited
    cells = result.cells.set_index(["judge", "condition", "attribute"])
    careful = cells.loc[("careful-labeler", "default")]
    assert careful.loc[list(WEAK), "abstain_share"].min() > 0.5 > careful.loc[list(VISIBLE), "abstain_share"].max()
    assert careful.loc[list(VISIBLE), "accuracy_exclude"].min() > 0.7
    guesser = cells.loc[("guessing-labeler", "default")]
    assert (guesser["coverage"] == 1).all()
    macro = result.macro.set_index(["judge", "condition"])
    c, g = macro.loc[("careful-labeler", "default")], macro.loc[("guessing-labeler", "default")]
    assert c["accuracy_exclude"] > g["accuracy_exclude"] and c["accuracy_miss"] < g["accuracy_miss"]
    clip = cells.loc[("clip-zero-shot", "default")]
    assert (clip["coverage"] == 1).all() and (clip["off_taxonomy"] == 0).all()


def test_the_ablations_drift_off_the_taxonomy_and_force_guesses(audited):
    data, result, _, _ = audited
    cells = result.cells.set_index(["judge", "condition", "attribute"])
    for judge in ("careful-labeler", "guessing-labeler"):
        assert (cells.loc[(judge, "default"), "off_taxonomy"] == 0).all()
        assert (cells.loc[(judge, "no_label_list"), "off_taxonomy"] > 0).all()
        assert (cells.loc[(judge, "no_unspecified"), "abstained"] == 0).all()
    # free text drifts where the judge answers: every attribute of the guesser, the visible ones of careful
    assert (cells.loc[("guessing-labeler", "no_label_list"), "off_taxonomy"] > 0.1).all()
    assert (cells.loc[("careful-labeler", "no_label_list"), "off_taxonomy"].loc[list(VISIBLE)] > 0.1).all()
    forced = cells.loc[("careful-labeler", "no_unspecified")]
    assert (forced.loc[list(WEAK), "coverage"] > 0.9).all()
    drifted = data.answers[data.answers["status"] == "off_taxonomy"]
    assert (drifted["condition"] == "no_label_list").all() and drifted["label"].isna().all()
    assert np.all([a not in data.taxonomy.attribute(attr).answers() for a, attr in zip(drifted["answer"], drifted["attribute"])])


def test_the_judges_were_recorded_through_the_recording_path(built):
    """Running the labeler recorder again with the demo's arguments finds every call recorded (same request
    keys: nothing to do), and each request shows the judge what the instruction renders for its image."""
    db = built[1]
    con = store.connect(db)
    try:
        gold = store.load_gold_labels(con, demo_attributes.DATASET)
        for judge, profile in demo_attributes.DEMO_LABELERS:
            again = record_labeler(con, dataset=demo_attributes.DATASET, judge=judge,
                                   backend=simulated_labeler(profile, gold), backend_name="simulated", model=profile,
                                   conditions=demo_attributes.CONDITIONS, progress=False)
            assert again.recorded == 0 and again.skipped == again.planned == N_PROMPTS * 3 * 3
        scope = load_label_scope(con, dataset=demo_attributes.DATASET, limit=None)
    finally:
        con.close()
    instruction, taxonomy = load_label_instruction(), load_taxonomy()
    conditions = select_label_conditions(DEFAULT_CONDITIONS, demo_attributes.CONDITIONS)
    requests, _ = plan_labels(scope, judge="j", model="m", instruction=instruction, taxonomy=taxonomy,
                              conditions=conditions)
    by_name = {c.name: c for c in conditions}
    assert all(r.content == instruction.render(taxonomy, by_name[r.condition], r.candidate_id) for r in requests)


def test_the_sidebar_and_selection_pages_point_an_attribute_dataset_to_the_attributes_page(built, tmp_path_factory,
                                                                                            monkeypatch):
    monkeypatch.setenv("JUDGE_AUDIT_DATA_DIR", str(tmp_path_factory.getbasetemp()))
    monkeypatch.delenv("JUDGE_AUDIT_DB", raising=False)
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"db": str(built[0]), "page": "overview", "dataset": demo_attributes.DATASET,
                            "resamples": "1000"})
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    notes = [i.value for i in at.sidebar.info] + [i.value for i in at.main.info]
    assert sum("attribute judges are on the Attributes page" in n for n in notes) == 2  # sidebar and page
    assert not any("Alignment page" in n for n in notes)


def test_the_demo_command_builds_the_attribute_dataset(tmp_path, monkeypatch):
    db = tmp_path / "demo.duckdb"
    # only the attribute demo is missing: the other two are reported built, so only it is written
    monkeypatch.setattr(demo, "is_built", lambda *args: True)
    monkeypatch.setattr(demo.ratings, "is_built", lambda *args: True)
    assert demo.main(["--db", str(db), "--attribute-prompts", "4", "--quiet"]) == 0
    assert demo_attributes.is_built(db, 0, 4)
    assert demo.main(["--db", str(db), "--attribute-prompts", "4", "--quiet"]) == 0  # already built: nothing to do
