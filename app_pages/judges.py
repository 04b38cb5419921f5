"""Judge comparison: a gate validated for one judge is not validated for the next.

Side by side for every selector judge: position bias and order flips (with 95%
intervals), output validity, seconds per call and what K orders cost against one
(what an order-agreement gate costs), the gain of each judge and its content-only
baseline, each judge's policies' gain against their calls (and seconds) per prompt with
the cheapest best one marked (`findings.figures.cost_gain_chart`, as in the report); with
two or more judges, a judge change: a baseline and a candidate (kept in the URL) compared on the same prompts, with the paired differences, the prompts
where their picks differ and each gate's verdict for each (`app_ui.judge_change_views`);
each judge's gain within every value of a slice (a picker kept in the URL), how often
each pair of judges agrees (each pair once), which generators each favours, and
whether order flips grow with the stakes. Every table is drawn at its full height.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_ui import context, draw, glance, judge_change_views
from audit_core.selection import timing
from findings import numbers
from findings.figures import cost_gain_chart, policy_forest
from findings.selection import cost_caption, costs_recorded

sel = context.selection("judges")
draw.header(
    "Judge comparison",
    sel,
    "Do the judges behave alike? Position bias, flips and gains differ from judge to judge.",
)
if not sel.judges:
    st.info("No selector judge has been recorded on this dataset yet.")
    st.stop()
result = sel.audit_selection()
colours = glance.name_colours(sel)

st.subheader("Position bias and order consistency")
glance.frame(glance.judge_table(result.judges, ["judge", "valid", "first_slot", "first_slot_uniform", "chi2", "chi2_df",
                                                "chi2_p", "flip_n", "flip_rate", "entropy"]))
st.caption("Picks slot A vs slot A if unbiased: share of valid calls picking the first slot (95% interval resampling "
           "prompts) vs no position bias (χ² test); flip rate: share of prompts whose returned image changes with the "
           "order (95% interval); order entropy: order inconsistency, 0–1.")
costs = timing.gate_cost(result.policies) if result.timing is not None else None
if result.timing is not None:
    st.subheader("Output validity")
    glance.frame(draw.table(result.timing, ["judge", "calls", "valid", "recovered", "failed", "not_json"]))
    st.caption("Valid: accepted by the strict parser; recovered: by the lenient one; failed: unparsed or a runtime "
               "error (the judge abstains); not JSON: not JSON at all.")
    st.subheader("Seconds per call, and what each multi-call policy costs")
    glance.frame(draw.table(result.timing, ["judge", "orders", "seconds_median", "seconds_mean",
                                            "prompt_seconds_one_order", "prompt_seconds_all_orders", "all_over_one"]))
    own = costs[costs["kind"] != "judge_gate"]
    calls = [numbers.MISSING if pd.isna(c) else f"{c:.3g}" for c in own["judge_calls"]]  # 1.4 for prior-corrected
    glance.frame(draw.table(own.assign(policy=glance.coverage_labels(own), over_one=own["over_one"].map(glance.times),
                                       judge_calls=calls),
                            ["policy", "judge_calls", "seconds_per_prompt", "over_one"]).rename(columns={
        "judge calls": "judge calls per prompt", "seconds per prompt": "s / prompt", "over one": "cost vs one order"}))
    st.caption("Seconds as recorded with every call: per prompt, over the prompts where every call a policy reads "
               "was timed; cost vs one order: those seconds over the judge's order-0 call's. Majority, "
               "order-agreement gates, Borda, calibrated and Plackett–Luce call their judge in every order, "
               "prior-corrected in every order on its calibration prompts only; a scorer gate adds a content scorer, "
               "whose time is not recorded (a dash), to one call.")

single = result.policies[result.policies["kind"].isin(["random", "oracle", "judge", "majority", "debiased",
                                                      "scorer"])]
draw.chart(policy_forest(single, colours, "gain", "Gain over random, judge by judge", "gain over random (alignment)"),
           "Each judge's order-0 pick, majority vote and debiased policies, content-only scorers, and the oracle; "
           "whiskers: 95% intervals; "
           "colour: the judge; marker: the kind of policy.")

st.subheader("What each policy costs against what it gains")
for cost in ("calls_per_prompt", "seconds_per_prompt") if costs_recorded(result.policies) else ("calls_per_prompt",):
    draw.chart(cost_gain_chart(result.policies, colours, cost), cost_caption(cost))

if len(sel.judges) >= 2:
    st.subheader("Judge change: would a new judge keep what the gates promised?")
    st.caption("A gate validated for one judge is not validated for the next: compare a candidate judge with the "
               "baseline on the same prompts (`python -m runners.compare` does the same for a pipeline).")
    baseline, candidate = judge_change_views.pick_judges(sel)
    change = judge_change_views.judge_change(sel, baseline, candidate)
    judge_change_views.differences(change, colours)
    judge_change_views.verdicts(change)

st.subheader("Where each judge does well: gain by slice")
names = [name for name in result.slice_prompts if name != "all"]
picked = context.bound(st.selectbox, "Break down by", "slice", "country", names, format_func=lambda n: n.replace("_", " "))
part = result.slices[(result.slices["slice"] == picked) & result.slices["policy"].isin(["random", *sel.judges])]
by_value = part.assign(gain=[numbers.estimate(g, lo, hi, signed=True) + f" (n {n})"
                             for g, lo, hi, n in zip(part["gain"], part["gain_lo"], part["gain_hi"], part["n"])])
table = by_value.pivot(index="value", columns="policy", values="gain").reindex(list(result.slice_prompts[picked]))
table = table[[p for p in sel.judges if p in table.columns]].fillna(numbers.MISSING)
table.insert(0, "prompts", [numbers.count(n) for n in result.slice_prompts[picked].values()])
table.insert(0, picked.replace("_", " "), [draw.place(v) for v in table.index])
glance.frame(table.reset_index(drop=True))
st.caption("Gain over random of each judge's order-0 pick within each value, 95% interval resampling the judge's prompts "
           "there; n = prompts it acts on (no gain, not zero, where n is 0).")

pairs = result.policies[(result.policies["kind"] == "judge_gate")
                       & (result.policies["base_judge"] < result.policies["partner"])]  # each pair once
seconds = costs.set_index("policy")["seconds_per_prompt"] if costs is not None else {}
pairs = pairs.assign(policy=pairs["base_judge"] + " and " + pairs["partner"],
                     seconds=[seconds.get(p, float("nan")) for p in pairs["policy"]])
st.subheader("When two judges agree")
glance.frame(draw.table(pairs, ["policy", "n", "coverage", "gain", "regret", "bmr", "bmr_random", "seconds"]).rename(
    columns={"policy": "judges", "prompts": "prompts they agree on", "seconds": "s / prompt, both judges"}))
st.caption("Coverage: share of prompts on which both judges' order-0 picks are the same image; gain on those "
           "prompts (a dash where they never agree); seconds of both judges' order-0 calls.")
st.subheader("Which generator each judge favours")
shares = result.generators.pivot(index="source_model", columns="judge", values="share").join(
    result.generators.groupby("source_model")["uniform"].mean().rename("if uniform"))
glance.frame(shares.map(numbers.percent).rename_axis("generator").reset_index())
st.caption("Share of valid calls returning each generator's image vs its share under uniform choice.")

st.subheader("Do order flips grow where the choice matters more?")
glance.frame(draw.table(result.flips_by_range))
st.caption("Flip rate by tertile of the pool's rating range (best − worst alignment), among fully parsed prompts.")
