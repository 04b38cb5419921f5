"""Attributes: how well do attribute judges answer closed questions about an image, and when do they abstain?

An attribute judge answers every attribute of a taxonomy (gender, age, religion, …) from
closed label sets with an abstention label. For a chosen condition: accuracy per attribute
under both abstention policies with coverage beside it, every judge (the CLIP baseline
too) side by side; a confusion matrix of one judge and attribute; abstentions and answers
off the taxonomy per attribute under every condition (the ablations side by side); and a
gallery of the images where a judge and the gold label disagree, each with the judge's
rationale and raw output. All numbers come from `audit_core.attributes.audit`.
"""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app_ui import context, draw, store_lock
from audit_core.attributes.audit import (
    AttributeAudit,
    AttributeData,
    audit_attributes,
    disagreements,
    load_attribute_data,
)
from findings import figures, numbers

NO_DATA = (
    "This dataset has no attribute judge: no labeler run is recorded on it. Record one with `python -m "
    "runners.run_labeler --db DB --dataset NAME --judge NAME --backend {simulated,hf,openai} --model ID`, or import "
    "gold labels and recorded answers with `python -m runners.ingest table --pools FILE --labels FILE "
    "--labeler NAME=FILE` (docs/table-contract.md)."
)
GALLERY = 8  # disagreements per gallery page
IMAGE = 160
POLICIES = {"accuracy_miss": "accuracy, abstention = miss", "accuracy_exclude": "accuracy, abstention excluded",
            "coverage": "coverage (answered / asked)"}


@st.cache_data(max_entries=4, show_spinner="Running the attribute audit (image-level bootstrap)…")
def _audit(db_path: str, stamp: float, dataset_id: str, resamples: int) -> tuple[AttributeData | None,
                                                                                  AttributeAudit | None]:
    with store_lock.reading(db_path) as con:
        data = load_attribute_data(con, dataset_id)
    return data, audit_attributes(data, context.resampling(resamples)) if data is not None else None


def accuracy_chart(cells, colours, attributes) -> go.Figure:
    """Per attribute (x), one bar per judge for each of POLICIES, side by side, with 95% intervals."""
    fig = make_subplots(rows=1, cols=3, shared_yaxes=True, subplot_titles=list(POLICIES.values()))
    for judge, part in cells.groupby("judge", sort=True):
        for col, measure in enumerate(POLICIES, start=1):
            bounded = f"{measure}_lo" in part.columns
            fig.add_trace(go.Bar(
                x=figures.plain(part["attribute"]), y=part[measure], name=figures.plain(judge), legendgroup=figures.plain(judge),
                showlegend=col == 1, marker_color=colours[judge], customdata=part["n"],
                hovertemplate="%{x}: %{y:.2f} (asked %{customdata})",
                error_y={"type": "data", "symmetric": False,
                         "array": (part[f"{measure}_hi"] - part[measure]).clip(lower=0),
                         "arrayminus": (part[measure] - part[f"{measure}_lo"]).clip(lower=0)} if bounded else None,
            ), row=1, col=col)
    fig.update_layout(barmode="group")
    fig.update_xaxes(categoryorder="array", categoryarray=list(figures.plain(attributes)))
    fig.update_yaxes(range=[0, 1.05], tickformat=".0%")
    return figures.layout(fig, "", "", "share of images", height=420)


def share_chart(cells, measure: str, title: str) -> go.Figure:
    """`measure` per attribute (x) of one judge, one bar per condition."""
    fig = go.Figure()
    for condition, part in cells.groupby("condition", sort=False):
        fig.add_trace(go.Bar(x=figures.plain(part["attribute"]), y=part[measure], name=figures.plain(condition),
                             customdata=part["n"], hovertemplate="%{x}: %{y:.0%} of %{customdata}"))
    fig.update_layout(barmode="group")
    fig.update_yaxes(range=[0, 1.05], tickformat=".0%")
    return figures.layout(fig, title, "attribute", "share of answers", height=360)


sel = context.selection("attributes")
draw.header("Attributes", sel, "Do attribute judges answer what the image shows, and abstain when it shows nothing?",
            focus=False)
data, result = _audit(sel.db_path, sel.stamp, sel.dataset_id, sel.resamples)
if data is None:
    st.info(NO_DATA)
    st.stop()
if result.cells.empty:
    st.info("Attribute judges are recorded here, but the dataset has no gold labels to score them against: import "
            "them with `python -m runners.ingest table --pools FILE --labels FILE`.")
    st.stop()
tax = result.taxonomy
st.caption(f"Taxonomy **{draw.esc(tax.name)} {draw.esc(tax.version)}** · {len(data.labelers)} judge × condition pairs · "
           f"95% image-level bootstrap intervals, {result.resampling.resamples:,} resamples, "
           f"seed {result.resampling.seed}. Accuracy with "
           "abstention = miss counts an abstention as wrong; with abstention excluded it leaves abstentions out (answers "
           "off the taxonomy and missing answers stay in as wrong). Undefined: the judge abstained on every image.")
judges = sorted({j for j, _ in data.labelers})
colours = draw.judge_colours(judges)
conditions = list(dict.fromkeys(c for _, c in sorted(data.labelers, key=lambda p: (p[1] != "default", p[1]))))

st.subheader("Every judge and condition, averaged over attributes")
macro = result.macro
st.dataframe({
    "judge": macro["judge"].map(draw.visible), "condition": macro["condition"].map(draw.visible),
    "backend": macro["backend"].map(draw.visible),
    "attributes": macro["attributes"].map(numbers.count), "coverage": macro["coverage"].map(numbers.percent),
    "accuracy (miss)": macro["accuracy_miss"].map(lambda v: numbers.number(v, missing=numbers.UNDEFINED)),
    "accuracy (excluded)": macro["accuracy_exclude"].map(lambda v: numbers.number(v, missing=numbers.UNDEFINED)),
    "macro-F1": macro["macro_f1"].map(numbers.number), "off taxonomy": macro["off_taxonomy"].map(numbers.percent),
}, hide_index=True, width="stretch")
st.caption("Means over the attributes each judge was scored on (an undefined accuracy is left out of its mean). "
           "Backend clip: the contrastive zero-shot baseline (argmax over label prompts, never abstains).")

condition = context.bound(st.selectbox, "Condition", "condition", conditions[0], conditions,
                          help="default: label lists and the abstention option; no_label_list / no_unspecified: "
                               "the published ablations.")
shown = result.cells[result.cells["condition"] == condition]
st.subheader(f"Accuracy per attribute under {draw.esc(condition)}")
draw.chart(accuracy_chart(shown, colours, list(tax.names())),
           "Left: abstentions count as wrong; middle: abstentions left out; right: the share answered with a label. "
           "A judge that abstains where the image shows little looks worse on the left and better in the middle.")
st.dataframe({
    "judge": shown["judge"].map(draw.visible), "attribute": shown["attribute"].map(draw.visible), "asked": shown["n"].map(numbers.count),
    "coverage": shown["coverage"].map(numbers.percent),
    "accuracy (miss) [95%]": [numbers.estimate(v, lo, hi, missing=numbers.UNDEFINED) for v, lo, hi in
                              zip(shown["accuracy_miss"], shown["accuracy_miss_lo"], shown["accuracy_miss_hi"])],
    "accuracy (excluded) [95%]": [numbers.estimate(v, lo, hi, missing=numbers.UNDEFINED) for v, lo, hi in
                                  zip(shown["accuracy_exclude"], shown["accuracy_exclude_lo"],
                                      shown["accuracy_exclude_hi"])],
    "macro-F1": shown["macro_f1"].map(numbers.number), "off taxonomy": shown["off_taxonomy"].map(numbers.percent),
    "policy in the taxonomy": shown["abstention"],
}, hide_index=True, width="stretch")

st.subheader("Confusion matrix")
picks = st.columns(2)
here = sorted(shown["judge"].unique())
judge = context.bound(picks[0].selectbox, "Judge", "labeler", here[0], here)
attributes = [a for a in tax.names() if a in set(shown.loc[shown["judge"] == judge, "attribute"])]
attribute = context.bound(picks[1].selectbox, "Attribute", "attribute", attributes[0], attributes)
matrix = result.confusion[(result.confusion["judge"] == judge) & (result.confusion["condition"] == condition)
                          & (result.confusion["attribute"] == attribute)]
grid = matrix.pivot(index="gold", columns="predicted", values="count")
grid = grid.reindex(index=list(dict.fromkeys(matrix["gold"])), columns=list(dict.fromkeys(matrix["predicted"])))
fig = go.Figure(go.Heatmap(z=grid.to_numpy(), x=list(figures.plain(grid.columns.to_series())),
                           y=list(figures.plain(grid.index.to_series())), colorscale="Blues", text=grid.to_numpy(),
                           texttemplate="%{text}", hovertemplate="gold %{y}, answered %{x}: %{z}"))
fig.update_yaxes(autorange="reversed")
draw.chart(figures.layout(fig, f"{figures.plain(judge)} · {figures.plain(condition)} · {figures.plain(attribute)}",
                       "answered", "gold label", height=max(320, 40 * len(grid) + 160)),
           "Rows: gold labels; columns: the taxonomy's labels, its abstention label, answers off the taxonomy and "
           "missing answers (a parse failure of the call). A gold abstention label (no evidence) is shown but not scored.")
by_label = result.by_label[(result.by_label["judge"] == judge) & (result.by_label["condition"] == condition)
                           & (result.by_label["attribute"] == attribute)]
st.dataframe({"gold label": by_label["gold"].map(draw.visible), "images": by_label["n"].map(numbers.count),
              "coverage": by_label["coverage"].map(numbers.percent),
              "accuracy (miss)": by_label["accuracy_miss"].map(numbers.number),
              "accuracy (excluded)": by_label["accuracy_exclude"].map(lambda v: numbers.number(v, missing=numbers.UNDEFINED))},
             hide_index=True, width="stretch")
st.caption("Accuracy by gold label: is the judge better for some groups than for others?")

st.subheader(f"Abstention and answers off the taxonomy of {draw.esc(judge)}, condition by condition")
mine = result.cells[result.cells["judge"] == judge]
left, right = st.columns(2)
with left:
    draw.chart(share_chart(mine, "abstain_share", "Abstained"), "Share of answers that are the abstention label.")
with right:
    draw.chart(share_chart(mine, "off_taxonomy", "Off the taxonomy"),
               "Share of answers outside the label set (never matched to a near label).")

st.subheader(f"Where judges and gold disagree on {draw.esc(attribute)}")
toggles = st.columns(2)
every = context.bound(toggles[0].checkbox, "Every judge (else the judge chosen above)", "every", False)
shown_abstained = context.bound(toggles[1].checkbox, "Include abstentions", "abstentions", False)
wrong = disagreements(data, include_abstained=shown_abstained)
wrong = wrong[(wrong["condition"] == condition) & (wrong["attribute"] == attribute) & (every | (wrong["judge"] == judge))]
if wrong.empty:
    st.info(f"No disagreement with the gold labels on {draw.esc(attribute)} under {draw.esc(condition)}.")
    st.stop()
pages = list(range(1, (len(wrong) - 1) // GALLERY + 2))
page = context.bound(st.selectbox, f"Page ({len(wrong)} answers, {GALLERY} a page)", "gallery", 1, pages)
for row in wrong.iloc[(page - 1) * GALLERY: page * GALLERY].itertuples():
    image, facts = st.columns([1, 3])
    image.image(draw.fitted(row.image_path, IMAGE, row.candidate_id))
    facts.markdown(f"**{draw.esc(row.judge)}** · gold **{draw.esc(row.gold)}** · answered "
                   f"**{draw.esc(row.answer if isinstance(row.answer, str) else 'nothing')}** ({draw.esc(row.status)})")
    facts.caption(f"image {draw.esc(row.candidate_id)} · prompt: {draw.esc(row.prompt)}")
    facts.text(draw.visible(f"rationale: {row.rationale if isinstance(row.rationale, str) else '(none recorded)'}"))
    facts.code(draw.visible(row.raw_output) if isinstance(row.raw_output, str) else "(no raw output recorded)", language=None,
               wrap_lines=True)
