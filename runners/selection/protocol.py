"""What a judge is shown: versioned instructions, request keys and typed requests.

A request is the prompt and the candidate images in one presentation order,
labelled A, B, C… and nothing else (no generator names, country, category or
ratings). Its key identifies the call across runs:

    request_key = sha256(json([dataset, judge, prompt_id, order_index,
                               slot_candidate_ids, instruction_sha256, manifest_sha256]))

so changing the instruction text (or contract) or the pools changes every key.

Structured output (opt-in, `structured=True`) also asks the server for JSON
constrained by `response_schema(contract, labels)`. It is a separate protocol
condition: the instruction hash becomes

    instruction_sha256 = sha256(json([sha256(instruction bytes), STRUCTURED_OUTPUT]))

so its keys and its run identity differ from the unconstrained protocol's, and
the strict parser still checks every output.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from runners.selection.parsing import CONTRACTS

INSTRUCTION_DIR = Path(__file__).resolve().parents[1] / "instructions"
# contract -> versioned instruction file; bump the version in the file name to change the text.
INSTRUCTION_FILES: dict[str, str] = {"ranking": "ranking_v1.txt", "choice": "choice_v1.txt"}
IMAGES_MARKER = "{images}"
# The version of `response_schema`'s rule, hashed into structured runs' keys: bump it when the schema changes.
STRUCTURED_OUTPUT = "json_schema_v1"


@dataclass(frozen=True)
class Instruction:
    """One versioned instruction file; `sha256` is over its exact bytes, or with `structured`
    over that hash and STRUCTURED_OUTPUT (see the module docstring).

    The text has the placeholders {prompt} and {labels} and one line {images}
    where the labelled images go.
    """

    contract: str
    file: str
    text: str
    sha256: str
    structured: bool = False

    def render(self, prompt: str, labels: Sequence[str]) -> tuple[str, str]:
        """(text before the images, text after them) for one request."""
        label_list = ", ".join(labels)
        before, marker, after = self.text.partition(IMAGES_MARKER)
        if not marker:
            raise ValueError(f"{self.file}: no {IMAGES_MARKER} line")

        def fill(part: str) -> str:
            return part.replace("{labels}", label_list).replace("{prompt}", prompt).strip()

        return fill(before), fill(after)


@cache
def load_instruction(contract: str, structured: bool = False) -> Instruction:
    """The instruction for an output contract, read from runners/instructions/, with or without structured output."""
    if contract not in CONTRACTS:
        raise ValueError(f"unknown output contract {contract!r}; expected one of {', '.join(CONTRACTS)}")
    name = INSTRUCTION_FILES[contract]
    data = (INSTRUCTION_DIR / name).read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    return Instruction(contract, name, data.decode("utf-8"), structured_sha256(sha) if structured else sha, structured)


def structured_sha256(instruction_sha256: str) -> str:
    """The hash standing for an instruction under structured output: sha256(json([its hash, STRUCTURED_OUTPUT]))."""
    return hashlib.sha256(json.dumps([instruction_sha256, STRUCTURED_OUTPUT]).encode()).hexdigest()


def response_schema(contract: str, labels: Sequence[str]) -> dict:
    """The JSON schema of a `contract` answer over `labels`: exactly its keys, each label value one of `labels`.

    Kept to the subset that strict structured-output modes accept (every key
    required, no others, string enums, no length bounds), so that a ranking
    lists every label exactly once stays the strict parser's check.
    """
    if contract not in CONTRACTS:
        raise ValueError(f"unknown output contract {contract!r}; expected one of {', '.join(CONTRACTS)}")
    label = {"type": "string", "enum": list(labels)}
    properties: dict[str, dict] = {"choice": label}
    if contract == "ranking":
        properties["ranking"] = {"type": "array", "items": label}
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def request_key(
    *,
    dataset: str,
    judge: str,
    prompt_id: str,
    order_index: int,
    slot_candidate_ids: Sequence[str],
    instruction_sha256: str,
    manifest_sha256: str,
) -> str:
    """SHA-256 identifying one call (see the module docstring for the fields)."""
    payload = [dataset, judge, prompt_id, int(order_index), list(slot_candidate_ids), instruction_sha256, manifest_sha256]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()


@dataclass(frozen=True)
class JudgeRequest:
    """One call as every backend receives it.

    `segments()` is the content in display order: the text before the images,
    then per slot the text "Image A:" and the image, then the text after
    (each on its own line).
    """

    request_key: str
    dataset: str
    prompt_id: str
    order_index: int
    prompt: str
    contract: str
    labels: tuple[str, ...]
    slot_candidate_ids: tuple[str, ...]
    image_paths: tuple[str, ...]
    text_before_images: str
    text_after_images: str
    structured: bool = False

    def output_schema(self) -> tuple[str, dict] | None:
        """(name, JSON schema) the answer is constrained to when `structured`, else None."""
        if not self.structured:
            return None
        return f"{self.contract}_{''.join(self.labels)}", response_schema(self.contract, self.labels)

    def segments(self) -> list[tuple[str, str]]:
        """[("text", str) | ("image", path), …] in the order the judge sees them."""
        # Chat templates concatenate content parts as they are, so the line breaks live in the text.
        out: list[tuple[str, str]] = [("text", self.text_before_images + "\n")]
        for j, (label, path) in enumerate(zip(self.labels, self.image_paths)):
            separator = "\n" if j else ""
            out += [("text", f"{separator}Image {label}:"), ("image", path)]
        out.append(("text", "\n" + self.text_after_images))
        return out
