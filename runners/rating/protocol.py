"""What a rating judge is shown: rubric instructions, conditions, typed requests and their keys.

A rating request is one item (a candidate image) with its prompt, under one
condition, and nothing else (no generator name, country, category or ratings
of the item). A rubric instruction file starts with a header that the loader
parses, then `---`, then the text the judge sees:

    scale: 1-5                       integer points lo-hi
    abstain: unspecified             the abstention label, or `none` (abstaining not allowed)
    outcome: alignment               the ratings outcome the rubric rates (demonstrations use its consensus)
    language: en                     the language of the text
    example: Example {n}. Prompt: "{prompt}"   the line introducing demonstration n and its image
    example_answer: Rating: {rating}           the line after that image
    ---
    {persona}      (own line; dropped when the condition has no persona)
    ... rubric text with anchors ...
    {examples}     (own line; the demonstrations, or dropped when none)
    ... text with {prompt} ...
    {image}        (own line, once: the item's image)
    ... closing text ...

A condition (a versioned JSON file, runners/conditions/) names a persona text,
a prompt language (another language reads the translation `<stem>.<language><suffix>`
beside the instruction file, which must keep its scale and outcome) and
optional demonstrations (`{"pool": NAME, "k": K}`). Its key:

    request_key = sha256(json(["rater", dataset, judge, condition, candidate_id,
                               manifest_sha256, instruction_sha256, condition_sha256, content]))

where `content` is every text part shown verbatim (instruction, persona,
demonstration lines with their ratings, prompt) and every image as its
candidate id, in order: any change in what reaches the model changes the key
of exactly the calls it reaches.

Structured output (opt-in) also asks the server for `{"rating": n}` with n
on the scale or the abstention label (`rating_response_schema`); it is a
separate protocol condition, hashed as for selectors
(`runners.selection.protocol.structured_sha256` of the instruction's hash).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from audit_core.errors import InputError
from runners.rating.parsing import RATING_KEY, Scale
from runners.recording.condition_files import line_of, read_conditions, select_named
from runners.recording.instruction_files import ContentParts, read_instruction_file
from runners.selection.protocol import structured_sha256

INSTRUCTION_DIR = Path(__file__).resolve().parents[1] / "instructions"
DEFAULT_INSTRUCTION = INSTRUCTION_DIR / "rubric_1to5_v1.txt"
DEFAULT_CONDITIONS = Path(__file__).resolve().parents[1] / "conditions" / "default_v1.json"
DEFAULT_CONDITION = "default"
HEADER_KEYS: tuple[str, ...] = ("scale", "abstain", "outcome", "language", "example", "example_answer")
CONDITION_KEYS: frozenset[str] = frozenset({"description", "persona", "language", "demonstrations"})
_SCALE = re.compile(r"\A(-?[0-9]+)-(-?[0-9]+)\Z")

Content = tuple[tuple[str, str], ...]  # ("text", text) | ("image", candidate id), in display order


@dataclass(frozen=True)
class Demonstration:
    """One in-context example: an item other than the one rated, with a pool's consensus on the scale."""

    candidate_id: str
    prompt: str
    rating: int


@dataclass(frozen=True)
class RubricInstruction:
    """One rubric instruction file; `sha256` is over its exact bytes (header included), or with
    `structured` the `structured_sha256` of that hash."""

    file: Path
    body: tuple[str, ...]
    sha256: str
    scale: Scale
    outcome: str
    language: str
    example: str
    example_answer: str
    structured: bool = False

    def translation(self, language: str) -> RubricInstruction:
        """This instruction in `language`: itself, or `<stem>.<language><suffix>` beside it (same scale and outcome)."""
        if language == self.language:
            return self
        path = self.file.with_name(f"{self.file.stem}.{language}{self.file.suffix}")
        if not path.is_file():
            raise InputError(
                f"no {language!r} translation of {self.file.name} (expected {path})", file=self.file, field="language"
            )
        other = load_rubric(path, structured=self.structured)
        if other.language != language:
            raise InputError(f"language {other.language!r}, expected {language!r}", file=path, field="language")
        if other.outcome != self.outcome:
            raise InputError(f"outcome {other.outcome!r} differs from {self.file.name}'s {self.outcome!r}",
                             file=path, field="outcome")
        if (other.scale.lo, other.scale.hi) != (self.scale.lo, self.scale.hi):
            raise InputError(f"scale {other.scale.lo}-{other.scale.hi} differs from {self.file.name}'s "
                             f"{self.scale.lo}-{self.scale.hi}", file=path, field="scale")
        return other

    def render(self, prompt: str, candidate_id: str, persona: str, demonstrations: Sequence[Demonstration]) -> Content:
        """What the judge sees for one item, in order (see the module docstring for the placeholders)."""
        content = ContentParts()
        for line in self.body:
            token = line.strip()
            if token == "{persona}":
                if persona:
                    content.line(persona)
            elif token == "{examples}":
                for n, demo in enumerate(demonstrations, 1):
                    content.line(self.example.replace("{n}", str(n)).replace("{prompt}", demo.prompt))
                    content.image(demo.candidate_id)
                    content.line(self.example_answer.replace("{rating}", str(demo.rating)))
            elif token == "{image}":
                content.image(candidate_id)
            else:
                content.line(line.replace("{prompt}", prompt))
        return content.content()


def load_rubric(path: str | Path, structured: bool = False) -> RubricInstruction:
    """Read and check a rubric instruction file, with or without structured output; InputError naming the
    file, line and field."""
    file = read_instruction_file(path, HEADER_KEYS)
    path, header, where = file.path, file.header, file.where
    match = _SCALE.match(header["scale"])
    if match is None or int(match.group(1)) >= int(match.group(2)):
        raise InputError(f"scale {header['scale']!r} is not 'lo-hi' with integers lo < hi",
                         file=path, line=where["scale"], field="scale")
    for key, needed in (("example", "{prompt}"), ("example_answer", "{rating}")):
        if needed not in header[key]:
            raise InputError(f"{key} must contain {needed}", file=path, line=where[key], field=key)
    for token, allowed in (("{image}", (1,)), ("{persona}", (0, 1)), ("{examples}", (0, 1))):
        at = file.token_lines(token)
        if len(at) not in allowed:
            raise InputError(f"{token} must appear {' or '.join(map(str, allowed))} time(s), found {len(at)}",
                             file=path, line=at[1] if len(at) > 1 else None, field=token)
    abstain = None if header["abstain"].lower() == "none" else header["abstain"]
    sha = hashlib.sha256(file.data).hexdigest()
    return RubricInstruction(
        file=path,
        body=file.body,
        sha256=structured_sha256(sha) if structured else sha,
        scale=Scale(int(match.group(1)), int(match.group(2)), abstain),
        outcome=header["outcome"],
        language=header["language"],
        example=header["example"],
        example_answer=header["example_answer"],
        structured=structured,
    )


def rating_response_schema(scale: Scale) -> dict:
    """The JSON schema of `{"rating": r}`: r an integer lo..hi, or the abstention label when the scale has one."""
    points = {"type": "integer", "enum": list(range(scale.lo, scale.hi + 1))}
    rating = points if scale.abstain is None else {"anyOf": [points, {"type": "string", "enum": [scale.abstain]}]}
    return {"type": "object", "properties": {RATING_KEY: rating}, "required": [RATING_KEY],
            "additionalProperties": False}


@dataclass(frozen=True)
class DemonstrationSpec:
    """k demonstrations with pool `pool`'s consensus."""

    pool: str
    k: int


@dataclass(frozen=True)
class Condition:
    """One named condition of a conditions file; `sha256` is over its definition (canonical JSON)."""

    name: str
    persona: str
    language: str
    demonstrations: DemonstrationSpec | None
    description: str
    sha256: str


def load_conditions(path: str | Path) -> dict[str, Condition]:
    """Every condition of a conditions file by name; InputError naming the file, line and field."""
    path = Path(path)
    text, specs = read_conditions(path)
    conditions: dict[str, Condition] = {}
    for name, spec in specs.items():
        at = f"conditions.{name}"

        def fail(message: str, fld: str = at) -> None:
            raise InputError(message, file=path, line=line_of(text, name), field=fld)

        if not name.strip():
            fail("a condition needs a non-empty name")
        if not isinstance(spec, dict):
            fail(f"expected an object, got {type(spec).__name__}")
        unknown = sorted(set(spec) - CONDITION_KEYS)
        if unknown:
            fail(f"unknown key {unknown[0]!r} (allowed: {', '.join(sorted(CONDITION_KEYS))})", f"{at}.{unknown[0]}")
        for key in ("persona", "language", "description"):
            if not isinstance(spec.get(key, ""), str):
                fail(f"{key} must be a string", f"{at}.{key}")
        language = spec.get("language", "en")
        if not language:
            fail("language must not be empty", f"{at}.language")
        demos = spec.get("demonstrations")
        if demos is not None:
            if not isinstance(demos, dict) or set(demos) != {"pool", "k"}:
                fail('demonstrations must be {"pool": NAME, "k": K} or null', f"{at}.demonstrations")
            if not isinstance(demos["pool"], str) or not demos["pool"]:
                fail("pool must be a non-empty string", f"{at}.demonstrations.pool")
            if isinstance(demos["k"], bool) or not isinstance(demos["k"], int) or demos["k"] < 1:
                fail(f"k must be a positive integer, got {demos['k']!r}", f"{at}.demonstrations.k")
        definition = {"persona": spec.get("persona", ""), "language": language, "demonstrations": demos}
        conditions[name] = Condition(
            name=name,
            persona=definition["persona"],
            language=language,
            demonstrations=DemonstrationSpec(demos["pool"], demos["k"]) if demos else None,
            description=spec.get("description", ""),
            sha256=hashlib.sha256(json.dumps(definition, sort_keys=True, ensure_ascii=False).encode()).hexdigest(),
        )
    return conditions


def select_conditions(path: str | Path, names: Sequence[str]) -> list[Condition]:
    """The named conditions of the file at `path`, in the order given (duplicates dropped)."""
    return select_named(load_conditions(path), path, names)


def rating_request_key(
    *,
    dataset: str,
    judge: str,
    condition: str,
    candidate_id: str,
    manifest_sha256: str,
    instruction_sha256: str,
    condition_sha256: str,
    content: Content,
) -> str:
    """SHA-256 identifying one rating call (see the module docstring for the fields)."""
    payload = ["rater", dataset, judge, condition, candidate_id, manifest_sha256, instruction_sha256,
               condition_sha256, [list(part) for part in content]]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()


@dataclass(frozen=True)
class RatingRequest:
    """One rating call as every backend receives it.

    `segments()` and `image_paths` are the interface the text-and-image
    backends (hf, openai) consume, as for a selector's `JudgeRequest`; the
    other fields say what the call is about (the simulated rater reads them).
    """

    request_key: str
    dataset: str
    candidate_id: str
    condition: str
    prompt: str
    scale: Scale
    content: Content
    image_files: tuple[tuple[str, str], ...]  # (candidate id, image path) of every image shown
    demonstration_pool: str | None = None
    structured: bool = False

    def output_schema(self) -> tuple[str, dict] | None:
        """(name, JSON schema) the answer is constrained to when `structured`, else None."""
        if not self.structured:
            return None
        return f"rating_{self.scale.lo}_to_{self.scale.hi}", rating_response_schema(self.scale)

    def segments(self) -> list[tuple[str, str]]:
        """[("text", str) | ("image", path), …] in the order the judge sees them."""
        paths = dict(self.image_files)
        return [(kind, paths[value] if kind == "image" else value) for kind, value in self.content]

    @property
    def image_paths(self) -> tuple[str, ...]:
        """The image files in the order shown (demonstrations first, the rated item last)."""
        return tuple(value for kind, value in self.segments() if kind == "image")


@runtime_checkable
class RatingBackend(Protocol):
    """A judge that sees a rating request's text and images and answers in text."""

    def generate(self, request: RatingRequest) -> str:
        """Raw output text; raise on runtime failure (the recorder retries once). Thread-safe."""
        ...

    def model_revision(self) -> str | None:
        """Exact revision of the model weights or endpoint, if known."""
        ...
