"""The app survives any URL: for every query parameter it reads, a value that is overlong, holds a NUL,
a slash, `..`, direction controls or bytes that were not UTF-8, a number out of range, negative or
fractional where a whole one is expected, or the parameter given twice, draws the page with no
exception and names the refused value in the "does not exist" warning (free text, which any
value is, is searched for instead)."""

from __future__ import annotations

import ast
from urllib.parse import unquote, urlencode

import pytest
from streamlit.testing.v1 import AppTest

from app_ui import painted
from runners.demo import attributes as demo_attributes
from tests.support.app import APP, APP_PAGES, UNEXPECTED, build_app_db
from tests.support.paths import REPO
from tests.support.rating_db import DATASET as RATING_DATASET
from tests.support.rating_db import build_rating_db

pytestmark = pytest.mark.usefixtures("data_folder")  # the app may open the test databases (tests/conftest.py)

QUERY_LIMIT = 524_288  # characters: Streamlit ignores a longer query string whole (tested below)
BAD: dict[str, str | list[str]] = {
    "300 chars": "p" * 300,
    "5,000 chars": "é" * 5_000,
    "100,000 digits": "7" * 100_000,  # beyond Python's limit for int(str)
    "NUL": "a\x00b",
    "slash": "/etc/passwd",
    "dot-dot": "../../../x",
    "bidi": "\u202e2\u2066",
    "not UTF-8": unquote("%ff%fe%c3"),  # as Streamlit decodes a query string: replacement characters
    "negative": "-3",
    "fraction": "2.5",
    "huge number": "9" * 40,
    "repeated": ["nosuch-1", "nosuch-2"],
}
SIDEBAR = ("dataset", "pool", "judge", "resamples")  # read on every page (db and page: their own tests below)
# page → (its parameters, a valid link for the one that stops the page when it names nothing)
SELECTION_PAGES: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "overview": (("slice",), {}),
    "explorer": (("policy", "country", "category", "generator", "q", "outcome", "sort", "desc", "per", "pg"), {}),
    "detail": (("raw", "policy", "country", "category", "generator", "q", "outcome", "sort", "desc"), {"prompt": "p003"}),
    "judges": (("slice", "baseline", "candidate", "measure", "policy"), {}),
    "gates": (("gate", "compose"), {}),
    "findings": ((), {}),
}
RATING_KEYS = ("rater", "condition", "group", "pair", "scorer")
ATTRIBUTE_KEYS = ("condition", "labeler", "attribute", "every", "abstentions", "gallery")
FREE_TEXT = {"q"}  # a search: every value is one
STOPPERS = {"detail": "prompt", "alignment": "item"}  # a value naming nothing stops the page after its warning


@pytest.fixture(scope="module")
def dbs(tmp_path_factory) -> dict[str, str]:
    """page kind → database: the app's selection dataset, a rating study, the attribute demo."""
    tmp = tmp_path_factory.mktemp("urls")
    attributes = tmp / "attributes.duckdb"
    demo_attributes.build_attribute_demo(attributes, n_prompts=4)
    return {"selection": str(build_app_db(tmp / "app.duckdb", tmp / "img", images=False)),
            "rating": str(build_rating_db(tmp / "rating.duckdb", tmp / "rimg")), "attributes": str(attributes)}


def visit(params: dict[str, str | list[str]], titled: bool = True) -> AppTest:
    """The app opened by a link with `params`: it must draw (its page's title, with `titled`) without
    an exception or the app's "unexpected error" line."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(params)
    at.session_state[painted.STATE] = set(APP_PAGES)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert not [e.value for e in at.error if UNEXPECTED in e.value]
    assert not titled or (at.title and at.title[0].value)
    return at


def refused_keys(at: AppTest) -> set[str]:
    """The URL parameters the page's "does not exist" warnings name."""
    warned = [w.value for w in at.warning if "does not exist" in w.value]
    return {key for w in warned for key in (w.split("`")[1],) if w.startswith("This link's")} | \
        {"prompt" for w in warned if w.startswith("Prompt `")} | {"item" for w in warned if w.startswith("Item `")}


def check(db: str, page: str, keys: tuple[str, ...], value: str | list[str], valid: dict[str, str],
          extra: dict[str, str] | None = None) -> None:
    """Open `page` with `value` for every one of `keys` (as few links as Streamlit's limit on a
    query string allows) and `valid` for the rest; each key must be named in a refusal."""
    encoded = len(urlencode({"k": value}, doseq=True))
    per_link = max(1, QUERY_LIMIT // 2 // encoded)
    for start in range(0, len(keys), per_link):
        batch = keys[start:start + per_link]
        at = visit({"db": db, "page": page, **(extra or {}), **valid, **{key: value for key in batch}})
        missing = set(batch) - FREE_TEXT - refused_keys(at)
        assert not missing, (page, missing, [w.value for w in at.warning])
        for note in [*at.warning, *at.caption]:  # a value is quoted short, with its invisible characters as markers
            assert len(note.value) < 1_000 and "\u202e" not in note.value and "\x00" not in note.value, note.value[:200]


@pytest.mark.parametrize("value", list(BAD.values()), ids=list(BAD))
def test_every_selection_page_refuses_any_bad_value_of_any_parameter(dbs, value) -> None:
    for page, (keys, valid) in SELECTION_PAGES.items():
        check(dbs["selection"], page, SIDEBAR + keys, value, valid)
        if page in STOPPERS:
            check(dbs["selection"], page, (STOPPERS[page],), value, {})


@pytest.mark.parametrize("value", list(BAD.values()), ids=list(BAD))
def test_the_rating_and_attribute_pages_refuse_any_bad_value_of_any_parameter(dbs, value) -> None:
    rating = {"dataset": RATING_DATASET, "resamples": "1000"}
    check(dbs["rating"], "alignment", RATING_KEYS, value, {}, rating)
    check(dbs["rating"], "alignment", ("item",), value, {}, rating)
    check(dbs["attributes"], "attributes", ATTRIBUTE_KEYS, value, {}, {"dataset": demo_attributes.DATASET, "resamples": "1000"})


@pytest.mark.parametrize("value", list(BAD.values()), ids=list(BAD))
def test_a_page_or_database_that_does_not_exist_is_refused_whatever_it_is(dbs, value) -> None:
    at = visit({"db": dbs["selection"], "page": value})  # no page file is looked for by this name
    assert "page" in refused_keys(at) and at.title[0].value == "Overview"
    at = visit({"db": value, "page": "explorer"}, titled=False)  # refused before any file is opened
    (refusal,) = [e.value for e in at.error if "which this app may not open" in e.value]
    assert "Nothing was opened" in refusal and len(refusal) < 1_000 and "\x00" not in refusal


def test_a_query_string_beyond_streamlits_limit_opens_the_default_view(dbs) -> None:
    at = visit({"db": dbs["selection"], "page": "explorer", "q": "x" * QUERY_LIMIT})
    assert at.title[0].value == "Overview"


def read_parameters() -> set[str]:
    """Every URL parameter the app's code reads: the key of each `bound(widget, label, KEY, ...)`,
    `adopt(KEY, ...)` and `query_params.get(KEY)` / `get_all(KEY)` call in app.py, app_ui/ and app_pages/."""
    keys = set()
    for path in [REPO / "app.py", *(REPO / "app_ui").glob("*.py"), *(REPO / "app_pages").glob("*.py")]:
        tree = ast.parse(path.read_text())
        names = {t.id: n.value.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                 and isinstance(n.value, ast.Constant) for t in n.targets if isinstance(t, ast.Name)}
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            func = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
            position = {"bound": 2, "adopt": 0, "get": 0, "get_all": 0}.get(func)
            if position is None or len(call.args) <= position:
                continue
            reads_url = func in ("bound", "adopt") or "query_params" in ast.unparse(call.func)
            arg = call.args[position]
            key = arg.value if isinstance(arg, ast.Constant) else names.get(getattr(arg, "id", None))
            if reads_url and isinstance(key, str):
                keys.add(key)
    return keys


ANNOTATE_KEYS = ("campaign", "annotator", "view", "token", "key")


def test_the_parameters_tested_are_every_parameter_the_app_reads() -> None:
    sent = {"db", "page", *SIDEBAR, *STOPPERS.values(), *RATING_KEYS, *ATTRIBUTE_KEYS,
            *(k for keys, _ in SELECTION_PAGES.values() for k in keys),
            *ANNOTATE_KEYS}  # fuzzed by the Annotate page's own URL tests (test_annotate_urls.py)
    read = read_parameters()
    assert {"db", "page", "judge", "compose", "pg", "prompt", "gallery"} <= read  # the scan finds them
    assert read <= sent, read - sent


def test_a_page_number_beyond_the_last_is_refused_but_a_new_page_size_just_starts_again(dbs) -> None:
    at = visit({"db": dbs["selection"], "page": "explorer", "pg": "7"})  # 12 pools, 10 a page: 2 pages
    assert "pg" in refused_keys(at) and at.number_input(key="pg").value == 2
    at = visit({"db": dbs["selection"], "page": "explorer", "pg": "2"})
    assert not refused_keys(at)
    at.selectbox(key="per").set_value(20).run()  # one page now: the view starts on it, nothing refused
    assert at.number_input(key="pg").value == 1 and not refused_keys(at) and "pg" not in at.query_params
