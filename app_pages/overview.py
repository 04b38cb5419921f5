"""Overview: does the focus judge return better images than random choice?

Headline cards for the focus judge (each estimate with its 95% interval), then four
figures: slot preference by judge, regret by slice (a picker: country, category, pool
size, ...; kept in the URL), what each gate keeps and rejects, and every policy's gain
over random with its interval (coverage beside every gated policy; a judge's colour and
a policy kind's marker are the same on every page); then output validity and timing per
judge. All numbers come from `audit_core.selection.audit`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app_ui import context, draw, glance, painted
from findings import figures, numbers
from findings.colours import policy_colour
from findings.figures import policy_forest


def slice_chart(slices: pd.DataFrame, name: str, policies: Sequence[str], colours: Mapping[str, str]) -> go.Figure:
    """Mean regret per value of slice `name` for each policy, with its within-value 95% interval;
    a value a policy never acts on has no bar (zero coverage, not zero regret)."""
    fig = go.Figure()
    for policy in policies:
        part = slices[(slices["slice"] == name) & (slices["policy"] == policy)]
        kind = "random" if policy == "random" else "judge"
        fig.add_trace(go.Bar(
            x=figures.plain(part["value"].map(draw.place)), y=part["regret"], name=figures.plain(policy), customdata=part["n"],
            marker_color=policy_colour(kind, policy, colours),
            hovertemplate="%{x}: regret %{y:.3f} on %{customdata} prompts",
            error_y={"type": "data", "symmetric": False, "array": (part["regret_hi"] - part["regret"]).clip(lower=0),
                     "arrayminus": (part["regret"] - part["regret_lo"]).clip(lower=0)},
        ))
    return figures.layout(fig, f"Regret by {figures.plain(name.replace('_', ' '))}", figures.plain(name), "mean regret (best − picked alignment)")

sel = context.selection("overview")
draw.header(
    "Overview",
    sel,
    "Does the judge return better images than random choice, and where does it go wrong?",
)
result = sel.audit_selection()
policies = result.policies.set_index("policy")
colours = glance.name_colours(sel)

# --- headline cards for the focus judge
if sel.judge:
    p = policies.loc[sel.judge]
    judge = result.judges.set_index("judge").loc[sel.judge]
    k = int(judge["orders"])
    unanimity = result.gates[(result.gates["gate"] == f"{sel.judge} agree>={k}/{k}") & (result.gates["side"] == "kept")]
    first = glance.percent_interval(judge["first_slot"], judge["first_slot_lo"], judge["first_slot_hi"])
    headline = [
        glance.Card("Gain over random", numbers.estimate(p["gain"], p["gain_lo"], p["gain_hi"], signed=True),
                    "Mean alignment of the order-0 pick minus the pool's mean (exact random); 95% bootstrap interval."),
        glance.Card("Regret", numbers.estimate(p["regret"], p["regret_lo"], p["regret_hi"]),
                    "Best alignment in the pool minus the picked image's, averaged over prompts."),
        glance.Card("Below-mean rate", f"{numbers.percent(p['bmr'])} vs {numbers.percent(p['bmr_random'])}",
                    "Share of picks rated below the pool mean, next to random's matched rate."),
        glance.Card(f"First-slot picks (uniform {numbers.percent(judge['first_slot_uniform'])})", first,
                    "Share of valid calls choosing slot A, 95% interval resampling prompts, vs the uniform "
                    f"expectation (χ² p {numbers.p_value(judge['chi2_p'])})."),
        glance.Card("Flip rate across orders",
                    glance.percent_interval(judge["flip_rate"], judge["flip_rate_lo"], judge["flip_rate_hi"])
                    if k > 1 else "one order",
                    "Share of fully parsed prompts whose returned image changes with the presentation order; "
                    "95% bootstrap interval over those prompts."),
    ]
    if k > 1 and not unanimity.empty:
        u = unanimity.iloc[0]
        headline.append(glance.Card(
            f"Unanimity gate keeps {numbers.percent(u['coverage'])} of prompts: gain",
            numbers.estimate(u["gain"], u["gain_lo"], u["gain_hi"], signed=True),
            f"Acts only when all {k} orders agree; gain over random on the {int(u['n'])} prompts it keeps, "
            "95% bootstrap interval."))
    glance.cards(st, headline)
    st.caption(
        f"{int(p['n']):,} prompts acted on ({numbers.percent(p['coverage'])} coverage) · {int(judge['calls']):,} calls, "
        f"{int(judge['failed']):,} failed · {result.resampling.resamples:,} bootstrap resamples, "
        f"seed {result.resampling.seed}."
    )
else:
    st.info("No selector judge has been recorded on this dataset; only random, oracle and scorers are shown.")

# --- figures, once the browser has painted the cards (`app_ui.painted`)
if not painted.painted("overview"):
    st.caption("Drawing the figures…")
    st.stop()
left, right = st.columns(2)
with left:
    if not result.positions.empty:
        draw.chart(figures.slot_chart(result.positions, colours),
                   "Bars: share of each judge's valid calls choosing each slot; black marks: the share with no position bias.")
with right:
    names = [name for name in result.slice_prompts if name != "all"]
    picked = context.bound(st.selectbox, "Break down by", "slice", "country", names,
                           format_func=lambda n: n.replace("_", " "))
    draw.chart(slice_chart(result.slices, picked, ["random", *sel.judges], colours),
               "Mean regret within each value for random choice and each judge's order-0 pick; whiskers: 95% intervals "
               "resampling the prompts within the value. Every policy per slice is in slices.csv.")

if sel.judge:
    focus_gates = result.gates[result.gates["base_judge"] == sel.judge]
    if not focus_gates.empty:
        draw.chart(figures.gate_chart(focus_gates),
                   f"Gain over random of {draw.esc(sel.judge)}'s gates on the prompts they keep vs reject (each "
                   "gate's coverage in brackets); diamonds: the ungated judge on the same prompts.")

forest = result.policies[~result.policies["kind"].str.endswith("rejected")]
draw.chart(policy_forest(forest, colours, "gain", "Every policy's gain over random", "gain over random (alignment)"),
           "Mean gain over random on the prompts each policy acts on (its coverage in brackets); whiskers: 95% "
           "bootstrap intervals; colour: the judge a policy rests on; marker: its kind; dashed: random.")
with st.expander("All policies as a table"):
    columns = ["policy", "kind", "n", "coverage", "gain", "regret", "bmr", "bmr_random", "best",
               "worst_group_regret", "disparity"]
    glance.frame(draw.table(result.policies, [c for c in columns if c in result.policies.columns]))

if result.timing is not None:
    with st.expander("Output validity and timing per judge"):
        glance.frame(draw.table(result.timing))
        st.caption("Valid: accepted by the strict parser; recovered: by the lenient one; not JSON: not JSON at all; "
                   "seconds as recorded with every call.")

# --- findings to take away
st.subheader("Export the findings")
exports = st.columns(3)
# each file is made when it is asked for, not on every run of the page
exports[0].download_button("Summary (JSON)", lambda: json.dumps(result.to_summary(), indent=2),
                           f"{sel.dataset_id}_summary.json", mime="application/json")
exports[1].download_button("Policies (CSV)", lambda: result.policies.to_csv(index=False),
                           f"{sel.dataset_id}_policies.csv", mime="text/csv")
exports[2].download_button("Gates (CSV)", lambda: result.gates.to_csv(index=False),
                           f"{sel.dataset_id}_gates.csv", mime="text/csv")
st.caption("The headline estimates with intervals, resamples and seed; every policy's measures; every gate's kept and rejected sides.")
