"""The findings report on an attribute dataset: it builds on attributes-demo, its attribute sections hold the
attribute audit's numbers (both policies with coverage, the ablations, the CLIP baseline) and its figures."""

from __future__ import annotations

import pandas as pd
import pytest

from audit_core import Resampling, store
from audit_core.attributes.audit import audit_attributes, load_attribute_data
from findings.blocks import Figure
from findings.numbers import percent
from findings.sections import build_sections
from runners import report
from runners.demo import attributes as demo_attributes
from tests.support.reports import render

RESAMPLES = 50


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    db = tmp_path_factory.mktemp("report_attributes") / "demo.duckdb"
    demo_attributes.build_attribute_demo(db, n_prompts=6)
    return db


def test_the_report_builds_on_the_attribute_demo_with_the_audits_numbers(built, tmp_path, capsys):
    out = tmp_path / "report"
    assert report.main(["--db", str(built), "--dataset", demo_attributes.DATASET, "--out", str(out),
                        "--resamples", str(RESAMPLES), "--no-figures"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert {"attributes.csv", "confusion.csv", "summary.json", "report.html", "report.md"} <= {
        p.name for p in out.iterdir()}
    page = (out / "report.html").read_text(encoding="utf-8")
    for key in ("attributes", "ablations", "baseline"):
        assert f'<section id="{key}">' in page
    assert "SIMULATED" in page and "Attribute judges: accuracy per attribute" in (out / "report.md").read_text()
    con = store.connect(built, read_only=True)
    try:
        result = audit_attributes(load_attribute_data(con, demo_attributes.DATASET), Resampling(RESAMPLES))
    finally:
        con.close()
    parsed = render((out / "report.md").read_text(encoding="utf-8"))
    rows = parsed.table("judge", "condition", "attribute", "images", "coverage")
    default = result.cells[result.cells["condition"] == "default"]
    assert len(rows) == len(default)  # every judge (the baseline included) × attribute, default condition
    shown = {(r[0], r[2]): r for r in rows}
    for cell in default.to_dict("records"):
        who = cell["judge"] + (" (CLIP baseline)" if cell["backend"] == "clip" else "")
        row = shown[(who, cell["attribute"])]
        assert row[3] == str(cell["n"]) and row[4] == percent(cell["coverage"])
        assert row[5].startswith(percent(cell["accuracy_miss"]))
        excluded = cell["accuracy_exclude"]
        assert row[6] == "undefined" if pd.isna(excluded) else row[6].startswith(percent(excluded))
    ablations = parsed.table("judge", "condition", "attributes", "coverage", "abstained")
    assert {(r[0], r[1]) for r in ablations} == {(j, c) for j, _ in demo_attributes.DEMO_LABELERS
                                               for c in demo_attributes.CONDITIONS}
    baseline = parsed.table("baseline", "attribute", "baseline accuracy")
    assert [r[1] for r in baseline] == list(result.taxonomy.names()) and {r[0] for r in baseline} == {"clip-zero-shot"}


def test_the_attribute_sections_draw_accuracy_under_both_policies(built):
    loaded = report.load_report(built, demo_attributes.DATASET, Resampling(RESAMPLES, 0), "all")
    figures = {f.name: f for s in build_sections(loaded) for f in s.figures if isinstance(f, Figure)}
    for name in ("attribute_accuracy_miss", "attribute_accuracy_exclude"):
        traces = figures[name].figure.data
        assert {t.name for t in traces} == {"careful-labeler", "guessing-labeler", "clip-zero-shot (CLIP baseline)"}
        assert all(list(t.x) == list(loaded.attributes.taxonomy.names()) for t in traces)
