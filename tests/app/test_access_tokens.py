"""Access (issue 25 item 5, `app_ui.access`): on this machine a name is enough; served to other machines,
the Annotate page opens only with a valid annotator token, a token opens its own campaign only, as its
annotator, and no other page opens for a visit or session that carries one; every other page opens only
with a valid viewer secret, checked again on every run."""

from __future__ import annotations

import socket

import pytest
from streamlit import config
from streamlit.testing.v1 import AppTest

from app_ui import access
from app_ui.access import NO_SECRET, serves_network
from audit_core import campaigns as cp
from audit_core import store
from audit_core.store import viewer_keys
from tests.support.app import build_app_db
from tests.support.paths import APP

pytestmark = pytest.mark.usefixtures("data_folder")


@pytest.fixture
def db(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokens")
    db = build_app_db(root / "tokens.duckdb", root / "images")
    con = store.connect(db)
    try:
        for name in ("A", "B"):
            cp.create_campaign(con, "tiny", name, "alignment", "crowd", "uniform", 4, 1, annotators=("ann", "bob"),
                               new_pool=True)
    finally:
        con.close()
    return db


@pytest.fixture
def on_network():
    """The app served to other machines, as `--server.address 0.0.0.0` serves it."""
    before = config.get_option("server.address")
    config.set_option("server.address", "0.0.0.0")
    yield
    config.set_option("server.address", before)


def invite(db, campaign: str, annotator: str) -> str:
    con = store.connect(db)
    try:
        return cp.invite(con, cp.load_campaign(con, "tiny", campaign), annotator)
    finally:
        con.close()


def visit(params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(params)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def refused(at: AppTest) -> str:
    return " ".join(e.value for e in at.error)


@pytest.mark.parametrize(("address", "network"), [
    ("localhost", False), ("127.0.0.1", False), ("127.3.2.1", False), ("::1", False), ("[::1]", False),
    ("0.0.0.0", True), ("", True), (None, True), ("192.168.1.5", True), ("::", True), ("annotate.example.org", True),
])
def test_only_a_loopback_address_keeps_the_server_on_this_machine(address, network):
    assert serves_network(address) is network


def test_on_this_machine_a_name_is_enough(db):
    at = visit({"page": "annotate", "db": str(db), "campaign": "A"})
    assert at.selectbox(key="annotator").options == ["—", "ann", "bob"] and not refused(at)


@pytest.mark.usefixtures("on_network")
def test_served_to_others_the_annotate_page_needs_a_valid_token(db):
    at = visit({"page": "annotate", "db": str(db), "campaign": "A"})
    assert "missing its token" in refused(at) and not at.text_input and not at.selectbox
    at = visit({"page": "annotate", "db": str(db), "campaign": "A", "token": "x" * 43})
    assert "not valid" in refused(at)


@pytest.mark.usefixtures("on_network")
def test_a_token_opens_its_campaign_as_its_annotator_and_nothing_else(db):
    token = invite(db, "A", "ann")
    at = visit({"page": "annotate", "campaign": "A", "token": token})  # the link as `campaign invite` prints it
    assert not refused(at) and not at.selectbox and not at.text_input  # no name to give, no organiser view
    assert "Campaign A" in at.caption[0].value
    while keys := [b for b in at.button if (b.key or "").startswith("k") and b.label == "yes"]:
        keys[0].click().run()
    next(b for b in at.button if (b.key or "").startswith("submit")).click().run()
    con = store.connect(db, read_only=True)
    try:
        assert {r[0] for r in con.execute("SELECT annotator FROM votes WHERE pool = 'crowd'").fetchall()} == {"ann"}
    finally:
        con.close()
    at = visit({"page": "annotate", "db": str(db), "campaign": "B", "token": token})
    assert "does not open that campaign" in refused(at)
    for page in ("overview", "explorer", "detail", "findings"):
        at = visit({"page": page, "db": str(db), "token": token})
        assert "opens its campaign's Annotate page only" in refused(at), page
        assert not at.title or at.title[0].value != "Overview"


@pytest.mark.usefixtures("on_network")
def test_a_session_that_showed_a_token_cannot_reach_another_page(db):
    at = visit({"page": "annotate", "db": str(db), "campaign": "A", "token": invite(db, "A", "bob")})
    assert not refused(at)
    at.query_params.clear()  # a page link drops the query: the URL no longer carries the token
    at.switch_page("app_pages/overview.py").run()
    assert "opens its campaign's Annotate page only" in refused(at)


@pytest.mark.usefixtures("on_network")
def test_a_revoked_token_is_refused(db):
    token = invite(db, "A", "ann")
    con = store.connect(db)
    try:
        assert cp.revoke(con, cp.load_campaign(con, "tiny", "A"), "ann") == 1
    finally:
        con.close()
    at = visit({"page": "annotate", "db": str(db), "campaign": "A", "token": token})
    assert "not valid" in refused(at) and not at.button


@pytest.mark.usefixtures("on_network")
def test_served_to_others_every_other_page_needs_a_viewer_secret_checked_on_every_run(db):
    for page in ("overview", "explorer", "alignment", "findings"):
        at = visit({"page": page, "db": str(db)})
        assert NO_SECRET in refused(at) and not at.title and not at.sidebar.children, page
    secret = viewer_keys.grant("organiser-test")
    at = visit({"page": "overview", "db": str(db), "key": secret})
    assert not refused(at) and at.title[0].value == "Overview"
    at.query_params.clear()  # the page menu's links drop the query: the session keeps the secret
    at.switch_page("app_pages/gates.py").run()
    assert not refused(at) and at.title[0].value == "Gate lab"
    viewer_keys.revoke("organiser-test")
    at.run()  # the same session's next run: the revoked secret no longer opens anything
    assert NO_SECRET in refused(at) and not at.title


@pytest.mark.usefixtures("on_network")
def test_a_viewer_secret_opens_the_organisers_view_not_the_rating_nor_a_token_the_audit(db):
    secret = viewer_keys.grant("viewer-test")
    at = visit({"page": "annotate", "db": str(db), "campaign": "A", "key": secret, "view": "rate"})
    assert not refused(at) and not at.button and not at.selectbox and not at.text_input
    assert [h.value for h in at.subheader][0] == "Items done per annotator" and len(at.dataframe) == 3
    token = invite(db, "A", "ann")
    at = visit({"page": "overview", "db": str(db), "key": secret, "token": token})
    assert "opens its campaign's Annotate page only" in refused(at) and not at.title


@pytest.mark.usefixtures("on_network")
@pytest.mark.parametrize("value", ["", "x", "a" * 43, "a" * 5_000, "%00", "\u202e\u0000", "../../etc/passwd",
                                   "<script>alert(1)</script>", "key=x&key=y"])
def test_any_other_key_is_refused_in_one_line(db, value):
    at = visit({"page": "overview", "db": str(db), "key": value})
    assert refused(at) == NO_SECRET and not at.title


def test_an_unset_address_is_judged_by_what_the_process_listens_on():
    """Unset, Streamlit listens on every interface: a process listening on 0.0.0.0 is on a network; one
    listening on loopback only, or not at all (AppTest), is not."""
    before = config.get_option("server.address")
    config.set_option("server.address", None)
    try:
        with socket.socket() as local:
            local.bind(("127.0.0.1", 0))
            local.listen()
            assert "127.0.0.1" in access.listening_addresses() and not access.on_network()
            with socket.socket() as everywhere:
                everywhere.bind(("0.0.0.0", 0))
                everywhere.listen()
                assert "0.0.0.0" in access.listening_addresses() and access.on_network()
        assert not access.on_network()
    finally:
        config.set_option("server.address", before)
