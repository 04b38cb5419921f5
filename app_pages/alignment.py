"""Alignment: whose judgement do a rating judge's scores follow?

A rating judge rates each image alone on the rubric's scale. Every reference pool
is reported on its own, never folded into one agreement number: for the chosen
judge, condition and item group, each pool's MAE, Pearson r and quadratic kappa
side by side, the tilt between pools (Δ, T), the rating distribution next to the
pools' (a positivity floor shows at once), breakdowns by item group and anchors,
each pool's reliability, and one item with every vote, rating and raw output.
Each rating judge is drawn in its own colour (`findings.colours`), pools in greys.
All numbers come from `audit_core.rating.audit`.
"""

from __future__ import annotations

import streamlit as st

from app_ui import context, draw, glance, rubric_views
from audit_core.rating.audit import item_detail, rating_distribution
from findings import figures, numbers

NO_DATA = (
    "This dataset has no rating data: no rating judge is recorded on it and no reference pool has votes on the "
    "rubric outcome. Record a rating judge with `python -m runners.run_rater --db DB --dataset NAME --judge NAME "
    "--backend {simulated,hf,openai} --model ID [--condition NAME ...]`, or import votes and recorded ratings with "
    "`python -m runners.ingest table --pools FILE --votes FILE --ratings NAME=FILE ...` (docs/table-contract.md)."
)
IMAGE = 320

sel = context.selection("alignment")
draw.header("Alignment", sel,
            "Whose judgement does a rating judge follow? Every reference pool is reported on its own.", focus=False)
try:
    data = sel.rating_data()
    result = sel.audit_rating()
except ValueError as err:  # recorded data the audit refuses (e.g. runs on different scales): say why
    st.error(f"The rating data of this dataset cannot be audited: {draw.esc(err)}")
    st.stop()
if data is None:
    st.info(NO_DATA)
    st.stop()
pools = data.pools
greys = figures.pool_colours(pools)
st.caption(f"Outcome **{draw.esc(data.outcome)}** on the scale {data.scale[0]}–{data.scale[1]} · {len(pools)} "
           f"reference pool(s) · 95% item-level bootstrap intervals, {result.resampling.resamples:,} resamples, "
           f"seed {result.resampling.seed}.")

if not data.raters or result.alignment.empty:
    st.info("No rating judge can be compared with a pool here yet: " + (
        "no rating judge is recorded." if not data.raters else "no pool has a consensus on the rubric outcome.")
        + " The pools' reliability and an item's votes are below.")
else:
    judges = sorted({j for j, _ in data.raters})
    colours = draw.judge_colours(judges)
    picks = st.columns(3)
    judge = context.bound(picks[0].selectbox, "Rating judge", "rater", judges[0], judges)
    conditions = [c for j, c in data.raters if j == judge]
    condition = context.bound(picks[1].selectbox, "Condition", "condition", conditions[0], conditions)
    judge_rows = result.alignment[result.alignment["judge"] == judge]
    mine = judge_rows[judge_rows["condition"] == condition]
    groups = list(dict.fromkeys(mine["group"]))
    group = context.bound(picks[2].selectbox, "Item group", "group", "all", groups,
                          help="'all', an attribute value, or anchors: both pools high (top two points), both "
                          "low, or contested.")

    # --- every pool side by side, for the chosen judge, condition and group
    st.subheader(f"{draw.esc(judge)} · {draw.esc(condition)} against each pool")
    cells = mine[mine["group"] == group].set_index("pool")
    for card, pool in zip(st.columns(len(pools)), pools):
        c = cells.loc[pool]
        card.markdown(f"**Pool {draw.esc(pool)}**")
        mae = numbers.estimate(c["mae"], c["mae_lo"], c["mae_hi"], missing=numbers.UNDEFINED)
        r = numbers.estimate(c["pearson"], c["pearson_lo"], c["pearson_hi"], missing=numbers.UNDEFINED)
        glance.cards(card, [
            glance.Card(f"MAE vs {pool}", mae, "Mean |rating − pool consensus| over the items the judge rated; 95% interval."),
            glance.Card(f"Pearson r vs {pool}", r,
                        "Undefined when the judge's ratings or the pool's consensus are constant on these items."),
            glance.Card(f"Quadratic κ vs {pool}", numbers.number(c["qwk"], missing=numbers.UNDEFINED),
                        "Cohen's kappa, quadratic weights, consensus rounded half up to the scale's points."),
        ])
        card.caption(f"{int(c['n'])} rated · {int(c['abstained'])} abstained · {int(c['failed'])} failed · "
                     f"floor (bottom two points): {numbers.percent(c['floor_share'])} of its ratings vs "
                     f"{numbers.percent(c['pool_floor_share'])} of the pool's consensus; it rates "
                     f"{numbers.percent(c['floor_recovery'])} of the pool's floor items there")
    st.markdown(f"**Every condition of {draw.esc(judge)}**, pools side by side (group {draw.esc(group)})")
    glance.frame(draw.pools_side_by_side(judge_rows[judge_rows["group"] == group], "condition"))

    # --- tilt between pools
    tilt = result.tilt[result.tilt["group"] == group].assign(
        pair=lambda t: t["pool_a"] + " vs " + t["pool_b"], rater=lambda t: t["judge"] + " · " + t["condition"])
    if not tilt.empty:
        st.subheader("Tilt between pools")
        st.caption("Δ = MAE against the first pool − MAE against the second (positive: closer to the second). T on "
                   "items where the pools' consensus differs: +1 at the first pool's, −1 at the second's, 0 midway.")
        pairs = list(dict.fromkeys(tilt["pair"]))
        pair = context.bound(st.selectbox, "Pool pair", "pair", pairs[0], pairs) if len(pairs) > 1 \
            else context.single("pair", pairs[0])
        shown = tilt[tilt["pair"] == pair]
        t = shown[(shown["judge"] == judge) & (shown["condition"] == condition)].iloc[0]
        t_text = numbers.estimate(t["tilt"], t["tilt_lo"], t["tilt_hi"], signed=True, missing=numbers.UNDEFINED)
        glance.cards(st, [
            glance.Card(f"Δ ({pair})", numbers.estimate(t["delta"], t["delta_lo"], t["delta_hi"], signed=True),
                        f"Over {int(t['n_delta'])} items rated with both pools' consensus."),
            glance.Card(f"T ({pair})", t_text, f"Over {int(t['n_tilt'])} rated items where the pools differ."),
        ])
        tilts = figures.forest(shown, "rater", "tilt", f"Normalised tilt T, {figures.plain(pair)}",
                            "T (+1: first pool's consensus, −1: second's)", colour="judge")
        for name in shown["judge"].unique():  # each rating judge in its own colour
            tilts.update_traces(marker_color=colours[name], selector={"name": figures.plain(name)})
        draw.chart(tilts,
                   "Every judge and condition, with 95% intervals (item-level bootstrap); a rater that rated no "
                   "item where the pools differ is left out.")
    else:
        context.single("pair", None)

    # --- rating distributions: the floor
    st.subheader("Rating distributions")
    # each judge under the chosen condition where it has one, else under its first
    shown_conditions = {j: condition if (j, condition) in data.raters else c for j, c in reversed(data.raters)}
    dist = rating_distribution(data)
    dist = dist[(dist["source"] == "pool") | (dist["condition"] == dist["judge"].map(shown_conditions))]
    draw.chart(figures.distribution_chart(dist, colours, data.scale),
               "Each judge under the chosen condition (else its first), abstained and failed calls included, next "
               "to each pool's consensus rounded half up; shaded: the bottom two points.")

    # --- item groups: attributes and anchors
    st.subheader("By item group")
    draw.chart(figures.group_bars(mine, "pool", "mae", "n", f"MAE of {figures.plain(judge)} · {figures.plain(condition)} by "
                               "item group", "MAE against the pool", greys),
               "Anchors: high / low when both pools' consensus is in the top / bottom two points, else contested.")
    by_group = result.tilt[(result.tilt["judge"] == judge) & (result.tilt["condition"] == condition)]
    if not by_group.empty:
        by_group = by_group.assign(pair=by_group["pool_a"] + " vs " + by_group["pool_b"])
        draw.chart(figures.group_bars(by_group, "pair", "tilt", "n_tilt", "Tilt T by item group", "T",
                                   dict.fromkeys(by_group["pair"], colours[judge])),
                   "Groups without an item where the pools differ have no bar.")
    wilcoxon = result.wilcoxon[result.wilcoxon["judge"] == judge]
    if not wilcoxon.empty:
        with st.expander(f"Paired Wilcoxon tests of {draw.esc(judge)}'s per-item absolute error"):
            glance.frame(draw.table(wilcoxon))
            st.caption("Between two pools under one condition, and between two conditions against one pool.")

# --- the reference pools themselves
st.subheader("Reference pools")
cols = st.columns(2)
cols[0].markdown("**Reliability within each pool** (Krippendorff's alpha)")
glance.frame(draw.table(result.reliability), cols[0])
cols[1].markdown("**Agreement between pools** (consensus values)")
agreement = result.pool_agreement.assign(
    pearson=[numbers.number(v, missing=numbers.UNDEFINED) for v in result.pool_agreement["pearson"]])
glance.frame(draw.table(agreement), cols[1])

# --- one item
st.subheader("One item")
rated = data.consensus["candidate_id"]
first = rated.iat[0] if len(rated) else data.candidates["candidate_id"].iat[0]
item_id = context.bound(st.text_input, "Item (candidate id)", "item", first, always=True)
try:
    detail = item_detail(data, item_id)
except KeyError:
    st.warning(f"Item {context.quote(item_id)} does not exist in this dataset: paste a candidate id from it.",
               icon=":material/link_off:")
    st.stop()
item = detail["item"].iloc[0]
left, right = st.columns([1, 2])
path = data.image_paths.get(item_id)
left.image(draw.fitted(path, IMAGE, item["source_model"] if isinstance(item["source_model"], str) else ""))
if draw.image_problem(path):
    left.caption(draw.image_problem(path))
right.text(item["prompt"])
attributes = [f"{draw.esc(k)}: {draw.esc(v)}" for k, v in item.drop(["candidate_id", "prompt_id", "prompt"]).items()
              if isinstance(v, str)]
right.caption(" · ".join([f"prompt {draw.esc(item['prompt_id'])}", *attributes]))
right.markdown("**Each pool's consensus and votes**")
votes = detail["votes"].groupby("pool")["value"].agg(lambda v: ", ".join(f"{x + 0.0:g}" for x in v))
glance.frame(draw.table(detail["consensus"].assign(values=detail["consensus"]["pool"].map(votes))), right)
st.markdown("**Each judge and condition's rating**, with its absolute error against each pool")
errors = {c: f"error vs {c.removeprefix('error_')}" for c in detail["ratings"].columns if c.startswith("error_")}
glance.frame(draw.table(detail["ratings"].drop(columns=["raw_output", "attempts", "seconds"]).rename(columns=errors)))
st.markdown("**Raw outputs**, as recorded")
for r in detail["ratings"].itertuples():
    st.caption(f"{draw.esc(r.judge)} · {draw.esc(r.condition)} · {draw.esc(r.status)}")
    st.code(draw.visible(r.raw_output) if isinstance(r.raw_output, str) else "(no output recorded)", language=None, wrap_lines=True)

# --- the rubric beside content scorers on the same images (the judge and condition chosen above, if any)
compared = data.raters and not result.alignment.empty
rubric_views.rubric_vs_scorer_section(sel, judge if compared else None, condition if compared else None)
