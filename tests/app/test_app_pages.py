"""The app's pages driven by Streamlit's AppTest on a database the tests build."""

from __future__ import annotations

import re
from urllib.parse import parse_qs

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from app_ui import painted
from audit_core import Resampling, store
from audit_core.selection.audit import audit_selection
from audit_core.selection.outcomes import prompt_outcomes
from findings.summary import findings_markdown, source_note
from tests.support.app import APP, FAILED, HTML_PROMPT, UNEXPECTED, build_app_db, cards, load_tiny, open_app, pick_rule

pytestmark = pytest.mark.usefixtures("data_folder")  # the app may open the test databases (tests/conftest.py)


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("app")
    return str(build_app_db(tmp / "app.duckdb", tmp / "images"))


@pytest.fixture(scope="module")
def data(db):
    return load_tiny(db)


def open_page(db: str, page: str, **params: str | list[str]) -> AppTest:
    """Run the app as a link `?db=…&page=…&…` would open it; fail on any exception."""
    at = open_app({"db": db, "page": page, **params})
    assert not [e.value for e in at.error if UNEXPECTED in e.value]
    return at


def texts(at: AppTest) -> list[str]:
    return [e.value for e in [*at.markdown, *at.text, *at.caption]]


def match_count(at: AppTest) -> int:
    line = next(m.value for m in at.markdown if "pools match" in m.value)
    return int(line.split("**")[1].replace(",", ""))


def link_query(link) -> dict[str, list[str]]:
    return parse_qs(link.proto.query_string)


# ------------------------------------------------------------ overview


def test_the_overview_draws_its_headline_first_and_its_figures_once_the_browser_has_painted_it(db):
    """A session's first overview run holds back the figures and mounts the painted marker
    (`app_ui.painted`); the run its trigger starts draws them under the same cards."""
    first = open_app({"db": db, "page": "overview"}, painted_first=False)
    assert cards(first) and "Drawing the figures…" in texts(first)
    assert not first.get("plotly_chart") and not first.get("download_button")
    assert len(first.get("bidi_component")) == 1
    first.session_state[painted.STATE].add("overview")  # what the marker's trigger does
    first.run()
    whole = open_page(db, "overview")
    assert cards(first) == cards(whole) and "Drawing the figures…" not in texts(first)
    assert len(first.get("plotly_chart")) == len(whole.get("plotly_chart")) >= 3
    assert not first.get("bidi_component") and len(first.get("download_button")) == 3


def test_overview_headline_cards_match_the_analysis(db, data):
    at = open_page(db, "overview")
    result = audit_selection(data, Resampling(10_000, 0))
    alpha = result.policies.set_index("policy").loc["alpha"]
    shown = dict(cards(at))
    assert shown["Gain over random"] == f"{alpha['gain']:+.3f} [{alpha['gain_lo']:+.3f}, {alpha['gain_hi']:+.3f}]"
    assert shown["Below-mean rate"] == f"{alpha['bmr']:.0%} vs {alpha['bmr_random']:.0%}"
    assert any(label.startswith("Unanimity gate keeps") for label in shown)
    assert len(at.get("plotly_chart")) == 4
    assert len(at.get("download_button")) == 3  # summary JSON, policies and gates CSV
    assert any("SIMULATED" in w.value for w in at.warning)


def test_resample_count_comes_from_the_url_and_reaches_the_intervals(db, data):
    at = open_page(db, "overview", resamples="1000")
    assert at.sidebar.selectbox(key="resamples").value == 1000
    assert any("1,000 bootstrap resamples" in c.value for c in at.caption)
    alpha = audit_selection(data, Resampling(1_000, 0)).policies.set_index("policy").loc["alpha"]
    assert dict(cards(at))["Regret"].endswith(f"[{alpha['regret_lo']:.3f}, {alpha['regret_hi']:.3f}]")


# ------------------------------------------------------------ explorer


def test_explorer_counts_and_filters_narrow(db, data):
    outcomes = prompt_outcomes(data, "alpha")
    at = open_page(db, "explorer")
    assert match_count(at) == 12
    assert len(at.get("page_link")) == 10  # first page of 10

    at.multiselect(key="outcome").set_value(["flip"]).run()
    assert match_count(at) == int(outcomes["flip"].sum()) < 12
    assert at.query_params["outcome"] == "flip"

    at.multiselect(key="country").set_value(["Japan"]).run()
    expected = int((outcomes["flip"].fillna(False) & (outcomes["country"] == "Japan")).sum())
    assert match_count(at) == expected

    at.text_input(key="q").set_value("number 1").run()  # matches prompts 1, 10, 11 before the other filters
    assert match_count(at) <= 3


def test_explorer_text_search_is_literal_and_links_open_detail(db):
    at = open_page(db, "explorer", q='"quoted" <script>')
    assert match_count(at) == 1
    assert HTML_PROMPT in [t.value for t in at.text]
    (link,) = at.get("page_link")
    query = link_query(link)
    assert query["prompt"] == ["p000"] and query["page"] == ["detail"] and query["q"] == ['"quoted" <script>']


def test_explorer_url_restores_filter_sort_and_page(db, data):
    outcomes = prompt_outcomes(data, "alpha")
    at = open_page(db, "explorer", country="Brazil", sort="gain", desc="0", per="10")
    assert at.multiselect(key="country").value == ["Brazil"]
    assert at.selectbox(key="sort").value == "gain"
    assert at.toggle(key="desc").value is False
    brazil = outcomes[outcomes["country"] == "Brazil"].sort_values(["gain", "prompt_id"])
    first_link = at.get("page_link")[0]
    assert link_query(first_link)["prompt"] == [brazil["prompt_id"].iloc[0]]

    at = open_page(db, "explorer", pg="2")
    assert at.number_input(key="pg").value == 2
    assert len(at.get("page_link")) == 2  # 12 pools, 10 per page


def test_explorer_judge_marks_follow_the_sidebar_judge(db):
    at = open_page(db, "explorer", judge="beta")
    assert at.selectbox(key="judge").value == "beta"
    assert at.multiselect(key="outcome").label.endswith("(all must hold)")
    assert "beta" in at.multiselect(key="outcome").label


# ------------------------------------------------------------ detail


def test_detail_grid_choices_and_gates_for_a_known_pool(db, data):
    at = open_page(db, "detail", prompt="p003")
    orders = [m.value for m in at.markdown if m.value.startswith("**Order")]
    assert orders == ["**Order 0**", "**Order 1**", "**Order 2**"]
    ids = sorted(f"p003_{g}" for g in ("SD35", "flux", "gpt-image", "imagegen3"))
    choices = next(d.value for d in at.dataframe if "order 0" in d.value.columns).set_index("judge")
    for j, judge in enumerate(("alpha", "beta")):
        for k in range(3):
            assert choices.loc[judge, f"order {k}"].endswith(ids[pick_rule(3, j, k, 4)])
    ratings = next(d.value for d in at.dataframe if "alignment votes" in d.value.columns)
    assert list(ratings["candidate id"]) == ids
    assert "score: scorer" in ratings.columns
    gates = next(d.value for d in at.dataframe if "policy" in d.value.columns)
    decision = gates.set_index("policy")["acts"]
    assert decision["alpha agree>=3/3"] == "abstains"  # prompt 3 flips across orders
    assert decision["alpha"] == "acts"


def test_detail_raw_output_on_demand_with_parse_status(db):
    pid, order = FAILED
    hidden = open_page(db, "detail", prompt=pid)
    assert not hidden.code
    at = open_page(db, "detail", prompt=pid, raw="1")
    assert len(at.code) == 6  # 2 judges × 3 orders
    assert "I like the <i>second</i> one best" in [c.value for c in at.code]
    assert any("parse_fail" in t and "prose, no JSON" in t for t in texts(at))
    choices = next(d.value for d in at.dataframe if "order 0" in d.value.columns).set_index("judge")
    assert choices.loc["alpha", f"order {order}"] == "parse_fail"


def test_detail_shows_html_prompt_literally(db):
    at = open_page(db, "detail", prompt="p000")
    assert at.text[0].value == HTML_PROMPT
    assert not any("<b>Bold</b>" in m.value and not m.value.startswith("<span") for m in at.markdown)


def test_detail_previous_next_walk_the_explorer_filter(db, data):
    outcomes = prompt_outcomes(data, "alpha")
    flips = outcomes[outcomes["flip"].fillna(False)].sort_values(["regret", "prompt_id"], ascending=[False, True])
    ids = list(flips["prompt_id"])
    at = open_page(db, "detail", prompt=ids[1], outcome="flip")
    links = {link.value: link_query(link) for link in at.get("page_link")}
    assert links["Previous pool"]["prompt"] == [ids[0]]
    assert links["Next pool"]["prompt"] == [ids[2]]
    assert links["Back to the explorer"]["outcome"] == ["flip"]


def test_detail_unknown_prompt_says_what_to_do(db):
    at = open_page(db, "detail", prompt="nope")
    (warning,) = [w.value for w in at.warning if "does not exist" in w.value]
    assert "`nope`" in warning and "explorer" in warning


# ------------------------------------------------------------ findings


def test_findings_shows_the_report_of_the_cached_analysis_and_offers_downloads(db, data):
    at = open_page(db, "findings")
    assert at.title[0].value == "Findings" and at.query_params["page"] == "findings"
    con = duckdb.connect(db, read_only=True)
    row = store.list_datasets(con).iloc[0].to_dict()
    calls = store.load_calls(con, "tiny")  # the app's audit reads the calls' slots and seconds too
    con.close()
    expected = findings_markdown(audit_selection(data, Resampling(10_000, 0), calls=calls), dataset="tiny",
                                 source_note=source_note(row))
    assert expected.strip() in [m.value for m in at.markdown]  # st.markdown strips the final newline
    assert "**SIMULATED data**" in expected
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["report.html", "report.md", "summary.json", "policies.csv", "gates.csv", "groups.csv", "positions.csv", "judges.csv"]


def test_findings_escapes_hostile_judge_and_country_names(tmp_path):
    db = build_app_db(tmp_path / "h.duckdb", tmp_path / "img", judges=("<b>x</b>", "a*b*"), images=False)
    con = duckdb.connect(str(db))
    con.execute("UPDATE prompts SET country = '*Star* <i>land</i>'")
    con.close()
    at = open_page(str(db), "findings", judge="<b>x</b>")
    (report,) = [m.value for m in at.markdown if m.value.startswith("# Judge audit findings")]
    for raw in ("a*b*", "*Star* <i>land</i>"):
        assert raw not in report
    assert "### \\<b>x\\</b>" in report and "### a\\*b\\*" in report  # only what Markdown would misread
    assert "\\*Star\\* \\<i>land\\</i>" in report


def test_findings_of_a_dataset_not_marked_simulated_say_so(tmp_path):
    db = build_app_db(tmp_path / "r.duckdb", tmp_path / "img", images=False, simulated=False)
    at = open_page(str(db), "findings")
    (report,) = [m.value for m in at.markdown if m.value.startswith("# Judge audit findings")]
    assert "SIMULATED" not in report and "Source: source tests" in report


# ------------------------------------------------------------ judges, gates, sidebar


def test_judges_and_gate_lab_render_and_restore_the_gate(db):
    at = open_page(db, "judges")
    assert list(at.dataframe[0].value["judge"]) == ["alpha", "beta"]
    at = open_page(db, "gates", gate="beta agree>=3/3")
    assert at.selectbox(key="gate").value == "beta agree>=3/3"
    assert at.query_params["gate"] == "beta agree>=3/3"
    assert len(cards(at)) == 2


def test_root_link_with_page_parameter_opens_that_page(db):
    at = open_page(db, "explorer", outcome="flip")
    assert at.title[0].value == "Prompt explorer"
    assert at.query_params["outcome"] == "flip"


def test_missing_database_is_reported_not_raised(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGE_AUDIT_DB", str(tmp_path / "missing.duckdb"))  # allowed, but not there
    monkeypatch.setenv("JUDGE_AUDIT_DATA_DIR", str(tmp_path / "data"))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception
    assert at.sidebar.error[0].value.startswith("`missing.duckdb`: no such database")
    assert str(tmp_path) not in at.sidebar.error[0].value


def test_a_file_that_is_not_a_database_is_reported(tmp_path):
    bogus = tmp_path / "notes.duckdb"
    bogus.write_text("not a database")
    at = open_page(str(bogus), "overview")
    assert "cannot be opened read-only" in at.sidebar.error[0].value


def test_environment_variable_names_the_default_database(db, monkeypatch, tmp_path):
    monkeypatch.setenv("JUDGE_AUDIT_DB", db)
    monkeypatch.setenv("JUDGE_AUDIT_DATA_DIR", str(tmp_path))  # db lies outside it: named by its file name
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["page"] = "explorer"
    at.run()
    assert not at.exception
    assert at.sidebar.selectbox(key="db").value == "app.duckdb"  # named, not by its server path
    assert "db" not in at.query_params  # the default database stays out of links
    assert all("db" not in link_query(link) for link in at.get("page_link"))


@pytest.mark.parametrize(
    "shape",
    [
        {"images": False},
        {"judges": ("solo",)},
        {"judges": ("qwen", "qwen8b", "smol", "<b>odd</b> *name*"), "scorer": False},
        {"judges": ("alpha", "beta"), "n_orders": 1, "simulated": False},
        {"judges": ()},
    ],
    ids=["no-images", "one-judge", "four-judges", "one-order", "scorer-only"],
)
def test_every_page_renders_for_other_dataset_shapes(tmp_path, shape):
    db = str(build_app_db(tmp_path / "x.duckdb", tmp_path / "img", **shape))
    for page in ("overview", "explorer", "detail", "judges", "gates", "findings"):
        at = open_page(db, page)
        assert at.title[0].value
        if not shape.get("simulated", True):
            assert not any("SIMULATED" in w.value for w in at.warning)


def test_detail_without_prompt_opens_the_filters_first_pool_and_names_it(db, data):
    outcomes = prompt_outcomes(data, "alpha")
    first = outcomes.sort_values(["regret", "prompt_id"], ascending=[False, True])["prompt_id"].iloc[0]
    at = open_page(db, "detail")
    assert at.text_input(key="prompt").value == first
    assert at.query_params["prompt"] == first  # the link names the pool even when it is the default


# ------------------------------------------------------------ links that name what does not exist, readable cells


@pytest.mark.parametrize(
    ("page", "key", "extra"),
    [
        ("overview", "judge", {}),
        ("explorer", "outcome", {}),
        ("detail", "outcome", {"prompt": "p003"}),
        ("gates", "gate", {}),
        ("judges", "slice", {}),
        ("overview", "dataset", {}),
        ("overview", "page", {}),
    ],
)
def test_a_link_naming_a_value_that_does_not_exist_says_so_and_shows_the_default(db, page, key, extra):
    hostile = "no<b>such</b>*"
    at = open_app({"db": db, "page": page, **extra, key: hostile})
    (warning,) = [w.value for w in at.warning if "does not exist" in w.value]
    assert f"`{key}`" in warning and f"`{hostile}`" in warning  # a code span: shown literally
    assert at.title[0].value  # the page still draws, with the default in place of the refused value
    if key == "judge":
        assert at.sidebar.selectbox(key="judge").value == "alpha" and "showing `alpha` instead" in warning
    if key == "gate":
        assert at.selectbox(key="gate").value == "alpha agree>=2/3"
    if key == "page":
        assert at.title[0].value == "Overview" and at.query_params["page"] == "overview"


def test_a_valid_link_shows_no_warning_and_a_refusal_is_not_repeated(db):
    at = open_page(db, "gates", gate="beta agree>=3/3", judge="beta")
    assert not [w for w in at.warning if "does not exist" in w.value]
    at = open_page(db, "gates", gate="nosuch")
    assert [w for w in at.warning if "`nosuch`" in w.value]
    at.selectbox(key="gate").set_value("beta agree>=3/3").run()
    assert not [w for w in at.warning if "does not exist" in w.value]


SHOWN_BADLY = re.compile(r"(?<![\w.])(None|nan|NaN|<NA>)(?!\w)|(?<![\w.])-0(\.0+)?%?(?![\d.])")


def _bad_cells(at: AppTest) -> list[str]:
    """Every dataframe cell and header and every card of the page that shows a missing value or a negative zero."""
    shown = []
    for frame in at.dataframe:
        table = frame.value.reset_index()
        shown += [str(c) for c in table.columns] + [str(v) for col in table.columns for v in table[col]]
    shown += [text for card in cards(at) for text in card]
    return [text for text in shown if SHOWN_BADLY.search(text)]


def test_the_bad_cell_pattern_finds_what_it_should():
    assert [t for t in ("None", "nan", "-0.00", "-0%", "gain -0.00 [x]", "<NA>") if SHOWN_BADLY.search(t)] == \
        ["None", "nan", "-0.00", "-0%", "gain -0.00 [x]", "<NA>"]
    assert not [t for t in ("Unanimity", "-0.05", "+0.00", "0%", "—", "-0.50 [-1.00, 0.00]", "Nonesuch")
                if SHOWN_BADLY.search(t)]


@pytest.mark.parametrize("page", ["overview", "explorer", "detail", "judges", "gates", "findings", "alignment"])
def test_no_table_or_card_shows_none_nan_or_negative_zero(db, page):
    at = open_page(db, page, **({"prompt": "p003"} if page == "detail" else {}))
    assert not _bad_cells(at)


def test_judge_comparison_tables_speak_words_and_percentages(db, data):
    at = open_page(db, "judges")
    calls = at.dataframe[0].value
    assert not [c for c in calls.columns if "_" in c]
    judges = audit_selection(data, Resampling(10_000, 0)).judges.set_index("judge")
    assert [c.split(" [")[0] for c in calls["picks slot A [95%]"]] == \
        [f"{judges.loc[j, 'first_slot']:.0%}" for j in ("alpha", "beta")]
    for frame in at.dataframe:
        assert not [c for c in frame.value.columns if "_" in str(c)], list(frame.value.columns)


def test_country_names_are_shown_as_written(tmp_path):
    db = build_app_db(tmp_path / "c.duckdb", tmp_path / "img", images=False)
    con = duckdb.connect(str(db))
    con.execute("UPDATE prompts SET country = 'South_Africa' WHERE country = 'Japan'")
    con.close()
    at = open_page(str(db), "judges")
    by_country = next(d.value for d in at.dataframe if "country" in d.value.columns)
    assert "South Africa" in list(by_country["country"])
    at = open_page(str(db), "explorer", country="South_Africa")  # links keep the stored value
    assert at.multiselect(key="country").value == ["South_Africa"]
    assert "South_Africa" not in " ".join(texts(at)) and any("South Africa" in t for t in texts(at))
    at = open_page(str(db), "detail", prompt="p001")
    assert "South_Africa" not in " ".join(texts(at))
