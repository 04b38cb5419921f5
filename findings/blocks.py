"""The pieces a report section is made of, each rendered both as HTML and as Markdown.

Every text in a block is plain text (data strings included): `html` escapes it with
`audit_core.user_text.escape_html`, `markdown` with `audit_core.user_text.escape_markdown`, so a
judge named `<script>` or `*x*` reads literally in both, and a direction override in a name
shows as a marker (`⟨U+202E⟩`) in both instead of reordering the numbers beside it. Figures are Plotly figures, drawn inline in
the HTML (plotly.js is embedded once per document) and referenced in the Markdown by their
exported file (`figures/<name>.svg`); gallery images are data URIs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import plotly.graph_objects as go

from audit_core.user_text import escape_html, escape_markdown

FIGURE_CONFIG = {"displaylogo": False, "responsive": True}


def markdown_table(header: Sequence[str], rows: list[list[str]]) -> list[str]:
    """Lines of a GFM table of plain-text cells (each escaped here)."""
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(escape_markdown(c) for c in cells) + " |"
    return [line(header), "|" + "---|" * len(header), *(line(r) for r in rows)]


@dataclass(frozen=True)
class Paragraph:
    """A paragraph of plain text; `warning` draws it as a warning box (and a Markdown quote)."""

    text: str
    warning: bool = False

    def html(self) -> str:
        return f'<p class="{"warning" if self.warning else "text"}">{escape_html(self.text)}</p>'

    def markdown(self) -> str:
        return f"> **{escape_markdown(self.text)}**" if self.warning else escape_markdown(self.text, line_start=True)


@dataclass(frozen=True)
class Table:
    """A table of plain-text cells with a caption saying what it holds."""

    header: Sequence[str]
    rows: list[list[str]]
    caption: str = ""

    def html(self) -> str:
        head = "".join(f"<th>{escape_html(str(h))}</th>" for h in self.header)
        body = "".join("<tr>" + "".join(f"<td>{escape_html(str(c))}</td>" for c in row) + "</tr>" for row in self.rows)
        caption = f"<caption>{escape_html(self.caption)}</caption>" if self.caption else ""
        return f'<div class="table"><table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'

    def markdown(self) -> str:
        lines = markdown_table(self.header, self.rows)
        return "\n".join(([escape_markdown(self.caption, line_start=True), ""] if self.caption else []) + lines)


@dataclass(frozen=True)
class Figure:
    """A Plotly figure with a file name (without extension, unique in a report) and a caption."""

    name: str
    figure: go.Figure
    caption: str

    def html(self) -> str:
        div = self.figure.to_html(full_html=False, include_plotlyjs=False, config=FIGURE_CONFIG, div_id=f"fig-{self.name}")
        return f'<figure>{div}<figcaption>{escape_html(self.caption)}</figcaption></figure>'

    def markdown(self) -> str:
        return f"![{escape_markdown(self.caption)}](figures/{self.name}.svg)\n\n{escape_markdown(self.caption, line_start=True)}"


@dataclass(frozen=True)
class Tile:
    """One candidate of a gallery pool: its image (a data URI, or None: "no image"), a caption,
    the colours of the judges (or sides) whose pick it is, their labels, and whether it is best."""

    candidate_id: str
    caption: str
    image: str | None
    frames: tuple[str, ...] = ()
    marks: tuple[str, ...] = ()
    best: bool = False

    def html(self) -> str:
        rings = ", ".join(f"0 0 0 {4 * (k + 1)}px {c}" for k, c in enumerate(self.frames))
        style = f' style="box-shadow: {rings}; margin: {4 * len(self.frames) + 2}px"' if self.frames else ""
        picture = (f'<img src="{self.image}" alt="{escape_html(self.candidate_id)}">' if self.image
                   else '<div class="noimage">no image</div>')
        star = '<span class="star" title="best-rated">★</span>' if self.best else ""
        marks = f'<div class="marks">{escape_html(" · ".join(self.marks))}</div>' if self.marks else ""
        return (f'<div class="tile"><div class="frame"{style}>{picture}{star}</div>'
                f'<div class="caption">{escape_html(self.caption)}</div>{marks}</div>')

    def markdown(self) -> str:
        parts = [self.candidate_id, self.caption, *(["best"] if self.best else []),
                 *([f"picked by {', '.join(self.marks)}"] if self.marks else []), *([] if self.image else ["no image"])]
        return "- " + escape_markdown(" · ".join(parts))


@dataclass(frozen=True)
class PoolCard:
    """One pool of a gallery: a heading (which judge, the rule's value), its prompt and its tiles."""

    heading: str
    prompt: str
    tiles: tuple[Tile, ...]

    def html(self) -> str:
        tiles = "".join(t.html() for t in self.tiles)
        return (f'<div class="pool"><div class="pool-head">{escape_html(self.heading)}</div>'
                f'<div class="prompt">{escape_html(self.prompt)}</div><div class="tiles">{tiles}</div></div>')

    def markdown(self) -> str:
        return "\n".join([f"**{escape_markdown(self.heading)}**: {escape_markdown(self.prompt)}", "",
                          *(t.markdown() for t in self.tiles)])


@dataclass(frozen=True)
class Gallery:
    """Pools chosen by one documented rule (`audit_core.selection.galleries`), with the rule in words."""

    title: str
    rule: str
    pools: tuple[PoolCard, ...]

    def html(self) -> str:
        cards = "".join(p.html() for p in self.pools) or '<p class="text">No pool meets this rule.</p>'
        return (f'<div class="gallery"><h3>{escape_html(self.title)}</h3><p class="rule">{escape_html(self.rule)}</p>'
                f"{cards}</div>")

    def markdown(self) -> str:
        cards = [p.markdown() for p in self.pools] or ["No pool meets this rule."]
        return "\n\n".join([f"### {escape_markdown(self.title)}", escape_markdown(self.rule, line_start=True), *cards])


Block = Paragraph | Table | Figure | Gallery


@dataclass(frozen=True)
class Section:
    """One titled part of the report: its blocks in order. `key` names it (an HTML anchor)."""

    key: str
    title: str
    blocks: list[Block] = field(default_factory=list)

    @property
    def figures(self) -> list[Figure]:
        return [b for b in self.blocks if isinstance(b, Figure)]

    def html(self) -> str:
        return (f'<section id="{escape_html(self.key)}"><h2>{escape_html(self.title)}</h2>'
                + "".join(b.html() for b in self.blocks) + "</section>")

    def markdown(self) -> str:
        return "\n\n".join([f"## {escape_markdown(self.title)}", *(b.markdown() for b in self.blocks)])
