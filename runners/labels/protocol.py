"""What an attribute judge is shown: the instruction built from a taxonomy, conditions, requests and keys.

A label request is one image (a candidate) and nothing else (no prompt, generator, gold
label or rating), with one instruction that asks every attribute of a taxonomy at once.
An instruction file starts with a header of line templates, then `---`, then the text:

    attribute: - {name}: {question}          one line per attribute, in taxonomy order
    labels: Answer with one of: {labels}.    appended to it when the condition lists labels
    abstain: If ..., answer {abstain}.       appended when the condition offers abstention
    label: "{label}"                         how one label is written ({labels}: joined by ", ")
    ---
    ... text ...
    {image}        (own line, once: the image)
    {attributes}   (own line, once: the attribute lines)
    ... text, where {keys} is the attribute names as JSON strings joined by ", " ...

A condition (runners/conditions/attributes_v1.json) says whether the label lists
(`label_list`) and the abstention option (`abstention`) are shown; `default`,
`no_label_list` and `no_unspecified` are the published ablations. Its key:

    request_key = sha256(json(["labeler", dataset, judge, model, condition, candidate_id,
                               manifest_sha256, instruction_sha256, condition_sha256,
                               taxonomy_sha256, content]))

where `content` is every text part shown verbatim and the image as its candidate id, in
order: a change of instruction, condition, taxonomy, model or image changes exactly the
keys it reaches.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from audit_core.attributes.taxonomy import Taxonomy
from audit_core.errors import InputError
from runners.recording.condition_files import line_of, read_conditions, select_named
from runners.recording.instruction_files import ContentParts, read_instruction_file

DEFAULT_INSTRUCTION = Path(__file__).resolve().parents[1] / "instructions" / "attributes_v1.txt"
DEFAULT_CONDITIONS = Path(__file__).resolve().parents[1] / "conditions" / "attributes_v1.json"
DEFAULT_CONDITION = "default"
HEADER_KEYS: tuple[str, ...] = ("attribute", "labels", "abstain", "label")
HEADER_NEEDS: dict[str, tuple[str, ...]] = {
    "attribute": ("{name}", "{question}"), "labels": ("{labels}",), "abstain": ("{abstain}",), "label": ("{label}",),
}
CONDITION_KEYS: frozenset[str] = frozenset({"description", "label_list", "abstention"})

Content = tuple[tuple[str, str], ...]  # ("text", text) | ("image", candidate id), in display order


@dataclass(frozen=True)
class LabelCondition:
    """One named condition; `sha256` is over its definition (label_list, abstention) as canonical JSON."""

    name: str
    label_list: bool
    abstention: bool
    description: str
    sha256: str


@dataclass(frozen=True)
class LabelInstruction:
    """One attribute instruction file; `sha256` is over its exact bytes (header included)."""

    file: Path
    header: dict[str, str]
    body: tuple[str, ...]
    sha256: str

    def attribute_lines(self, taxonomy: Taxonomy, condition: LabelCondition) -> list[str]:
        """One line per attribute: its question, then its labels and abstention option as the condition shows them."""

        def quoted(label: str) -> str:
            return self.header["label"].replace("{label}", label)

        lines = []
        for a in taxonomy.attributes:
            parts = [self.header["attribute"].replace("{name}", a.name).replace("{question}", a.question)]
            if condition.label_list:
                parts.append(self.header["labels"].replace("{labels}", ", ".join(quoted(x) for x in a.labels)))
            if condition.abstention:
                parts.append(self.header["abstain"].replace("{abstain}", quoted(a.abstain)))
            lines.append(" ".join(parts))
        return lines

    def render(self, taxonomy: Taxonomy, condition: LabelCondition, candidate_id: str) -> Content:
        """What the judge sees for one image, in order (see the module docstring for the placeholders)."""
        keys = ", ".join(json.dumps(name, ensure_ascii=False) for name in taxonomy.names())
        content = ContentParts()
        for line in self.body:
            token = line.strip()
            if token == "{image}":
                content.image(candidate_id)
            elif token == "{attributes}":
                for text in self.attribute_lines(taxonomy, condition):
                    content.line(text)
            else:
                content.line(line.replace("{keys}", keys))
        return content.content()


def load_label_instruction(path: str | Path = DEFAULT_INSTRUCTION) -> LabelInstruction:
    """Read and check an attribute instruction file; InputError naming the file, line and field."""
    file = read_instruction_file(path, HEADER_KEYS, HEADER_NEEDS)
    for token in ("{image}", "{attributes}"):
        at = file.token_lines(token)
        if len(at) != 1:
            raise InputError(f"{token} must appear once, found {len(at)}", file=file.path,
                             line=at[1] if len(at) > 1 else None, field=token)
    return LabelInstruction(file.path, file.header, file.body, hashlib.sha256(file.data).hexdigest())


def load_label_conditions(path: str | Path = DEFAULT_CONDITIONS) -> dict[str, LabelCondition]:
    """Every condition of a conditions file by name (label_list and abstention default to true);
    InputError naming the file, line and field."""
    path = Path(path)
    text, specs = read_conditions(path)
    conditions: dict[str, LabelCondition] = {}
    for name, spec in specs.items():
        at = f"conditions.{name}"
        where = {"file": path, "line": line_of(text, name)}
        if not name.strip():
            raise InputError("a condition needs a non-empty name", field=at, **where)
        if not isinstance(spec, dict):
            raise InputError(f"expected an object, got {type(spec).__name__}", field=at, **where)
        unknown = sorted(set(spec) - CONDITION_KEYS)
        if unknown:
            raise InputError(f"unknown key {unknown[0]!r} (allowed: {', '.join(sorted(CONDITION_KEYS))})",
                             field=f"{at}.{unknown[0]}", **where)
        for key in ("label_list", "abstention"):
            if not isinstance(spec.get(key, True), bool):
                raise InputError(f"{key} must be true or false, got {spec[key]!r}", field=f"{at}.{key}", **where)
        if not isinstance(spec.get("description", ""), str):
            raise InputError("description must be a string", field=f"{at}.description", **where)
        definition = {"label_list": spec.get("label_list", True), "abstention": spec.get("abstention", True)}
        conditions[name] = LabelCondition(
            name=name, description=spec.get("description", ""), **definition,
            sha256=hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest(),
        )
    return conditions


def select_label_conditions(path: str | Path, names: Sequence[str]) -> list[LabelCondition]:
    """The named conditions of the file at `path`, in the order given (duplicates dropped)."""
    return select_named(load_label_conditions(path), path, names)


def label_request_key(
    *,
    dataset: str,
    judge: str,
    model: str,
    condition: str,
    candidate_id: str,
    manifest_sha256: str,
    instruction_sha256: str,
    condition_sha256: str,
    taxonomy_sha256: str,
    content: Content,
) -> str:
    """SHA-256 identifying one labeler call (see the module docstring for the fields)."""
    payload = ["labeler", dataset, judge, model, condition, candidate_id, manifest_sha256, instruction_sha256,
               condition_sha256, taxonomy_sha256, [list(part) for part in content]]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()


@dataclass(frozen=True)
class LabelRequest:
    """One labeler call as every backend receives it.

    `segments()` and `image_paths` are what the text-and-image backends (hf, openai)
    consume, as for a selector's `JudgeRequest`; the other fields say what the call is
    about (the simulated labeler and the CLIP zero-shot backend read them).
    """

    request_key: str
    dataset: str
    candidate_id: str
    condition: str
    taxonomy: Taxonomy
    label_list: bool
    abstention: bool
    content: Content
    image_path: str

    def segments(self) -> list[tuple[str, str]]:
        """[("text", str) | ("image", path), …] in the order the judge sees them."""
        return [(kind, self.image_path if kind == "image" else value) for kind, value in self.content]

    @property
    def image_paths(self) -> tuple[str, ...]:
        """The one image shown."""
        return (self.image_path,)


@runtime_checkable
class LabelBackend(Protocol):
    """A judge that sees a label request's text and image and answers in text."""

    def generate(self, request: LabelRequest) -> str:
        """Raw output text; raise on runtime failure (the recorder retries once). Thread-safe."""
        ...

    def model_revision(self) -> str | None:
        """Exact revision of the model weights or endpoint, if known."""
        ...
