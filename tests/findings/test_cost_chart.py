"""Gain against cost (`findings.figures.cost_gain_chart`): the chart draws the front and names the cheapest
best policy of each judge that `audit_core.selection.costs.cost_front` finds on a hand-built table, escapes
judge names, and the report on the demo carries it as a figure file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit_core.user_text import escape_html
from findings.figures import cost_gain_chart
from runners import demo, report

CHROMIUM = Path("/usr/bin/chromium")
HOSTILE = "b <b>x</b> \u202e1.5\u202c"


def policies(second: str = "b") -> pd.DataFrame:
    """Judge a: order 0 < prior-corrected (1.4 calls) < Borda (3 calls, ties calibrated); judge `second`'s
    order-0 pick beats its majority."""
    rows = [
        ("random", "random", None, 0.0, 0.0, 0.0, 0.0, 0.0),
        ("a", "judge", "a", 1.0, 2.0, 0.10, 0.05, 0.15),
        ("a majority", "majority", "a", 3.0, 6.0, 0.11, 0.06, 0.16),
        ("a borda", "debiased", "a", 3.0, 6.0, 0.20, 0.15, 0.25),
        ("a calibrated", "debiased", "a", 3.0, 6.0, 0.20, 0.15, 0.25),
        ("a prior-corrected", "debiased", "a", 1.4, 2.8, 0.15, 0.10, 0.20),
        (second, "judge", second, 1.0, np.nan, 0.30, 0.20, 0.40),
        (f"{second} majority", "majority", second, 3.0, np.nan, 0.25, 0.20, 0.30),
    ]
    return pd.DataFrame(rows, columns=["policy", "kind", "base_judge", "calls_per_prompt", "seconds_per_prompt",
                                       "gain", "gain_lo", "gain_hi"]).assign(n=50)


def test_the_chart_draws_each_judges_front_and_names_its_cheapest_best():
    fig = cost_gain_chart(policies(), {"a": "#111111", "b": "#222222"})
    assert [a.text for a in fig.layout.annotations if a.text.startswith("best")] == ["best: a borda", "best: b"]
    points = [t for t in fig.data if t.mode == "markers" and t.customdata is not None]
    assert [[c[0] for c in t.customdata] for t in points] == [
        ["a", "a prior-corrected", "a borda", "a calibrated", "a majority"], ["b", "b majority"]]
    assert [c[2] for c in points[0].customdata] == [1.0, 1.4, 3.0, 3.0, 3.0]  # the exact cost, in the hover
    fronts = [t for t in fig.data if t.mode == "lines"]
    assert [list(t.y) for t in fronts] == [[0.10, 0.15, 0.20], [0.30]] and fronts[0].line.shape == "hv"
    # judges sharing a cost are drawn side by side, the ring on the best point where it is drawn
    assert points[0].x[0] < 1.0 < points[1].x[0]
    rings = [t for t in fig.data if t.mode == "markers" and t.marker.size == 22]
    assert [(r.x[0], r.y[0]) for r in rings] == [(points[0].x[2], 0.20), (points[1].x[0], 0.30)]
    assert list(points[0].error_y.array) == pytest.approx([0.05] * 5)


def test_by_seconds_an_untimed_judge_is_not_drawn():
    fig = cost_gain_chart(policies(), {"a": "#111111"}, "seconds_per_prompt")
    assert [a.text for a in fig.layout.annotations if a.text.startswith("best")] == ["best: a borda"]
    assert fig.layout.xaxis.title.text == "judge seconds per prompt"


def test_a_hostile_judge_name_is_escaped_in_the_legend_hover_and_label():
    fig = cost_gain_chart(policies(HOSTILE), {})
    escaped = escape_html(HOSTILE)
    assert "<b>" not in escaped and "\u202e" not in escaped
    assert escaped in {t.name for t in fig.data}
    assert f"best: {escaped}" in [a.text for a in fig.layout.annotations]
    assert all("<b>" not in str(c[0]) for t in fig.data if t.customdata is not None for c in t.customdata)


def test_the_demo_report_has_the_cost_figure(tmp_path):
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium for the figure export")
    db, out = tmp_path / "demo.duckdb", tmp_path / "report"
    assert demo.main(["--db", str(db), "--prompts", "40", "--rating-prompts", "4", "--attribute-prompts", "2",
                      "--quiet"]) == 0
    assert report.main(["--db", str(db), "--dataset", "demo", "--out", str(out), "--resamples", "50"]) == 0
    assert (out / "figures" / "cost_gain.svg").read_text()[:200].lstrip().startswith("<svg")
    assert (out / "figures" / "cost_gain.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    markdown, html = (out / "report.md").read_text(), (out / "report.html").read_text()
    assert "figures/cost_gain.svg" in markdown and ">Gain against cost</h2>" in html
    assert 'id="fig-cost_gain"' in html and "cheapest best policy" in markdown
