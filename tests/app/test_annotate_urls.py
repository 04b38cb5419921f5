"""The Annotate page's URL parameters (`campaign`, `annotator`, `view`, `dataset`, `db`, and on a network
`token` and `key`) given any value: the page draws, names what it refuses in one short line with
invisible characters marked, opens nothing it was not allowed to, and stores nothing."""

from __future__ import annotations

from urllib.parse import unquote

import pytest
from streamlit import config
from streamlit.testing.v1 import AppTest

from audit_core import campaigns as cp
from audit_core import store
from tests.support.app import UNEXPECTED, build_app_db
from tests.support.paths import APP

pytestmark = pytest.mark.usefixtures("data_folder")

VALUES = {
    "300 chars": "p" * 300,
    "5,000 chars": "é" * 5_000,
    "100,000 digits": "7" * 100_000,
    "NUL": "a\x00b",
    "slash": "/etc/passwd",
    "dot-dot": "../../../x.duckdb",
    "bidi": "\u202e2\u2066",
    "not UTF-8": unquote("%ff%fe%c3"),
    "markup": "<b>x</b> *y* :red[z] $w$",
    "repeated": ["nosuch-1", "nosuch-2"],
}
KEYS = ("campaign", "annotator", "view", "dataset", "db")


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    root = tmp_path_factory.mktemp("annotate_urls")
    db = build_app_db(root / "urls.duckdb", root / "images", images=False)
    con = store.connect(db)
    try:
        cp.create_campaign(con, "tiny", "A", "alignment", "crowd", "uniform", 2, 1, annotators=("ann",), new_pool=True)
    finally:
        con.close()
    return db


def visit(params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"page": "annotate", **params})
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    notes = [n.value for n in [*at.error, *at.warning, *at.info]]
    assert not [n for n in notes if UNEXPECTED in n], notes
    for note in notes:
        assert len(note) < 1_000 and "\u202e" not in note and "\x00" not in note, note[:200]
    return at


def no_votes(db) -> bool:
    con = store.connect(db, read_only=True)
    try:
        return con.execute("SELECT count(*) FROM votes WHERE pool = 'crowd'").fetchone()[0] == 0
    finally:
        con.close()


@pytest.mark.parametrize("value", list(VALUES.values()), ids=list(VALUES))
def test_any_value_of_any_parameter_is_refused_or_shown_marked(db, value):
    for key in KEYS:
        params = {"db": str(db), "campaign": "A", "annotator": "ann", key: value}
        at = visit(params)
        assert at.title and at.title[0].value == "Annotate", key
        if key in ("campaign", "dataset"):  # names no campaign: the choice of campaigns is offered
            assert at.selectbox[0].label == "Campaign", key
        if key == "db":  # a database not allowed: nothing opened
            assert any("may not open" in e.value or "no such database" in e.value for e in at.error), key
    assert no_votes(db)


@pytest.mark.parametrize("value", list(VALUES.values()), ids=list(VALUES))
def test_on_a_network_any_token_or_key_that_is_not_granted_opens_nothing(db, value):
    before = config.get_option("server.address")
    config.set_option("server.address", "0.0.0.0")
    try:
        for key in ("token", "key"):
            at = visit({"db": str(db), "campaign": "A", key: value})
            assert at.error and not at.button and not at.dataframe, key
    finally:
        config.set_option("server.address", before)
    assert no_votes(db)
