"""Strict field values for the readers: numbers, integers in a column's range, text, ids and names.

Each check takes the raw value (from JSON, a CSV cell or Parquet), the field's
name and `where` ({"file": ..., "line": ...}) and returns the clean value or
raises InputError naming file, line and field. Numbers written as text follow
one ASCII syntax, `[+-]digits[.digits][e[+-]digits]`: Python's float() also
takes `1_0`, non-ASCII digits, 'nan' and 'inf', which no table means.

Names are checked with `audit_core.user_text.blank`; messages quote values through
`audit_core.user_text.shown` and `excerpt`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence

from audit_core.errors import InputError
from audit_core.store.schema import INTEGER_MAX
from audit_core.user_text import BLANK, blank, shown

NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# how far a call's label probabilities may sum above 1: a server's rounded log-probabilities, float32 softmax
LABEL_PROBS_TOLERANCE = 1e-3


def name(value: object, field: str, where: Mapping | None = None) -> str:
    """`value` when it is a name that is not blank; InputError naming `field` (and `where`) otherwise."""
    if not isinstance(value, str):
        raise InputError(f"expected a name (text), got {shown(value)}", field=field, **dict(where or {}))
    if blank(value):
        raise InputError(BLANK, field=field, **dict(where or {}))
    return value


def names(given: Mapping[str, str | Sequence[str] | None]) -> None:
    """Check every name given on a command line: {flag: name, names or None (not given)}."""
    for flag, value in given.items():
        for one in [value] if isinstance(value, str) else value or ():
            name(one, flag)


def real(value: object) -> float | None:
    """`value` as a finite float when it is an int or float (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond the float range
        return None
    return number if math.isfinite(number) else None


def parsed_number(text: str) -> float | None:
    """The finite number a text spells in NUMBER_TEXT syntax (spaces and tabs around allowed), else None."""
    text = text.strip(" \t")
    if not NUMBER_TEXT.fullmatch(text):
        return None
    number = float(text)  # '1e999' overflows to inf, refused below
    return number if math.isfinite(number) else None


def number(value: object, field: str, where: dict, *, text: bool = False) -> float:
    """A finite int or float; with `text`, also a string in NUMBER_TEXT syntax."""
    number = parsed_number(value) if text and isinstance(value, str) else real(value)
    if number is None:
        raise InputError(f"{_number_problem(value, text)}, got {shown(value)}", field=field, **where)
    return number


def _number_problem(value: object, text: bool) -> str:
    if text and isinstance(value, str):
        spelled = value.strip(" \t")
        if NUMBER_TEXT.fullmatch(spelled) or spelled.lower().lstrip("+-") in ("nan", "inf", "infinity"):
            return "expected a finite number"
        return "expected a number written with ASCII digits (like 0.5, -2 or 1e-3)"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "expected a finite number"
    return "expected a number"


def integer(
    value: object, field: str, where: dict, *, minimum: int, maximum: int = INTEGER_MAX, text: bool = False
) -> int:
    """An integral number in [minimum, maximum] (an INTEGER column's range by default)."""
    number = parsed_number(value) if text and isinstance(value, str) else real(value)
    if isinstance(value, int) and not isinstance(value, bool):
        exact: int | None = value  # exact even beyond the float range
    else:
        exact = int(number) if number is not None and number.is_integer() else None
    if exact is None or not minimum <= exact <= maximum:
        raise InputError(f"expected an integer from {minimum} to {maximum}, got {shown(value)}", field=field, **where)
    return exact


def text(value: object, field: str, where: dict, *, required: bool = False) -> str | None:
    """A string, or None when absent (JSON null) and not `required`."""
    if value is None:
        if required:
            raise InputError("missing", field=field, **where)
        return None
    if not isinstance(value, str):
        raise InputError(f"expected text, got {shown(value)}", field=field, **where)
    return value


def identifier(value: object, field: str, where: dict, *, integers: bool = False) -> str:
    """A string that is not `blank`, as given; with `integers`, an int id is taken as its text."""
    if integers and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if value is None:
        raise InputError("missing", field=field, **where)
    if not isinstance(value, str):
        raise InputError(f"expected an id (text), got {shown(value)}", field=field, **where)
    if blank(value):
        raise InputError(BLANK, field=field, **where)
    return value


def flag(value: object, field: str, where: dict) -> bool | None:
    """true, false or absent (None)."""
    if value is not None and not isinstance(value, bool):
        raise InputError(f"expected true or false, got {shown(value)}", field=field, **where)
    return value


class _NotJson(ValueError):
    pass


def _unique_object(pairs: list[tuple[str, object]]) -> dict:
    obj: dict = {}
    for key, value in pairs:
        if key in obj:
            raise _NotJson(f"key {shown(key)} appears twice")
        obj[key] = value
    return obj


def _no_constant(name: str) -> object:
    raise _NotJson(f"{name} is not a number")


def label_probs(value: object, labels: Sequence[str], field: str, where: dict) -> str | None:
    """A call's label probabilities as JSON text, or None when absent: a JSON object (or text holding one)
    mapping some of the call's offered `labels` to finite numbers in [0, 1] whose sum is at most
    1 + LABEL_PROBS_TOLERANCE."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value, object_pairs_hook=_unique_object, parse_constant=_no_constant)
        except (json.JSONDecodeError, _NotJson, RecursionError) as err:
            problem = (f"{err.msg} at character {err.pos + 1}" if isinstance(err, json.JSONDecodeError)
                       else str(err) or "nested too deeply")
            raise InputError(f"not JSON ({problem})", field=field, **where) from None
    if not isinstance(value, dict):
        raise InputError(f"expected a JSON object of label -> probability, got {shown(value)}", field=field, **where)
    for label, probability in value.items():
        if label not in labels:
            raise InputError(f"label {shown(label)} is not offered in this call ({', '.join(labels)})", field=field,
                             **where)
        number = real(probability)
        if number is None or not 0.0 <= number <= 1.0:
            raise InputError(f"the probability of {label} must be a number in [0, 1], got {shown(probability)}",
                             field=field, **where)
    total = math.fsum(float(p) for p in value.values())
    if total > 1.0 + LABEL_PROBS_TOLERANCE:
        raise InputError(f"the probabilities sum to {total:.6g}, more than 1 (+ {LABEL_PROBS_TOLERANCE:g})",
                         field=field, **where)
    return json.dumps(value, ensure_ascii=False)
