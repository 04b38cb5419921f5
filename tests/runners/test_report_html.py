"""`runners.report`: the self-contained report on the demo (selection and rating datasets) and on
the JudgeActs main split. Its headline numbers are summary.json's, every figure is exported as
SVG and PNG, and opened in headless Chromium the page requests nothing and throws no error."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest

from runners import demo, report
from tests.support.app import build_app_db
from tests.support.judgeacts import ingest_main_split
from tests.support.paths import JUDGEACTS_MAIN as JUDGEACTS
from tests.support.reports import Rendered, render

RESAMPLES = "200"
CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    assert demo.main(["--db", str(db), "--prompts", "50", "--rating-prompts", "20", "--attribute-prompts", "4",
                      "--quiet"]) == 0
    return db


@pytest.fixture(scope="module")
def demo_report(demo_db, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report")
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium for the figure export")
    assert report.main(["--db", str(demo_db), "--dataset", "demo", "--out", str(out), "--resamples", RESAMPLES]) == 0
    return out


def fmt(value, signed=False):
    return "—" if value is None else f"{value:+.3f}" if signed else f"{value:.3f}"


def with_ci(entry, stat, signed=False):
    lo, hi = entry[f"{stat}_ci"]
    return fmt(entry[stat], signed) + ("" if lo is None else f" [{fmt(lo, signed)}, {fmt(hi, signed)}]")


def check_headline(out: Path) -> None:
    """Every row of the Markdown and HTML headline tables states summary.json's numbers."""
    summary = {p["policy"]: p for p in json.loads((out / "summary.json").read_text())["policies"]}
    md = render((out / "report.md").read_text(encoding="utf-8")).table("policy", "prompts", "coverage")
    page = render_html((out / "report.html").read_text(encoding="utf-8")).table("policy", "prompts", "coverage")
    assert md[: len(page)] == page[: len(md)] and md
    kinds = {"random", "oracle", "judge", "majority", "debiased", "scorer"}
    expected = [p for p in summary.values() if p["kind"] in kinds]
    headline = md[: len(expected)]
    assert [r[0] for r in headline] == [p["policy"] for p in expected]
    for row, p in zip(headline, expected):
        assert row[1] == str(p["n"]) and row[2] == f"{round(p['coverage'] * 100)}%"
        assert row[3] == with_ci(p, "gain", signed=True) and row[4] == with_ci(p, "regret")


def render_html(text: str) -> Rendered:
    """The report's tables, parsed as the browser would see their cells."""
    return Rendered(text)


def test_demo_report_states_summary_json_and_exports_every_figure(demo_report) -> None:
    check_headline(demo_report)
    html = (demo_report / "report.html").read_text(encoding="utf-8")
    for heading in ("Headline estimates", "Position bias", "Gates: what each keeps and rejects", "Every policy",
                    "Regret by country", "Cultural errors", "Gain against cost", "Example galleries", "Method in brief",
                    "Provenance"):
        assert f">{heading}</h2>" in html
    summary = json.loads((demo_report / "summary.json").read_text())
    policies = {p["policy"]: p for p in summary["policies"]}
    gates = render_html(html).table("gate", "kept: prompts (coverage)")
    assert gates and all(row[0] in policies for row in gates)
    table = pd.read_csv(demo_report / "policies.csv").set_index("policy")
    for row in gates:  # the paired kept − rejected difference and its interval, not "overlap" wording
        r = table.loc[row[0]]
        assert row[7] == f"{r['gain_vs_rejected']:+.3f} [{r['gain_vs_rejected_lo']:+.3f}, {r['gain_vs_rejected_hi']:+.3f}]"
        assert row[8].startswith(f"{r['regret_vs_rejected']:+.3f} [")
    assert "overlap" not in (demo_report / "report.md").read_text()
    for name in ("policies", "gates", "groups", "cultural", "judges", "positions"):
        assert (demo_report / f"{name}.csv").is_file()
    figures = sorted((demo_report / "figures").iterdir())
    names = {p.stem for p in figures}
    assert names == {"headline_gain", "cost_gain", "cost_gain_seconds", "slots", "gates", "gate_difference", "countries",
                     "cultural", "judge_change"}
    for name in names:
        assert (demo_report / "figures" / f"{name}.svg").read_text()[:200].lstrip().startswith("<svg")
        assert (demo_report / "figures" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"figures/{name}.svg" in (demo_report / "report.md").read_text()
    assert html.count("data:image/jpeg;base64,") >= 10  # gallery thumbnails embedded
    for rule in ("a) Largest-regret below-mean picks", "b) Same slot in every order", "c) The unanimity gate",
                 "d) Judge and content scorer disagree most"):
        assert rule in html


def test_demo_markdown_reads_as_plain_text(demo_report) -> None:
    text = (demo_report / "report.md").read_text(encoding="utf-8")
    assert "\\" not in text  # no data string of the demo needs an escape: no backslash soup
    assert "South Africa" in text and "slot-a-judge agree>=3/3" in text
    assert not {"em", "code", "a", "script"} & set(render(text).tags)


def test_the_page_requests_nothing_and_throws_no_error(demo_report) -> None:
    if not DRIVER.exists():
        pytest.skip("no /usr/bin/chromedriver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--window-size=1300,1800"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(DRIVER)), options=options)
    try:
        driver.get((demo_report / "report.html").as_uri())
        deadline = time.monotonic() + 30
        plots = 0
        figures = len(list((demo_report / "figures").glob("*.svg")))
        while time.monotonic() < deadline and plots < figures:  # every figure drawn by the embedded plotly.js
            plots = driver.execute_script("return document.querySelectorAll('.js-plotly-plot .main-svg').length ? "
                                          "document.querySelectorAll('.js-plotly-plot').length : 0")
            time.sleep(0.2)
        assert plots == figures
        assert driver.execute_script("return Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
        events = [json.loads(e["message"])["message"] for e in driver.get_log("performance")]
        console = driver.get_log("browser")
    finally:
        driver.quit()
    urls = [e["params"]["request"]["url"] for e in events if e["method"] == "Network.requestWillBeSent"]
    assert urls and urls[0] == (demo_report / "report.html").as_uri()
    assert [u for u in urls[1:] if not u.startswith("data:")] == []  # nothing but the file and its data URIs
    assert [e for e in console if e["level"] in ("SEVERE", "WARNING")] == []


def test_a_rating_only_dataset_gets_the_rating_sections(demo_db, tmp_path) -> None:
    out = tmp_path / "ratings"
    args = ["--db", str(demo_db), "--dataset", "ratings-demo", "--out", str(out), "--resamples", RESAMPLES,
            "--no-figures"]
    assert report.main(args) == 0
    html = (out / "report.html").read_text(encoding="utf-8")
    # its pools' alignment consensus also gives it the selection sections (one per reference pool via --pool)
    assert "Rating judges: alignment per pool" in html and "Rating judges: tilt between pools" in html
    summary = json.loads((out / "summary.json").read_text())
    rows = render((out / "report.md").read_text(encoding="utf-8")).table("judge", "condition", "pool")
    expected = [a for a in summary["alignment"] if a["group"] == "all"]
    assert len(rows) == len(expected)
    for row, a in zip(rows, expected):
        assert row[:3] == [a["judge"], a["condition"], a["pool"]] and row[3] == str(a["n"])
        assert row[5].startswith(f"{a['mae']:.3f} [")
    assert (out / "alignment.csv").is_file() and (out / "tilt.csv").is_file() and not (out / "figures").exists()


def test_bad_input_is_one_line_and_exit_2(demo_db, tmp_path, capsys) -> None:
    assert report.main(["--db", str(tmp_path / "nope.duckdb"), "--dataset", "demo", "--out", str(tmp_path)]) == 2
    assert report.main(["--db", str(demo_db), "--dataset", "nope", "--out", str(tmp_path / "o")]) == 2
    assert report.main(["--db", str(demo_db), "--dataset", "demo", "--pool", "zz", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("error: ") for line in err)
    assert "'nope'" in err[1] and "known: " in err[1] and "'zz'" in err[2]
    assert not (tmp_path / "o").exists()


def test_judgeacts_main_split_report_states_summary_json(tmp_path) -> None:
    if not JUDGEACTS.is_dir():
        pytest.skip(f"{JUDGEACTS} is not available")
    db = tmp_path / "ja.duckdb"
    ingest_main_split(db)
    out = tmp_path / "out"
    assert report.main(["--db", str(db), "--dataset", "main", "--out", str(out), "--resamples", RESAMPLES,
                        "--no-figures"]) == 0
    check_headline(out)
    md = (out / "report.md").read_text(encoding="utf-8")
    # the published point estimates (tests/audit_core/selection/test_analyze_published.py), as the report prints them
    every_policy = [t for t in render(md).tables if t[0][:3] == ["policy", "prompts", "coverage"]][-1]
    rows = {r[0]: r for r in every_policy[1:]}
    assert rows["qwen"][3].startswith("+0.039 [") and rows["qwen"][4].startswith("0.160 [")
    assert rows["qwen agree>=3/3"][1:3] == ["121", "40%"] and rows["qwen agree>=3/3"][3].startswith("+0.141 [")
    assert "no image" in md  # the split carries no images: its gallery tiles say so


HOSTILE = ("*x*", "<script>alert(1)</script>", "a|b_c_")


def test_hostile_judge_names_render_literally_in_both_reports(tmp_path) -> None:
    db = build_app_db(tmp_path / "h.duckdb", tmp_path / "img", judges=HOSTILE)
    out = tmp_path / "out"
    assert report.main(["--db", str(db), "--dataset", "tiny", "--out", str(out), "--resamples", "50",
                        "--no-figures"]) == 0
    md = (out / "report.md").read_text(encoding="utf-8")
    rendered = render(md)
    assert not {"em", "script", "a", "code"} & set(rendered.tags)  # (strong: the report's own bold pool headings)
    text = "".join(rendered.text)
    for name in HOSTILE:
        assert name in text  # rendered literally
    headline = {r[0] for r in rendered.table("policy", "prompts", "coverage")}
    assert set(HOSTILE) <= headline
    for table in rendered.tables:  # an escaped | does not split a cell
        assert {len(row) for row in table} == {len(table[0])}
    html = (out / "report.html").read_text(encoding="utf-8")
    body = html[html.index("<body>"):]
    assert "<script>alert(1)</script>" not in body and "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "no image" not in body  # the fixture's images are embedded
