"""How a judge's instruction file is read: a header of `key: value` lines, a `---` line, then the
text the judge sees, with placeholder tokens standing alone on their lines; and how that text
becomes content parts. The file is a regular file of bounded size (`audit_core.ingest.input_files`, config). Each protocol keeps its own keys and checks (runners/labels/protocol.py,
runners/rating/protocol.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from audit_core.errors import InputError
from audit_core.ingest import input_files
from audit_core.user_text import shown

HEADER_END = "---"


@dataclass(frozen=True)
class InstructionFile:
    """An instruction file as read: its exact bytes, header values and their line numbers, and the text."""

    path: Path
    data: bytes
    header: dict[str, str]
    where: dict[str, int]  # header key -> its line number
    body: tuple[str, ...]
    body_start: int  # the file line number of body[0]

    def token_lines(self, token: str) -> list[int]:
        """File lines where `token` stands alone; InputError if it also appears inside another line."""
        at = [self.body_start + i for i, line in enumerate(self.body) if line.strip() == token]
        stray = [self.body_start + i for i, line in enumerate(self.body) if token in line and line.strip() != token]
        if stray:
            raise InputError(f"{token} must stand alone on its line", file=self.path, line=stray[0], field=token)
        return at


def read_instruction_file(
    path: str | Path, keys: Sequence[str], needs: Mapping[str, Sequence[str]] | None = None
) -> InstructionFile:
    """Read the file at `path`: every key of `keys` once in its header, none other, each value holding
    the tokens `needs` gives for its key; InputError naming the file, line and field."""
    path = Path(path)
    needs = needs or {}
    data = input_files.read_bytes(path, input_files.CONFIG, what="the instruction file")
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text ({err.reason})", file=path) from None
    if HEADER_END not in lines:
        raise InputError(f"no '{HEADER_END}' line ending the header ({', '.join(keys)})", file=path)
    end = lines.index(HEADER_END)
    header: dict[str, str] = {}
    where: dict[str, int] = {}
    for number, line in enumerate(lines[:end], 1):
        key, colon, value = line.partition(":")
        key = key.strip()
        if not colon or key not in keys:
            raise InputError(f"expected 'key: value' with a key among {', '.join(keys)}, got {shown(line)}",
                             file=path, line=number, field=key or None)
        if key in header:
            raise InputError(f"{shown(key)} given twice", file=path, line=number, field=key)
        header[key], where[key] = value.strip(), number
        absent = [token for token in needs.get(key, ()) if token not in header[key]]
        if absent:
            raise InputError(f"{key} must contain {' and '.join(absent)}", file=path, line=number, field=key)
    missing = [k for k in keys if k not in header]
    if missing:
        raise InputError(f"header lacks {', '.join(missing)}", file=path, field=missing[0])
    return InstructionFile(path, data, header, where, tuple(lines[end + 1:]), end + 2)


class ContentParts:
    """Content in display order, built line by line: consecutive text lines make one text part, an
    image its own part. Chat templates concatenate parts as they are, so line breaks live in the text:
    text after an image starts with one."""

    def __init__(self) -> None:
        self._parts: list[tuple[str, str]] = []
        self._lines: list[str] = []

    def line(self, text: str) -> None:
        """Add one text line."""
        self._lines.append(text)

    def image(self, candidate_id: str) -> None:
        """Add the image of `candidate_id` after the text so far."""
        self._flush()
        self._parts.append(("image", candidate_id))

    def content(self) -> tuple[tuple[str, str], ...]:
        """("text", text) | ("image", candidate id) parts, in order."""
        self._flush()
        return tuple(self._parts)

    def _flush(self) -> None:
        if self._lines:
            text = "\n".join(self._lines)
            self._parts.append(("text", "\n" + text if self._parts and self._parts[-1][0] == "image" else text))
            self._lines.clear()
