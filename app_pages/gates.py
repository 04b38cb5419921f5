"""Gate lab: what does each gate keep, what does it reject, and at what coverage?

A gate acts only when orders (or judges, or judge and scorer) agree. Its value
is judged on both sides: the prompts it keeps and the prompts it rejects, each
next to random and to the ungated judge on the same prompts, and by the paired
kept − rejected difference. Pick a standard gate, or compose one from conditions
joined with AND/OR (`audit_core.selection.gate_compose`; its text form is kept in the URL as
`compose`). Both are marked in every chart; coverage stands beside every gate.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_ui import context, draw, gate_views, glance
from findings import figures

sel = context.selection("gates")
draw.header(
    "Gate lab",
    sel,
    "Does abstaining when orders or judges disagree leave better picks behind, and at what coverage?",
)
result = sel.audit_selection()
if result.gates.empty:
    st.info("No gate can be formed on this dataset: it needs several orders, several judges or a scorer.")
    st.stop()
data = sel.data()
colours = glance.name_colours(sel)  # the same mapping as every other page

# --- a standard gate
names = list(dict.fromkeys(result.gates["gate"]))
coverage = result.gates[result.gates["side"] == "kept"].set_index("gate")["coverage"]
gate = context.bound(st.selectbox, "Gate", "gate", names[0], names,
                     format_func=lambda g: figures.with_coverage(g, coverage.get(g)))
gate_views.side_cards(result.gates[result.gates["gate"] == gate])

# --- a composed gate
st.subheader("Compose a gate")
st.caption("A base judge acts only where the conditions hold; AND binds tighter than OR. It returns the judge's "
           "majority pick over its orders when a condition reads the judge's own orders, else its order-0 pick; "
           "the rejected side is the judge's order-0 pick where the gate abstains.")
composed = gate_views.composer(sel, data)
extra = None
if composed is not None:
    extra = gate_views.composed_result(sel, composed)
    st.markdown(f"**{draw.esc(extra.name)}**")
    gate_views.side_cards(extra.gates)

# --- charts: the selected gate and the composed one marked in each
gates = result.gates if extra is None else pd.concat([result.gates, extra.gates], ignore_index=True)
draw.chart(figures.gate_chart(gates, gate, extra.name if extra else None),
           "Every gate, with the share of prompts it keeps: gain over random on the prompts it keeps vs rejects; "
           "diamonds: the ungated judge on the same prompts; dashed: random; shaded: the selected and composed gates.")

judge_of = result.gates.drop_duplicates("gate").set_index("gate")["base_judge"]
countries = result.groups[result.groups["policy"] == gate].assign(judge=judge_of[gate])
if extra is not None:
    countries = pd.concat([countries, extra.countries.assign(judge=composed.judge)], ignore_index=True)
draw.chart(gate_views.country_chart(countries, colours, extra.name if extra else None),
           "Share of each country's prompts the selected gate (and the composed gate, hatched) keeps; "
           "a country it never keeps has no bar: zero coverage, not zero risk.")

curve = result.risk_coverage.dropna(subset=["regret"])
draw.chart(gate_views.risk_chart(curve, colours, gate, extra.point if extra else None),
           "Lines: each judge from its order-0 pick (100%) through majority to stricter agreement thresholds; "
           "dotted: random on the same prompts; other markers: cross-judge and scorer gates; hexagram: the composed "
           "gate with its 95% interval; ring: the selected gate.")

with st.expander("All gates as a table"):
    st.dataframe(gate_views.gates_table(gates), hide_index=True, width="stretch")
    st.caption("Kept: the prompts where the gate acts; rejected: those where it abstains, measured with the judge's "
               "own pick there. Kept − rejected: the kept side's mean minus the rejected side's, with a 95% "
               "interval resampling all prompts together. A dash: no prompt on that side.")
