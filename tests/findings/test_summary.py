"""The Markdown findings report: its numbers are audit()'s, data strings render literally,
provenance is stated, and odd datasets (one judge, no scorer, a mute judge) still read."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit_core import Resampling, store
from audit_core.selection.audit import audit_selection
from audit_core.selection.data import load_selection_data
from audit_core.store.schema import ERROR_OUTCOMES
from audit_core.user_text import escape_markdown
from findings.summary import TABLE_KINDS, findings_markdown, source_note
from runners import analyze
from tests.support.app import build_app_db
from tests.support.reports import render
from tests.support.selection_data import make_data, random_data


def section(report: str, heading: str) -> str:
    """The text under a Markdown heading line, up to the next heading of any level."""
    lines = report.splitlines()
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("#")), len(lines))
    return "\n".join(lines[start:end])


def no_nan(report: str) -> None:
    assert not re.search(r"\bnan\b", report, re.IGNORECASE), report


@pytest.fixture(scope="module")
def result():
    return audit_selection(random_data(n=60, seed=4), Resampling(300, 1))


def test_each_judges_headline_numbers_are_the_audits(result) -> None:
    report = findings_markdown(result, dataset="rand", source_note="source tests")
    assert "300 prompt-level bootstrap resamples (seed 1)" in report
    policies = result.policies.set_index("policy")
    for judge in result.judges.to_dict("records"):
        p = policies.loc[judge["judge"]]
        text = section(report, f"### {judge['judge']}")
        assert f"Order-0 pick on {p['n']} of 60 prompts" in text
        assert f"Gain over random {p['gain']:+.3f} [{p['gain_lo']:+.3f}, {p['gain_hi']:+.3f}]" in text
        assert f"regret {p['regret']:.3f} [{p['regret_lo']:.3f}, {p['regret_hi']:.3f}] vs {p['random_regret']:.3f}" in text
        assert (f"Below-mean rate {p['bmr']:.0%} [{p['bmr_lo']:.0%}, {p['bmr_hi']:.0%}] vs random's matched "
                f"{p['bmr_random']:.0%}") in text
        assert f"First-slot share {judge['first_slot']:.0%} of valid calls vs {judge['first_slot_uniform']:.0%}" in text
        assert f"χ² = {judge['chi2']:.1f} (df {judge['chi2_df']}), p = {judge['chi2_p']:.2g}" in text
        assert f"on {judge['flip_rate']:.0%} of the {judge['flip_n']} prompts where every order parsed" in text
        assert f"{judge['calls']} recorded, {judge['valid']} valid; parse failures {judge['parse_fail']} (" in text

    rendered = render(report)
    table = {row[0]: row for row in rendered.table("policy", "n")}
    main = result.policies[result.policies["kind"].isin(TABLE_KINDS)]
    assert set(main["policy"]) <= set(table) and not any(" order " in name for name in table)
    for r in main.to_dict("records"):
        assert table[r["policy"]][1:4] == [str(r["n"]), f"{r['coverage']:.0%}",
                                           f"{r['gain']:+.3f} [{r['gain_lo']:+.3f}, {r['gain_hi']:+.3f}]"]
    assert set(result.gates["gate"]) == {row[0] for row in rendered.table("gate")}

    for judge in result.judges["judge"]:
        groups = result.groups[(result.groups["policy"] == judge) & (result.groups["n"] > 0)]
        worst = groups.loc[groups["regret"].idxmax()]
        (row,) = [r for r in rendered.table("judge", "worst country") if r[0] == judge]
        assert row[1] == worst["country"]
        assert row[2].startswith(f"{worst['regret']:.3f} [")
        assert row[3] == f"{worst['regret'] + worst['gain']:.3f}"  # random on the same prompts


def test_slices_gates_and_timing_sections_carry_the_audits_numbers(result) -> None:
    rendered = render(findings_markdown(result, dataset="rand"))
    judges = list(result.judges["judge"])
    rows = result.slices.set_index(["slice", "value", "policy"])
    table = rendered.table("slice", "value")
    assert {r[0] for r in table} == set(result.slice_prompts) - {"all"}
    for row in table:
        assert int(row[2]) == result.slice_prompts[row[0]][row[1]]
        for judge, cell in zip(judges, row[3:]):
            r = rows.loc[(row[0], row[1], judge)]
            assert cell == f"{r['gain']:+.3f} [{r['gain_lo']:+.3f}, {r['gain_hi']:+.3f}] (n {int(r['n'])})"
    policies = result.policies.set_index("policy")
    for row in rendered.table("gate"):
        p = policies.loc[row[0]]
        assert row[6] == f"{p['gain_vs_rejected']:+.3f} [{p['gain_vs_rejected_lo']:+.3f}, {p['gain_vs_rejected_hi']:+.3f}]"
        if p["gain_vs_rejected_lo"] > 0:
            assert row[7] == "interval excludes 0: kept above rejected"
    assert "Output validity and timing" not in "".join(rendered.text)  # no timing table attached
    timing = pd.DataFrame([{"judge": "a", "orders": 3, "calls": 180, "valid": 170, "recovered": 4, "failed": 6,
                            "not_json": 2, "seconds_median": 1.25, "seconds_mean": 1.5, "timed_prompts": 60,
                            "prompt_seconds_one_order": 1.5, "prompt_seconds_all_orders": 4.0, "all_over_one": 2.67,
                            "hours_one_order": 0.025, "hours_all_orders": 0.0667}])
    timed = render(findings_markdown(dataclasses.replace(result, timing=timing), dataset="rand"))
    assert timed.table("judge", "calls") == [["a", "180", "170", "4", "6", "2", "1.250", "1.500", "4.000", "0.067"]]


def test_wording_follows_what_the_gain_interval_includes() -> None:
    n = 24
    h = np.tile([0.0, 0.5, 1.0], (n, 1))
    picks = {"best": np.full((n, 2), 2), "worst": np.full((n, 2), 0),
             "coin": np.repeat(np.where(np.arange(n) % 2, 0, 2)[:, None], 2, axis=1)}
    report = findings_markdown(audit_selection(make_data(h, picks), Resampling(400, 0)), dataset="d")
    assert "interval excludes 0: above random" in section(report, "### best")
    assert "interval excludes 0: below random" in section(report, "### worst")
    coin = section(report, "### coin")
    assert "+0.000" in coin and "Gain over random +0.000 [" in coin and "(interval includes 0)" in coin


HOSTILE_JUDGES = ("<b>x</b>", "a|b*c_d`", ":red[j]$x$")
HOSTILE_COUNTRY = "*Star* [land](http://e.x) <i>it</i>"


def test_hostile_names_and_countries_render_literally() -> None:
    rng = np.random.default_rng(3)
    n = 30
    h = np.round(rng.random((n, 3)) * 4) / 4
    picks = {j: rng.integers(0, 3, size=(n, 2)) for j in HOSTILE_JUDGES}
    data = make_data(h, picks, countries=[HOSTILE_COUNTRY] * n)
    report = findings_markdown(audit_selection(data, Resampling(100)), dataset="data|set <script>x</script>")
    assert not re.search(r"(?<!\\)<[A-Za-z/]", report)  # every tag-like < is escaped
    for raw in HOSTILE_JUDGES:
        assert raw not in report  # only in escaped form
    rendered = render(report)
    text = "".join(rendered.text)
    for raw in (*HOSTILE_JUDGES, HOSTILE_COUNTRY, "data|set <script>x</script>"):
        assert raw in text
    assert not {"b", "i", "em", "strong", "a", "script", "code"} & set(rendered.tags)
    for table in rendered.tables:  # an escaped | does not split a cell
        assert {len(row) for row in table} == {len(table[0])}
    assert [row[:2] for row in rendered.table("judge", "worst country")] == [[j, HOSTILE_COUNTRY] for j in sorted(HOSTILE_JUDGES)]
    assert {row[0] for row in rendered.table("policy", "n")} >= {*HOSTILE_JUDGES, *(f"{j} majority" for j in HOSTILE_JUDGES)}
    assert escape_markdown("a\nb|c") == "a b\\|c"


def test_simulated_is_stated_only_when_the_note_says_so(result) -> None:
    simulated = findings_markdown(result, dataset="demo", source_note="SIMULATED demo: generated pools")
    assert simulated.splitlines()[2].startswith("> **SIMULATED data**")
    assert "SIMULATED demo: generated pools" in "".join(render(simulated).text)
    real = findings_markdown(result, dataset="cf", source_note="source culturalframes; revision abc")
    assert "SIMULATED" not in real and "Source: source culturalframes; revision abc" in "".join(render(real).text)
    assert "Source:" not in findings_markdown(result, dataset="x")


def test_source_note_marks_the_demo_and_skips_missing_fields() -> None:
    assert source_note({"source": "demo", "source_revision": "seed=0", "notes": None}) == "SIMULATED: source demo; revision seed=0"
    assert source_note({"source": "demo", "notes": "SIMULATED demo"}) == "source demo; SIMULATED demo"
    assert source_note({"source": "culturalframes", "source_revision": float("nan"), "notes": "v1"}) == "source culturalframes; v1"


def test_one_judge_without_a_scorer() -> None:
    data = random_data(n=30, n_orders=2, seed=2, judges=("solo",))
    data.scores.clear()
    report = findings_markdown(audit_selection(data, Resampling(100)), dataset="one")
    no_nan(report)
    assert "### solo" in report and report.count("### ") == 1
    assert [row[0] for row in render(report).table("gate")] == ["solo agree>=2/2"]  # no cross-judge or scorer gate
    assert "No cultural-error delta" in report or "fewer errors" in report or "more errors" in report


def test_a_judge_with_no_valid_pick() -> None:
    h = np.array([[0.1, 0.5, 0.9], [0.2, 0.4, 0.6], [0.0, 1.0, 0.5]])
    data = make_data(h, {"mute": np.full((3, 2), -1), "ok": np.array([[2, 2], [0, 1], [1, 1]])}, countries=["x", "y", "x"])
    report = findings_markdown(audit_selection(data, Resampling(50)), dataset="m")
    no_nan(report)
    mute = section(report, "### mute")
    assert "never returned a valid image" in mute and "6 recorded, 0 valid; parse failures 6 (100.0% of calls)" in mute
    rendered = render(report)
    assert ["mute", "—", "—", "—", "—", "0 of 2"] in rendered.table("judge", "worst country")
    assert next(r for r in rendered.table("gate") if r[0] == "mute agree>=2/2")[-1] == "keeps nothing"


def test_no_resamples_and_no_judges_read_without_intervals() -> None:
    h = np.array([[0.1, 0.5, 0.9], [0.2, 0.4, 0.6]])
    report = findings_markdown(audit_selection(make_data(h, {"j": np.array([[2, 1], [0, 0]])}), Resampling(0)), dataset="z")
    no_nan(report)
    assert "no bootstrap intervals (0 resamples)" in report and "(no interval)" in report
    empty = findings_markdown(audit_selection(make_data(h, {}, countries=[None, None]), Resampling(20)), dataset="z")
    no_nan(empty)
    assert "No selector judge is recorded" in empty and "No gate can be formed" in empty


def test_cultural_rows_are_those_whose_bonferroni_interval_excludes_zero() -> None:
    result = audit_selection(random_data(n=200, seed=7), Resampling(400, 2))
    rows = render(findings_markdown(result, dataset="c")).table("policy", "error")
    c = result.cultural
    c = c[c["outcome"].isin(ERROR_OUTCOMES) & c["kind"].isin(["judge", "majority", "debiased", "scorer"])]
    expected = c[(c["delta_lo_bonf"] > 0) | (c["delta_hi_bonf"] < 0)]
    assert {(r[0], r[1], r[2]) for r in rows} == {
        (p, o.replace("_", " "), s) for p, o, s in zip(expected["policy"], expected["outcome"], expected["subset"])}
    for r in rows:
        assert r[7] == ("fewer errors than random" if r[4].startswith("-") else "more errors than random")


def test_analyze_writes_the_report_with_the_datasets_provenance(tmp_path) -> None:
    db = build_app_db(tmp_path / "a.duckdb", tmp_path / "img", images=False)
    out = tmp_path / "out"
    assert analyze.main(["--db", str(db), "--dataset", "tiny", "--out", str(out), "--resamples", "40", "--seed", "5"]) == 0
    con = store.connect(db, read_only=True)
    try:
        data, row = load_selection_data(con, "tiny"), store.dataset_row(con, "tiny")
        calls = store.load_calls(con, "tiny")
    finally:
        con.close()
    result = audit_selection(data, Resampling(40, 5), calls=calls)
    expected = findings_markdown(result, dataset="tiny", source_note=source_note(row))
    written = (out / "report.md").read_text(encoding="utf-8")
    assert written == expected and "**SIMULATED data**" in written


ORDINARY = ("Gain over random +0.039 [0.016, 0.062] (interval excludes 0: above random); p < 1e-300",
            "qwen agree>=3/3 rejected", "South_Africa", "slot-a-judge", "kept − rejected: 40% (121 of 300 prompts)",
            "source demo; revision seed=0; content sha256 edcff7d0976bd15a", "3 × 4 = 12, 5 > 2 & 1 < 2", "C#, F# and x.y")


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_keeps_no_backslash(text) -> None:
    assert escape_markdown(text) == text and escape_markdown(text, line_start=True) == text


@pytest.mark.parametrize("text, escaped", [
    ("*x*", "\\*x\\*"), ("_x_", "\\_x\\_"), ("<script>", "\\<script>"), ("[a](b)", "[a\\](b)"), ("`c`", "\\`c\\`"),
    (":red[j]", "\\:red[j]"), ("$x$", "\\$x\\$"), ("a|b", "a\\|b"), ("&amp;", "\\&amp;"), ("x #", "x \\#"),
])
def test_markup_in_data_is_escaped_where_markdown_would_read_it(text, escaped) -> None:
    assert escape_markdown(text) == escaped


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126) | st.sampled_from("éü−×"), max_size=40))
def test_escaped_text_renders_as_itself(text) -> None:
    # a paragraph of its own, and inside a line (a table cell is inline too)
    for markdown, expected in ((escape_markdown(text, line_start=True), text),
                               ("x " + escape_markdown(text), "x " + text),
                               (f"| h |\n|---|\n| {escape_markdown(text)} |", text)):
        rendered = render(markdown)
        shown = "".join(rendered.tables[0][1][0] if rendered.tables else rendered.text)
        assert shown.strip() == expected.strip(), (text, markdown)
        assert set(rendered.tags) <= {"p", "table", "thead", "tbody", "tr", "th", "td"}, (text, markdown)
