"""The Annotate page through Streamlit's AppTest: rating blind (no judge, pick, generator, country or
candidate id anywhere in what the page draws), votes stored once, skip, change the last answer, resume,
the organiser's alpha against the `krippendorff` package, and bad links refused. Remote access by token
is tests/app/test_access_tokens.py; real browsers are tests/app/test_annotate_browser.py."""

from __future__ import annotations

import re

import krippendorff
import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from audit_core import campaigns as cp
from audit_core import store
from audit_core.attributes.taxonomy import load_taxonomy
from tests.support.app import build_app_db
from tests.support.paths import APP

pytestmark = pytest.mark.usefixtures("data_folder")

JUDGES = ("JUDGEMARKqx", "JUDGEMARKzv")
NAMES = ("ann", "bob", "cy")
ALPHA_TOLERANCE = 5e-4  # the page shows alpha to 3 decimals
HOSTILE = "A <script>alert(1)</script> *festival* \u202e$x$ :red[y]"


def marked_store(db, images):
    """The app's test dataset with every field the page must not show made a distinctive marker, and three
    campaigns on it: alignment (pool `crowd`, 4 prompts, overlap 2), rubric and labels (4 images, overlap 2)."""
    build_app_db(db, images, judges=JUDGES)
    con = store.connect(db)
    try:
        with store.transaction(con):
            con.execute("UPDATE candidates SET source_model = 'GENMARK' || canonical_index")
            con.execute("UPDATE prompts SET country = 'COUNTRYMARK', category = 'CATMARK'")
            con.execute("UPDATE calls SET raw_output = 'RAWMARK', parse_note = NULL")
        for name, task in (("align", "alignment"), ("rub", "rubric"), ("lab", "labels")):
            cp.create_campaign(con, "tiny", name, task, "crowd", "uniform", 4, 2, annotators=NAMES, new_pool=True,
                               taxonomy=load_taxonomy() if task == "labels" else None)
    finally:
        con.close()
    return db


@pytest.fixture
def db(tmp_path_factory):
    root = tmp_path_factory.mktemp("annotate")
    return marked_store(root / "annotate.duckdb", root / "images")


def visit(params, *, timeout: float = 60) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=timeout)
    at.query_params.update({"page": "annotate", **params})
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def drawn(at: AppTest) -> str:
    """Everything the page drew (main area and sidebar), each element's message serialised: labels,
    options, Markdown, captions, tables, alerts, widget ids."""
    def walk(node):
        yield node
        for child in getattr(node, "children", {}).values():
            yield from walk(child)
    return "\n".join(node.proto.SerializeToString().decode("utf-8", "replace")
                     for node in walk(at._tree) if getattr(node, "proto", None) is not None)


def forbidden(db) -> set[str]:
    """What a blind page must not show: judge names, generators, countries, raw outputs, candidate ids."""
    con = store.connect(db, read_only=True)
    try:
        rows = con.execute("SELECT judge FROM runs UNION SELECT source_model FROM candidates UNION "
                           "SELECT country FROM prompts UNION SELECT raw_output FROM calls UNION "
                           "SELECT candidate_id FROM candidates").fetchall()
    finally:
        con.close()
    return {r[0] for r in rows if r[0]} | {"CATMARK"}


def buttons(at: AppTest, prefix: str):
    return [b for b in at.button if (b.key or "").startswith(prefix)]


def rate_alignment(at: AppTest, label: str = "yes") -> AppTest:
    """Rate every image of the shown item with the scale point `label` by its shortcut button, then submit."""
    while keys := [b for b in buttons(at, "k") if b.label == label]:
        keys[0].click().run()
    (submit,) = buttons(at, "submit")
    return submit.click().run()


def assigned(db, name: str, annotator: str) -> int:
    con = store.connect(db, read_only=True)
    try:
        done = cp.progress(con, cp.load_campaign(con, "tiny", name))
    finally:
        con.close()
    return int(done.loc[done["annotator"] == annotator, "target"].iloc[0])


def votes(db, pool: str = "crowd") -> list[tuple]:
    con = store.connect(db, read_only=True)
    try:
        return con.execute("SELECT annotator, candidate_id, outcome, value FROM votes WHERE pool = ? ORDER BY ALL",
                           [pool]).fetchall()
    finally:
        con.close()


def test_an_alignment_item_shows_the_prompt_and_every_image_blind_and_is_stored_once(db):
    at = visit({"db": str(db), "campaign": "align", "annotator": "ann"})
    text = drawn(at)
    assert "Prompt:" in text and "Image A" in text and not at.sidebar.children
    assert not {m for m in forbidden(db) if m in text}, {m for m in forbidden(db) if m in text}
    rate_alignment(at)
    assert [s.value for s in at.success] == ["Saved."]
    stored = votes(db)
    assert stored and {(a, o, v) for a, _, o, v in stored} == {("ann", "alignment", 1.0)}
    assert at.get("progress")[0].value == round(100 / assigned(db, "align", "ann"))  # one item of those assigned


def test_every_task_draws_nothing_the_blind_rule_forbids_even_after_votes(db):
    con = store.connect(db)
    try:
        campaign = cp.load_campaign(con, "tiny", "rub")
        item = cp.next_item(con, campaign, "bob")
        assert cp.submit(con, campaign, "bob", item.item_id, 5, item.candidate_ids, 2.0)
    finally:
        con.close()
    for name in ("align", "rub", "lab"):
        for view in ("rate", "organiser"):
            at = visit({"db": str(db), "campaign": name, "annotator": "ann", "view": view})
            text = drawn(at)
            assert not {m for m in forbidden(db) if m in text}, (name, view, {m for m in forbidden(db) if m in text})


def test_a_rubric_press_is_the_answer_and_a_second_visit_resumes_at_the_next_item(db):
    at = visit({"db": str(db), "campaign": "rub", "annotator": "bob"})
    assert at.get("progress")[0].value == 0
    next(b for b in buttons(at, "k") if b.label.startswith("4 =")).click().run()
    assert [s.value for s in at.success] == ["Saved."]
    again = visit({"db": str(db), "campaign": "rub", "annotator": "bob"})  # a refresh: a new session
    assert [r[2:] for r in votes(db)] == [("rubric", 4.0)] and votes(db)[0][0] == "bob"
    assert again.get("progress")[0].value == round(100 / assigned(db, "rub", "bob"))


def test_a_label_item_needs_every_attribute_before_it_is_stored(db):
    at = visit({"db": str(db), "campaign": "lab", "annotator": "cy"})
    buttons(at, "submit")[0].click().run()
    assert [w.value for w in at.warning] == ["Answer every question first."] and not labels(db)
    con = store.connect(db, read_only=True)
    try:
        campaign = cp.load_campaign(con, "tiny", "lab")
    finally:
        con.close()
    for k, _ in enumerate(campaign.taxonomy):  # the first item's widgets are numbered 0
        at.session_state[f"l0_{k}"] = campaign.abstain_label
    buttons(at, "submit")[0].click().run()
    assert [s.value for s in at.success] == ["Saved."]
    assert labels(db) == [("cy", len(campaign.taxonomy), campaign.abstain_label)]


def labels(db) -> list[tuple]:
    con = store.connect(db, read_only=True)
    try:
        return con.execute("SELECT annotator, count(*), min(label) FROM campaign_labels GROUP BY 1").fetchall()
    finally:
        con.close()


def test_skip_moves_on_without_a_vote_and_the_last_answer_can_be_changed(db):
    at = visit({"db": str(db), "campaign": "align", "annotator": "bob"})
    buttons(at, "skip")[0].click().run()
    assert votes(db) == [] and at.get("progress")[0].value > 0
    rate_alignment(at, "no")
    before = votes(db)
    assert {v for *_, v in before} == {0.0}
    at = visit({"db": str(db), "campaign": "align", "annotator": "bob"})  # a refresh: the last answer is still theirs
    at.button(key="revise").click().run()
    assert "Changing your last answer" in at.info[0].value
    rate_alignment(at, "partly")
    after = votes(db)
    assert [s.value for s in at.success] == ["Your last answer was changed."]
    assert [r[:3] for r in after] == [r[:3] for r in before] and {v for *_, v in after} == {0.5}


def test_a_change_of_the_last_answer_is_refused_once_another_tab_rated_a_newer_item(db):
    at = visit({"db": str(db), "campaign": "align", "annotator": "ann"})
    rate_alignment(at, "no")
    at.button(key="revise").click().run()  # this tab now shows the first item again, answered anew
    while keys := [b for b in buttons(at, "k") if b.label == "partly"]:
        keys[0].click().run()
    con = store.connect(db)
    try:  # meanwhile another tab of ann's rates the next item
        campaign = cp.load_campaign(con, "tiny", "align")
        item = cp.next_item(con, campaign, "ann")
        assert cp.submit(con, campaign, "ann", item.item_id, {c: 1.0 for c in item.candidate_ids},
                         cp.shown_order(campaign, "ann", item), 1.0)
    finally:
        con.close()
    before = votes(db)
    buttons(at, "submit")[0].click().run()
    assert any(e.value.startswith("Not stored: item_id") for e in at.error) and votes(db) == before


def test_the_organisers_alpha_is_the_krippendorff_packages_on_the_stored_votes(db):
    con = store.connect(db)
    try:
        campaign = cp.load_campaign(con, "tiny", "align")
        rng = np.random.default_rng(5)
        for name in NAMES:
            while (item := cp.next_item(con, campaign, name)) is not None:
                answer = {c: float(rng.choice([0.0, 0.5, 1.0])) for c in item.candidate_ids}
                cp.submit(con, campaign, name, item.item_id, answer, cp.shown_order(campaign, name, item), 3.0)
    finally:
        con.close()
    stored = votes(db)
    units = sorted({c for _, c, _, _ in stored})
    matrix = np.full((len(NAMES), len(units)), np.nan)
    for annotator, candidate, _, value in stored:
        matrix[NAMES.index(annotator), units.index(candidate)] = value
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="interval")
    at = visit({"db": str(db), "campaign": "align", "view": "organiser"})
    shown = at.dataframe[1].value.iloc[0, 1]  # "0.123 [lo, hi]"
    alpha, lo, hi = (float(x) for x in re.findall(r"-?\d+\.\d+", shown))
    assert abs(alpha - expected) <= ALPHA_TOLERANCE and lo <= alpha <= hi, (shown, expected)
    done = at.dataframe[0].value
    assert sorted(done["annotator"]) == list(NAMES) and (done["rated"] == done["target"]).all()
    assert any("Open the audit" in m.value and "overview?dataset=tiny" in m.value and "pool=crowd" in m.value
               for m in at.markdown)


def test_links_naming_what_does_not_exist_or_is_not_allowed_are_refused(db, tmp_path):
    at = visit({"db": str(db), "campaign": "no<b>such</b>"})
    assert any("does not exist here" in w.value and "no<b>such</b>" in w.value for w in at.warning)
    assert at.selectbox[0].label == "Campaign"  # the choice of campaigns instead
    outside = tmp_path.parent.parent / "elsewhere.duckdb"
    at = visit({"db": str(outside), "campaign": "align"})
    assert any("may not open" in e.value and "Nothing was opened" in e.value for e in at.error)
    at = visit({"db": str(db), "campaign": "align", "annotator": "mallory"})
    assert any("annotator" in w.value for w in at.warning) and not votes(db)
    at = visit({"db": str(db), "campaign": "align", "view": "sideways"})
    assert any("view" in w.value for w in at.warning)


def test_prompts_and_names_from_the_data_are_drawn_as_text_with_invisible_characters_marked(db):
    con = store.connect(db)
    try:
        with store.transaction(con):
            con.execute("UPDATE prompts SET prompt = ?", [HOSTILE])
        cp.create_campaign(con, "tiny", "open\u202ecampaign", "alignment", "crowd", "uniform", 2, 1, new_pool=True)
    finally:
        con.close()
    name = "eve\u202e<b>x</b>"
    at = visit({"db": str(db), "campaign": "open\u202ecampaign", "annotator": name})
    text = drawn(at).replace(name, "", 1)  # the name box holds what was typed, as typed; nothing else may
    assert "\u202e" not in text and "open⟨U+202E⟩campaign" in text
    (prompt,) = [m.value for m in at.markdown if m.value.startswith("**Prompt:**")]
    assert "⟨U+202E⟩" in prompt and "<script>" not in prompt.replace("\\<script>", "")
    rate_alignment(at)
    assert {a for a, *_ in votes(db)} == {name}  # stored as given, shown marked


def test_the_overview_and_alignment_pages_follow_new_votes_without_a_restart(db):
    def pools() -> list[str]:
        at = AppTest.from_file(APP, default_timeout=120)
        at.query_params.update({"db": str(db), "page": "overview", "resamples": "1000"})
        at.run()
        assert not at.exception, [e.message for e in at.exception]
        boxes = [s for s in at.sidebar.selectbox if s.label == "Reference pool"]
        return list(boxes[0].options) if boxes else []

    assert "crowd" not in pools()  # no vote in the campaign's new pool yet
    rate_alignment(visit({"db": str(db), "campaign": "align", "annotator": "ann"}))
    assert "crowd" in pools()  # the same server process: its caches followed the file
