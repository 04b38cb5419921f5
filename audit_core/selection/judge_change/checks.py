"""Checks: small expressions over a judge comparison's tables, read by a grammar of their own (no eval).

    check      := clause ("or" clause)*          "and" binds tighter than "or"; no parentheses
    clause     := comparison ("and" comparison)*
    comparison := operand OP operand             OP: == != < <= > >=
    operand    := NUMBER | STRING | call
    call       := FUNCTION "(" argument "," argument ")"
    argument   := WORD | STRING

A WORD is a bare name (a letter or `_` first, then anything but spaces, quotes, parentheses, commas
and `<>=!`); a STRING is double-quoted, with `\\"` and `\\\\` inside; keywords and function names are
read in any case. Functions, each a column of one table:

- of compare.csv, arguments (MEASURE, POLICY): baseline, candidate, difference, difference_lo,
  difference_hi, n;
- of gates.csv, arguments (JUDGE, GATE): coverage, kept_gain, kept_gain_lo, kept_gain_hi,
  rejected_gain, rejected_gain_lo, rejected_gain_hi, kept_minus_rejected, kept_minus_rejected_lo,
  kept_minus_rejected_hi and verdict (text: compared with == or != to one of the verdicts).

JUDGE is `baseline`, `candidate` or the judge's name. GATE is a gate's label (`orders>=3/3`), the
gate in gate_compose's syntax on either judge (`qwen: orders>=3/3`) or a standard gate's policy
name on either judge (`qwen agree>=3/3`, `qwen+clip agree`, `qwen+smol agree`); POLICY is a
compare.csv policy, or a gate named so (with ` rejected` for its rejected side).

A comparison with an undefined number (NaN: no prompts, no interval) does not hold. Text that
does not read, an unknown function, a type mismatch or a name the tables lack is an InputError
naming the check.

    verdict(candidate, "orders>=3/3") == "filters failures"
    difference_lo(gain, order0) > -0.02
    verdict(baseline, "qwen agree>=3/3") != "filters failures" or
        verdict(candidate, "qwen agree>=3/3") != "discards good decisions"    (one line)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from audit_core.errors import InputError
from audit_core.selection.gate_compose import Condition, format_condition, parse_gate
from audit_core.selection.judge_change.pairing import ROLES, gate_label
from audit_core.selection.judge_change.verdicts import VERDICTS
from audit_core.user_text import shown

COMPARE_FUNCTIONS = ("baseline", "candidate", "difference", "difference_lo", "difference_hi", "n")
GATE_FUNCTIONS = ("coverage", "kept_gain", "kept_gain_lo", "kept_gain_hi", "rejected_gain", "rejected_gain_lo",
                  "rejected_gain_hi", "kept_minus_rejected", "kept_minus_rejected_lo", "kept_minus_rejected_hi",
                  "verdict")
OPERATORS = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
             "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
_TOKEN = re.compile(r'\s*(?:(?P<string>"(?:[^"\\]|\\.)*")|(?P<op>==|!=|<=|>=|<|>)|(?P<punct>[(),])'
                    r'|(?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![^\s"(),<>=!]))'
                    r'|(?P<word>[A-Za-z_][^\s"(),<>=!]*))')
_CONTRACT = re.compile(r"(?P<judge>.+?)(?: agree>=(?P<k>\d+)/(?P<of>\d+)|\+(?P<other>.+) agree)")


@dataclass(frozen=True)
class Call:
    """function(first, second) as written (`text`)."""

    function: str
    first: str
    second: str
    text: str

    @property
    def is_text(self) -> bool:
        return self.function == "verdict"


Operand = Call | float | str  # a call, a number literal or a text literal


@dataclass(frozen=True)
class Comparison:
    left: Operand
    op: str
    right: Operand


@dataclass(frozen=True)
class Check:
    """An OR of AND-clauses of comparisons, and its text."""

    text: str
    clauses: tuple[tuple[Comparison, ...], ...]

    @property
    def calls(self) -> list[Call]:
        return [o for clause in self.clauses for c in clause for o in (c.left, c.right) if isinstance(o, Call)]


@dataclass(frozen=True)
class CheckOutcome:
    """Whether `check` holds, and the value of each call in it (text or number, NaN undefined)."""

    check: Check
    holds: bool
    values: dict[str, object]


class _Reader:
    """The check's tokens, left to right; errors name the character (1-based)."""

    def __init__(self, text: str) -> None:
        self.text, self.tokens, self.i = text, [], 0
        pos = 0
        while text[pos:].strip():
            match = _TOKEN.match(text, pos)
            if match is None:
                start = len(text) - len(text[pos:].lstrip())
                raise self.error(f"unexpected {text[start]!r}", start)
            kind = match.lastgroup
            self.tokens.append((kind, match.group(kind), match.start(kind)))
            pos = match.end()

    def error(self, what: str, position: int | None = None) -> InputError:
        if position is None:
            position = self.tokens[self.i][2] if self.i < len(self.tokens) else len(self.text)
        return InputError(f"check {shown(self.text)}, character {position + 1}: {what}")

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i][:2] if self.i < len(self.tokens) else None

    def take(self, kinds: tuple[str, ...], shown_as: str, value: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if token is None or token[0] not in kinds or (value is not None and token[1] != value):
            found = f"found {shown(token[1])}" if token else "found the end"
            raise self.error(f"expected {shown_as}, {found}")
        self.i += 1
        return token

    def keyword(self) -> str | None:
        token = self.peek()
        return token[1].lower() if token and token[0] == "word" and token[1].lower() in ("and", "or") else None


def _unquote(kind: str, value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value[1:-1], flags=re.DOTALL) if kind == "string" else value


def _operand(reader: _Reader) -> Operand:
    kind, value = reader.take(("number", "string", "word"), "a number, a quoted text or a function call")
    if kind == "number":
        return float(value)
    if kind == "string":
        return _unquote(kind, value)
    function = value.lower()
    if function not in COMPARE_FUNCTIONS + GATE_FUNCTIONS:
        reader.i -= 1
        raise reader.error(f"unknown function {shown(value)} (functions: {', '.join(COMPARE_FUNCTIONS + GATE_FUNCTIONS)})")
    start = reader.tokens[reader.i - 1][2]
    reader.take(("punct",), "'('", "(")
    first = _unquote(*reader.take(("word", "string"), "a name or a quoted text"))
    reader.take(("punct",), "','", ",")
    second = _unquote(*reader.take(("word", "string"), "a name or a quoted text"))
    reader.take(("punct",), "')'", ")")
    end = reader.tokens[reader.i - 1][2] + 1
    return Call(function, first, second, reader.text[start:end])


def _comparison(reader: _Reader) -> Comparison:
    position = reader.tokens[reader.i][2] if reader.i < len(reader.tokens) else len(reader.text)
    left = _operand(reader)
    op = reader.take(("op",), "a comparison (== != < <= > >=)")[1]
    right = _operand(reader)
    texts = [isinstance(o, str) or (isinstance(o, Call) and o.is_text) for o in (left, right)]
    if texts[0] != texts[1]:
        raise reader.error("compares a text with a number (only verdict(...) gives text)", position)
    if texts[0] and op not in ("==", "!="):
        raise reader.error(f"texts are compared with == or !=, not {op}", position)
    if not any(isinstance(o, Call) for o in (left, right)):
        raise reader.error("compares two constants: name a value of the tables with a function", position)
    for o in (left, right):
        if isinstance(o, str) and o not in VERDICTS:
            raise reader.error(f"{shown(o)} is not a verdict (verdicts: {', '.join(VERDICTS)})", position)
    return Comparison(left, op, right)


def parse_check(text: str) -> Check:
    """The check written as `text` (module docstring); InputError naming the character that does not fit."""
    reader = _Reader(text)
    if reader.peek() is None:
        raise reader.error("empty: write a comparison such as difference_lo(gain, order0) > -0.02")
    clauses, clause = [], [_comparison(reader)]
    while reader.peek() is not None:
        joint = reader.keyword()
        if joint is None:
            raise reader.error(f"expected 'and' or 'or', found {shown(reader.peek()[1])}")
        reader.i += 1
        if joint == "or":
            clauses.append(tuple(clause))
            clause = []
        clause.append(_comparison(reader))
    clauses.append(tuple(clause))
    return Check(text, tuple(clauses))


# ------------------------------------------------------------ evaluating


@dataclass(frozen=True)
class Tables:
    """What checks read: compare (COMPARE_COLUMNS), gates (GATE_DETAIL_COLUMNS) and role -> judge."""

    compare: pd.DataFrame
    gates: pd.DataFrame
    judges: Mapping[str, str]


def evaluate_check(check: Check, tables: Tables) -> CheckOutcome:
    """Whether `check` holds on `tables`; InputError naming the check for a name they lack."""
    values = {call.text: _value(check, call, tables) for call in check.calls}

    def side(operand: Operand) -> object:
        return values[operand.text] if isinstance(operand, Call) else operand

    def holds(c: Comparison) -> bool:
        a, b = side(c.left), side(c.right)
        if any(isinstance(v, float) and math.isnan(v) for v in (a, b)):
            return False
        return bool(OPERATORS[c.op](a, b))

    return CheckOutcome(check, any(all(holds(c) for c in clause) for clause in check.clauses), values)


def _value(check: Check, call: Call, tables: Tables) -> object:
    def fail(what: str) -> InputError:
        return InputError(f"check {shown(check.text)}: {call.text}: {what}")

    if call.function in COMPARE_FUNCTIONS:
        frame = tables.compare
        measures = list(dict.fromkeys(frame["measure"]))
        if call.first not in measures:
            raise fail(f"no measure {shown(call.first)} (measures: {', '.join(measures)})")
        policy = _policy(call.second, list(dict.fromkeys(frame["policy"])), tables)
        if policy is None:
            raise fail(f"no policy {shown(call.second)} (policies: {', '.join(dict.fromkeys(frame['policy']))})")
        row = frame[(frame["measure"] == call.first) & (frame["policy"] == policy)]
        if row.empty:
            raise fail(f"policy {shown(policy)} has no measure {shown(call.first)}")
        return float(row[call.function].iloc[0])
    role = call.first if call.first in ROLES else next(
        (r for r, judge in tables.judges.items() if judge == call.first), None)
    if role is None:
        raise fail(f"no judge {shown(call.first)} (judges: baseline, candidate, "
                   f"{', '.join(dict.fromkeys(tables.judges.values()))})")
    labels = list(dict.fromkeys(tables.gates["gate"]))
    gate = _gate(call.second, labels, tables)
    if gate is None:
        raise fail(f"no gate {shown(call.second)} (gates: {', '.join(labels) or 'none'})")
    row = tables.gates[(tables.gates["gate"] == gate) & (tables.gates["role"] == role)].iloc[0]
    return str(row["verdict"]) if call.function == "verdict" else float(row[call.function])


def _gate(reference: str, labels: Sequence[str], tables: Tables) -> str | None:
    """The label of the gate `reference` names (module docstring), None when no gate fits."""
    if reference in labels:
        return reference
    names = set(tables.judges.values())
    try:
        gate = parse_gate(reference)
    except InputError:
        gate = None
    if gate is not None and gate.judge in names:
        label = gate_label(gate)
        return label if label in labels else None
    match = _CONTRACT.fullmatch(reference)
    if match is None or match["judge"] not in names:
        return None
    if match["other"] is None:
        candidates = [format_condition(Condition("orders", "", k=int(match["k"]), of=int(match["of"])), "")]
    else:
        candidates = [format_condition(Condition(kind, match["other"]), "") for kind in ("scorer", "judge")]
    return next((c for c in candidates if c in labels), None)


def _policy(reference: str, policies: Sequence[str], tables: Tables) -> str | None:
    """The compare.csv policy `reference` names: itself, or a gate named as `_gate` reads it
    (with ` rejected` for the rejected side)."""
    if reference in policies:
        return reference
    stem, rejected = (reference[: -len(" rejected")], " rejected") if reference.endswith(" rejected") else (reference, "")
    gate = _gate(stem, [p for p in policies if not p.endswith(" rejected")], tables)
    return f"{gate}{rejected}" if gate is not None and f"{gate}{rejected}" in policies else None


def default_checks(gates: Sequence[str]) -> list[str]:
    """For each gate label: the candidate's verdict is not "discards good decisions" where the
    baseline's was "filters failures"; and the order-0 gain difference's lower bound is above −0.02."""
    out = []
    for label in gates:
        quoted = '"' + label.replace("\\", "\\\\").replace('"', '\\"') + '"'
        out.append(f'verdict(baseline, {quoted}) != "filters failures" or '
                   f'verdict(candidate, {quoted}) != "discards good decisions"')
    out.append("difference_lo(gain, order0) > -0.02")
    return out
