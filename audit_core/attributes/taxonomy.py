"""Attribute taxonomies (DESIGN §4c): closed label sets, each with an abstention label
and a scoring policy for abstentions, read from versioned JSON files.

File format: {"name", "version", "attributes": [{"name", "question", "labels": [...],
"abstain": "unspecified", "abstention": "miss" | "exclude"}, ...]}. `miss` counts an
abstention in the denominator with no credit; `exclude` leaves it out (coverage reported).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from audit_core.errors import InputError
from audit_core.ingest import input_files
from audit_core.user_text import blank, excerpt, shown

ABSTENTION_POLICIES: tuple[str, ...] = ("miss", "exclude")
DEFAULT_TAXONOMY = Path(__file__).resolve().parents[2] / "runners" / "taxonomies" / "default_v1.json"


@dataclass(frozen=True)
class Attribute:
    """One closed question: its labels (without the abstention label), abstention label and policy."""

    name: str
    question: str
    labels: tuple[str, ...]
    abstain: str
    abstention: str

    def answers(self) -> tuple[str, ...]:
        """Every valid answer: the labels, then the abstention label."""
        return (*self.labels, self.abstain)


@dataclass(frozen=True)
class Taxonomy:
    """A named, versioned set of attributes; sha256 is the hash of the file's bytes."""

    name: str
    version: str
    attributes: tuple[Attribute, ...]
    sha256: str
    source: str

    def attribute(self, name: str) -> Attribute:
        """The attribute called `name` (KeyError if the taxonomy has none)."""
        for attribute in self.attributes:
            if attribute.name == name:
                return attribute
        raise KeyError(name)

    def names(self) -> tuple[str, ...]:
        """Attribute names in file order."""
        return tuple(a.name for a in self.attributes)

    def to_json(self) -> str:
        """The taxonomy as canonical JSON (for storing with a dataset or a run's config)."""
        return json.dumps({"name": self.name, "version": self.version, "attributes": [
            {"name": a.name, "question": a.question, "labels": list(a.labels), "abstain": a.abstain,
             "abstention": a.abstention} for a in self.attributes]}, sort_keys=True)


def _text(value: object, where: str) -> str:
    """`value` when it is a string that is not blank (`user_text.blank`)."""
    if not isinstance(value, str) or blank(value):
        raise InputError(f"{where}: expected a string that is not blank, got {shown(value)}")
    return value


def parse_taxonomy(raw: bytes, source: str) -> Taxonomy:
    """A Taxonomy from a file's bytes; InputError naming `source` and the field on any defect
    (bad JSON, missing keys, duplicate attributes or labels, abstention label among the labels,
    unknown abstention policy)."""
    try:
        doc = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"{source}: not a JSON taxonomy ({excerpt(str(err))})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("attributes"), list) or not doc["attributes"]:
        raise InputError(f"{source}: expected an object with a non-empty 'attributes' list")
    attributes: list[Attribute] = []
    for i, entry in enumerate(doc["attributes"]):
        where = f"{source}: attributes[{i}]"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: expected an object")
        name = _text(entry.get("name"), f"{where}.name")
        labels = entry.get("labels")
        if not isinstance(labels, list) or not labels:
            raise InputError(f"{where}.labels: expected a non-empty list of strings")
        labels = tuple(_text(label, f"{where}.labels") for label in labels)
        if len(set(labels)) != len(labels):
            raise InputError(f"{where}.labels: a label is listed twice")
        abstain = _text(entry.get("abstain", "unspecified"), f"{where}.abstain")
        if abstain in labels:
            raise InputError(f"{where}.abstain: {shown(abstain)} is also one of the labels")
        policy = entry.get("abstention", "miss")
        if policy not in ABSTENTION_POLICIES:
            raise InputError(f"{where}.abstention: expected one of {', '.join(ABSTENTION_POLICIES)}, got {shown(policy)}")
        if any(a.name == name for a in attributes):
            raise InputError(f"{where}.name: attribute {shown(name)} is listed twice")
        question = entry.get("question") or f"Which {name} does the image show?"
        attributes.append(Attribute(name, _text(question, f"{where}.question"), labels, abstain, policy))
    return Taxonomy(
        name=_text(doc.get("name", Path(source).stem), f"{source}: name"),
        version=str(doc.get("version", "")),
        attributes=tuple(attributes),
        sha256=hashlib.sha256(raw).hexdigest(),
        source=source,
    )


def load_taxonomy(path: str | Path = DEFAULT_TAXONOMY) -> Taxonomy:
    """The taxonomy in file `path` (InputError if it is not a regular file of bounded size,
    `input_files.CONFIG`, or cannot be read or parsed)."""
    return parse_taxonomy(input_files.read_bytes(path, input_files.CONFIG, what="the taxonomy"), str(path))
