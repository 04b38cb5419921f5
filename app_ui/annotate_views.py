"""What the Annotate page draws: which campaign and who rates, one item blind, and the organiser's view.

Blind (issue 25 item 2): the annotator's view reads campaigns, items and the annotator's own progress
through `audit_core.campaigns`, never a judge, pick, score, rationale, generator or country, nor another
annotator's answer (nor the sidebar, which names judges). An item shows its prompt and its images
decoded and drawn anew (no file name or metadata reaches the browser), each named by its place in the
annotator's `shown_order` ("Image A"), never by candidate id, which may name the generator; widget keys
are numbered, never ids, since Streamlit writes keys into the page. Every read goes through
`store_lock.reading` and every act (submit, skip, revise) through `store_lock.writing`, one
transaction each. `submit` is idempotent per (campaign, annotator, item) and each button carries the id
of the item it was drawn with, so a double click, a refresh or a stale page cannot store a vote twice.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from app_ui import access, allowed, draw, store_lock
from app_ui.context import adopt, publish, quote
from audit_core import campaigns as cp
from audit_core.errors import DatabaseFileError
from audit_core.stats.resampling import Resampling
from audit_core.user_text import blank, escape_markdown, visible
from findings import numbers

# the page's URL parameters, with db, dataset and token
CAMPAIGN = "campaign"
ANNOTATOR = "annotator"
VIEW = "view"
VIEWS = {"rate": "Rate", "organiser": "Organiser"}
RELIABILITY = Resampling(1_000, seed=0)  # item bootstrap behind the organiser's alpha intervals
IMAGE = 360  # pixels of an item's image
SKIP_KEY, REVISE_KEY, SUBMIT_KEY = "s", "Backspace", "Enter"
AUDIT_PAGE = {"alignment": "overview", "rubric": "alignment", "labels": "attributes"}  # where each task's references are audited
_STATE = "_annotate"  # session state: per-item widget numbers, when each item was first shown, revising or not, a note
T = TypeVar("T")


@dataclass(frozen=True)
class Desk:
    """What the page works on: the database (its name and server path), the campaign, who rates it
    (None until named) and whether they came through a token (a visitor from another machine)."""

    db_name: str
    db_path: str
    db_default: bool
    campaign: cp.Campaign
    annotator: str | None
    by_token: bool


def _state() -> dict[str, Any]:
    return st.session_state.setdefault(_STATE, {"keys": {}, "shown_at": {}, "revising": False, "note": None})


def read(db_path: str, ask: Callable[..., T], *args: Any) -> T:
    """ask(con, *args) on a read-only connection to the store that takes its turn with votes (`store_lock`)."""
    with store_lock.reading(db_path) as con:
        return ask(con, *args)


# ------------------------------------------------------------ which database, campaign and annotator


def _stop(message: str) -> None:
    st.error(message, icon=":material/block:")
    st.stop()


def databases() -> tuple[dict[str, Any], str | None]:
    """(name → path of every database the starter allowed, the default name)."""
    allowance = allowed.allowance(sys.argv[1:], os.environ)
    found = allowed.databases(allowance)
    return found, allowed.default_name(found, allowance)


def database() -> tuple[str, str, bool]:
    """(name, server path, is the default) of the database a link names (`db`, else the one the sidebar
    chose in this session, else the default); refused, and the page stopped, when it was not allowed."""
    found, default = databases()
    raw = st.query_params.get("db") or st.session_state.get("db") or default
    if raw is None:
        _stop("No database to open: start the app with `streamlit run app.py -- --db PATH`.")
    try:
        name = allowed.database_name(raw, found)
    except allowed.Refused as err:
        _stop(f"This link names the database {quote(raw)}, which this app may not open: {err}. Nothing was opened.")
    if not found[name].is_file():
        _stop(f"{quote(name)}: no such database.")
    return name, str(found[name]), name == default


def view() -> str:
    """The view this visit opens (a key of VIEWS): on this machine the URL's `view`, a choice; from another
    machine "rate" for an annotator's token, "organiser" for a viewer's secret (`app_ui.access`)."""
    if access.on_network():
        return "organiser" if access.shown_token() is None and access.viewer() is not None else "rate"
    adopt(VIEW, "rate", list(VIEWS))
    chosen = st.segmented_control("View", list(VIEWS), key=VIEW, format_func=VIEWS.get, label_visibility="collapsed")
    publish(VIEW, chosen, "rate")
    return chosen or "rate"


def desk(view: str) -> Desk:
    """The campaign and annotator of this visit: for rating from another machine, the token's (`app_ui.access`);
    else the link's `campaign` (a choice when it names none) and, for rating, the name the annotator gives."""
    if access.on_network() and view == "rate":
        return _desk_by_token()
    db_name, db_path, db_default = database()
    campaign = _campaign(db_path)
    annotator = _annotator_name(campaign) if view == "rate" else None
    return Desk(db_name, db_path, db_default, campaign, annotator, by_token=False)


def _desk_by_token() -> Desk:
    """The desk a valid token opens: its campaign, as its annotator, in the database the link names (or, with
    none named, the allowed database that knows the token). Refused without a valid token, or when the link
    names another campaign."""
    token = access.shown_token()
    refusal = ("This page opens only from an annotator's link (`python -m runners.campaign invite`): this one "
               "is {}. Ask the organiser for a new link.")
    if not token:
        _stop(refusal.format("missing its token"))
    found, default = databases()
    names = [database()[0]] if "db" in st.query_params else [n for n in found if found[n].is_file()]
    for name in names:
        try:
            held = read(str(found[name]), cp.token_holder, token)
        except DatabaseFileError:
            continue
        if held is not None:
            campaign, annotator = held
            named = st.query_params.get(CAMPAIGN)
            if named is not None and named != campaign.name or st.query_params.get("dataset", campaign.dataset) != campaign.dataset:
                _stop("This link's token does not open that campaign: use the link you were given as it is.")
            return Desk(name, str(found[name]), name == default, campaign, annotator, by_token=True)
    _stop(refusal.format("not valid (mistyped, or revoked by the organiser)"))
    raise AssertionError  # st.stop() does not return


def _campaign(db_path: str) -> cp.Campaign:
    """The campaign the link names (`campaign`, in `dataset` when given), or the one chosen here."""
    dataset = st.query_params.get("dataset")
    known = read(db_path, cp.list_campaigns, None)
    if not known:
        _stop("This database has no rating campaign yet: create one with `python -m runners.campaign create` "
              "(docs/campaigns.md).")
    named = st.query_params.get(CAMPAIGN)
    if named is not None:
        matches = [c for c in known if c.name == named and dataset in (None, c.dataset)]
        if len(matches) == 1:
            return matches[0]
        where = "" if dataset is None else f" in dataset {quote(dataset)}"
        why = "names two datasets' campaigns: add `dataset=`" if matches else "does not exist here"
        st.warning(f"This link's `campaign` {quote(named)}{where} {why}.", icon=":material/link_off:")
    keys = [f"{c.dataset}/{c.name}" for c in known]
    label = {f"{c.dataset}/{c.name}": visible(f"{c.name} ({c.task}, pool {c.pool}, dataset {c.dataset})") for c in known}
    chosen = st.selectbox("Campaign", keys, index=None, format_func=label.get, placeholder="Choose a campaign")
    if chosen is None:
        st.stop()
    campaign = known[keys.index(chosen)]
    st.query_params[CAMPAIGN] = campaign.name
    st.query_params["dataset"] = campaign.dataset
    st.rerun()
    raise AssertionError


def _annotator_name(campaign: cp.Campaign) -> str | None:
    """The annotator's name (URL `annotator`): one of the campaign's annotators when it names them, else
    any non-blank name; None until given."""
    if campaign.annotators:
        adopt(ANNOTATOR, "", ("", *campaign.annotators))
        name = st.selectbox("Who rates", ["", *campaign.annotators], key=ANNOTATOR, format_func=lambda n: visible(n) or "—")
    else:
        adopt(ANNOTATOR, "")
        name = st.text_input("Your name", key=ANNOTATOR, max_chars=80,
                             help="Your votes are stored under this name; come back with it to resume.")
    publish(ANNOTATOR, name, "")
    if not name or blank(name):
        st.info("Give your name to start rating.")
        return None
    return name


# ------------------------------------------------------------ rating


def _note(kind: str, text: str) -> None:
    _state()["note"] = (kind, text)


def _act(desk: Desk, act: Callable[..., T], *args: Any) -> tuple[bool, T | None]:
    """(done, what it returned) of act(con, campaign, annotator, *args) in its own write turn and transaction;
    a refusal is (False, None) and becomes the note."""
    try:
        with store_lock.writing(desk.db_path) as con:
            return True, act(con, desk.campaign, desk.annotator, *args)
    except (cp.CampaignError, DatabaseFileError) as err:
        _note("error", f"Not stored: {err}")
        return False, None


def _seconds(item_id: str) -> float:
    return max(time.time() - _state()["shown_at"].get(item_id, time.time()), 0.0)


def _submit(desk: Desk, item: cp.Item, shown: tuple[str, ...], answer: Callable[[], cp.Answer | None],
            revising: bool) -> None:
    """Button callback: store `answer()` on the item the button was drawn with (or revise the last answer)."""
    given = answer()
    if given is None:
        _note("warning", "Answer every question first.")
        return
    if revising:  # only if the item shown is still their latest rated one (another tab may have rated since)
        if _act(desk, cp.revise_last, given, _seconds(item.item_id), item.item_id)[0]:
            _note("success", "Your last answer was changed.")
        _state()["revising"] = False
        return
    done, stored = _act(desk, cp.submit, item.item_id, given, shown, _seconds(item.item_id))
    if done:
        _note("success" if stored else "info", "Saved." if stored else "That item was already saved: nothing changed.")


def _skip(desk: Desk, item_id: str) -> None:
    if _act(desk, cp.skip, item_id)[0]:
        _note("info", "Skipped.")


def _revise(on: bool) -> None:
    _state()["revising"] = on


def rate(desk: Desk) -> None:
    """The annotator's progress, then the next open item (or the last rated one, to revise it)."""
    state = _state()
    if (note := state.pop("note", None)) is not None:
        getattr(st, note[0])(note[1])
    campaign, annotator = desk.campaign, desk.annotator
    with store_lock.reading(desk.db_path) as con:
        left = cp.open_items(con, campaign, annotator)
        progress = cp.progress(con, campaign)
        last = cp.last_rated(con, campaign, annotator)  # (item, the order it was shown in) or None
        upcoming = cp.next_item(con, campaign, annotator) if left else None
    mine = progress[progress["annotator"] == annotator]
    done = int(mine[["rated", "skipped"]].sum().sum())
    total = done + len(left)
    st.progress(done / total if total else 1.0, text=f"{done} of {total} items done")
    revising = bool(state["revising"]) and last is not None
    if revising:
        item, shown = last
        st.info("Changing your last answer: answer it again.")
    else:
        item = upcoming
        if item is None:
            st.success("Every item for you in this campaign is done. Thank you!")
            _revise_button(last is not None)
            return
        shown = cp.shown_order(campaign, annotator, item)
    n = state["keys"].setdefault((item.item_id, bool(revising)), len(state["keys"]))
    state["shown_at"].setdefault(item.item_id, time.time())
    with st.expander("Instructions", expanded=done == 0):
        st.text(visible(campaign.instructions))
    st.markdown(f"**Prompt:** {escape_markdown(item.prompt)}")
    paths = dict(zip(item.candidate_ids, item.image_paths))
    answer = {"alignment": _alignment, "rubric": _rubric, "labels": _labels}[campaign.task]
    answer(desk, item, shown, [paths[c] for c in shown], n, bool(revising))
    left_col, right_col = st.columns(2)
    if revising:
        left_col.button("Keep my last answer", key=f"keep{n}", on_click=_revise, args=(False,))
    else:
        left_col.button("Skip this item", key=f"skip{n}", shortcut=SKIP_KEY, on_click=_skip, args=(desk, item.item_id))
        _revise_button(last is not None, right_col)


def _revise_button(shown: bool, where: Any = st) -> None:
    if shown:
        where.button("Change my last answer", key="revise", shortcut=REVISE_KEY, on_click=_revise, args=(True,))


def _letter(slot: int) -> str:
    return chr(ord("A") + slot) if slot < 26 else str(slot + 1)


def _choose(key: str, value: float) -> None:
    """Button callback: give the scale widget `key` the value `value` (a key press rates the next image)."""
    st.session_state[key] = value


def _alignment(desk: Desk, item: cp.Item, shown: tuple[str, ...], paths: list[str | None], n: int, revising: bool) -> None:
    """Every image of the pool with the scale under it; the keys rate the first image still unrated."""
    scale = {p.value: p for p in desk.campaign.scale}
    keys = [f"a{n}_{slot}" for slot in range(len(shown))]
    for row in range(0, len(shown), 3):
        for col, slot in zip(st.columns(3), range(row, min(row + 3, len(shown)))):
            col.image(draw.fitted(paths[slot], IMAGE, "no image"), caption=f"Image {_letter(slot)}")
            col.segmented_control(f"Image {_letter(slot)}", list(scale), key=keys[slot],
                                  format_func=lambda v: visible(scale[v].label), label_visibility="collapsed")
    unrated = [slot for slot, key in enumerate(keys) if st.session_state.get(key) is None]
    if unrated:
        st.caption(f"Image {_letter(unrated[0])}: press a key or a button")
        for col, point in zip(st.columns(len(scale)), scale.values()):
            col.button(visible(point.label), key=f"k{n}_{point.key}", shortcut=point.key,
                       on_click=_choose, args=(keys[unrated[0]], point.value))

    def answer() -> dict[str, float] | None:
        values = [st.session_state.get(key) for key in keys]
        return None if any(v is None for v in values) else dict(zip(shown, values))

    st.button("Submit", key=f"submit{n}", type="primary", shortcut=SUBMIT_KEY, disabled=bool(unrated),
              on_click=_submit, args=(desk, item, shown, answer, revising))


def _rubric(desk: Desk, item: cp.Item, shown: tuple[str, ...], paths: list[str | None], n: int, revising: bool) -> None:
    """The image, then one button per scale point: a press (or its key) is the answer."""
    st.image(draw.fitted(paths[0], IMAGE, "no image"), caption="Image A")
    for point in desk.campaign.scale:
        st.button(visible(point.label), key=f"k{n}_{point.key}", shortcut=point.key, on_click=_submit,
                  args=(desk, item, shown, lambda v=point.value: v, revising))


def _labels(desk: Desk, item: cp.Item, shown: tuple[str, ...], paths: list[str | None], n: int, revising: bool) -> None:
    """The image, then each attribute's closed label set with the abstention label last."""
    taxonomy = desk.campaign.taxonomy or {}
    st.image(draw.fitted(paths[0], IMAGE, "no image"), caption="Image A")
    keys = {attribute: f"l{n}_{k}" for k, attribute in enumerate(taxonomy)}
    for attribute, labels in taxonomy.items():
        options = [*labels, *([desk.campaign.abstain_label] if desk.campaign.abstain_label else [])]
        st.pills(visible(attribute), options, key=keys[attribute], format_func=visible)

    def answer() -> dict[str, str] | None:
        values = {attribute: st.session_state.get(key) for attribute, key in keys.items()}
        return None if any(v is None for v in values.values()) else values

    st.button("Submit", key=f"submit{n}", type="primary", shortcut=SUBMIT_KEY,
              on_click=_submit, args=(desk, item, shown, answer, revising))


# ------------------------------------------------------------ the organiser's view


def audit_link(desk: Desk) -> str:
    """A relative link to the page that audits the campaign's references (the Overview with its pool for
    alignment, the Alignment page for rubric, the Attributes page for labels)."""
    page = AUDIT_PAGE[desk.campaign.task]
    query = {"dataset": desk.campaign.dataset, **({} if desk.db_default else {"db": desk.db_name}),
             **({"pool": desk.campaign.pool} if page == "overview" else {})}
    return f"{page}?{urlencode(query)}"


def organiser(desk: Desk) -> None:
    """Items done per annotator against the target, alpha per pool with its interval, each annotator's
    agreement with the rest and median seconds per item (`audit_core.campaigns.measures`), and the audit."""
    campaign = desk.campaign
    with store_lock.reading(desk.db_path) as con:
        progress = cp.progress(con, campaign)
        reliability = cp.reliability(con, campaign, RELIABILITY)
        agreement = cp.annotator_agreement(con, campaign)
        seconds = cp.median_seconds(con, campaign)
    st.subheader("Items done per annotator")
    st.dataframe(_text_frame(progress), hide_index=True)
    level = "nominal" if campaign.task == "labels" else "interval"
    st.subheader(f"Krippendorff's α per pool ({level}; 95% item-bootstrap interval)")
    st.dataframe(pd.DataFrame({
        "pool": [visible(p) for p in reliability["pool"]],
        "α [95%]": [numbers.estimate(a, lo, hi, missing="— (no item has two votes yet)") for a, lo, hi in
                    zip(reliability["alpha"], reliability["alpha_lo"], reliability["alpha_hi"])],
        "items with two votes or more": [numbers.count(v) for v in reliability["items_with_overlap"]],
    }), hide_index=True)
    st.subheader("Each annotator against the rest")
    both = agreement.merge(seconds, on="annotator", how="outer")
    st.dataframe(pd.DataFrame({
        "annotator": [visible(a) for a in both["annotator"]],
        "agreement with the rest": [numbers.number(v) for v in both["agreement_with_rest"]],
        "shared items": [numbers.count(v) for v in both["n"]],
        "median seconds per item": [numbers.number(v) for v in both["median_seconds"]],
    }), hide_index=True)
    st.markdown(f"[Open the audit with these references]({audit_link(desk)})")


def _text_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with its text cells made `visible` (names shown as written, invisible characters marked)."""
    return frame.apply(lambda col: col.map(visible) if col.dtype == object else col)
