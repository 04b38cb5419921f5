"""The Gate lab's pieces: the gate composer (kept in the URL), gate cards, and charts that mark
the selected gate and the composed one.

Kept and rejected sides take `findings.colours.SIDE_COLOURS`, judges their colour from
`draw.judge_colours`, a composed gate the `composed_gate` marker. Data text reaches Plotly
through `figures.plain` and Markdown through `draw.esc`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app_ui import context, draw, glance
from app_ui.context import Selection
from audit_core import SelectionData
from audit_core.errors import InputError
from audit_core.selection import gate_compose as gc
from audit_core.selection.gates import PAIRED
from findings import figures, numbers
from findings.colours import KIND_SYMBOLS, RANDOM

COMPOSE = "compose"  # URL parameter: the composed gate's text form
KIND_WORDS = {"orders": "orders agree (at least k of K)", "judge": "agrees with another judge",
              "scorer": "agrees with a content scorer", "entropy": "order entropy at most x",
              "margin": "scorer margin at least x"}
SYNTAX = ("`judge: condition and condition or condition`, AND before OR. Conditions: `orders>=k/K`, "
          "`orders(J)>=k/K`, `judge(J)`, `scorer(S)`, `entropy<=x`, `entropy(J)<=x`, `margin(S)>=x`; "
          "quote a name with spaces or symbols: `judge(\"my judge\")`.")
MARK = "#000000"  # the ring around the selected gate's point




# ------------------------------------------------------------ composer


def _parsed(text: str) -> gc.ComposedGate | None:
    try:
        return gc.parse_gate(text) if text.strip() else None
    except InputError:
        return None


def _set(gate: gc.ComposedGate | None) -> None:
    st.session_state[COMPOSE] = gc.format_gate(gate) if gate else ""


def _add(orders: Mapping[str, int]) -> None:
    """Button callback: the builder's condition joined to the gate in the text box (a new gate
    on the builder's judge when the box holds none, or one on another judge)."""
    s = st.session_state
    kind, judge = s["cg_kind"], s["cg_judge"]
    name = s[f"cg_name_{kind}_{judge}"]
    if kind == "orders":
        condition = gc.Condition(kind, name, k=int(s[f"cg_k_{name}"]), of=orders[name])
    elif kind in ("entropy", "margin"):
        condition = gc.Condition(kind, name, x=float(s[f"cg_x_{kind}"]))
    else:
        condition = gc.Condition(kind, name)
    gate = _parsed(s.get(COMPOSE, ""))
    _set(gc.ComposedGate(judge, ((condition,),)) if gate is None or gate.judge != judge
         else gate.joined(condition, s.get("cg_joint", "and")))


def _rebase() -> None:
    gate = _parsed(st.session_state.get(COMPOSE, ""))
    if gate is not None:
        _set(gate.rebased(st.session_state["cg_judge"]))


def _drop_last() -> None:
    gate = _parsed(st.session_state.get(COMPOSE, ""))
    _set(gate.without_last() if gate else None)


def composer(sel: Selection, data: SelectionData) -> gc.ComposedGate | None:
    """Draw the composer: a builder (base judge, AND/OR, condition, judge or scorer, bound) that
    writes the text box, which is bound to the URL parameter `compose`. Returns the gate it
    holds, None when it is empty or refused (a warning names it and says why)."""
    context.adopt(COMPOSE, "")
    held = _parsed(st.session_state.get(COMPOSE, ""))
    if held is not None and held.judge in data.judges:
        st.session_state["cg_judge"] = held.judge
    elif st.session_state.get("cg_judge") not in data.judges:
        st.session_state["cg_judge"] = sel.judge or data.judges[0]
    kinds = [k for k in gc.KINDS if (k not in gc.SCORER_KINDS or data.scorers) and (k != "judge" or len(data.judges) > 1)]
    cols = st.columns([1.3, 0.7, 1.6, 1.3, 1.1])
    judge = cols[0].selectbox("Base judge", data.judges, key="cg_judge", on_change=_rebase, format_func=draw.visible)
    cols[1].selectbox("Join", ("and", "or"), key="cg_joint", disabled=held is None,
                      help="AND binds tighter than OR: a and b or c is (a and b) or c.")
    kind = cols[2].selectbox("Condition", kinds, key="cg_kind", format_func=KIND_WORDS.get)
    others = [j for j in data.judges if j != judge]
    names = data.scorers if kind in gc.SCORER_KINDS else others if kind == "judge" else [judge, *others]
    name = cols[3].selectbox("scorer" if kind in gc.SCORER_KINDS else "judge", names, key=f"cg_name_{kind}_{judge}",
                           format_func=draw.visible)
    if kind == "orders":
        k = data.n_orders(name)
        cols[4].number_input(f"k of {k} orders", 1, k, k, key=f"cg_k_{name}")
    elif kind == "entropy":
        cols[4].number_input("x (0–1)", 0.0, 1.0, 0.5, 0.05, key="cg_x_entropy")
    elif kind == "margin":
        margins = gc.score_margin(data.scores[name], data.mask)
        typical = float(np.nanmedian(margins)) if (~np.isnan(margins)).any() else 0.0
        cols[4].number_input("x (the median margin)", value=round(typical, 3), step=0.005, format="%.3f",
                             key="cg_x_margin")
    buttons = st.columns(3)
    orders = {j: data.n_orders(j) for j in data.judges}
    buttons[0].button("Add condition", key="cg_add", on_click=_add, args=(orders,), width="stretch")
    buttons[1].button("Remove the last condition", key="cg_drop", on_click=_drop_last, disabled=held is None,
                      width="stretch")
    buttons[2].button("Clear", key="cg_clear", on_click=_set, args=(None,), disabled=held is None, width="stretch")
    text = st.text_input("Composed gate", key=COMPOSE, help=SYNTAX, placeholder="build one above, or write it here")
    context.publish(COMPOSE, text, "")
    if not text.strip():
        return None
    try:
        gate = gc.parse_gate(text)
        gc.check(gate, data)
    except InputError as err:
        context.refuse(COMPOSE, text)
        context.warn_refused()
        st.caption(f"Why: {draw.esc(err.message)}. Syntax: {SYNTAX}")
        return None
    return gate


@st.cache_resource(max_entries=16, show_spinner="Auditing the composed gate (prompt-level bootstrap)…")
def _evaluated(db_path: str, stamp: float, dataset_id: str, pool: str, resamples: int, text: str,
               _data: SelectionData) -> gc.ComposedResult:
    return gc.evaluate(gc.parse_gate(text), _data, context.resampling(resamples))


def composed_result(sel: Selection, gate: gc.ComposedGate) -> gc.ComposedResult:
    """The composed gate's audit with the sidebar's resamples and seed 0, cached per dataset and gate."""
    return _evaluated(sel.db_path, sel.stamp, sel.dataset_id, sel.pool, sel.resamples, gc.format_gate(gate), sel.data())


# ------------------------------------------------------------ cards and table


def side_cards(rows: pd.DataFrame) -> None:
    """One card per side of a gate (its gates-table rows): prompts and coverage, gain with its
    interval, regret next to random and the ungated judge; then the kept − rejected difference."""
    both = rows.set_index("side")
    for card, side in zip(st.columns(2), ("kept", "rejected")):
        g = both.loc[side]
        label = f"{draw.SIDES[side].capitalize()}: {numbers.count(g['n'])} prompts ({numbers.percent(g['coverage'])})"
        glance.cards(card, [glance.Card(
            label, f"gain {numbers.estimate(g['gain'], g['gain_lo'], g['gain_hi'], signed=True)}",
            "Gain over random of the gate's pick (kept) or the judge's own pick (rejected) on these prompts, 95% "
            "interval; a dash when there are none.")])
        card.caption(f"regret {numbers.estimate(g['regret'], g['regret_lo'], g['regret_hi'])} vs random "
                     f"{numbers.number(g['random_regret'])} and ungated judge {numbers.number(g['ungated_regret'])} · "
                     f"below mean {numbers.percent(g['bmr'])} vs random {numbers.percent(g['bmr_random'])}")
    kept = both.loc["kept"]
    gain = numbers.estimate(kept["gain_vs_rejected"], kept["gain_vs_rejected_lo"], kept["gain_vs_rejected_hi"], signed=True)
    regret = numbers.estimate(kept["regret_vs_rejected"], kept["regret_vs_rejected_lo"], kept["regret_vs_rejected_hi"],
                           signed=True)
    st.markdown(f"**Kept − rejected:** gain {gain}, regret {regret} "
                "(95% interval resampling all prompts together, so both sides move with the same draws)")


def gates_table(gates: pd.DataFrame) -> pd.DataFrame:
    """The gates table as text, the kept − rejected differences joined with their intervals."""
    shown = gates.assign(side=gates["side"].map(draw.SIDES))
    for stat in PAIRED:
        shown[f"kept − rejected {stat.split('_')[0]} [95%]"] = [
            numbers.estimate(v, lo, hi, signed=True) for v, lo, hi in
            zip(gates[stat], gates[f"{stat}_lo"], gates[f"{stat}_hi"])]
    dropped = [f"{s}{end}" for s in PAIRED for end in ("", "_lo", "_hi")]
    return draw.table(shown.drop(columns=dropped))


# ------------------------------------------------------------ charts


def country_chart(rows: pd.DataFrame, colours: Mapping[str, str], composed: str | None) -> go.Figure:
    """Share of each country's prompts a gate keeps, one bar group per gate (`policy`, in its base
    judge's colour; the composed gate hatched), n and prompts on hover."""
    fig = go.Figure()
    for policy, part in rows.groupby("policy", sort=False):
        judge = part["judge"].iloc[0]
        fig.add_trace(go.Bar(
            x=figures.plain(part["country"].map(draw.place)), y=part["coverage"],
            name=("composed: " if policy == composed else "") + str(figures.plain(policy)),
            marker={"color": colours.get(judge, RANDOM), "pattern": {"shape": "x" if policy == composed else ""}},
            customdata=np.column_stack([part["n"], part["prompts"]]),
            hovertemplate="%{x}: keeps %{customdata[0]} of %{customdata[1]} prompts (%{y:.0%})",
        ))
    fig.update_layout(barmode="group")
    fig.update_yaxes(tickformat=".0%", range=[0, 1])
    return figures.layout(fig, "Coverage by country", "country", "share of the country's prompts kept")


def risk_chart(curve: pd.DataFrame, colours: Mapping[str, str], selected: str, point: pd.DataFrame | None) -> go.Figure:
    """Coverage vs selective regret: each judge's threshold line (dotted: random on the same prompts),
    the cross-judge and scorer gates in their judge's colour and kind's marker, the composed gate's
    point with its interval, and a ring around the selected gate."""
    fig = go.Figure()
    lines = curve["kind"].isin(["judge", "majority", "order_gate"])
    for judge, part in curve[lines].groupby("judge"):
        part = part.sort_values("coverage")
        colour = colours.get(judge, RANDOM)
        fig.add_trace(go.Scatter(x=part["coverage"], y=part["regret"], mode="lines+markers", name=figures.plain(judge),
                                 text=figures.plain(part["policy"]), marker_color=colour,
                                 hovertemplate="%{text}: regret %{y:.3f} at %{x:.0%}"))
        fig.add_trace(go.Scatter(x=part["coverage"], y=part["random_regret"], mode="lines",
                                 name=f"random on {figures.plain(judge)}'s prompts", line={"dash": "dot", "color": colour}))
    for kind, part in curve[~lines].groupby("kind"):
        fig.add_trace(go.Scatter(
            x=part["coverage"], y=part["regret"], mode="markers", name=draw.words(kind).replace("gate", "gates"),
            text=figures.plain(part["policy"]), hovertemplate="%{text}: regret %{y:.3f} at %{x:.0%}",
            marker={"symbol": KIND_SYMBOLS.get(kind, "x"), "size": 11,
                    "color": [colours.get(j, RANDOM) for j in part["judge"]]},
        ))
    if point is not None and not point.empty:
        p = point.iloc[0]
        fig.add_trace(go.Scatter(
            x=[p["coverage"]], y=[p["regret"]], mode="markers", name="composed gate", text=[figures.plain(p["policy"])],
            hovertemplate="%{text}: regret %{y:.3f} at %{x:.0%}",
            error_y={"type": "data", "symmetric": False, "array": [max(p["regret_hi"] - p["regret"], 0)],
                     "arrayminus": [max(p["regret"] - p["regret_lo"], 0)]},
            marker={"symbol": KIND_SYMBOLS["composed_gate"], "size": 18, "color": colours.get(p["judge"], RANDOM),
                    "line": {"width": 1.5, "color": MARK}},
        ))
        fig.add_trace(go.Scatter(x=[p["coverage"]], y=[p["random_regret"]], mode="markers",
                                 name="random on the composed gate's prompts",
                                 marker={"symbol": "line-ew-open", "size": 18, "color": RANDOM, "line": {"width": 3}}))
    chosen = curve[curve["policy"] == selected]
    if not chosen.empty:
        fig.add_trace(go.Scatter(x=chosen["coverage"], y=chosen["regret"], mode="markers+text", name="selected gate",
                                 text=["selected"], textposition="top center", hoverinfo="skip",
                                 marker={"symbol": "circle-open", "size": 24, "color": MARK, "line": {"width": 2}}))
    fig.update_xaxes(tickformat=".0%")
    return figures.layout(fig, "Risk–coverage", "coverage (share of prompts acted on)", "selective regret", height=440)
