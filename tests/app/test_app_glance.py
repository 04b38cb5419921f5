"""The app reads at a glance: one colour per judge across datasets, coverage beside gated
policies, intervals on the headline cards, each pair of judges once, the cost of K orders,
the explorer's filter kept across the sidebar, and no None / nan / -0 / South_Africa in any
rendered text on a small demo and on the JudgeActs main split."""

from __future__ import annotations

import html
import json
import re

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from streamlit.testing.v1 import AppTest

from app_ui import glance
from audit_core import Resampling, store
from audit_core.selection.audit import audit_selection
from audit_core.selection.data import load_selection_data
from audit_core.user_text import visible
from findings import colours
from runners import demo
from tests.support.app import build_app_db, cards, markdown_texts, open_app
from tests.support.judgeacts import ingest_main_split
from tests.support.paths import JUDGEACTS_MAIN as JUDGEACTS
from tests.support.reports import render

pytestmark = pytest.mark.usefixtures("data_folder")  # the app may open the test databases (tests/conftest.py)


class _Container:
    """Records what `glance.cards` draws: each container it opens, and each caption and subheader
    with its help, as ("caption" | "subheader", body, help) in drawing order."""

    def __init__(self, log: list | None = None) -> None:
        self.log = [] if log is None else log

    def container(self, **_kwargs) -> "_Container":
        self.log.append(("container", "", None))
        return _Container(self.log)

    def caption(self, body: str, help: str | None = None) -> None:
        self.log.append(("caption", body, help))

    def subheader(self, body: str, anchor: object = None) -> None:
        self.log.append(("subheader", body, None))


def _as_read(markdown: str, heading: bool = False) -> str:
    """What a reader sees of a Streamlit Markdown body (a subheader's body as a level-3 heading)."""
    shown = render(f"### {markdown}" if heading else markdown)
    assert set(shown.tags) <= ({"h3"} if heading else {"p"}), (markdown, shown.tags)
    return "".join(shown.text).strip()


TEXT = hs.text(hs.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(hs.lists(hs.tuples(TEXT, TEXT, TEXT), min_size=1, max_size=4))
def test_cards_show_any_label_value_and_help_as_written(shown):
    """Whatever a card holds (`<script>`, `*x*`, `# x`, `1. x`, `&amp;`), the reader sees it as
    that text: one box per card in one row, its label as a caption with the help as tooltip, its
    value as a subheader, no other markup."""
    where = _Container()
    glance.cards(where, [glance.Card(label, value, help) for label, value, help in shown])
    kinds = [kind for kind, _, _ in where.log]
    assert kinds == ["container"] + ["container", "caption", "subheader"] * len(shown)
    captions = [(body, help) for kind, body, help in where.log if kind == "caption"]
    values = [body for kind, body, _ in where.log if kind == "subheader"]
    for (label, value, help), (caption, tooltip), heading in zip(shown, captions, values):
        # as written, invisible characters shown as markers (`audit_core.user_text.visible`)
        assert _as_read(caption) == visible(label).strip()
        assert _as_read(tooltip) == visible(help).strip()
        assert _as_read(heading, heading=True) == visible(value).strip()


RESAMPLES = "1000"
BAD = re.compile(r"(?<![\w.])(None|nan|NaN|<NA>)(?!\w)|(?<![\w.])-0(\.0+)?%?(?![\d.])|South_Africa")
PAGES = ("overview", "explorer", "detail", "judges", "alignment")  # the pages this suite covers


@pytest.fixture(scope="module")
def three(tmp_path_factory) -> str:
    """The tiny dataset with three judges, seconds recorded (order 0: 2 s, the others 1 s) and a
    country written with an underscore."""
    tmp = tmp_path_factory.mktemp("glance")
    db = build_app_db(tmp / "three.duckdb", tmp / "img", judges=("alpha", "beta", "gamma"), images=False)
    con = duckdb.connect(str(db))
    con.execute("UPDATE calls SET seconds = CASE WHEN order_index = 0 THEN 2.0 ELSE 1.0 END")
    con.execute("UPDATE prompts SET country = 'South_Africa' WHERE country = 'Japan'")
    con.close()
    return str(db)


def open_page(db: str, page: str, **params: str) -> AppTest:
    return open_app({"db": db, "page": page, "resamples": RESAMPLES, **params}, timeout=180)


def charts(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def chart_titled(at: AppTest, start: str) -> dict:
    return next(c for c in charts(at) if c["layout"]["title"]["text"].startswith(start))


def shown_text(at: AppTest) -> list[str]:
    """Every text the page renders: Markdown, captions, texts, cards, table headers and cells,
    and the charts' titles, trace names and category labels."""
    shown = [e.value for e in [*at.title, *at.subheader, *at.text, *at.caption, *at.info,
                               *at.warning]]
    shown += markdown_texts(at)
    for frame in at.dataframe:
        table = frame.value.reset_index(drop=True)
        shown += [str(c) for c in table.columns] + [str(v) for c in table.columns for v in table[c]]
    for spec in charts(at):
        shown.append(spec["layout"].get("title", {}).get("text", ""))
        for trace in spec["data"]:
            shown.append(str(trace.get("name", "")))
            shown += [v for axis in ("x", "y") for v in trace.get(axis) or [] if isinstance(v, str)]
    return shown


# ------------------------------------------------------------ colours, coverage, intervals


def test_a_judge_keeps_its_colour_across_datasets(three, tmp_path):
    other = str(build_app_db(tmp_path / "two.duckdb", tmp_path / "img", judges=("alpha", "delta"), images=False))
    alpha = colours.NAME_PALETTE[colours.preferred_index("alpha")]  # its hashed colour, no clash in either set
    for db in (three, other):
        at = open_page(db, "overview", judge="alpha")
        slots = chart_titled(at, "Which slot")
        assert next(t for t in slots["data"] if t["name"] == "alpha")["marker"]["color"] == alpha
        by_slice = chart_titled(at, "Regret by")
        assert next(t for t in by_slice["data"] if t["name"] == "alpha")["marker"]["color"] == alpha
        assert next(t for t in by_slice["data"] if t["name"] == "random")["marker"]["color"] == colours.RANDOM
        forest = chart_titled(at, "Every policy")
        judge_points = next(t for t in forest["data"] if t["name"] == "judge")
        assert judge_points["marker"]["symbol"] == colours.KIND_SYMBOLS["judge"]
        points = zip(judge_points["y"], judge_points["marker"]["color"])
        assert {c for y, c in points if y.startswith("alpha ")} == {alpha}
        sides = {t["marker"]["color"] for t in chart_titled(at, "What each gate")["data"] if t["type"] == "bar"}
        assert sides == set(colours.SIDE_COLOURS.values())
        named = {t["marker"]["color"] for t in slots["data"] if t["type"] == "bar"}
        assert not named & sides  # no judge takes the kept / rejected pair's colours


def test_gated_policies_carry_their_coverage_and_the_cards_their_intervals(three):
    at = open_page(three, "overview", judge="beta")
    con = duckdb.connect(three, read_only=True)
    try:
        data, calls = load_selection_data(con, "tiny"), store.load_calls(con, "tiny")
        result = audit_selection(data, Resampling(int(RESAMPLES), 0), calls=calls)
    finally:
        con.close()
    policies = result.policies.set_index("policy")
    labels = [html.unescape(y) for t in chart_titled(at, "Every policy")["data"] for y in t["y"]]  # escaped for Plotly
    for gate in ("beta agree>=2/3", "beta agree>=3/3", "beta+scorer agree", "beta majority"):
        assert f"{gate} ({policies.loc[gate, 'coverage']:.0%} of prompts)" in labels
    judge = result.judges.set_index("judge").loc["beta"]
    shown = dict(cards(at))
    pct = "{:.0%}".format
    assert shown[f"First-slot picks (uniform {pct(judge['first_slot_uniform'])})"] == \
        f"{pct(judge['first_slot'])} [{pct(judge['first_slot_lo'])}, {pct(judge['first_slot_hi'])}]"
    assert shown["Flip rate across orders"] == \
        f"{pct(judge['flip_rate'])} [{pct(judge['flip_rate_lo'])}, {pct(judge['flip_rate_hi'])}]"
    kept = policies.loc["beta agree>=3/3"]
    assert shown[f"Unanimity gate keeps {pct(kept['coverage'])} of prompts: gain"] == \
        f"{kept['gain']:+.3f} [{kept['gain_lo']:+.3f}, {kept['gain_hi']:+.3f}]"


def test_judge_comparison_shows_each_pair_once_and_what_orders_cost(three):
    at = open_page(three, "judges")
    pairs = next(d.value for d in at.dataframe if "judges" in d.value.columns)
    assert list(pairs["judges"]) == ["alpha and beta", "alpha and gamma", "beta and gamma"]
    assert list(pairs["s / prompt, both judges"]) == ["4.000"] * 3  # both judges' order-0 calls, 2 s each
    per_judge = next(d.value for d in at.dataframe if "all orders ÷ one" in d.value.columns)
    assert list(per_judge["all orders ÷ one"]) == ["2.000"] * 3  # (2 + 1 + 1) s over order 0's 2 s
    gates = next(d.value for d in at.dataframe if "cost vs one order" in d.value.columns).set_index("policy")
    assert gates.loc["beta majority", "cost vs one order"] == "2.000×"
    assert gates.loc["beta agree>=3/3 (50% of prompts)", "cost vs one order"] == "2.000×"
    assert gates.filter(like="+scorer agree", axis=0)["cost vs one order"].eq("—").all()  # the scorer is not timed


def test_the_explorer_keeps_its_filter_through_the_sidebar(three):
    at = open_page(three, "explorer")
    at.multiselect(key="outcome").set_value(["flip"]).run()
    at.selectbox(key="sort").set_value("gain").run()
    narrowed = next(m.value for m in at.markdown if "pools match" in m.value)
    for page in ("app_pages/judges.py", "app_pages/explorer.py"):  # the sidebar's links drop the query string
        at.query_params.clear()
        at.switch_page(page).run()
        assert not at.exception
    assert at.multiselect(key="outcome").value == ["flip"] and at.selectbox(key="sort").value == "gain"
    assert at.query_params["outcome"] == "flip" and at.query_params["sort"] == "gain"
    assert next(m.value for m in at.markdown if "pools match" in m.value) == narrowed
    at = open_page(three, "explorer", outcome="below_mean")  # a link naming a filter is followed as it is
    assert at.multiselect(key="outcome").value == ["below_mean"]


# ------------------------------------------------------------ no None, nan, -0 or South_Africa anywhere


@pytest.fixture(scope="module")
def small_demo(tmp_path_factory) -> str:
    """The built-in demo's selection dataset, small."""
    db = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    demo.build_demo(db, n_prompts=16, progress=False)
    return str(db)


@pytest.fixture(scope="module")
def judgeacts_db(tmp_path_factory) -> str:
    if not JUDGEACTS.is_dir():
        pytest.skip(f"{JUDGEACTS} is not available")
    db = tmp_path_factory.mktemp("ja") / "ja.duckdb"
    ingest_main_split(db)
    return str(db)


@pytest.mark.parametrize("source", ["small_demo", "judgeacts_db"])
def test_no_page_shows_none_nan_negative_zero_or_underscored_countries(source, request):
    db = request.getfixturevalue(source)
    extra = {"dataset": "demo"} if source == "small_demo" else {}
    for page in PAGES:
        at = open_page(db, page, **extra)
        assert at.title[0].value
        bad = [t for t in shown_text(at) if BAD.search(t)]
        assert not bad, (page, bad[:5])
