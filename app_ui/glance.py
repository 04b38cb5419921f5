"""What makes a page read at a glance: one colour per name on every page, coverage beside every
gated policy, intervals in cells, and tables drawn at their full height (`frame`). The figures
themselves are `findings.figures`'."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from app_ui import draw
from app_ui.context import Selection
from audit_core.user_text import escape_markdown, visible
from findings import colours, numbers
from findings.figures import with_coverage

GATED = ("order_gate", "judge_gate", "scorer_gate", "composed_gate")  # kinds that act on part of the prompts


def name_colours(sel: Selection) -> dict[str, str]:
    """One colour per selector judge and content scorer of the dataset (`findings.colours`), the same
    mapping on every page: a clash between two names is settled within the same set everywhere."""
    scorers = list(sel.data().scores) if sel.pools else []
    return colours.name_colours([*sel.judges, *scorers])


def coverage_labels(policies: pd.DataFrame, name: str = "policy") -> pd.Series:
    """Each row's `name`, with its coverage beside it when it is gated (a kind in GATED) or acts on
    fewer than all prompts (rounded below 100%)."""
    partial = policies["coverage"].map(lambda c: numbers.percent(c) != "100%")
    gated = policies["kind"].isin(GATED) | partial
    return pd.Series([with_coverage(n, c) if g else str(n) for n, c, g in
                      zip(policies[name], policies["coverage"], gated)], index=policies.index)


def percent_interval(value: object, lo: object, hi: object) -> str:
    """"49% [46%, 52%]", the value alone without bounds, a dash without a value."""
    text = numbers.percent(value)
    if text == numbers.MISSING or numbers.MISSING in (numbers.percent(lo), numbers.percent(hi)):
        return text
    return f"{text} [{numbers.percent(lo)}, {numbers.percent(hi)}]"


def judge_table(judges: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """`draw.table` of the judges rows, with the first-slot share as a percentage and its 95% interval."""
    shown = draw.table(judges, [c for c in columns if c != "first_slot"])
    if "first_slot" in columns:
        cells = [percent_interval(v, lo, hi) for v, lo, hi in
                 zip(judges["first_slot"], judges["first_slot_lo"], judges["first_slot_hi"])]
        shown.insert(list(columns).index("first_slot"), draw.COLUMNS["first_slot"].header + " [95%]", cells)
    return shown


# Cards are Streamlit's own text elements, a caption (the label, its help as the tooltip) above a
# heading (the value), in a row that wraps: the browser draws them with the code it loads at start,
# in the same pass as the page's title. Cards as HTML in Markdown, as st.html or as st.metric (the
# last two fetch their code on first use) were drawn 0.15-0.4 s after the title on this machine.
CARD_WIDTH = 360  # pixels: three a row on a wide page, one a row in a narrow column


@dataclass(frozen=True)
class Card:
    """One headline number: `label` above `value`, `help` as its tooltip."""

    label: str
    value: str
    help: str = ""


def cards(where: Any, shown: Sequence[Card]) -> None:
    """`shown` side by side in container `where`, wrapping onto more rows where they do not fit,
    each shown as written (Markdown escaped)."""
    row = where.container(horizontal=True, gap="small")
    for card in shown:
        box = row.container(width=CARD_WIDTH, gap=None)
        tooltip = escape_markdown(card.help, line_start=True) if card.help else None
        box.caption(escape_markdown(card.label, line_start=True), help=tooltip)
        box.subheader(escape_markdown(card.value, line_start=True), anchor=False)


def frame(table: pd.DataFrame, where: Any = None, *, index: bool = False, **kwargs: Any) -> None:
    """`st.dataframe` (in container `where`, default the page) tall enough for every row, so a small
    table never scrolls; the index only with `index`. Headers, index labels and text cells are shown
    `visible` (a judge or generator named with a direction override shows it as a marker)."""
    (where or st).dataframe(visible_table(table), hide_index=not index, width="stretch", height="content", **kwargs)


def visible_table(table: pd.DataFrame) -> pd.DataFrame:
    """A copy of `table` whose column names, index labels and string cells are made `visible`."""
    def shown(value: object) -> object:
        return visible(value) if isinstance(value, str) else value
    out = table.rename(columns=shown, index=shown)
    for k, column in enumerate(out.columns):
        cells = out.iloc[:, k]
        if cells.dtype == object or pd.api.types.is_string_dtype(cells):
            out.isetitem(k, cells.map(shown))
    return out


def times(ratio: object) -> str:
    """A cost ratio as "2.57×", a dash where it is unknown."""
    text = numbers.number(ratio)
    return text if text == numbers.MISSING else f"{text}×"
