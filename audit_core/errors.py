"""Errors raised for bad input: they name the file, line and field."""

from __future__ import annotations

from pathlib import Path


class InputError(ValueError):
    """Bad user input, located as precisely as the source allows.

    str(err) reads like: "runs/qwen.jsonl line 17, field 'selected_id': ...".
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.file = str(file) if file is not None else None
        self.line = line
        self.field = field
        self.message = message
        super().__init__(self._render())

    def _render(self) -> str:
        location = " ".join(p for p in (self.file, f"line {self.line}" if self.line else None) if p)
        if self.field:
            location = f"{location}, field '{self.field}'" if location else f"field '{self.field}'"
        return f"{location}: {self.message}" if location else self.message


class DatabaseFileError(InputError):
    """The database file cannot be opened as asked: str(err) is one line, "<path>: <what>"
    (not a DuckDB database, is a directory, read-only: cannot write, ...)."""

    def __init__(self, message: str, *, file: str | Path) -> None:
        super().__init__(message, file=file)


class DatabaseHeld(DatabaseFileError):
    """Another process held the database file's lock for longer than the open would wait."""
