"""How user-given text is judged and quoted: blank names and short marked excerpts.

Names and ids (dataset, judge, scorer, rater, pool, condition, annotator,
outcome, prompt and candidate ids) are never blank: a name is blank when it has
no visible character, every character being whitespace (`str.isspace`: spaces,
tabs, line breaks, no-break and ideographic spaces), a format character
(Unicode category Cf: zero-width spaces and joiners, the byte-order mark,
direction marks) or a control character (Cc). Such a name would show as nothing
in the app and the reports, and two of them could not be told apart.

Error messages quote a user's value through `shown` (or `excerpt` for text
that is not a single value), at most EXCERPT_CHARS characters of it followed by
how many more there were, so a huge field cannot flood a message. This module
imports nothing from the project, so every layer can use it.
"""

from __future__ import annotations

import unicodedata

EXCERPT_CHARS = 80
BLANK = "a name cannot be blank"
_INVISIBLE_CATEGORIES = frozenset({"Cf", "Cc"})


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
