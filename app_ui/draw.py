"""Drawing helpers shared by the pages: headers, legends, thumbnails, tables and charts
(the figure builders are `findings.figures`', the number formats `findings.numbers`').

Every string that comes from data (prompts, names, raw outputs) is either drawn
with a plain-text element (`st.text`, `st.code`, dataframes) or passed through
`esc` (Markdown), `escape_html` (the HTML legend) or `findings.figures.plain` (Plotly) first; plain-text elements
get `visible` text, so a direction override in a name shows as `⟨U+202E⟩` everywhere.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from PIL import Image, ImageDraw, ImageFont

from app_ui import context
from app_ui.context import Selection
from audit_core.store import thumbnails
from audit_core.user_text import escape_html, escape_markdown, visible
from findings import colours
from findings.colours import STAR
from findings.numbers import MISSING, UNDEFINED, absent, count, estimate, number, p_value, percent

FRAME = 5  # pixels of frame per judge


def esc(text: object) -> str:
    """`text` made literal inside Streamlit Markdown, on one line: only what Markdown would read
    as syntax is escaped (`audit_core.user_text.escape_markdown`), so `South_Africa` stays as written."""
    return escape_markdown(text)


def place(name: object) -> str:
    """A country (or other place) name as written: a source's underscores ("South_Africa") become spaces;
    the stored value is unchanged."""
    return MISSING if name is None or (not isinstance(name, str) and pd.isna(name)) else visible(name).replace("_", " ")


def judge_colours(judges: Sequence[str]) -> dict[str, str]:
    """A colour per judge (or scorer), the same on every page and dataset (`findings.colours`)."""
    return colours.name_colours(judges)


def header(title: str, sel: Selection, what: str, focus: bool = True) -> None:
    """Page title, the one-line question the page answers, and the dataset it shows (with the
    sidebar's focus judge unless `focus` is False: a page that does not use it)."""
    st.title(title)
    context.warn_refused()
    st.caption(what)
    dataset = f"Dataset **{esc(sel.dataset_name)}** in {esc(sel.db_name)}"
    st.markdown(f"{dataset} · focus judge **{esc(sel.judge or 'none')}**" if focus else dataset)
    if sel.simulated:
        st.warning("SIMULATED dataset: generated pools, ratings and judges, not real model or human data.")


def legend(judges: Sequence[str], colours: Mapping[str, str], marks: Mapping[str, str]) -> None:
    """One line naming each judge's frame colour and mark, plus the best-rated star."""
    items = [
        f'<span style="border:3px solid {colours[j]};padding:0 6px;margin-right:10px;border-radius:4px">'
        f"<b>{escape_html(marks[j])}</b> {escape_html(j)}</span>"
        for j in judges
    ]
    items.append(f'<span style="color:{STAR}">★</span> best-rated (ties all starred)')
    st.html(f'<div style="font-size:0.95rem">{" ".join(items)}</div>')


# ------------------------------------------------------------ thumbnails


@st.cache_data(max_entries=4096, show_spinner=False)
def image_problem(path: str | None) -> str | None:
    """Why the candidate's image cannot be shown ("no image", "image file missing",
    "unreadable image"), or None when it decodes. Never names the path."""
    if not path:
        return "no image"
    if not Path(path).is_file():
        return "image file missing"
    try:
        with Image.open(path) as image:
            image.load()
    except Exception:  # PIL raises many types (OSError, SyntaxError, DecompressionBombError...) for bad files
        return "unreadable image"
    return None


@st.cache_resource(max_entries=4096, show_spinner=False)
def _thumbnail(path: str | None, size: int, placeholder: str) -> Image.Image:
    problem = image_problem(path)
    if problem is None:
        try:
            with Image.open(path) as image:
                shown = image.convert("RGB")
            shown.thumbnail((size, size))
            canvas = Image.new("RGB", (size, size), "white")
            canvas.paste(shown, ((size - shown.width) // 2, (size - shown.height) // 2))
            return canvas
        except Exception:  # changed on disk since it was checked
            problem = "unreadable image"
    canvas = Image.new("RGB", (size, size), "#e8e8e8")
    draw = ImageDraw.Draw(canvas)
    font = ImageFont.load_default(size=max(10, size // 9))
    draw.multiline_text((size / 2, size / 2), f"{problem}\n{visible(placeholder)}", fill="#555555", font=font, anchor="mm", align="center")
    return canvas


def fitted(path: str | None, size: int, placeholder: str = "") -> Image.Image:
    """The candidate's image scaled to fit a size × size box (a small one enlarged, aspect kept),
    or the grey placeholder tile saying why it cannot be shown (`image_problem`)."""
    if image_problem(path) is None:
        try:
            with Image.open(path) as image:
                shown = image.convert("RGB")
            scale = size / max(shown.size)
            return shown.resize((max(1, round(shown.width * scale)), max(1, round(shown.height * scale))),
                                Image.Resampling.LANCZOS)
        except Exception:  # changed on disk since it was checked: the placeholder says so
            pass
    return _thumbnail(path, size, placeholder)


def image_note(paths: Sequence[str | None]) -> str | None:
    """A caption counting the images of recorded files that cannot be shown, e.g. "1 image not
    shown: unreadable image"; None when every recorded file decodes (a candidate without one is not counted)."""
    problems = [image_problem(p) for p in paths if p]
    problems = [p for p in problems if p]
    if not problems:
        return None
    counts = pd.Series(problems).value_counts()
    kinds = ", ".join(f"{n} {kind}" if len(counts) > 1 else kind for kind, n in counts.items())
    return f"{len(problems)} image{'s' if len(problems) > 1 else ''} not shown: {kinds}"


def data_uri(path: str | None, size: int, placeholder: str = "") -> str:
    """The candidate's thumbnail (or placeholder) as a PNG data URI, for image columns of tables."""
    buffer = io.BytesIO()
    _thumbnail(path, size, placeholder).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


@st.cache_data(max_entries=8, show_spinner=False)
def abstain_uri(size: int) -> str:
    """A size × size tile saying "abstains", as a PNG data URI: the image cell of a policy that returns nothing."""
    canvas = Image.new("RGB", (size, size), "#f4f4f4")
    font = ImageFont.load_default(size=max(9, size // 6))
    ImageDraw.Draw(canvas).text((size / 2, size / 2), "abstains", fill="#555555", font=font, anchor="mm")
    buffer = io.BytesIO()
    canvas.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def grid_image(path: str | None, candidate_id: str) -> str | None:
    """The file a grid tile draws for a candidate: its thumbnail beside the selected database
    (made now when missing or older than the image), else the image itself when no
    thumbnail can be made (an unreadable image keeps its own path, so its tile says why)."""
    selected = context.current_selection()  # pages pass only tiles here
    if selected is None or image_problem(path) is not None:
        return path
    thumb = thumbnails.thumbnail_path(selected.db_path, selected.dataset_id, candidate_id)
    if not thumbnails.is_current(path, thumb):
        try:
            thumbnails.make_thumbnail(path, thumb)
        except Exception:  # an unwritable folder, or the image changed since it was checked: draw the image itself
            return path
    return str(thumb)


def _star(draw: ImageDraw.ImageDraw, x: float, y: float, r: float) -> None:
    points = [
        (x + (r if k % 2 == 0 else r / 2.5) * math.sin(k * math.pi / 5), y - (r if k % 2 == 0 else r / 2.5) * math.cos(k * math.pi / 5))
        for k in range(10)
    ]
    draw.polygon(points, fill=STAR, outline="#7a5c00")


def framed(
    path: str | None, size: int, frames: Sequence[str], star: bool, placeholder: str = ""
) -> Image.Image:
    """The candidate's thumbnail inside one nested frame per picking judge, starred if best.

    A candidate whose image cannot be shown gets a grey tile saying why (`image_problem`,
    with `placeholder`).
    """
    pad = FRAME * max(len(frames), 1)
    tile = Image.new("RGB", (size + 2 * pad, size + 2 * pad), "white")
    draw = ImageDraw.Draw(tile)
    for k, colour in enumerate(frames):
        draw.rectangle([k * FRAME, k * FRAME, tile.width - 1 - k * FRAME, tile.height - 1 - k * FRAME], fill=colour)
    tile.paste(_thumbnail(path, size, placeholder), (pad, pad))
    if star:
        _star(draw, pad + size * 0.16, pad + size * 0.16, size * 0.13)
    return tile


def pool_strip(
    tiles: pd.DataFrame, colours: Mapping[str, str], marks: Mapping[str, str], size: int, cells: int
) -> Image.Image:
    """One pool's candidates side by side (canonical order), each framed, starred and captioned
    with its mean alignment and the marks of the judges whose order-0 pick it is.

    Tiles are drawn from the candidates' thumbnails (`grid_image`), so a page of real
    photographs decodes small files. The strip is always `cells` candidates wide (the
    largest pool), so pools of different sizes are drawn at the same scale.
    """
    font = ImageFont.load_default(size=max(11, size // 8))
    drawn = []
    for t in tiles.itertuples():
        frames = [colours[j] for j in t.picked_by]
        cell = framed(grid_image(t.image_path, t.candidate_id), size, frames, t.best, t.generator)
        picked = " ".join(marks[j] for j in t.picked_by)
        text = f"{t.alignment:.2f}" + (f"  {picked}" if picked else "")
        captioned = Image.new("RGB", (cell.width, cell.height + font.size + 8), "white")
        captioned.paste(cell, (0, 0))
        ImageDraw.Draw(captioned).text((cell.width / 2, cell.height + 3), text, fill="black", font=font, anchor="ma")
        drawn.append(captioned)
    width = size + 2 * FRAME * max(len(colours), 1)
    height = max(c.height for c in drawn)
    gap = 6
    strip = Image.new("RGB", (max(cells, len(drawn)) * (width + gap) - gap, height), "white")
    for k, cell in enumerate(drawn):
        strip.paste(cell, (k * (width + gap) + (width - cell.width) // 2, 0))
    return strip


# ------------------------------------------------------------ charts


def chart(fig: go.Figure, caption: str) -> None:
    """A Plotly figure with the one-line caption saying what it shows."""
    st.plotly_chart(fig, width="stretch")
    st.caption(caption)


def _holds(value: object) -> bool:
    return value is not None and not pd.isna(value) and bool(value)


def pool_facts(pool: object, judge: str) -> str:
    """Caption line of an explorer pool: where it comes from and how `judge`'s order-0 pick fared."""
    flags = [name for name, column in (("below mean", "below_mean"), ("orders flip", "flip"), ("parse failure", "parse_fail"))
             if _holds(getattr(pool, column))]
    return " · ".join(
        [
            esc(place(pool.country) if pool.country else "no country"),
            esc(pool.category or "no category"),
            f"{pool.m} images",
            f"{esc(judge)}: regret {number(pool.regret)}, gain {number(pool.gain, signed=True)}",
            *flags,
        ]
    )


# ------------------------------------------------------------ tables


def text(value: object) -> str:
    """A cell as text: yes/no for a flag, a number for a fraction, a dash for a missing value."""
    if absent(value):
        return MISSING
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, float):
        return number(value)
    return visible(value)


def words(value: object) -> str:
    """An identifier-like value ("order_gate") in words ("order gate")."""
    return place(value)


@dataclass(frozen=True)
class Column:
    """How a table shows a column: its header, the format of its cells and, with `interval`, its
    `<name>_lo`/`<name>_hi` columns joined into "value [lo, hi]" (95%)."""

    header: str
    show: Callable[[object], str] = text
    interval: bool = False


_signed = partial(number, signed=True)  # "+0.160"
SIDES = {"kept": "kept (the gate acts)", "rejected": "rejected (the gate abstains)"}  # a gate's two sides

# The measures' names in words, shared by every page's tables (DESIGN.md defines each).
COLUMNS: dict[str, Column] = {
    "policy": Column("policy"), "kind": Column("kind", words), "judge": Column("judge"), "gate": Column("gate"),
    "base_judge": Column("judge"), "partner": Column("with"), "threshold": Column("orders that must agree", count),
    "side": Column("side"), "n": Column("prompts", count), "coverage": Column("coverage", percent),
    "utility": Column("alignment of the pick", number, True), "regret": Column("regret", number, True),
    "gain": Column("gain over random", _signed, True), "bmr": Column("below mean", percent, True),
    "bmr_random": Column("below mean, random", percent), "best": Column("picks the best", percent, True),
    "random_regret": Column("regret, random", number, True), "random_utility": Column("alignment, random", number),
    "ungated_regret": Column("regret, ungated judge", number), "ungated_gain": Column("gain, ungated judge", _signed),
    "ungated_bmr": Column("below mean, ungated judge", percent),
    "regret_vs_ungated": Column("regret − ungated judge's", _signed, True),
    "worst_group_regret": Column("worst country's regret", number, True),
    "disparity": Column("worst − best country", number),
    "orders": Column("orders", count), "calls": Column("calls", count), "valid": Column("valid", count),
    "recovered": Column("recovered", count), "failed": Column("failed", count),
    "parse_fail": Column("unparsed", count), "runtime_fail": Column("runtime errors", count),
    "first_slot": Column("picks slot A", percent), "first_slot_uniform": Column("slot A if unbiased", percent),
    "chi2": Column("χ²", number), "chi2_df": Column("χ² df", count), "chi2_p": Column("χ² p", p_value),
    "flip_n": Column("prompts in all orders", count), "flip_rate": Column("flip rate", percent, True),
    "entropy": Column("order entropy (0–1)", number), "not_json": Column("not JSON", count),
    "seconds_median": Column("median s / call", number), "seconds_mean": Column("mean s / call", number),
    "timed_prompts": Column("timed prompts", count),
    "prompt_seconds_one_order": Column("s / prompt, one order", number),
    "prompt_seconds_all_orders": Column("s / prompt, all orders", number),
    "all_over_one": Column("all orders ÷ one", number),
    "hours_one_order": Column("hours, one order", number), "hours_all_orders": Column("hours, all orders", number),
    "tertile": Column("rating range"), "range_lo": Column("range from", number), "range_hi": Column("range to", number),
    "prompts": Column("prompts", count), "parsed": Column("fully parsed", count),
    "share": Column("share", percent), "uniform": Column("uniform share", percent),
    "source_model": Column("generator"), "generator": Column("generator"), "country": Column("country", place),
    "alignment": Column("alignment", number),
    # rating judges (alignment page)
    "alpha_ordinal": Column("α ordinal", number), "alpha_interval": Column("α interval", number),
    "n_items": Column("items", count), "n_annotators": Column("annotators", count), "n_nonzero": Column("nonzero", count),
    "pool_a": Column("first pool"), "pool_b": Column("second pool"), "condition_a": Column("first condition"),
    "condition_b": Column("second condition"), "pearson": Column("Pearson r", number),
    "mean_abs_diff": Column("mean |difference|", number), "mean_diff": Column("mean difference", _signed),
    "statistic": Column("W", number), "p_value": Column("p", p_value), "consensus": Column("consensus", number),
    "votes": Column("votes", count), "rating": Column("rating", number), "parse_note": Column("parse note"),
}


def _column(name: str, values: pd.Series) -> Column:
    """A column's `COLUMNS` entry, else its name in words, counted when integral."""
    if name in COLUMNS:
        return COLUMNS[name]
    integral = pd.api.types.is_integer_dtype(values) and not pd.api.types.is_bool_dtype(values)
    return Column(str(name).replace("_", " "), count if integral else text)


def table(frame: pd.DataFrame, columns: Sequence[str] | None = None, *, index: bool = False) -> pd.DataFrame:
    """`frame`'s `columns` (default: all but interval bounds) as text, for `st.dataframe`.

    Headers are `COLUMNS`' words; intervals are joined to their value; a missing value is a dash, never
    None, nan or -0.00. With `index`, the index is shown as the first column, in the same words.
    """
    shown = frame.reset_index() if index else frame
    names = list(columns) if columns is not None else list(shown.columns)
    joined = {f"{n}_{end}" for n in names if n in COLUMNS and COLUMNS[n].interval for end in ("lo", "hi")}
    out = {}
    for name in names:
        if name in joined and columns is None:
            continue
        col = _column(name, shown[name])
        bounded = col.interval and {f"{name}_lo", f"{name}_hi"} <= set(shown.columns)
        if bounded:
            cells = [MISSING if absent(v) else col.show(v) if absent(lo) or absent(hi)
                     else f"{col.show(v)} [{col.show(lo)}, {col.show(hi)}]"
                     for v, lo, hi in zip(shown[name], shown[f"{name}_lo"], shown[f"{name}_hi"])]
        else:
            cells = [col.show(v) for v in shown[name]]
        header = visible(col.header) + (" [95%]" if bounded else "")
        out[header if header not in out else f"{header} ({name})"] = cells  # two names, one word: both kept
    return pd.DataFrame(out)


# ------------------------------------------------------------ rating judges (alignment page)


def pools_side_by_side(rows: pd.DataFrame, index: str) -> pd.DataFrame:
    """Alignment rows (one pool each) as one text row per `index` value with, for every pool side
    by side: n rated, MAE [95%], Pearson r [95%] and QWK; "undefined" where a figure does not exist."""
    table = pd.DataFrame(index=pd.Index(list(dict.fromkeys(rows[index])), name=index))
    for pool, part in rows.groupby("pool", sort=True):
        part = part.set_index(index)
        pool, cells = visible(pool), list(part.itertuples())
        table[f"{pool} · n"] = part["n"]
        table[f"{pool} · MAE"] = [estimate(r.mae, r.mae_lo, r.mae_hi, missing=UNDEFINED) for r in cells]
        table[f"{pool} · r"] = [estimate(r.pearson, r.pearson_lo, r.pearson_hi, missing=UNDEFINED) for r in cells]
        table[f"{pool} · κ"] = [number(v, missing=UNDEFINED) for v in part["qwk"]]
    return table.reset_index()
