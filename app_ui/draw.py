"""Drawing helpers shared by the pages: headers, legends, thumbnails and charts.

Every string that comes from data (prompts, names, raw outputs) is either drawn
with a plain-text element (`st.text`, `st.code`, dataframes) or passed through
`esc` (Markdown), `html.escape` (the HTML legend) or `plain` (Plotly) first.
"""

from __future__ import annotations

import base64
import html
import io
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from PIL import Image, ImageDraw, ImageFont

from app_ui.context import Selection

# Okabe–Ito colours: distinguishable for colour-blind readers.
PALETTE: tuple[str, ...] = ("#E69F00", "#0072B2", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000")
RANDOM_COLOUR = "#888888"
STAR_COLOUR = "#FFC20A"
FRAME = 5  # pixels of frame per judge
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~$:=^&\"'])")


def esc(text: object) -> str:
    """`text` made literal inside Streamlit Markdown (every punctuation mark escaped)."""
    return _MD_SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ")


def judge_colours(judges: Sequence[str]) -> dict[str, str]:
    """A stable colour per judge (by position in the sorted judge list)."""
    return {j: PALETTE[i % len(PALETTE)] for i, j in enumerate(sorted(judges))}


def header(title: str, sel: Selection, what: str) -> None:
    """Page title, the one-line question the page answers, and the dataset it shows."""
    st.title(title)
    st.caption(what)
    dataset = f"Dataset **{esc(sel.dataset_name)}** in {esc(sel.db_path)}"
    st.markdown(f"{dataset} · focus judge **{esc(sel.judge or 'none')}**")
    if sel.simulated:
        st.warning("SIMULATED dataset: generated pools, ratings and judges, not real model or human data.")


def legend(judges: Sequence[str], colours: Mapping[str, str], marks: Mapping[str, str]) -> None:
    """One line naming each judge's frame colour and mark, plus the best-rated star."""
    items = [
        f'<span style="border:3px solid {colours[j]};padding:0 6px;margin-right:10px;border-radius:4px">'
        f"<b>{html.escape(marks[j])}</b> {html.escape(j)}</span>"
        for j in judges
    ]
    items.append(f'<span style="color:{STAR_COLOUR}">★</span> best-rated (ties all starred)')
    st.html(f'<div style="font-size:0.95rem">{" ".join(items)}</div>')


# ------------------------------------------------------------ thumbnails


@st.cache_resource(max_entries=4096, show_spinner=False)
def _thumbnail(path: str | None, size: int, placeholder: str) -> Image.Image:
    if path and Path(path).is_file():
        image = Image.open(path).convert("RGB")
        image.thumbnail((size, size))
        canvas = Image.new("RGB", (size, size), "white")
        canvas.paste(image, ((size - image.width) // 2, (size - image.height) // 2))
        return canvas
    canvas = Image.new("RGB", (size, size), "#e8e8e8")
    draw = ImageDraw.Draw(canvas)
    font = ImageFont.load_default(size=max(10, size // 9))
    draw.multiline_text((size / 2, size / 2), f"no image\n{placeholder}", fill="#555555", font=font, anchor="mm", align="center")
    return canvas


def data_uri(path: str | None, size: int, placeholder: str = "") -> str:
    """The candidate's thumbnail (or placeholder) as a PNG data URI, for image columns of tables."""
    buffer = io.BytesIO()
    _thumbnail(path, size, placeholder).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _star(draw: ImageDraw.ImageDraw, x: float, y: float, r: float) -> None:
    points = [
        (x + (r if k % 2 == 0 else r / 2.5) * math.sin(k * math.pi / 5), y - (r if k % 2 == 0 else r / 2.5) * math.cos(k * math.pi / 5))
        for k in range(10)
    ]
    draw.polygon(points, fill=STAR_COLOUR, outline="#7a5c00")


def framed(
    path: str | None, size: int, frames: Sequence[str], star: bool, placeholder: str = ""
) -> Image.Image:
    """The candidate's thumbnail inside one nested frame per picking judge, starred if best.

    A candidate without an image file gets a grey tile saying so (with `placeholder`).
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

    The strip is always `cells` candidates wide (the largest pool), so pools of
    different sizes are drawn at the same scale.
    """
    font = ImageFont.load_default(size=max(11, size // 8))
    drawn = []
    for t in tiles.itertuples():
        frames = [colours[j] for j in t.picked_by]
        cell = framed(t.image_path, size, frames, t.best, t.generator)
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


def layout(fig: go.Figure, title: str, x_title: str, y_title: str, height: int = 380) -> go.Figure:
    """The shared look of every figure: title, axis titles, legend below, readable font."""
    fig.update_layout(
        title=title,
        xaxis_title=x_title,
        yaxis_title=y_title,
        height=height,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        legend={"orientation": "h", "y": -min(0.2, 90 / height)},  # a fixed gap below tall figures too
        font={"size": 14},
    )
    return fig


def plain(text: object) -> object:
    """Data text for Plotly, which reads a subset of HTML in names and tick labels: escaped.

    A pandas Series is escaped element-wise.
    """
    if isinstance(text, pd.Series):
        return text.astype(str).map(html.escape)
    return html.escape(str(text))


def chart(fig: go.Figure, caption: str) -> None:
    """A Plotly figure with the one-line caption saying what it shows."""
    st.plotly_chart(fig, width="stretch")
    st.caption(caption)


def forest(frame: pd.DataFrame, label: str, value: str, title: str, x_title: str, colour: str | None = None) -> go.Figure:
    """Horizontal point-and-interval plot: one row per `label`, `value` with `value`_lo/_hi, 0 marked.

    Rows without an estimate (a policy that never acts) are left out.
    """
    ordered = frame.dropna(subset=[value]).sort_values(value)
    fig = go.Figure()
    groups = ordered.groupby(colour, sort=False) if colour else [(None, ordered)]
    for name, part in groups:
        fig.add_trace(
            go.Scatter(
                x=part[value],
                y=plain(part[label]),
                mode="markers",
                name=plain(name) if name is not None else value,
                marker={"size": 10},
                error_x={"type": "data", "symmetric": False,
                         "array": part[f"{value}_hi"] - part[value], "arrayminus": part[value] - part[f"{value}_lo"]},
                showlegend=colour is not None,
            )
        )
    fig.add_vline(x=0, line_dash="dash", line_color=RANDOM_COLOUR)
    fig.update_yaxes(categoryorder="array", categoryarray=list(plain(ordered[label])))
    return layout(fig, title, x_title, "", height=max(300, 28 * len(ordered) + 120))



def number(value: object, signed: bool = False) -> str:
    """Two decimals (with sign if `signed`), or a dash for a missing value."""
    if value is None or pd.isna(value):
        return "—"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def _holds(value: object) -> bool:
    return value is not None and not pd.isna(value) and bool(value)


def pool_facts(pool: object, judge: str) -> str:
    """Caption line of an explorer pool: where it comes from and how `judge`'s order-0 pick fared."""
    flags = [name for name, column in (("below mean", "below_mean"), ("orders flip", "flip"), ("parse failure", "parse_fail"))
             if _holds(getattr(pool, column))]
    return " · ".join(
        [
            esc(pool.country or "no country"),
            esc(pool.category or "no category"),
            f"{pool.m} images",
            f"{esc(judge)}: regret {number(pool.regret)}, gain {number(pool.gain, signed=True)}",
            *flags,
        ]
    )


def interval(value: object, lo: object, hi: object, signed: bool = False) -> str:
    """"0.12 [0.05, 0.20]" (a dash for a missing value, no brackets without an interval)."""
    text = number(value, signed)
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return text
    return f"{text} [{number(lo, signed)}, {number(hi, signed)}]"


def slot_chart(positions: pd.DataFrame, colours: Mapping[str, str]) -> go.Figure:
    """Share of calls choosing each slot per judge (pooled over pool sizes), uniform marked."""
    pooled = positions[positions["m"].isna()] if positions["m"].isna().any() else positions
    fig = go.Figure()
    for judge, part in pooled.groupby("judge", sort=True):
        fig.add_trace(go.Bar(x=part["slot"], y=part["share"], name=plain(judge), marker_color=colours.get(judge)))
    uniform = pooled.groupby("slot", sort=True)["uniform"].mean()
    fig.add_trace(go.Scatter(x=uniform.index, y=uniform.values, mode="markers", name="uniform expectation",
                             marker={"symbol": "line-ew", "size": 40, "line": {"width": 3, "color": "black"}}))
    fig.update_yaxes(tickformat=".0%")
    return layout(fig, "Which slot each judge picks", "slot (A = shown first)", "share of valid calls")


def group_chart(groups: pd.DataFrame, policies: Sequence[str], colours: Mapping[str, str]) -> go.Figure:
    """Mean regret per country for random and each judge, with 95% intervals."""
    fig = go.Figure()
    for policy in policies:
        part = groups[groups["policy"] == policy]
        fig.add_trace(go.Bar(
            x=plain(part["country"]), y=part["regret"], name=plain(policy),
            marker_color=colours.get(policy, RANDOM_COLOUR),
            error_y={"type": "data", "symmetric": False, "array": (part["regret_hi"] - part["regret"]).clip(lower=0),
                     "arrayminus": (part["regret"] - part["regret_lo"]).clip(lower=0)},
        ))
    return layout(fig, "Regret by country", "country", "mean regret (best − picked alignment)")


def gate_chart(gates: pd.DataFrame) -> go.Figure:
    """Gain over random on the prompts each gate keeps and rejects, with the ungated judge there.

    Horizontal bars, one row per gate, so long gate names stay readable.
    """
    fig = go.Figure()
    for side, colour in (("kept", "#009E73"), ("rejected", "#D55E00")):
        part = gates[gates["side"] == side]
        fig.add_trace(go.Bar(
            y=plain(part["gate"]), x=part["gain"], orientation="h", name=f"gate's pick, {side} prompts",
            marker_color=colour, offsetgroup=side, customdata=part["n"],
            hovertemplate="%{y}: gain %{x:.3f} on %{customdata} prompts",
            error_x={"type": "data", "symmetric": False, "array": (part["gain_hi"] - part["gain"]).clip(lower=0),
                     "arrayminus": (part["gain"] - part["gain_lo"]).clip(lower=0)},
        ))
        fig.add_trace(go.Scatter(
            y=plain(part["gate"]), x=part["ungated_gain"], mode="markers", offsetgroup=side, orientation="h",
            name=f"ungated judge, {side} prompts",
            marker={"symbol": "diamond-open", "size": 12, "color": "#222222", "line": {"width": 2}},
        ))
    fig.add_vline(x=0, line_dash="dash", line_color=RANDOM_COLOUR, annotation_text="random", annotation_position="top")
    fig.update_layout(barmode="group", scattermode="group")
    fig.update_yaxes(autorange="reversed")
    rows = gates["gate"].nunique()
    return layout(fig, "What each gate keeps and rejects", "gain over random (alignment)", "", height=max(320, 56 * rows + 140))