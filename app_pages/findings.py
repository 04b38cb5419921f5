"""Findings: the headline numbers as a report to paste into a document, and the tables behind it.

The text shown is `findings.summary`'s, from the cached audit (data strings escaped only
where Markdown would misread them). The downloads include the full report of
`runners.report`: report.html, one self-contained file (figures, styles and gallery images
embedded), and the same report as report.md; both are built when their button is pressed.
"""

from __future__ import annotations

import functools
import json

import streamlit as st

from app_ui import context, draw, store_lock
from audit_core import store
from findings import document, images
from findings.common import library_versions
from findings.inputs import ReportInput
from findings.sections import build_sections
from findings.summary import findings_markdown, source_note

TABLES = ("policies", "gates", "groups", "positions", "judges")

sel = context.selection("findings")
draw.header("Findings", sel, "What can be said about these judges, with which intervals? A report to take away.")
result = sel.audit_selection() if sel.pools else None
data = sel.data() if sel.pools else None
rating, rating_data = sel.audit_rating(), sel.rating_data()
paths = sel.image_paths()
row = sel.dataset_row()
note = source_note(row)


@functools.cache
def full_report() -> tuple[str, str]:
    """(report.html, report.md) of this selection, as `runners.report` writes them (no Streamlit call here:
    it runs when a download button is pressed)."""
    with store_lock.reading(sel.db_path) as con:
        runs = store.load_runs(con, sel.dataset_id)
    report = ReportInput(
        dataset_id=sel.dataset_id, row=row, note=note, data=data, result=result, rating_data=rating_data,
        rating=rating, runs=runs, image_paths=paths, pool=sel.pool,
        image=lambda cid, path: images.candidate_uri(sel.db_path, sel.dataset_id, cid, path),
        versions=library_versions(),
    )
    sections = build_sections(report)
    return document.report_html(report, sections), document.report_markdown(report, sections)


st.subheader("Download")
buttons = st.columns(3 + len(TABLES) if result is not None else 2)
buttons[0].download_button("report.html", lambda: full_report()[0], f"{sel.dataset_id}_report.html", mime="text/html")
buttons[1].download_button("report.md", lambda: full_report()[1], f"{sel.dataset_id}_report.md", mime="text/markdown")
if result is not None:
    buttons[2].download_button("summary.json", json.dumps(result.to_summary(), indent=2),
                               f"{sel.dataset_id}_summary.json", mime="application/json")
    tables = result.tables()
    for button, name in zip(buttons[3:], TABLES):
        button.download_button(f"{name}.csv", tables[name].to_csv(index=False), f"{sel.dataset_id}_{name}.csv",
                               mime="text/csv")
st.caption(f"report.html: the whole report in one file that opens offline (headline estimates, position bias, every "
           "gate's kept and rejected sides, every policy, countries, cultural errors, galleries chosen by fixed rules, "
           f"method and provenance); report.md: the same as Markdown. The headline estimates with resamples "
           f"({sel.resamples:,}) and seed (0) as JSON; every policy, every gate's sides, country groups, slot shares "
           "and judge call summaries as CSV.")

if result is None:
    st.info("This dataset has no alignment ratings, so it has no selection findings; the report holds its rating "
            "judges' sections.")
    st.stop()
dataset = sel.dataset_name if sel.dataset_name == sel.dataset_id else f"{sel.dataset_name} ({sel.dataset_id})"
with st.container(border=True):
    st.markdown(findings_markdown(result, dataset=dataset, source_note=note))
