"""How a judge's conditions file is read: a JSON object whose "conditions" object maps names, none
blank, to definitions. The file is a regular file of bounded size (`audit_core.ingest.input_files`, config).
Each protocol checks its own definitions (runners/labels/protocol.py, runners/rating/protocol.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from audit_core import user_text
from audit_core.errors import InputError
from audit_core.ingest import input_files

T = TypeVar("T")


def read_conditions(path: Path) -> tuple[str, dict]:
    """(the file's text, its non-empty "conditions" object, no name blank); InputError naming the file and line."""
    data = input_files.read_bytes(path, input_files.CONFIG, what="the conditions file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text ({err.reason} at byte {err.start})", file=path) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"not JSON ({err.msg})", file=path, line=err.lineno) from None
    if not isinstance(data, dict) or not isinstance(data.get("conditions"), dict) or not data["conditions"]:
        raise InputError('expected an object with a non-empty "conditions" object', file=path, field="conditions")
    for name in data["conditions"]:
        if user_text.blank(name):
            raise InputError(user_text.BLANK, file=path, line=line_of(text, name), field="conditions")
    return text, data["conditions"]


def line_of(text: str, name: str) -> int | None:
    """Line of the first `"name":` in a JSON text, for error messages."""
    spellings = {json.dumps(name, ensure_ascii=False), json.dumps(name)}  # as typed, or with \u escapes
    key = re.compile("(?:" + "|".join(map(re.escape, spellings)) + r")\s*:")
    for number, line in enumerate(text.splitlines(), 1):
        if key.search(line):
            return number
    return None


def select_named(known: Mapping[str, T], path: str | Path, names: Sequence[str]) -> list[T]:
    """The conditions `names` of `known` (read from `path`), in the order given (duplicates dropped)."""
    chosen = []
    for name in dict.fromkeys(names):
        if name not in known:
            raise InputError(f"unknown condition {user_text.shown(name)} (in {path}: {user_text.excerpt(', '.join(known))})",
                             field="--condition")
        chosen.append(known[name])
    return chosen
