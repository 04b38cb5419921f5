"""Parse a judge's raw text into a pick, per the output contracts of DESIGN §5.

Two contracts:

- ``ranking``: a JSON object with exactly the keys ``choice`` and ``ranking``;
  ``ranking`` lists every supplied label exactly once, best first, and
  ``choice == ranking[0]``.
- ``choice``: a JSON object with exactly the key ``choice``.

The strict parser accepts only that (the whole output may sit inside one
Markdown code fence, which is noted). The lenient adapter is opt-in per judge
and runs only when the strict parser fails; it recovers exactly two shapes:

- a bare supplied label (``" B"``), optionally preceded by ``Candidate``;
- a one-key object whose key is a declared alias (or ``choice`` itself) and
  whose value is a supplied label, optionally preceded by ``Candidate``.

Every recovery has status ``recovered`` and a note saying what was recovered.
Prose, several labels, unknown labels (labels are case-sensitive) and any
ambiguity are ``parse_fail``: the call abstains. No pick is ever invented.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

CONTRACTS: tuple[str, ...] = ("ranking", "choice")
CONTRACT_KEYS: dict[str, frozenset[str]] = {
    "ranking": frozenset({"choice", "ranking"}),
    "choice": frozenset({"choice"}),
}
ALIASES: tuple[str, ...] = ("image", "selected", "selected_image", "candidate")

_FENCE = re.compile(r"\A```[A-Za-z]*[ \t]*\n(.*)\n[ \t]*```\Z", re.DOTALL)
_LABEL = re.compile(r"\A(Candidate\s+)?([A-Z])\Z")


@dataclass(frozen=True)
class ParseResult:
    """Outcome of parsing one raw output.

    status: ``ok`` (strict), ``recovered`` (lenient adapter) or ``parse_fail``.
    choice: the picked slot label, None on failure.
    ranking: the full ranking (ranking contract, strict parse only), else None.
    note: why it failed, what was recovered, or a formatting remark; None when clean.
    """

    status: str
    choice: str | None = None
    ranking: tuple[str, ...] | None = None
    note: str | None = None


class _Reject(Exception):
    """Internal: the strict parser's reason for refusing an output."""


def parse_output(raw: str | None, labels: Sequence[str], contract: str, *, lenient: bool = False) -> ParseResult:
    """Strict parse of `raw` against the supplied `labels`; lenient recovery if asked.

    Raises ValueError for an unknown contract (a programming error, not a judge's).
    """
    if contract not in CONTRACTS:
        raise ValueError(f"unknown output contract {contract!r}; expected one of {CONTRACTS}")
    labels = tuple(labels)
    text = (raw or "").strip()
    if not text:
        return ParseResult("parse_fail", note="empty output")
    body, fenced = _unfence(text)
    try:
        choice, ranking = _strict(body, labels, contract)
    except _Reject as reason:
        if lenient:
            recovered = _recover(body, labels)
            if recovered is not None:
                label, how = recovered
                return ParseResult("recovered", choice=label, note=_join("code fence removed" if fenced else None, how))
        return ParseResult("parse_fail", note=_join("code fence removed" if fenced else None, str(reason)))
    return ParseResult("ok", choice=choice, ranking=ranking, note="code fence removed" if fenced else None)


def _unfence(text: str) -> tuple[str, bool]:
    match = _FENCE.match(text)
    return (match.group(1).strip(), True) if match else (text, False)


def _join(*parts: str | None) -> str | None:
    kept = [p for p in parts if p]
    return "; ".join(kept) if kept else None


class DuplicateKey(ValueError):
    """A JSON object names a key twice (json.loads alone would keep the last value)."""


def unique_keys_object(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """`json.loads` object_pairs_hook: the object as a dict, or DuplicateKey naming its first repeated key (sorted)."""
    keys = [k for k, _ in pairs]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise DuplicateKey(f"key {repeated[0]!r} appears more than once")
    return dict(pairs)


def _json_object(body: str) -> dict[str, object]:
    try:
        value = json.loads(body, object_pairs_hook=unique_keys_object)
    except DuplicateKey as err:
        raise _Reject(str(err)) from None
    except json.JSONDecodeError as err:
        raise _Reject(f"not a JSON object ({err.msg} at char {err.pos})") from None
    if not isinstance(value, dict):
        raise _Reject(f"JSON {type(value).__name__}, not an object")
    return value


def _check_label(value: object, labels: tuple[str, ...], field: str) -> str:
    if not isinstance(value, str):
        raise _Reject(f"{field} is {type(value).__name__}, not a label string")
    if value not in labels:
        raise _Reject(f"{field} {value!r} is not a supplied label ({', '.join(labels)})")
    return value


def _strict(body: str, labels: tuple[str, ...], contract: str) -> tuple[str, tuple[str, ...] | None]:
    obj = _json_object(body)
    expected = CONTRACT_KEYS[contract]
    if set(obj) != expected:
        missing = sorted(expected - set(obj))
        extra = sorted(set(obj) - expected)
        detail = ", ".join(
            part for part in (f"missing {missing}" if missing else "", f"unexpected {extra}" if extra else "") if part
        )
        raise _Reject(f"keys {sorted(obj)} do not match contract {contract!r} ({detail})")
    choice = _check_label(obj["choice"], labels, "choice")
    if contract == "choice":
        return choice, None
    ranking = obj["ranking"]
    if not isinstance(ranking, list):
        raise _Reject(f"ranking is {type(ranking).__name__}, not a list")
    ranked = tuple(_check_label(item, labels, "ranking entry") for item in ranking)
    if len(set(ranked)) != len(ranked):
        raise _Reject(f"ranking {list(ranked)} repeats a label")
    if len(ranked) != len(labels):
        raise _Reject(f"ranking {list(ranked)} is incomplete (labels: {', '.join(labels)})")
    if ranked[0] != choice:
        raise _Reject(f"choice {choice!r} differs from ranking[0] {ranked[0]!r}")
    return choice, ranked


def _label_value(value: object, labels: tuple[str, ...]) -> tuple[str, bool] | None:
    """(label, had 'Candidate' prefix) when `value` names exactly one supplied label."""
    if not isinstance(value, str):
        return None
    match = _LABEL.match(value.strip())
    if match is None or match.group(2) not in labels:
        return None
    return match.group(2), match.group(1) is not None


def _recover(body: str, labels: tuple[str, ...]) -> tuple[str, str] | None:
    """The lenient adapter: (label, note) for the two recoverable shapes, else None."""
    bare = _label_value(body, labels)
    if bare is not None:
        label, prefixed = bare
        return label, "bare label" + (" with 'Candidate' prefix" if prefixed else "")
    try:
        obj = _json_object(body)
    except _Reject:
        return None
    if len(obj) != 1:
        return None
    (key, value), = obj.items()
    if key not in ALIASES and key != "choice":
        return None
    named = _label_value(value, labels)
    if named is None:
        return None
    label, prefixed = named
    return label, f"one-key object {key!r}" + (" with 'Candidate' prefix" if prefixed else "")
