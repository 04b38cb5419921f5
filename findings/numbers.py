"""Numbers as every page, report and figure shows them: the one set of formats.

Measures on the 0–1 alignment scale (gain, regret, deltas, coefficients) take three decimals,
shares a whole percentage, counts thousands separators; a missing value is a dash (`MISSING`),
a statistic that cannot exist (a correlation with a constant side, an accuracy with nothing left
to score) may say `UNDEFINED` instead; never "nan", "None" or a negative zero ("-0.000", "-0%").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pandas as pd

MISSING = "—"
UNDEFINED = "undefined"
DECIMALS = 3


def absent(value: object) -> bool:
    """Whether `value` is missing: None, NA or NaN (a string never is)."""
    return value is None or (not isinstance(value, str) and bool(pd.isna(value)))


def number(value: object, signed: bool = False, missing: str = MISSING) -> str:
    """`value` to DECIMALS places ("0.160"; "+0.160" when `signed`), or `missing`."""
    if absent(value):
        return missing
    rounded = round(float(value), DECIMALS) + 0.0  # + 0.0 turns a rounded −0.0 into 0.0
    return f"{rounded:+.{DECIMALS}f}" if signed else f"{rounded:.{DECIMALS}f}"


def percent(share: object) -> str:
    """A share as a whole percentage ("41%"; a rounded −0.4% reads "0%"), or MISSING."""
    return MISSING if absent(share) else f"{round(float(share) * 100) + 0}%"


def interval(lo: object, hi: object, fmt: Callable[..., str] = number, **kw: bool) -> str:
    """" [lo, hi]" in the value's format `fmt`, or "" when either end is missing."""
    return "" if absent(lo) or absent(hi) else f" [{fmt(lo, **kw)}, {fmt(hi, **kw)}]"


def estimate(value: object, lo: object, hi: object, signed: bool = False, missing: str = MISSING) -> str:
    """"0.160 [0.136, 0.184]": a number with its interval (`missing` for a missing value)."""
    return number(value, signed, missing) + ("" if absent(value) else interval(lo, hi, signed=signed))


def share_estimate(value: object, lo: object, hi: object, missing: str = MISSING) -> str:
    """"41% [36%, 47%]": a share with its interval (`missing` for a missing value)."""
    return missing if absent(value) else percent(value) + interval(lo, hi, percent)


def estimate_of(row: Mapping[str, object], stat: str, signed: bool = False, missing: str = MISSING) -> str:
    """`estimate` of a row's `stat` and its `stat_lo`, `stat_hi` columns."""
    return estimate(row.get(stat), row.get(f"{stat}_lo"), row.get(f"{stat}_hi"), signed, missing)


def share_of(row: Mapping[str, object], stat: str, missing: str = MISSING) -> str:
    """`share_estimate` of a row's `stat` and its `stat_lo`, `stat_hi` columns."""
    return share_estimate(row.get(stat), row.get(f"{stat}_lo"), row.get(f"{stat}_hi"), missing)


def count(value: object) -> str:
    """A whole number with thousands separators ("12,400"), or MISSING."""
    return MISSING if absent(value) else f"{int(value):,}"


def p_value(p: object) -> str:
    """A p-value to two significant digits, "< 0.001" below that, or MISSING."""
    if absent(p):
        return MISSING
    return "< 0.001" if float(p) < 0.001 else f"{float(p):.2g}"


def zero_reading(lo: object, hi: object, above: str, below: str) -> str:
    """What a 95% interval says about 0, in words: "interval excludes 0: `above`" (or `below`),
    "interval includes 0", or "no interval"."""
    if absent(lo) or absent(hi):
        return "no interval"
    side = above if float(lo) > 0 else below if float(hi) < 0 else None
    return f"interval excludes 0: {side}" if side else "interval includes 0"
