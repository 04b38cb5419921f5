"""The Judge comparison page's judge change, driven by Streamlit's AppTest on the built study where the
unanimity gate splits two judges (tests/support/judge_change.py): the baseline/candidate picker in the
URL, the chart's points against the `JudgeChange`, the verdict table against `runners.compare`'s
gates.csv, and hostile judge names in a link."""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app_ui import judge_change_views
from audit_core import load_selection_data, store
from audit_core.selection.judge_change import JudgeChange, compare_judges, pair_judges
from audit_core.stats.resampling import Resampling
from audit_core.store import audit_cache
from findings import numbers
from findings.judge_change import VERDICT_HEADER
from runners import analyze, compare, demo
from tests.support.app import UNEXPECTED, open_app
from tests.support.cache import assert_same_result
from tests.support.judge_change import gate_split, ingest_gate_split

pytestmark = pytest.mark.usefixtures("data_folder")  # the app may open the test databases (tests/conftest.py)

RESAMPLES = 1000
CHART = "Paired differences, candidate − baseline"
MEASURES = ["gain", "regret", "bmr", "best"]  # the chart's default measures and policies
POLICIES = ["order0", "majority", "orders>=3/3", "all orders"]


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    return str(ingest_gate_split(tmp_path_factory.mktemp("judge_change") / "split.duckdb"))


def changed(db: str, baseline: str, candidate: str):
    """The JudgeChange the page should show: standard gates, RESAMPLES resamples, seed 0."""
    con = store.connect(db, read_only=True)
    try:
        data = load_selection_data(con, "split")
    finally:
        con.close()
    return compare_judges(pair_judges(data, baseline, candidate), resampling=Resampling(resamples=RESAMPLES, seed=0))


def open_judges(db: str, **params: str | list[str]) -> AppTest:
    at = open_app({"db": db, "page": "judges", "dataset": "split", "resamples": str(RESAMPLES), **params})
    assert not [e.value for e in at.error if UNEXPECTED in e.value]
    return at


def chart(at: AppTest) -> dict:
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    (spec,) = [s for s in specs if s["layout"]["title"]["text"] == CHART]
    (points,) = spec["data"]
    return {**points, "x": _values(points["x"]), "minus": _values(points["error_x"]["arrayminus"]),
            "plus": _values(points["error_x"]["array"])}


def _values(column: object) -> list:
    """Plotly sends numeric arrays as base64 `bdata`."""
    if isinstance(column, dict) and "bdata" in column:
        return np.frombuffer(base64.b64decode(column["bdata"]), dtype=column["dtype"]).tolist()
    return list(column)


def verdict_table(at: AppTest) -> pd.DataFrame:
    (table,) = [d.value for d in at.dataframe if list(d.value.columns) == list(VERDICT_HEADER)]
    return table


def refused(at: AppTest) -> set[str]:
    """The URL parameters named by the page's "does not exist" warnings."""
    return {w.value.split("`")[1] for w in at.warning
            if w.value.startswith("This link's") and "does not exist" in w.value}


def test_the_picker_defaults_to_the_first_two_judges_and_keeps_a_chosen_pair_in_the_url(db):
    at = open_judges(db)
    assert (at.selectbox(key="baseline").value, at.selectbox(key="candidate").value) == ("large", "small")
    assert at.selectbox(key="candidate").options == ["small", "small_copy"]  # never the baseline
    assert "baseline" not in at.query_params and "candidate" not in at.query_params  # defaults leave the URL clean

    at = open_judges(db, baseline="small", candidate="small_copy")
    assert (at.selectbox(key="baseline").value, at.selectbox(key="candidate").value) == ("small", "small_copy")
    assert not refused(at) and (at.query_params["baseline"], at.query_params["candidate"]) == ("small", "small_copy")

    at.selectbox(key="baseline").set_value("small_copy").run()  # the candidate's judge: the candidate gets its default
    assert (at.selectbox(key="baseline").value, at.selectbox(key="candidate").value) == ("small_copy", "large")
    assert not refused(at) and not at.exception
    assert at.query_params["baseline"] == "small_copy" and "candidate" not in at.query_params

    at.selectbox(key="candidate").set_value("small").run()
    assert at.query_params["candidate"] == "small"


def test_the_chart_shows_the_judge_changes_paired_differences_row_for_row(db):
    at = open_judges(db, baseline="small", candidate="large")
    rows = changed(db, "small", "large").compare.set_index(["measure", "policy"])
    shown = chart(at)
    expected = [(m, p) for m in MEASURES for p in POLICIES if (m, p) in rows.index]
    assert len(shown["x"]) == len(expected) == 12  # four measures × order 0, majority and the unanimity gate
    for k, (measure, policy) in enumerate(expected):
        row = rows.loc[(measure, policy)]
        assert shown["y"][k].endswith(f"· {policy.replace('>', '&gt;')} (n {int(row['n'])})")
        assert shown["x"][k] == pytest.approx(row["difference"], abs=1e-12)
        assert shown["x"][k] - shown["minus"][k] == pytest.approx(row["difference_lo"], abs=1e-12)
        assert shown["x"][k] + shown["plus"][k] == pytest.approx(row["difference_hi"], abs=1e-12)

    # independently of audit_core: the order-0 gain difference is the mean of large's minus small's gain
    h, picks = gate_split()
    gain = {j: h[np.arange(len(h)), picks[j][:, 0]] - h.mean(axis=1) for j in ("small", "large")}
    assert shown["x"][0] == pytest.approx(float(np.mean(gain["large"] - gain["small"])), abs=1e-12)

    at = open_judges(db, baseline="small", candidate="large", measure=["flip_rate", "first_slot"], policy="all orders")
    assert at.multiselect(key="measure").value == ["flip_rate", "first_slot"]
    assert [y.split(" (n")[0] for y in chart(at)["y"]] == ["flip rate · all orders", "first-slot share · all orders"]
    assert chart(at)["x"] == pytest.approx([rows.loc[("flip_rate", "all orders"), "difference"],
                                            rows.loc[("first_slot", "all orders"), "difference"]], abs=1e-12)


def test_the_picks_differ_sentence_and_the_verdicts_equal_runners_compare(db, tmp_path):
    at = open_judges(db, baseline="small", candidate="large")
    change = changed(db, "small", "large")
    h, picks = gate_split()
    differ = int((picks["small"][:, 0] != picks["large"][:, 0]).sum())
    assert change.disagreement.n == differ == 30
    texts = [re.sub(r"\\(.)", r"\1", m.value) for m in at.markdown]  # as the reader sees them: escapes resolved
    (sentence,) = [t for t in texts if t.startswith("The order-0 picks of")]
    assert f"differ on {differ} of the {len(h)} prompts" in sentence
    for gain in (change.disagreement.baseline_gain, change.disagreement.candidate_gain, change.disagreement.difference):
        assert numbers.estimate(*gain, signed=True) in sentence
    (rule,) = [t for t in texts if t.startswith("Each gate gets a verdict")]
    assert "at most 0 and the lower end of kept − rejected gain is above 0" in rule

    out = tmp_path / "compare"
    assert compare.main(["--db", db, "--dataset", "split", "--baseline", "small", "--candidate", "large", "--out",
                         str(out), "--resamples", str(RESAMPLES), "--seed", "0"]) == 1  # the unanimity check fails
    gates = pd.read_csv(out / "gates.csv")
    role = {"small": "baseline", "large": "candidate"}
    expected = [[g["gate"], f"{g['judge']} ({role[g['judge']]})", numbers.percent(g["coverage"]),
                 numbers.estimate_of(g, "kept_gain", True), numbers.estimate_of(g, "rejected_gain", True),
                 numbers.estimate_of(g, "kept_minus_rejected", True), g["verdict"]] for g in gates.to_dict("records")]
    assert verdict_table(at).values.tolist() == expected
    unanimity = gates[gates["gate"] == "orders>=3/3"].set_index("judge")["verdict"]
    assert unanimity.to_dict() == {"small": "filters failures", "large": "discards good decisions"}


@pytest.mark.parametrize("hostile", ['<script>alert(1)</script>', "../../etc/passwd", "a\u202eb", "x" * 5_000,
                                     "small\x00", "large@candidate"])
def test_a_hostile_judge_name_in_the_link_is_refused_and_the_defaults_are_shown(db, hostile):
    at = open_judges(db, baseline=hostile, candidate=hostile)
    assert refused(at) >= {"baseline", "candidate"}
    assert (at.selectbox(key="baseline").value, at.selectbox(key="candidate").value) == ("large", "small")
    assert verdict_table(at)["judge"].tolist()[:2] == ["large (baseline)", "small (candidate)"]
    assert all(len(w.value) < 1_000 and "\u202e" not in w.value and "\x00" not in w.value for w in at.warning)


def test_a_link_naming_the_baseline_as_candidate_gets_the_first_other_judge(db):
    at = open_judges(db, baseline="small", candidate="small")
    assert refused(at) == {"candidate"}
    assert (at.selectbox(key="baseline").value, at.selectbox(key="candidate").value) == ("small", "large")


def test_analyze_cache_only_keeps_the_pair_the_page_opens_with_and_the_page_reads_it(tmp_path, monkeypatch):
    """`runners.analyze --cache-only` on the demo keeps the judge change of its first judge against the first other
    one (the page's defaults) for its pool and resamples; the page's first opening then reads it from the cache
    instead of computing it, and shows its verdicts."""
    db = tmp_path / "demo.duckdb"
    assert demo.main(["--db", str(db), "--prompts", "30", "--rating-prompts", "4", "--attribute-prompts", "2",
                      "--quiet"]) == 0
    assert analyze.main(["--db", str(db), "--dataset", "demo", "--resamples", str(RESAMPLES), "--cache-only"]) == 0
    con = store.connect(db, read_only=True)
    try:
        data = load_selection_data(con, "demo")
        content = audit_cache.dataset_fingerprint(con, "demo")
    finally:
        con.close()
    baseline, candidate = data.judges[:2]
    settings = Resampling(RESAMPLES, 0)
    kept = audit_cache.load(db, audit_cache.judge_change_key(content, "demo", settings, "all", baseline, candidate),
                            JudgeChange)
    assert_same_result(kept, compare_judges(pair_judges(data, baseline, candidate), resampling=settings))

    def computed(*_, **__):
        raise AssertionError("the page computed the judge change it should have read")

    monkeypatch.setattr(judge_change_views, "compare_judges", computed)
    at = open_app({"db": str(db), "page": "judges", "dataset": "demo", "resamples": str(RESAMPLES)})
    assert not [e.value for e in at.error if UNEXPECTED in e.value]
    assert (at.selectbox(key="baseline").value, at.selectbox(key="candidate").value) == (baseline, candidate)
    assert verdict_table(at)["verdict"].tolist() == kept.gates["verdict"].tolist()


def test_a_dataset_with_one_selector_judge_has_no_judge_change(tmp_path_factory):
    db = str(ingest_gate_split(tmp_path_factory.mktemp("one_judge") / "one.duckdb", judges=("small",)))
    at = open_judges(db)
    assert not [s for s in at.selectbox if s.key in ("baseline", "candidate")]
    assert not [c for c in at.get("plotly_chart") if CHART in c.proto.spec]
    assert at.title[0].value == "Judge comparison"
