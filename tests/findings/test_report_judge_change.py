"""The report's "Judge change" section: present with two or more selector judges (the first two compared,
baseline first, with the report's resamples and seed), absent with one; its verdict table and its
sentence hold the `JudgeChange`'s numbers; the rule is described as it is set; on the JudgeActs main
split it says what the published study says of the 4B and 8B judges."""

from __future__ import annotations

import pytest

from audit_core import audit_selection, load_selection_data, store
from audit_core.selection.judge_change import VerdictRule, compare_judges, pair_judges
from audit_core.stats.resampling import Resampling
from findings import judge_change
from findings.inputs import ReportInput
from findings.numbers import estimate, estimate_of, percent
from runners import report
from tests.support.judge_change import ingest_gate_split, ingest_main_with_8b
from tests.support.paths import JUDGEACTS_MAIN
from tests.support.reports import render

RESAMPLES = 1000
SEED = 7  # not the default: the section must take the report's seed


def write_report(db, out) -> tuple[str, str]:
    """(report.html, report.md) of dataset `split` in `db`, without figure files."""
    assert report.main(["--db", str(db), "--dataset", "split", "--out", str(out), "--resamples", str(RESAMPLES),
                        "--seed", str(SEED), "--no-figures"]) == 0
    return (out / "report.html").read_text(encoding="utf-8"), (out / "report.md").read_text(encoding="utf-8")


def load(db, dataset: str):
    con = store.connect(db, read_only=True)
    try:
        return load_selection_data(con, dataset)
    finally:
        con.close()


def test_two_selector_judges_get_the_section_with_the_judge_changes_numbers(tmp_path):
    db = ingest_gate_split(tmp_path / "split.duckdb", judges=("small", "large"))
    page, markdown = write_report(db, tmp_path / "report")
    assert '<section id="judge_change">' in page and 'id="fig-judge_change"' in page
    data = load(db, "split")
    assert data.judges[:2] == ["large", "small"]  # the audit's order: the baseline is large
    change = compare_judges(pair_judges(data, "large", "small"), resampling=Resampling(resamples=RESAMPLES, seed=SEED))

    rows = render(markdown).table(*judge_change.VERDICT_HEADER)
    expected = [[g["gate"], f"{g['judge']} ({g['role']})", percent(g["coverage"]), estimate_of(g, "kept_gain", True),
                 estimate_of(g, "rejected_gain", True), estimate_of(g, "kept_minus_rejected", True), g["verdict"]]
                for g in change.gates.to_dict("records")]
    assert rows == expected and len(rows) == 4  # orders>=2/3 and orders>=3/3, each for both judges
    verdicts = {(r[0], r[1]): r[6] for r in rows}
    assert verdicts[("orders>=3/3", "large (baseline)")] == "discards good decisions"
    assert verdicts[("orders>=3/3", "small (candidate)")] == "filters failures"

    text = " ".join(render(markdown).text)
    split = change.disagreement
    assert f"The order-0 picks of large and small differ on {split.n} of the {split.both} prompts" in text
    assert estimate(*split.difference, signed=True) in text
    assert judge_change.rule_in_words(VerdictRule()) in text


def test_one_selector_judge_gets_no_judge_change(tmp_path):
    db = ingest_gate_split(tmp_path / "one.duckdb", judges=("small",))
    page, markdown = write_report(db, tmp_path / "report")
    assert '<section id="headline">' in page  # the selection sections are there
    assert 'id="judge_change"' not in page and "Judge change" not in markdown


def test_the_rule_is_described_with_the_thresholds_it_holds():
    words = judge_change.rule_in_words(VerdictRule(filters_rejected_lo_at_most=-0.0125,
                                                   filters_kept_minus_rejected_lo_above=0.05,
                                                   discards_rejected_lo_above=0.02))
    assert "rejected side's gain is at most -0.0125 and the lower end of kept − rejected gain is above 0.05" in words
    assert "\"discards good decisions\" when the lower end of the rejected side's gain is above 0.02" in words


def test_on_the_judgeacts_main_split_the_section_says_what_the_study_says_of_the_4b_and_8b_judges(tmp_path):
    if not JUDGEACTS_MAIN.is_dir():
        pytest.skip(f"{JUDGEACTS_MAIN} is not available")
    data = load(ingest_main_with_8b(tmp_path / "ja.duckdb"), "main")
    result = audit_selection(data, Resampling(resamples=RESAMPLES, seed=0))
    section = judge_change.judge_change(ReportInput("main", {}, "", data, result))
    assert list(result.judges["judge"][:2]) == ["qwen", "qwen8b"]
    texts = [b.text for b in section.blocks if hasattr(b, "text")]
    # published (scale extension): picks differ on 126 prompts, where the 4B gains -0.039 and the 8B +0.098
    assert any(t.startswith("The order-0 picks of qwen and qwen8b differ on 126 of the 300 prompts both picked on. "
                            "There, qwen's gain over random is -0.039 [") and "qwen8b's +0.098 [" in t for t in texts)
    (table,) = [b for b in section.blocks if hasattr(b, "rows")]
    unanimity = {r[1]: r for r in table.rows if r[0] == "orders>=3/3"}
    # published: the unanimity gate's rejected side gains -0.030 for the 4B judge and +0.068 for the 8B judge
    assert unanimity["qwen (baseline)"][4].startswith("-0.030 [")
    assert unanimity["qwen (baseline)"][6] == "filters failures"
    assert unanimity["qwen8b (candidate)"][4].startswith("+0.068 [")
    assert unanimity["qwen8b (candidate)"][6] == "discards good decisions"
