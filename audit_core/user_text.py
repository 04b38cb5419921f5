"""User-given text as data: when a name is blank, how a message quotes a value, and how text is
shown so that it renders literally.

Names and ids (dataset, judge, scorer, rater, pool, condition, annotator,
outcome, prompt and candidate ids) are never blank: a name is blank when it has
no visible character, every character being whitespace (`str.isspace`: spaces,
tabs, line breaks, no-break and ideographic spaces) or invisible: a format character
(Unicode category Cf: zero-width spaces and joiners, the byte-order mark,
direction marks), a control character (Cc) or a line or paragraph separator (Zl, Zp).
Such a name would show as nothing in the app and the reports, and two of them could not be told apart.

Error messages quote a user's value through `shown` (or `excerpt` for text
that is not a single value), at most EXCERPT_CHARS characters of it followed by
how many more there were, so a huge field cannot flood a message.

Data text is made `visible` before it is rendered anywhere (Markdown by `escape_markdown`, HTML
by `escape_html`, figures by `findings.figures.plain`, the app's plain-text elements): an
invisible character that is not a joiner, tab or line break, a direction override, isolate or
mark among them, becomes a visible marker such as `⟨U+202E⟩`, so a name can neither reorder the
numbers beside it nor hide text. `escape_markdown` escapes a character only where Markdown
(CommonMark, GFM and Streamlit's extensions `:emoji:`, `:red[..]`, `$..$`) would read it as
syntax, so a judge named `*x*` or `<script>` renders literally and ordinary text keeps no backslashes.

This module imports nothing from the project, so every layer can use it.
"""

from __future__ import annotations

import html
import re
import unicodedata

EXCERPT_CHARS = 80
BLANK = "a name cannot be blank"
_INVISIBLE_CATEGORIES = frozenset({"Cf", "Cc", "Zl", "Zp"})  # format, control, line and paragraph separators


def excerpt(text: str) -> str:
    """`text` when it has at most EXCERPT_CHARS characters, else its first EXCERPT_CHARS and
    "… (N more characters)"."""
    if len(text) <= EXCERPT_CHARS:
        return text
    return f"{text[:EXCERPT_CHARS]}… ({len(text) - EXCERPT_CHARS:,} more characters)"


def shown(value: object) -> str:
    """repr(value) for a message, a long one cut as `excerpt` cuts text (a long string is cut
    before its repr is made, so quoting a 500 MB field costs no more than quoting a short one)."""
    if isinstance(value, str) and len(value) > EXCERPT_CHARS:
        return f"{value[:EXCERPT_CHARS]!r}… ({len(value) - EXCERPT_CHARS:,} more characters)"
    return excerpt(repr(value))


def blank(text: str) -> bool:
    """Whether `text` has no visible character (module docstring): empty, or only whitespace,
    format and control characters."""
    return all(ch.isspace() or unicodedata.category(ch) in _INVISIBLE_CATEGORIES for ch in text)


# (pattern, what it protects): each match gets a backslash before its first character
_INLINE = re.compile(
    r"[\\`*~$|^]"             # code, emphasis, strikethrough, LaTeX, table cells, superscript: anywhere
    r"|(?<![^\W_])_|_(?![^\W_])"  # emphasis by underscore: never between two letters or digits
    r"|\](?=[(\[:])"             # a link, reference or link definition: `](`, `][`, `]:`
    r"|<(?=[A-Za-z/!?])"         # raw HTML, comments, autolinks
    r"|&(?=#?[A-Za-z0-9]+;)"     # character references (&amp;)
    r"|:(?=[A-Za-z])"            # Streamlit's :emoji: shortcodes and :colour[text] directives
)
_LINE_START = re.compile(r"^(?:([#>+=-])|(\d+)([.)]))")  # headings, quotes, lists, setext lines
# Joiners shape Arabic, Indic and emoji text and reorder nothing: they stay as written.
_JOINERS = frozenset("\u200c\u200d")




def _marker(char: str) -> str:
    return f"⟨U+{ord(char):04X}⟩"


def unseen(char: str) -> bool:
    """Whether `char` is invisible or steers the text around it: a format character (Unicode
    category Cf: the bidi overrides, embeddings, isolates and marks U+202A–U+202E, U+2066–U+2069,
    U+200E, U+200F, U+061C, zero-width spaces, tags...) other than the two joiners, a control
    character other than tab and line breaks, or a line or paragraph separator."""
    return (unicodedata.category(char) in _INVISIBLE_CATEGORIES and char not in _JOINERS
            and char not in "\t\n\r")


def visible(text: object) -> str:
    """`str(text)` with every `unseen` character replaced by a visible marker, `⟨U+202E⟩` for
    U+202E: the one rule for data text in the app, the reports and the figures. Tabs and line
    breaks are left to each renderer; everything else is unchanged."""
    out = str(text)
    if out.isascii() and out.isprintable():  # the common case: nothing to mark
        return out
    return "".join(_marker(c) if unseen(c) else c for c in out)


def escape_html(text: object) -> str:
    """`text` made `visible` and escaped for HTML (element text and quoted attribute values)."""
    return html.escape(visible(text))


def escape_markdown(text: object, line_start: bool = False) -> str:
    """`text` made `visible`, as Markdown that renders literally, on one line (line breaks become spaces).

    Escapes only what Markdown would misread (see the module docstring): `*`, `` ` ``, `~`,
    `$`, `|`, `^` and `\\` anywhere; `_` unless between letters or digits; `]` before `(`,
    `[` or `:`; `<` before a tag; `&` of an entity; `:` before a letter; a trailing `#`. With
    `line_start` (a paragraph's text), also a leading block marker (`#`, `>`, `-`, `+`, `=`, `1.`).
    """
    out = visible(str(text).replace("\r", " ").replace("\n", " "))
    out = _INLINE.sub(lambda m: "\\" + m.group(0), out.lstrip() if line_start else out)
    out = re.sub(r"(\s)(#+\s*)$", lambda m: m.group(1) + "\\" + m.group(2), out)  # a heading's closing sequence
    if line_start:  # leading blanks are dropped: four of them would start a code block
        out = _LINE_START.sub(lambda m: "\\" + m.group(1) if m.group(1) else m.group(2) + "\\" + m.group(3), out, count=1)
    return out
