"""Gate lab: what does each gate keep, what does it reject, and at what coverage?

A gate acts only when orders (or judges, or judge and scorer) agree. Its value
is judged on both sides: the prompts it keeps and the prompts it rejects, each
next to random and to the ungated judge on the same prompts.
"""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from app_ui import context, draw

sel = context.selection("gates")
draw.header(
    "Gate lab",
    sel,
    "Does abstaining when orders or judges disagree leave better picks behind, and at what coverage?",
)
result = sel.audit()
if result.gates.empty:
    st.info("No gate can be formed on this dataset: it needs several orders, several judges or a scorer.")
    st.stop()
colours = draw.judge_colours(sel.judges)

names = list(dict.fromkeys(result.gates["gate"]))
gate = context.bound(st.selectbox, "Gate", "gate", names[0], names)
both = result.gates[result.gates["gate"] == gate].set_index("side")
cards = st.columns(2)
for card, side in zip(cards, ("kept", "rejected")):
    if side not in both.index:
        continue
    g = both.loc[side]
    card.metric(f"{draw.SIDES[side].capitalize()}: {int(g['n']):,} prompts ({draw.percent(g['coverage'])})",
                f"gain {draw.interval(g['gain'], g['gain_lo'], g['gain_hi'], signed=True)}",
                help="Gain over random of the judge's own pick on these prompts; a dash when there are none.")
    card.caption(f"regret {draw.number(g['regret'])} vs random {draw.number(g['random_regret'])} and ungated judge "
                 f"{draw.number(g['ungated_regret'])} · below mean {draw.percent(g['bmr'])} vs random "
                 f"{draw.percent(g['bmr_random'])}")

draw.chart(draw.gate_chart(result.gates), "Every gate: gain over random on the prompts it keeps vs rejects; "
           "diamonds: the ungated judge on the same prompts; dashed: random.")

curve = result.risk_coverage.dropna(subset=["regret"])
thresholds = curve["kind"].isin(["judge", "majority", "order_gate"])
fig = go.Figure()
for judge, part in curve[thresholds].groupby("judge"):
    part = part.sort_values("coverage")
    fig.add_trace(go.Scatter(x=part["coverage"], y=part["regret"], mode="lines+markers", name=draw.plain(judge),
                             text=draw.plain(part["policy"]), marker_color=colours.get(judge), hovertemplate="%{text}: %{y:.3f}"))
    fig.add_trace(go.Scatter(x=part["coverage"], y=part["random_regret"], mode="lines", name=f"random on {draw.plain(judge)}'s prompts",
                             line={"dash": "dot", "color": colours.get(judge)}))
others = curve[~thresholds]
fig.add_trace(go.Scatter(x=others["coverage"], y=others["regret"], mode="markers", name="cross-judge / scorer gates",
                         text=draw.plain(others["policy"]), marker={"symbol": "x", "size": 10, "color": "black"},
                         hovertemplate="%{text}: %{y:.3f}"))
fig.update_xaxes(tickformat=".0%")
draw.chart(draw.layout(fig, "Risk–coverage", "coverage (share of prompts acted on)", "selective regret"),
           "Lines: each judge from its order-0 pick (100%) through majority to stricter agreement thresholds; "
           "dotted: random on the same prompts; crosses: cross-judge and scorer gates.")

with st.expander("All gates as a table"):
    st.dataframe(draw.table(result.gates.assign(side=result.gates["side"].map(draw.SIDES))), hide_index=True,
                 width="stretch")
    st.caption("Kept: the prompts where the gate acts; rejected: those where it abstains, measured with the judge's "
               "own pick there. A dash: no prompt on that side.")
