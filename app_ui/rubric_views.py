"""The rating judge's rubric beside a content scorer on the same images, as the Alignment page draws it.

The numbers are `audit_core.rating.rubric_vs_scorer`'s (rubric rescaled to [−1, 1], Pearson and
Spearman with item-level bootstrap intervals), cached per database file, dataset and
resample count; this module only draws: a table of every judge × condition × scorer and,
for the page's judge and condition, one point per item.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app_ui import context, draw, glance, store_lock
from app_ui.context import Selection
from audit_core import RatingData, store
from audit_core.rating.rubric_vs_scorer import RubricVsScorer, rubric_vs_scorer
from findings import figures, numbers

NO_SCORER = ("No content scorer is recorded on this dataset, so the rubric has nothing to stand beside. Record "
             "one with `python -m runners.score --db DB --dataset NAME --scorer NAME --backend clip --model "
             "ViT-L-14 --pretrained openai`.")


@st.cache_resource(max_entries=4, show_spinner="Setting the rubric beside the content scorers…")
def _comparison(db_path: str, stamp: float, dataset_id: str, resamples: int,
                _data: RatingData) -> RubricVsScorer | None:
    """The comparison for the dataset's rating data (`_data`, not hashed: it is fixed by the other arguments)."""
    with store_lock.reading(db_path) as con:
        scores = store.load_scores(con, dataset_id)
    if _data.ratings.empty or scores.empty:
        return None
    return rubric_vs_scorer(_data.ratings, scores, _data.scale, context.resampling(resamples))


def comparison_table(correlations: pd.DataFrame) -> pd.DataFrame:
    """One text row per judge × condition × scorer: items paired, unrated, Pearson and Spearman [95%]."""
    return pd.DataFrame({
        "judge": correlations["judge"], "condition": correlations["condition"], "scorer": correlations["scorer"],
        "items": correlations["n"], "unrated": correlations["unrated"],
        "Pearson r": [numbers.estimate(v, lo, hi, missing=numbers.UNDEFINED) for v, lo, hi in
                      zip(correlations["pearson"], correlations["pearson_lo"], correlations["pearson_hi"])],
        "Spearman ρ": [numbers.estimate(v, lo, hi, missing=numbers.UNDEFINED) for v, lo, hi in
                       zip(correlations["spearman"], correlations["spearman_lo"], correlations["spearman_hi"])],
    })


def item_scatter(items: pd.DataFrame, title: str, scorer: str, colour: str) -> go.Figure:
    """One point per item: the rescaled rubric (x) against the scorer's score (y), the item named on hover."""
    fig = go.Figure(go.Scatter(
        x=items["rubric_scaled"], y=items["score"], mode="markers", marker={"color": colour, "opacity": 0.6},
        customdata=items[["candidate_id", "rating"]].map(figures.plain).to_numpy(),
        hovertemplate="%{customdata[0]}<br>rating %{customdata[1]} → %{x:.2f}<br>score %{y:.3f}<extra></extra>",
        name=figures.plain(scorer)))
    fig.update_xaxes(range=[-1.1, 1.1])
    return figures.layout(fig, title, "rubric rescaled to [−1, 1]  (2(r − lo)/(hi − lo) − 1)",
                       f"{figures.plain(scorer)} score")


def rubric_vs_scorer_section(sel: Selection, judge: str | None, condition: str | None) -> None:
    """The section: every pair's correlations, then the page's judge and condition item by item against a scorer."""
    st.subheader("The rubric beside content scorers")
    st.caption("Each rating judge's rating rescaled to [−1, 1] (1–5: (r − 3)/2), on the scale of a content "
               "scorer such as CLIP cosine, on the images both rated and scored; abstained and failed ratings are "
               "counted as unrated, never turned into a number. 95% item-level bootstrap intervals.")
    data = sel.rating_data()
    result = None if data is None else _comparison(sel.db_path, sel.stamp, sel.dataset_id, sel.resamples, data)
    if result is None:
        context.single("scorer", None)
        st.info(NO_SCORER)
        return
    glance.frame(comparison_table(result.correlations))
    if judge is None or condition is None:
        context.single("scorer", None)
        return
    scorers = list(dict.fromkeys(result.correlations["scorer"]))
    scorer = context.bound(st.selectbox, "Content scorer", "scorer", scorers[0], scorers) if len(scorers) > 1 \
        else context.single("scorer", scorers[0])
    items = result.items
    mine = items[(items["judge"] == judge) & (items["condition"] == condition) & (items["scorer"] == scorer)]
    colour = draw.judge_colours(sorted(set(result.correlations["judge"])))[judge]
    draw.chart(item_scatter(mine, f"{figures.plain(judge)} · {figures.plain(condition)} beside {figures.plain(scorer)}",
                            scorer, colour),
               f"{len(mine)} items rated and scored; hover for the item, its rating and its score.")
