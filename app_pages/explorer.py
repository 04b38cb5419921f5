"""Prompt explorer: which pools did the judge get wrong, and what did it see?

Filter by country, category, generator, prompt text and outcome of the focus
judge; sort by regret, gain or rating range; page through the matching pools. A policy
of the focus judge (its order-0 pick by default; majority, a gate, a debiased selector
such as `<judge> borda`, …) keeps the pools it acts on and is what the pick outcomes,
regret and gain are about. The view lives in the URL, and comes back when the page is
reopened from the sidebar. Each pool shows its candidates in canonical order, framed in
the colour of each judge whose order-0 pick it is, the best-rated starred, mean alignment
below. Counting, filtering, sorting and paging are DuckDB queries (`browse.count_pools`,
`browse.pool_page`): a page reads only its own pools.
"""

from __future__ import annotations

import streamlit as st

from app_ui import context, draw, glance
from audit_core.selection import browse

PAGE_SIZES = (10, 20, 50)
THUMB = 112
VIEW = ("policy", "country", "category", "generator", "q", "outcome", "sort", "desc", "per", "pg")  # its URL parameters

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
options = sel.filter_options()
kinds = sel.judge_policies()  # policy -> kind, the order-0 pick first

# --- the filter, every field bound to the URL
chosen_policy = context.bound(
    st.selectbox, "Policy: whose picks, on the pools it acts on", "policy", sel.judge, list(kinds),
    format_func=lambda p: f"{p} · {browse.policy_note(p, kinds[p])}" + (" (every pool)" if p == sel.judge else ""),
)
top = st.columns([2, 2, 2, 3])
countries = context.bound(top[0].multiselect, "Country", "country", (), options["country"], format_func=draw.place)
categories = context.bound(top[1].multiselect, "Category", "category", (), options["category"])
chosen_generators = context.bound(top[2].multiselect, "Generator in pool", "generator", (), options["generator"])
text = context.bound(top[3].text_input, "Prompt contains", "q", "")
below = st.columns([5, 2, 1.4, 1])
chosen_outcomes = context.bound(
    below[0].multiselect,
    f"Outcome of {draw.esc(chosen_policy)} (all must hold)",
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
    policy="" if chosen_policy == sel.judge else chosen_policy,
)
table = sel.pool_table(flt.policy)
n_matches = browse.count_pools(table, flt)

# --- the count, and which page of it
if st.session_state.get("_explorer_filter", (flt, page_size)) != (flt, page_size):
    st.session_state["pg"] = 1  # a new filter or page size starts on the first page
st.session_state["_explorer_filter"] = (flt, page_size)
n_pages = browse.page_bounds(n_matches, 1, page_size)[2]
context.adopt("pg", 1)
if not 1 <= st.session_state["pg"] <= n_pages:
    shown = min(max(int(st.session_state["pg"]), 1), n_pages)
    context.refuse("pg", st.session_state["pg"], shown)
    st.session_state["pg"] = shown
context.warn_refused()
count, pager = st.columns([3, 1])
acting = f" · {draw.esc(flt.policy)} acts on them" if flt.policy else ""
count.markdown(f"**{n_matches:,}** of {table.num_rows:,} pools match{acting} · sorted by {browse.SORT_KEYS[sort]}")
page = pager.number_input(f"Page (of {n_pages})", min_value=1, max_value=n_pages, step=1, key="pg")
context.publish("pg", page, 1)
context.remember_view("explorer", VIEW)
start, stop, _ = browse.page_bounds(n_matches, page, page_size)
if not n_matches:
    st.info("No pool matches this filter. Remove a condition to widen it.")
    st.stop()

# --- the grid
colours = glance.name_colours(sel)
marks = browse.judge_marks(sel.judges)
draw.legend(sel.judges, colours, marks)
shown = browse.pool_page(table, flt, start, stop)
rows = shown.index.to_numpy()
tiles = browse.pool_tiles(data, rows, sel.judges, sel.image_paths(data.candidate_ids[rows][data.mask[rows]].tolist()))
link_filter = context.filter_params(flt)
grid = st.columns(2)
for k, pool in enumerate(shown.itertuples()):
    with grid[k % 2].container(border=True):
        st.text(draw.visible(pool.prompt))
        st.caption(draw.pool_facts(pool, chosen_policy))
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
st.caption(f"Pools {start + 1:,}–{stop:,} of {n_matches:,}.")
