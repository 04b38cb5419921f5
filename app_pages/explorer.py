"""Prompt explorer: which pools did the judge get wrong, and what did it see?

Filter by country, category, generator, prompt text and outcome of the focus
judge; sort by regret, gain or rating range; page through the matching pools. The view
lives in the URL, and comes back when the page is reopened from the sidebar.
Each pool shows its candidates in canonical order, framed in the colour of each
judge whose order-0 pick it is, the best-rated starred, mean alignment below.
"""

from __future__ import annotations

import streamlit as st

from app_ui import context, draw, glance
from audit_core.selection import browse

PAGE_SIZES = (10, 20, 50)
THUMB = 112
VIEW = ("country", "category", "generator", "q", "outcome", "sort", "desc", "per", "pg")  # its URL parameters

sel = context.selection("explorer")
context.restore_view("explorer", VIEW)
draw.header(
    "Prompt explorer",
    sel,
    "Every recorded decision, pool by pool: filter to below-mean picks, order flips or judge disagreements.",
)
if sel.judge is None:
    st.info("This dataset has no selector judge yet, so there are no picks to explore.")
    st.stop()

data = sel.data()
outcomes = sel.outcomes()
options = context.filter_options(data)

# --- the filter, every field bound to the URL
top = st.columns([2, 2, 2, 3])
countries = context.bound(top[0].multiselect, "Country", "country", (), options["country"], format_func=draw.place)
categories = context.bound(top[1].multiselect, "Category", "category", (), options["category"])
chosen_generators = context.bound(top[2].multiselect, "Generator in pool", "generator", (), options["generator"])
text = context.bound(top[3].text_input, "Prompt contains", "q", "")
below = st.columns([5, 2, 1.4, 1])
chosen_outcomes = context.bound(
    below[0].multiselect,
    f"Outcome of {draw.esc(sel.judge)} (all must hold)",
    "outcome",
    (),
    list(browse.OUTCOME_FILTERS),
    format_func=lambda k: browse.OUTCOME_FILTERS[k][0],
)
sort = context.bound(below[1].selectbox, "Sort by", "sort", "regret", list(browse.SORT_KEYS), format_func=browse.SORT_KEYS.get)
descending = context.bound(below[2].toggle, "Descending", "desc", True)
page_size = context.bound(below[3].selectbox, "Per page", "per", PAGE_SIZES[0], list(PAGE_SIZES))

flt = browse.PoolFilter(
    countries=tuple(countries),
    categories=tuple(categories),
    generators=tuple(chosen_generators),
    text=text,
    outcomes=tuple(chosen_outcomes),
    sort=sort,
    descending=descending,
)
matches = browse.filter_pools(data, outcomes, flt)

# --- the count, and which page of it
if st.session_state.get("_explorer_filter", (flt, page_size)) != (flt, page_size):
    st.session_state["pg"] = 1  # a new filter or page size starts on the first page
st.session_state["_explorer_filter"] = (flt, page_size)
n_pages = browse.page_bounds(len(matches), 1, page_size)[2]
context.adopt("pg", 1)
if not 1 <= st.session_state["pg"] <= n_pages:
    shown = min(max(int(st.session_state["pg"]), 1), n_pages)
    context.refuse("pg", st.session_state["pg"], shown)
    st.session_state["pg"] = shown
context.warn_refused()
count, pager = st.columns([3, 1])
count.markdown(f"**{len(matches):,}** of {len(outcomes):,} pools match · sorted by {browse.SORT_KEYS[sort]}")
page = pager.number_input(f"Page (of {n_pages})", min_value=1, max_value=n_pages, step=1, key="pg")
context.publish("pg", page, 1)
context.remember_view("explorer", VIEW)
start, stop, _ = browse.page_bounds(len(matches), page, page_size)
if matches.empty:
    st.info("No pool matches this filter. Remove a condition to widen it.")
    st.stop()

# --- the grid
colours = glance.name_colours(sel)
marks = browse.judge_marks(sel.judges)
draw.legend(sel.judges, colours, marks)
shown = matches.iloc[start:stop]
tiles = browse.pool_tiles(data, shown.index.to_numpy(), sel.judges, sel.image_paths())
link_filter = context.filter_params(flt)
grid = st.columns(2)
for k, pool in enumerate(shown.itertuples()):
    with grid[k % 2].container(border=True):
        st.text(draw.visible(pool.prompt))
        st.caption(draw.pool_facts(pool, sel.judge))
        pool_tiles = tiles.loc[tiles["row"] == pool.Index]
        st.image(draw.pool_strip(pool_tiles, colours, marks, THUMB, data.mask.shape[1]))
        if note := draw.image_note(pool_tiles["image_path"].tolist()):
            st.caption(note)
        st.page_link(
            "app_pages/detail.py",
            label=f"Open pool {draw.esc(pool.prompt_id)}",
            icon=":material/open_in_new:",
            query_params=sel.link("detail", prompt=pool.prompt_id, **link_filter),
        )
st.caption(f"Pools {start + 1:,}–{stop:,} of {len(matches):,}.")
