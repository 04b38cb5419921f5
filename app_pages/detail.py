"""Pool detail: one pool across every presentation order.

What each judge saw (one grid row per order, one column per slot, each judge's
pick framed in its colour), the held-out ratings with the individual votes,
what each judge's order-0 pick cost, what every policy (gates and debiased selectors
included) returned, with a note on what it is, and on demand the raw text of every call.
Previous/next walk the explorer's current filter (a DuckDB query, `browse.pool_place`).
"""

from __future__ import annotations

import streamlit as st

from app_ui import context, draw, glance
from audit_core.selection import browse
from findings import numbers

CELL = 150

sel = context.selection("detail")
draw.header(
    "Pool detail",
    sel,
    "One pool in every order: what each judge saw, what it returned, and what each gate did with it.",
)
data = sel.data()
policies = sel.policies()
flt = context.pool_filter_from_url(sel.filter_options(), list(sel.judge_policies()))
table = sel.pool_table(flt.policy) if sel.judge else None
first = (browse.pool_place(table, flt, "").first if table is not None else None) or data.prompts["prompt_id"].iat[0]
prompt_id = context.bound(st.text_input, "Prompt id", "prompt", first, always=True)
try:
    row = browse.prompt_row(data, prompt_id)
except KeyError:
    st.warning(f"Prompt {context.quote(prompt_id)} does not exist in this dataset: pick a pool in the explorer "
               "or paste a prompt id from this dataset.", icon=":material/link_off:")
    st.stop()

# --- the prompt, and where it sits in the explorer's filter
pool = data.prompts.iloc[row]
st.subheader("Prompt")
st.text(draw.visible(pool["prompt"]))
st.caption(f"{draw.esc(draw.place(pool['country']) if pool['country'] else 'no country')} · {draw.esc(pool['category'] or 'no category')} · {pool['m']} images")
place = browse.pool_place(table, flt, prompt_id) if table is not None else None
previous, following = (place.previous, place.following) if place else (None, None)
link_filter = context.filter_params(flt)
nav = st.columns(3)
if previous:
    nav[0].page_link("app_pages/detail.py", label="Previous pool", icon=":material/arrow_back:",
                     query_params=sel.link("detail", prompt=previous, **link_filter))
nav[1].page_link("app_pages/explorer.py", label="Back to the explorer", icon=":material/grid_view:",
                 query_params=sel.link("explorer", **link_filter))
if following:
    nav[2].page_link("app_pages/detail.py", label="Next pool", icon=":material/arrow_forward:",
                     query_params=sel.link("detail", prompt=following, **link_filter))
st.caption(
    f"Pool {place.place:,} of the {place.count:,} in the explorer's current filter."
    if place and place.place else "This pool is outside the explorer's current filter."
)

# --- what each judge saw, order by order
m = int(pool["m"])
candidate_ids = list(data.candidate_ids[row, :m])
calls, votes = sel.pool_records(prompt_id, candidate_ids)
ratings = browse.candidate_table(data, row, votes).set_index("candidate_id")
colours = glance.name_colours(sel)
marks = browse.judge_marks(sel.judges)
st.subheader("What each judge saw and returned")
draw.legend(sel.judges, colours, marks)
paths = sel.image_paths(candidate_ids)
grid = browse.pool_grid(calls)
if grid.empty:
    st.info("No judge has been called on this pool yet.")
for _, arrangement in grid.groupby("arrangement"):
    cells = st.columns([1] + [1] * m)
    head = arrangement.iloc[0]
    cells[0].markdown(f"**Order {head['order_index']}**")
    cells[0].caption("shown to " + ", ".join(draw.esc(j) for j in head["judges"]))
    for cell, slot in zip(cells[1:], arrangement.itertuples()):
        rating = ratings.loc[slot.candidate_id]
        path = paths.get(slot.candidate_id)
        cell.image(draw.framed(path, CELL, [colours[j] for j in slot.picked_by],
                               bool(rating["best"]), rating["generator"]))
        picked = ", ".join(marks[j] for j in slot.picked_by)
        unshown = draw.image_problem(path) if path else None
        cell.caption(f"**{slot.slot_label}** · {draw.esc(rating['generator'])} · alignment {numbers.number(rating['alignment'])}"
                     + (f" · picked by {draw.esc(picked)}" if picked else "") + (f" · {unshown}" if unshown else ""))

st.subheader("Held-out ratings")
st.caption("Mean rating per outcome (errors: share of annotators flagging it), individual alignment votes, content scores.")
glance.frame(draw.table(ratings.rename(columns={"best": "best_rated"}), index=True))

st.subheader("What each judge's order-0 pick cost")
st.caption("Regret = best − picked alignment; gain = picked − pool mean (random); below mean = gain < 0.")
if sel.judges:
    costs = browse.pool_outcomes(data, sel.judges, row).rename_axis("judge").rename(columns={
        "pick_id": "picked_image", "best": "picks_the_best", "agreement": "order_agreement",
        "parse_fail": "a_call_failed", "flip": "orders_flip"})
    glance.frame(draw.table(costs, index=True))
    glance.frame(draw.table(browse.choices_by_order(calls), index=True))
    st.caption("Choices by order: the slot each call named and the image behind it, or the call's failure status.")

st.subheader("Every gate's decision and every policy's pick")
st.caption("What each policy returned on this pool: the order-0 pick, other orders, majority, the debiased "
           "selectors (from the calls alone, never the ratings), scorers and gates. A gate acts only when its "
           "orders or judges agree; otherwise it abstains and returns nothing.")
decisions = browse.gate_decisions(data, policies.picks, row)
decisions.insert(1, "what it is", [browse.policy_note(p, policies.kinds[p]) for p in decisions["policy"]])
thumbs = {cid: draw.data_uri(paths.get(cid), 64, ratings.loc[cid, "generator"]) for cid in candidate_ids}
images = [thumbs[c] if acts else draw.abstain_uri(64) for c, acts in zip(decisions["candidate_id"], decisions["acts"])]
abstains = ~decisions["acts"]
decisions = draw.table(decisions.assign(
    acts=decisions["acts"].map({True: "acts", False: "abstains"}),
    candidate_id=decisions["candidate_id"].mask(abstains, "abstains"),
    generator=decisions["generator"].mask(abstains, "abstains")))
decisions.insert(2, "returned image", images)
glance.frame(decisions,
             column_config={"returned image": st.column_config.ImageColumn("returned image")})

if context.bound(st.toggle, "Show each call's raw output and parse status", "raw", False):
    for call in calls.itertuples():
        with st.expander(f"{draw.esc(call.judge)} · order {call.order_index} · {draw.esc(call.status)}"):
            st.code(draw.visible(call.raw_output) if call.raw_output is not None else "(no output recorded)", language=None,
                    wrap_lines=True)
            st.text(draw.visible(f"status: {call.status} · attempts: {call.attempts} · parse note: "
                                 f"{call.parse_note if isinstance(call.parse_note, str) else '—'}"))
