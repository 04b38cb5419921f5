"""Markdown as a reader sees it: `render` turns a report's Markdown into visible text, tags and tables."""

from __future__ import annotations

from html.parser import HTMLParser

from markdown_it import MarkdownIt


class Rendered(HTMLParser):
    """Visible text of rendered HTML, the tags used, and each table as rows of cell texts
    (`table(first header)` returns a table's body rows)."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.text, self.tags, self.tables = [], [], []
        self._cell: list[str] | None = None
        self.feed(html)

    def table(self, *header: str) -> list[list[str]]:
        return next(t[1:] for t in self.tables if t[0][: len(header)] == list(header))

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def render(markdown: str) -> Rendered:
    """CommonMark with GFM tables, raw HTML shown as text (as Streamlit does without unsafe HTML)."""
    return Rendered(MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown))
