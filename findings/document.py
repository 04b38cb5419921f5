"""The report as one self-contained HTML file and as Markdown, from its sections.

The HTML embeds everything it shows: plotly.js once in the head, the styles, the figures'
data and the gallery images as data URIs. Its Content-Security-Policy allows no source
but the page itself (`default-src 'none'`, images only as `data:`), so opened offline
or online the page requests nothing.
"""

from __future__ import annotations

from plotly.offline import get_plotlyjs

from audit_core.user_text import escape_html, escape_markdown
from findings.blocks import Section
from findings.inputs import ReportInput

CSP = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
       "img-src data:; font-src data:; connect-src 'none'; form-action 'none'; base-uri 'none'")
STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto; max-width: 1180px;
       padding: 1.5rem; color: #1a1a1a; line-height: 1.45; }
h1 { font-size: 1.8rem; margin-bottom: 0.2rem; } h2 { border-bottom: 2px solid #ddd; padding-bottom: 0.2rem;
margin-top: 2.2rem; } h3 { margin-top: 1.6rem; }
nav { font-size: 0.92rem; margin: 0.8rem 0 1.4rem; } nav a { margin-right: 1rem; color: #0072B2; }
p.warning { background: #fff3cd; border: 1px solid #e0c060; padding: 0.6rem 0.9rem; border-radius: 6px;
            font-weight: 600; }
p.rule { color: #444; font-style: italic; }
div.table { overflow-x: auto; margin: 0.8rem 0; }
table { border-collapse: collapse; font-size: 0.88rem; }
caption { text-align: left; color: #444; padding-bottom: 0.3rem; caption-side: top; }
th, td { border: 1px solid #d6d6d6; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } tbody tr:nth-child(even) { background: #fafafa; }
figure { margin: 1rem 0; } figcaption { color: #444; font-size: 0.9rem; }
div.pool { border: 1px solid #e2e2e2; border-radius: 8px; padding: 0.6rem; margin: 0.7rem 0; }
div.pool-head { font-weight: 600; } div.prompt { color: #333; margin: 0.2rem 0 0.5rem; }
div.tiles { display: flex; flex-wrap: wrap; gap: 0.8rem; }
div.tile { width: 176px; font-size: 0.8rem; }
div.frame { position: relative; width: 160px; height: 160px; display: flex; align-items: center;
            justify-content: center; background: #fff; }
div.frame img { max-width: 160px; max-height: 160px; }
div.noimage { width: 160px; height: 160px; background: #e8e8e8; color: #555; display: flex; align-items: center;
              justify-content: center; }
span.star { position: absolute; top: 2px; left: 4px; color: #FFC20A; font-size: 1.5rem;
            text-shadow: 0 0 2px #7a5c00; }
div.marks { font-weight: 600; }
footer { margin-top: 3rem; color: #666; font-size: 0.85rem; }
"""


def title(report: ReportInput) -> str:
    """The report's title line."""
    return f"Judge audit report: {report.name}"


def report_html(report: ReportInput, sections: list[Section]) -> str:
    """The whole report as one HTML document that needs no other file and no network."""
    nav = "".join(f'<a href="#{escape_html(s.key)}">{escape_html(s.title)}</a>' for s in sections)
    body = "".join(s.html() for s in sections)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape_html(title(report))}</title><style>{STYLE}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head>'
        f"<body><h1>{escape_html(title(report))}</h1><nav>{nav}</nav>{body}"
        "<footer>Written by runners.report (Judge Audit). Every number is the audit's; figures are also in "
        "figures/ as SVG and PNG, tables in the CSV files beside this report.</footer></body></html>\n"
    )


def report_markdown(report: ReportInput, sections: list[Section]) -> str:
    """The whole report as Markdown: readable as plain text, data strings escaped only where Markdown
    would misread them; figures referenced as figures/<name>.svg."""
    return "\n\n".join([f"# {escape_markdown(title(report))}", *(s.markdown() for s in sections)]).rstrip() + "\n"
