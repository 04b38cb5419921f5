"""Judge comparison: a gate validated for one judge is not validated for the next.

Side by side for every selector judge: call outcomes and position bias, output
validity and timing, the gain of each judge and its content-only baseline, each
judge's gain within every value of a slice (a picker kept in the URL), how often
pairs of judges agree, which generators each favours, and whether order flips
grow with the stakes.
"""

from __future__ import annotations

import streamlit as st

from app_ui import context, draw

sel = context.selection("judges")
draw.header(
    "Judge comparison",
    sel,
    "Do the judges behave alike? Position bias, flips and gains differ from judge to judge.",
)
if not sel.judges:
    st.info("No selector judge has been recorded on this dataset yet.")
    st.stop()
result = sel.audit()
colours = draw.judge_colours(sel.judges)

st.subheader("Calls, position bias and order consistency")
st.dataframe(draw.table(result.judges), hide_index=True, width="stretch")
st.caption("Picks slot A vs slot A if unbiased: share of valid calls picking the first slot vs no position bias "
           "(χ² test); flip rate: share of prompts whose returned image changes with the order; order entropy: "
           "order inconsistency, 0–1.")
if result.timing is not None:
    st.subheader("Output validity and timing")
    st.dataframe(draw.table(result.timing), hide_index=True, width="stretch")
    st.caption("Valid: accepted by the strict parser; recovered: by the lenient one; not JSON: not JSON at all; "
               "seconds per call and per prompt (one order, all orders) as recorded with every call.")

single = result.policies[result.policies["kind"].isin(["random", "oracle", "judge", "majority", "scorer"])]
draw.chart(draw.forest(single, "policy", "gain", "Gain over random, judge by judge", "gain over random (alignment)", colour="kind"),
           "Each judge's order-0 pick and majority vote, content-only scorers, and the oracle; whiskers: 95% intervals.")

st.subheader("Where each judge does well: gain by slice")
names = [name for name in result.slice_prompts if name != "all"]
picked = context.bound(st.selectbox, "Break down by", "slice", "country", names, format_func=lambda n: n.replace("_", " "))
part = result.slices[(result.slices["slice"] == picked) & result.slices["policy"].isin(["random", *sel.judges])]
by_value = part.assign(gain=[draw.interval(g, lo, hi, signed=True) + f" (n {n})"
                             for g, lo, hi, n in zip(part["gain"], part["gain_lo"], part["gain_hi"], part["n"])])
table = by_value.pivot(index="value", columns="policy", values="gain").reindex(list(result.slice_prompts[picked]))
table = table[[p for p in sel.judges if p in table.columns]].fillna(draw.MISSING)
table.insert(0, "prompts", [draw.count(n) for n in result.slice_prompts[picked].values()])
table.insert(0, picked.replace("_", " "), [draw.place(v) for v in table.index])
st.dataframe(table, hide_index=True, width="stretch")
st.caption("Gain over random of each judge's order-0 pick within each value, 95% interval resampling the judge's prompts "
           "there; n = prompts it acts on (no gain, not zero, where n is 0).")

left, right = st.columns(2)
with left:
    pairs = result.policies[result.policies["kind"] == "judge_gate"]
    st.subheader("When two judges agree")
    st.dataframe(draw.table(pairs, ["policy", "n", "coverage", "gain", "regret", "bmr", "bmr_random"]),
                 hide_index=True, width="stretch")
    st.caption("Coverage: share of prompts on which both judges' order-0 picks are the same image; gain on those "
               "prompts (a dash where they never agree).")
with right:
    st.subheader("Which generator each judge favours")
    shares = result.generators.pivot(index="source_model", columns="judge", values="share").join(
        result.generators.groupby("source_model")["uniform"].mean().rename("if uniform"))
    st.dataframe(shares.map(draw.percent).rename_axis("generator").reset_index(), hide_index=True, width="stretch")
    st.caption("Share of valid calls returning each generator's image vs its share under uniform choice.")

st.subheader("Do order flips grow where the choice matters more?")
st.dataframe(draw.table(result.flips_by_range), hide_index=True, width="stretch")
st.caption("Flip rate by tertile of the pool's rating range (best − worst alignment), among fully parsed prompts.")
