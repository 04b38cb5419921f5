"""Parse a rating judge's raw text into a rating on the rubric's scale, an abstention or a failure.

Accepted, after stripping surrounding whitespace (and, noted, one Markdown
code fence around the whole output), and nothing else:

| shape               | example               | result                               |
|---------------------|-----------------------|--------------------------------------|
| bare integer        | ``4``                 | ok, 4 (ASCII digits, no sign, no leading zero, on the scale) |
| abstention label    | ``unspecified``       | abstained (only if the instruction allows it; case-sensitive) |
| one-key JSON object | ``{"rating": 4}``     | ok, 4 (a JSON integer, not 4.0, "4" or true) |
| one-key JSON object | ``{"rating": "unspecified"}`` | abstained (as for the bare label) |

Everything else is ``parse_fail`` with a note saying why: an integer off the
scale, a decimal or signed number, the label in another case, other keys, prose
around a number ("I'd say 4"), several numbers. A failed parse is never turned
into a number and never resampled.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

RATING_KEY = "rating"

_FENCE = re.compile(r"\A```[A-Za-z]*[ \t]*\n(.*)\n[ \t]*```\Z", re.DOTALL)
_INTEGER = re.compile(r"\A(?:0|[1-9][0-9]*)\Z")
_NUMBER = re.compile(r"\A[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")


@dataclass(frozen=True)
class Scale:
    """A rubric scale: integer points lo..hi, and the abstention label (None: abstaining is not allowed)."""

    lo: int
    hi: int
    abstain: str | None = None

    def __post_init__(self) -> None:
        if self.lo >= self.hi:
            raise ValueError(f"scale {self.lo}-{self.hi}: the top must exceed the bottom")

    def describe(self) -> str:
        """E.g. "an integer from 1 to 5 or 'unspecified'"."""
        base = f"an integer from {self.lo} to {self.hi}"
        return f"{base} or {self.abstain!r}" if self.abstain else base


@dataclass(frozen=True)
class RatingParse:
    """Outcome of parsing one raw output.

    status: ``ok``, ``abstained`` or ``parse_fail``; rating: the point on the
    scale when ok, else None; note: why it failed, or a formatting remark.
    """

    status: str
    rating: int | None = None
    note: str | None = None


def _on_scale(value: int, scale: Scale, shown: str) -> RatingParse:
    if scale.lo <= value <= scale.hi:
        return RatingParse("ok", rating=value)
    return RatingParse("parse_fail", note=f"{shown} is outside the scale {scale.lo}-{scale.hi}")


def _abstention(scale: Scale, shown: str) -> RatingParse:
    if scale.abstain is None:
        return RatingParse("parse_fail", note=f"abstention {shown!r} is not allowed by this instruction")
    return RatingParse("abstained")


def _bare_integer(body: str, scale: Scale) -> RatingParse | None:
    return _on_scale(int(body), scale, body) if _INTEGER.match(body) else None


def _other_number(body: str, scale: Scale) -> RatingParse | None:
    if not _NUMBER.match(body):
        return None
    return RatingParse("parse_fail", note=f"{body!r} is not a plain integer (expected {scale.describe()})")


def _bare_label(body: str, scale: Scale) -> RatingParse | None:
    label = scale.abstain or "unspecified"
    if body == label:
        return _abstention(scale, body)
    if body.casefold() == label.casefold():
        return RatingParse("parse_fail", note=f"{body!r} is not the abstention label {label!r} (case matters)")
    return None


def _reject_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("a key appears more than once")
    return dict(pairs)


def _json_object(body: str, scale: Scale) -> RatingParse | None:
    if not body.startswith("{"):
        return None
    try:
        obj = json.loads(body, object_pairs_hook=_reject_duplicate_keys)
    except json.JSONDecodeError as err:
        return RatingParse("parse_fail", note=f"not a JSON object ({err.msg} at char {err.pos})")
    except ValueError as err:
        return RatingParse("parse_fail", note=f"JSON object: {err}")
    if not isinstance(obj, dict):
        return RatingParse("parse_fail", note=f"JSON {type(obj).__name__}, not an object")
    if list(obj) != [RATING_KEY]:
        return RatingParse("parse_fail", note=f"keys {sorted(obj)} are not exactly [{RATING_KEY!r}]")
    value = obj[RATING_KEY]
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return RatingParse("parse_fail", note=f"{RATING_KEY} is {type(value).__name__} {value!r}, not {scale.describe()}")
    if isinstance(value, int):
        return _on_scale(value, scale, str(value))
    label = scale.abstain or "unspecified"
    if value == label:
        return _abstention(scale, value)
    return RatingParse("parse_fail", note=f"{RATING_KEY} is the string {value!r}, not {scale.describe()}")


# Tried in order; the first shape that recognises the text decides (accepting or saying why not).
SHAPES: tuple[tuple[str, Callable[[str, Scale], RatingParse | None]], ...] = (
    ("bare integer", _bare_integer),
    ("other number", _other_number),
    ("abstention label", _bare_label),
    ("JSON object", _json_object),
)


def parse_rating(raw: str | None, scale: Scale) -> RatingParse:
    """Strict parse of `raw` against `scale` (see the module docstring for the accepted shapes)."""
    text = (raw or "").strip()
    if not text:
        return RatingParse("parse_fail", note="empty output")
    fence = _FENCE.match(text)
    body = fence.group(1).strip() if fence else text
    fence_note = "code fence removed" if fence else None
    for _, shape in SHAPES:
        result = shape(body, scale)
        if result is not None:
            note = "; ".join(p for p in (fence_note, result.note) if p) or None
            return RatingParse(result.status, result.rating, note)
    expected = f'{scale.describe()}, or {{"{RATING_KEY}": n}}'
    return RatingParse("parse_fail", note="; ".join(p for p in (fence_note, f"not a rating: expected {expected}") if p))
