"""Text that is data stays inert everywhere, names included: direction overrides, isolates, marks and
other invisible characters in any user-given field are shown as markers (`audit_core.user_text.visible`)
in report.md (both commands'), report.html, the figures and every element the app draws, and
Markdown and HTML metacharacters there render literally."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from audit_core import Resampling, store
from audit_core.user_text import escape_html, escape_markdown, visible
from findings import figures
from findings.sections import build_sections
from runners import analyze, report
from runners.demo import attributes as demo_attributes
from tests.support.app import APP_PAGES, build_app_db, open_app
from tests.support.rating_db import build_rating_db

pytestmark = pytest.mark.usefixtures("data_folder")  # the app may open the test databases (tests/conftest.py)

# the direction controls the issue names, then other invisible format characters
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
INVISIBLE = BIDI + "\u200b\u2060\ufeff\u00ad\U000e0041"
MARKUP = ("*", "_", "`", "<b>", "</b>", "[l](http://e.x)", "![i](x.png)", "<script>", "&amp;", "|", "#", ":red[", "$")


def hostile(field: str) -> str:
    """A value of `field` carrying every direction control and invisible character and Markdown/HTML
    markup, with numbers that a direction override would reorder."""
    return (f"{field} \u202e*{field}* 1.25\u202c <b>x</b> \u2066[l](http://e.x)\u2069 `c` | _u_ \u200f2.5\u061c "
            f"![i](x.png) &amp; <script>s</script> {''.join(INVISIBLE)} :red[r] $m$ #")


def raw_controls(text: str) -> set[str]:
    """The invisible characters left unmarked in `text`, written raw or as JSON/Python escapes."""
    escaped = {c for c in INVISIBLE if f"\\u{ord(c):04x}" in text.lower() or f"\\U{ord(c):08x}" in text}
    return {c for c in INVISIBLE if c in text} | escaped


# ------------------------------------------------------------ the one rule, as a property


TEXT = st.lists(st.characters(codec="utf-8") | st.sampled_from([*INVISIBLE, *MARKUP]), max_size=30).map("".join)
MD = MarkdownIt("commonmark", {"html": True}).enable("table")  # raw HTML on: a tag in the text would be a token


def inline_tokens(markdown: str) -> list:
    return [child for token in MD.parse(markdown) if token.children for child in token.children]


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_every_invisible_character_is_marked_and_markup_stays_text(text) -> None:
    shown = visible(text)
    assert not raw_controls(shown) and not [c for c in shown if c in BIDI]
    for c in set(text) & set(INVISIBLE):
        assert f"⟨U+{ord(c):04X}⟩" in shown
    assert visible(shown) == shown  # marking twice changes nothing
    for markdown in (escape_markdown(text, line_start=True), "x " + escape_markdown(text),
                     f"| h |\n|---|\n| {escape_markdown(text)} |"):
        assert not raw_controls(markdown)
        kinds = {t.type for t in inline_tokens(markdown)}
        assert kinds <= {"text", "text_special", "softbreak"}, (text, markdown, kinds)
    assert not raw_controls(escape_html(text)) and "<" not in escape_html(text)
    assert not raw_controls(json.dumps(figures.plain(text)))


def test_joiners_and_ordinary_scripts_stay_as_written() -> None:
    for text in ("مرحبا 1.5", "שלום", "नमस्ते", "👩‍👩‍👧", "می‌خواهم", "a\tb\nc", "plain ASCII 0.12 [0.05, 0.20]"):
        assert visible(text) == text


# ------------------------------------------------------------ the reports


def make_hostile(con: duckdb.DuckDBPyConnection, dataset: str) -> None:
    """Every user-given text field of `dataset` made `hostile`, each naming its field."""
    con.execute("UPDATE datasets SET name = ?, source = ?, source_revision = ?, notes = ? WHERE dataset_id = ?",
                [hostile("dataset"), hostile("source"), hostile("revision"), hostile("notes"), dataset])
    con.execute("UPDATE prompts SET country = ? || (ord(right(prompt_id, 1)) % 2), category = ?, prompt = ? "
                "WHERE dataset_id = ?", [hostile("country"), hostile("category"), hostile("prompt"), dataset])
    con.execute("UPDATE candidates SET source_model = ? WHERE dataset_id = ?", [hostile("generator"), dataset])
    con.execute("UPDATE calls SET raw_output = ?, parse_note = ? WHERE run_id IN "
                "(SELECT run_id FROM runs WHERE dataset_id = ?)", [hostile("raw"), hostile("note"), dataset])


@pytest.fixture(scope="module")
def selection_db(tmp_path_factory) -> Path:
    """The app's test dataset with a hostile judge, a hostile reference pool and every field hostile,
    in a database whose file name carries a direction override too."""
    tmp = tmp_path_factory.mktemp("inert")
    db = build_app_db(tmp / "x\u202eb.duckdb", tmp / "img", judges=(hostile("judge"), "beta"), images=False)
    con = store.connect(db)
    try:
        with store.transaction(con):
            make_hostile(con, "tiny")
            con.execute("INSERT INTO ratings SELECT dataset_id, candidate_id, outcome, ?, 1 - value, n FROM ratings "
                        "WHERE outcome = 'alignment' AND pool = 'all'", [hostile("pool")])
    finally:
        con.close()
    return db


@pytest.fixture(scope="module")
def rating_db(tmp_path_factory) -> Path:
    """A rating-only dataset (no alignment ratings, so no selection audit) with hostile provenance,
    judge, pool and raw outputs."""
    tmp = tmp_path_factory.mktemp("inert_rating")
    db = build_rating_db(tmp / "rating.duckdb", tmp / "img")
    con = store.connect(db)
    try:
        with store.transaction(con):
            for table in ("ratings", "votes"):
                con.execute(f"DELETE FROM {table} WHERE outcome = 'alignment'")
            con.execute("UPDATE datasets SET source = ?, notes = ?", [hostile("source"), hostile("notes")])
            con.execute("UPDATE runs SET judge = ? WHERE judge = 'tilted'", [hostile("rater")])
            con.execute("UPDATE votes SET pool = ? WHERE pool = 'b'", [hostile("pool")])
            con.execute("UPDATE rating_calls SET raw_output = ?", [hostile("raw")])
    finally:
        con.close()
    return db


def check_markdown(text: str) -> None:
    """No raw HTML, link, image, emphasis or code span anywhere, and no invisible character unmarked."""
    assert not raw_controls(text), raw_controls(text)
    tokens = MD.parse(text)
    assert not [t for t in tokens if t.type == "html_block"]
    made = {c.type for t in tokens for c in (t.children or [])} - {"text", "text_special", "softbreak", "hardbreak"}
    # the report's own emphasis (bold labels, the SIMULATED warning) and its figure references are allowed
    assert made <= {"strong_open", "strong_close", "image"}, made
    for t in tokens:
        for c in t.children or []:
            if c.type == "image":
                assert re.fullmatch(r"figures/\w+\.svg", c.attrs["src"]), c.attrs


def check_html(text: str) -> None:
    """No invisible character unmarked and no tag from the data, outside the embedded plotly.js."""
    body = text.split("</head>", 1)[1]
    assert not raw_controls(body), raw_controls(body)
    for tag in ("<b>x", "<script>s", 'href="http://e.x', 'src="x.png'):
        assert tag not in body


def test_analyze_report_md_of_a_rating_only_dataset_escapes_its_source(rating_db, tmp_path) -> None:
    out = tmp_path / "out"
    dataset = duckdb.connect(str(rating_db), read_only=True).execute("SELECT dataset_id FROM datasets").fetchone()[0]
    assert analyze.main(["--db", str(rating_db), "--dataset", dataset, "--out", str(out), "--resamples", "20"]) == 0
    text = (out / "report.md").read_text(encoding="utf-8")
    assert "No selection audit" in text and "source" in text
    check_markdown(text)


def test_both_reports_and_their_figures_keep_every_field_inert(selection_db, tmp_path) -> None:
    out = tmp_path / "analyze"
    assert analyze.main(["--db", str(selection_db), "--dataset", "tiny", "--out", str(out), "--resamples", "20"]) == 0
    check_markdown((out / "report.md").read_text(encoding="utf-8"))
    out = tmp_path / "report"
    assert report.main(["--db", str(selection_db), "--dataset", "tiny", "--out", str(out), "--resamples", "20",
                        "--no-figures"]) == 0
    md, page = ((out / name).read_text(encoding="utf-8") for name in ("report.md", "report.html"))
    check_markdown(md)
    check_html(page)
    for field in ("judge", "country", "prompt", "source", "notes", "generator"):
        assert f"{field} ⟨U+202E⟩" in md and f"{field} ⟨U+202E⟩" in page, field
    built = report.load_report(selection_db, "tiny", Resampling(20, 0), "all")
    shown = [f for s in build_sections(built) for f in s.figures]
    assert shown
    for figure in shown:  # what kaleido draws into the SVG and PNG files too
        texts = list(strings(json.loads(figure.figure.to_json())))
        assert not raw_controls("".join(texts)), (figure.name, raw_controls("".join(texts)))
        assert not [t for t in texts if "<b>x" in t or "<script>" in t], figure.name
    assert any("judge ⟨U+202E⟩" in t for f in shown for t in strings(json.loads(f.figure.to_json())))


def strings(value: object):
    """Every string in a JSON value (a Plotly figure's data and layout)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


# ------------------------------------------------------------ the app


def drawn(at) -> str:
    """Every element and block the page drew (main area and sidebar), serialised: labels, options,
    Markdown, tables (Arrow), charts (Plotly JSON), captions, alerts."""
    def walk(node):
        yield node
        for child in getattr(node, "children", {}).values():
            yield from walk(child)
    return "\n".join(node.proto.SerializeToString().decode("utf-8", "replace")
                     for node in walk(at._tree) if getattr(node, "proto", None) is not None)


PAGE_LINKS = {"detail": {"prompt": "p001", "raw": "1"}}
PAGE_FIELDS = {"explorer": ("country", "category", "generator", "prompt"), "detail": ("prompt", "raw", "generator"),
               "findings": ("source", "country"), "judges": ("country", "generator"), "overview": ("pool",)}


@pytest.mark.parametrize("page", sorted(set(APP_PAGES) - {"alignment", "attributes", "annotate"}))
def test_every_selection_page_draws_hostile_fields_marked(selection_db, page) -> None:
    at = open_app({"db": str(selection_db), "page": page, "resamples": "1000", **PAGE_LINKS.get(page, {})})
    assert not at.error and at.title[0].value != "Overview" or page == "overview"
    text = drawn(at)
    assert not raw_controls(text), raw_controls(text)
    for field in ("dataset", "judge", *PAGE_FIELDS.get(page, ())):  # the fields are there, marked
        assert f"{field} ⟨U+202E⟩" in text, field


def test_the_alignment_page_draws_hostile_fields_marked(rating_db) -> None:
    at = open_app({"db": str(rating_db), "page": "alignment", "resamples": "1000"})
    text = drawn(at)
    assert not raw_controls(text), raw_controls(text)
    assert "rater ⟨U+202E⟩" in text and "pool ⟨U+202E⟩" in text


@pytest.fixture(scope="module")
def attributes_db(tmp_path_factory) -> Path:
    """The attribute demo with a hostile attribute judge, rationales and raw outputs."""
    db = tmp_path_factory.mktemp("inert_attributes") / "attributes.duckdb"
    demo_attributes.build_attribute_demo(db, n_prompts=4)
    con = store.connect(db)
    try:
        with store.transaction(con):
            judge = con.execute("SELECT min(judge) FROM runs WHERE kind = 'labeler'").fetchone()[0]
            con.execute("UPDATE runs SET judge = ? WHERE judge = ?", [hostile("labeler"), judge])
            con.execute("UPDATE label_answers SET rationale = ?", [hostile("rationale")])
            con.execute("UPDATE label_calls SET raw_output = ?", [hostile("raw")])
    finally:
        con.close()
    return db


def test_the_attributes_page_draws_hostile_fields_marked(attributes_db) -> None:
    at = open_app({"db": str(attributes_db), "page": "attributes", "dataset": demo_attributes.DATASET,
                   "resamples": "1000"})
    text = drawn(at)
    assert not raw_controls(text), raw_controls(text)
    assert "labeler ⟨U+202E⟩" in text and "rationale ⟨U+202E⟩" in text
