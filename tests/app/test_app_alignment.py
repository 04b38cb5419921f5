"""The Alignment page and the sidebar's reference pool, driven by Streamlit's AppTest."""

from __future__ import annotations

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from audit_core import Resampling, store
from audit_core.rating.audit import audit_rating, load_rating_data
from audit_core.selection.audit import audit_selection
from audit_core.selection.data import load_selection_data
from tests.support.app import UNEXPECTED, build_app_db, cards, open_app
from tests.support.rating_db import DATASET, HTML_ITEM, HTML_OUTPUT, build_rating_db, write_runs_on_two_scales

pytestmark = pytest.mark.usefixtures("data_folder")  # the app may open the test databases (tests/conftest.py)

RESAMPLES = "1000"  # the smallest choice of the sidebar


@pytest.fixture(scope="module")
def rating_db(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("app_rating")
    return str(build_rating_db(tmp / "rating.duckdb", tmp / "images"))


@pytest.fixture(scope="module")
def pools_db(tmp_path_factory) -> str:
    """The app's selection dataset with alignment ratings from a second pool, 'strict', that inverts 'all'."""
    tmp = tmp_path_factory.mktemp("app_pools")
    db = build_app_db(tmp / "pools.duckdb", tmp / "images")
    con = store.connect(db)
    try:
        with store.transaction(con):
            con.execute("INSERT INTO ratings SELECT dataset_id, candidate_id, outcome, 'strict', 1 - value, n "
                        "FROM ratings WHERE outcome = 'alignment' AND pool = 'all'")
    finally:
        con.close()
    return str(db)


def open_page(db: str, page: str, **params: str) -> AppTest:
    """Run the app as a link `?db=…&page=…&…` would open it; fail on any exception."""
    at = open_app({"db": db, "page": page, "resamples": RESAMPLES, **params})
    assert not [e.value for e in at.error if UNEXPECTED in e.value]
    return at


def metrics(at: AppTest) -> dict[str, str]:
    return dict(cards(at))


def test_every_pool_side_by_side_with_undefined_pearson(rating_db):
    at = open_page(rating_db, "alignment", rater="constant")
    assert "pool" not in [s.key for s in at.sidebar.selectbox]  # one alignment pool: nothing to choose
    cards = metrics(at)
    assert {f"{name} vs {pool}" for name in ("MAE", "Pearson r", "Quadratic κ") for pool in "ab"} <= set(cards)
    assert cards["Pearson r vs a"] == cards["Pearson r vs b"] == "undefined"
    assert any("SIMULATED" in w.value for w in at.warning)
    side = at.dataframe[0].value  # every condition of the judge, each pool's columns side by side
    assert {"a · MAE", "a · r", "a · κ", "b · MAE", "b · r", "b · κ"} <= set(side.columns)
    assert side.loc[0, "a · r"] == "undefined"
    assert len(at.get("plotly_chart")) >= 4  # tilt, distribution, MAE by group, tilt by group


def test_overview_numbers_are_the_audits(rating_db):
    con = duckdb.connect(rating_db, read_only=True)
    try:
        result = audit_rating(load_rating_data(con, DATASET), Resampling(int(RESAMPLES), 0))
    finally:
        con.close()
    at = open_page(rating_db, "alignment", rater="copy")
    row = result.alignment.set_index(["judge", "condition", "pool", "group"]).loc[("copy", "default", "b", "all")]
    cards = metrics(at)
    assert cards["MAE vs a"] == "0.000 [0.000, 0.000]"
    assert cards["MAE vs b"] == f"{row['mae']:.3f} [{row['mae_lo']:.3f}, {row['mae_hi']:.3f}]"
    assert cards["T (a vs b)"] == "+1.000 [+1.000, +1.000]"


def test_url_restores_judge_condition_group_and_item(rating_db):
    at = open_page(rating_db, "alignment", rater="unsure", condition="insider_persona", group="culture=east",
                   item=HTML_ITEM)
    assert at.selectbox(key="rater").value == "unsure"
    assert at.selectbox(key="condition").value == "insider_persona"
    assert at.selectbox(key="group").value == "culture=east"
    assert at.text_input(key="item").value == HTML_ITEM
    assert "A festival scene number 3 in a town square" in [t.value for t in at.text]

    at.selectbox(key="condition").set_value("default").run()  # the judge's first condition: left out of the URL
    assert "condition" not in at.query_params and at.query_params["rater"] == "unsure"
    at.selectbox(key="group").set_value("anchor=contested").run()
    at.text_input(key="item").set_value("p001_SD35").run()
    assert (at.query_params["group"], at.query_params["item"]) == ("anchor=contested", "p001_SD35")


def test_unknown_item_is_named_in_a_warning(rating_db):
    at = open_page(rating_db, "alignment", item="p999_nothing")
    assert any("p999_nothing" in w.value for w in at.warning)  # escaped only where Markdown would misread it


def test_raw_output_with_html_is_shown_literally(rating_db):
    at = open_page(rating_db, "alignment", item=HTML_ITEM)
    assert HTML_OUTPUT in [c.value for c in at.code]
    assert not [m.value for m in at.markdown if "<script>" in m.value]


def test_rating_data_the_audit_refuses_is_one_clear_error(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("app_scales")
    write_runs_on_two_scales(tmp / "scales.duckdb", tmp / "images")
    at = open_page(str(tmp / "scales.duckdb"), "alignment")
    (error,) = [e.value for e in at.error]
    assert "cannot be audited" in error and "different scales" in error


def test_dataset_without_rating_data_says_how_to_get_some(pools_db):
    at = open_page(pools_db, "alignment")
    (info,) = [i.value for i in at.info if "rating data" in i.value]
    assert "runners.run_rater" in info and "--votes" in info and "--ratings" in info


def test_reference_pool_changes_the_selection_audit(pools_db):
    at = open_page(pools_db, "overview")
    choice = at.sidebar.selectbox(key="pool")
    assert choice.options == ["all", "strict"] and choice.value == "all"
    before = metrics(at)
    choice.set_value("strict").run()
    assert not at.exception and at.query_params["pool"] == "strict"
    after = metrics(at)
    assert before != after
    con = duckdb.connect(pools_db, read_only=True)
    try:
        strict = audit_selection(load_selection_data(con, "tiny", pool="strict"), Resampling(int(RESAMPLES), 0))
    finally:
        con.close()
    alpha = strict.policies.set_index("policy").loc["alpha"]
    assert f"{alpha['gain']:+.3f} [{alpha['gain_lo']:+.3f}, {alpha['gain_hi']:+.3f}]" in after.values()

    linked = open_page(pools_db, "gates", pool="strict")  # a link keeps the pool
    assert linked.sidebar.selectbox(key="pool").value == "strict"


@pytest.fixture(scope="module")
def rubric_only_db(tmp_path_factory) -> str:
    """A rating study with rubric votes and no alignment ratings at all: it has no selection audit."""
    from runners.ingest import main as ingest_main
    from tests.support.rating_tables import pool_rows, rating_rows, vote_rows
    from tests.support.tables import write_table

    tmp = tmp_path_factory.mktemp("app_rubric_only")
    db = tmp / "study.duckdb"
    assert ingest_main(["table", "--pools", str(write_table(tmp / "pools.csv", pool_rows())),
                        "--votes", str(write_table(tmp / "votes.csv", vote_rows())),
                        "--ratings", f"r={write_table(tmp / 'ratings.csv', rating_rows())}",
                        "--db", str(db), "--dataset", "study"]) == 0
    return str(db)


@pytest.mark.parametrize("page", ["overview", "explorer", "judges", "gates", "findings"])
def test_selection_pages_on_a_rating_study_say_there_is_no_selection_audit(rubric_only_db, page):
    at = open_page(rubric_only_db, page)
    assert any("no selection audit" in i.value for i in at.info)


def test_the_alignment_page_audits_a_rating_study_without_alignment_ratings(rubric_only_db):
    at = open_page(rubric_only_db, "alignment")
    assert {"MAE vs a", "MAE vs b"} <= set(metrics(at))
