"""Parse an attribute judge's raw text: one JSON object answering every attribute of a taxonomy.

Output contract (runners/instructions/attributes_v1.txt states it to the judge): after
stripping surrounding whitespace (and, noted, one Markdown code fence around the whole
output), the text is ONE JSON object whose keys are exactly the taxonomy's attribute names
(any order), each value an object with exactly the keys "label" and "rationale", both strings:

    {"gender": {"label": "female", "rationale": "long dress, ..."},
     "religion": {"label": "unspecified", "rationale": "no religious symbol"}, ...}

The call's status:

| text                                                             | call status | every field |
|------------------------------------------------------------------|-------------|-------------|
| such an object                                                   | ok          | its own status, below |
| empty, prose, not JSON, JSON then more text, not an object, a key repeated at any depth, a key missing or extra | parse_fail | missing |

A field's status (`answer` keeps the label as given; the rationale is kept, never scored):

| field value                                                      | status       | label |
|------------------------------------------------------------------|--------------|-------|
| {"label": L, "rationale": R}, L exactly one of the attribute's labels | ok      | L     |
| ... L exactly the attribute's abstention label                   | abstained    | None  |
| ... L any other string (another case, extra spaces, a synonym, a label of another attribute), or not a string (answer: its JSON text) | off_taxonomy | None |
| any other shape (a bare string, other keys, a rationale that is not a string): answer is the value's JSON text | missing | None |

Matching is exact, character for character: nothing is case-folded, trimmed or matched
fuzzily, so an answer off the taxonomy is never coerced to a near label. The abstention
label counts as an abstention under every condition (also when the instruction did not
offer it), so conditions are scored alike.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from audit_core.attributes.taxonomy import Attribute, Taxonomy
from runners.selection.parsing import unique_keys_object

FIELD_KEYS: tuple[str, str] = ("label", "rationale")

_FENCE = re.compile(r"\A```[A-Za-z]*[ \t]*\n(.*)\n[ \t]*```\Z", re.DOTALL)


@dataclass(frozen=True)
class FieldAnswer:
    """One attribute's answer: status ok | abstained | off_taxonomy | missing (schema.LABEL_ANSWER_STATUSES)."""

    attribute: str
    status: str
    label: str | None = None
    answer: str | None = None
    rationale: str | None = None


@dataclass(frozen=True)
class LabelParse:
    """Outcome of parsing one call: status ok | parse_fail, one answer per attribute (taxonomy order), a note."""

    status: str
    answers: tuple[FieldAnswer, ...]
    note: str | None = None


def missing_answers(taxonomy: Taxonomy) -> tuple[FieldAnswer, ...]:
    """Every attribute 'missing': the answers of a call that failed (parse or runtime)."""
    return tuple(FieldAnswer(a.name, "missing") for a in taxonomy.attributes)


def _as_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def parse_field(attribute: Attribute, value: object) -> tuple[FieldAnswer, str | None]:
    """One field's answer and, unless it is ok or abstained, a note saying why (see the module docstring)."""
    name = attribute.name
    if not isinstance(value, dict) or sorted(value) != sorted(FIELD_KEYS) or not isinstance(value["rationale"], str):
        shape = "an object" if isinstance(value, dict) else f"a {type(value).__name__}"
        return (FieldAnswer(name, "missing", answer=_as_text(value)),
                f"{name}: {shape}, not {{\"label\": string, \"rationale\": string}}")
    label, rationale = value["label"], value["rationale"]
    if isinstance(label, str) and label in attribute.labels:
        return FieldAnswer(name, "ok", label=label, answer=label, rationale=rationale), None
    if label == attribute.abstain:
        return FieldAnswer(name, "abstained", answer=label, rationale=rationale), None
    return (FieldAnswer(name, "off_taxonomy", answer=_as_text(label), rationale=rationale),
            f"{name}: {_as_text(label)!r} is not one of its answers")


def _failed(taxonomy: Taxonomy, note: str, fence_note: str | None) -> LabelParse:
    return LabelParse("parse_fail", missing_answers(taxonomy), "; ".join(p for p in (fence_note, note) if p))


def parse_labels(raw: str | None, taxonomy: Taxonomy) -> LabelParse:
    """Strict parse of one call's `raw` text against `taxonomy` (see the module docstring)."""
    text = (raw or "").strip()
    if not text:
        return _failed(taxonomy, "empty output", None)
    fence = _FENCE.match(text)
    body = fence.group(1).strip() if fence else text
    fence_note = "code fence removed" if fence else None
    if not body.startswith("{"):
        return _failed(taxonomy, "not a JSON object (text before it or none at all)", fence_note)
    try:
        obj = json.loads(body, object_pairs_hook=unique_keys_object)
    except json.JSONDecodeError as err:
        return _failed(taxonomy, f"not one JSON object ({err.msg} at char {err.pos})", fence_note)
    except ValueError as err:  # a repeated key (DuplicateKey), an integer past Python's digit limit
        return _failed(taxonomy, f"JSON object: {err}", fence_note)
    names = taxonomy.names()
    missing = [n for n in names if n not in obj]
    extra = sorted(k for k in obj if k not in names)
    if missing or extra:
        said = "; ".join(p for p in (f"missing keys {missing}" if missing else "",
                                     f"extra keys {extra}" if extra else "") if p)
        return _failed(taxonomy, f"keys are not exactly the taxonomy's ({said})", fence_note)
    answers, notes = [], []
    for attribute in taxonomy.attributes:
        answer, note = parse_field(attribute, obj[attribute.name])
        answers.append(answer)
        if note:
            notes.append(note)
    note = "; ".join(p for p in (fence_note, *notes) if p) or None
    return LabelParse("ok", tuple(answers), note)
