"""Findings: the headline numbers as a report to paste into a document, and the tables behind it.

The report is written by `audit_core.report` from the cached audit (every data
string in it is escaped, so judge and country names render literally); this page
shows it and offers it, the JSON summary and the main tables as downloads.
"""

from __future__ import annotations

import json

import streamlit as st

from app_ui import context, draw
from audit_core.report import findings_markdown, source_note

TABLES = ("policies", "gates", "groups", "positions", "judges")

sel = context.selection("findings")
draw.header("Findings", sel, "What can be said about these judges, with which intervals? A report to take away.")
result = sel.audit()
dataset = sel.dataset_name if sel.dataset_name == sel.dataset_id else f"{sel.dataset_name} ({sel.dataset_id})"
report = findings_markdown(result, dataset=dataset, source_note=source_note(sel.dataset_row()))

st.subheader("Download")
buttons = st.columns(2 + len(TABLES))
buttons[0].download_button("report.md", report, f"{sel.dataset_id}_report.md", mime="text/markdown")
buttons[1].download_button("summary.json", json.dumps(result.to_summary(), indent=2), f"{sel.dataset_id}_summary.json",
                           mime="application/json")
tables = result.tables()
for button, name in zip(buttons[2:], TABLES):
    button.download_button(f"{name}.csv", tables[name].to_csv(index=False), f"{sel.dataset_id}_{name}.csv",
                           mime="text/csv")
st.caption(f"The report below as Markdown; the headline estimates with resamples ({result.resamples:,}) and seed "
           f"({result.seed}) as JSON; every policy, every gate's kept and rejected sides, country groups, slot shares "
           "and judge call summaries as CSV.")

with st.container(border=True):
    st.markdown(report)
