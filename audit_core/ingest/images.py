"""Images at ingest: paths confined to the dataset's folder, every image fully decoded.

A relative image path names a file inside the dataset's folder (the folder of
the table or the JudgeActs artifact); absolute paths and paths that leave the
folder, through `..` or a symlink, are refused, so a table cannot make the app
read files elsewhere on the machine. An image that Pillow cannot decode is
refused at ingest rather than discovered when a page draws it; so is a path
naming a FIFO, a device or a folder, or an image larger than `input_files`'
image limit.
"""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from audit_core.errors import InputError
from audit_core.ingest import input_files
from audit_core.user_text import shown


def confined_path(text: str, folder: Path, field: str, where: dict) -> Path:
    """`folder / text` with symlinks resolved; InputError unless it stays inside `folder`."""
    if not text.strip() or any(ord(ch) < 32 for ch in text):
        raise InputError(f"expected a file path, got {shown(text)}", field=field, **where)
    if Path(text).is_absolute():
        raise InputError(f"absolute path {shown(text)}: image paths are relative to {folder}", field=field, **where)
    try:
        root = folder.resolve()
        resolved = (root / text).resolve()
    except (OSError, RuntimeError) as err:  # RuntimeError: a symlink loop
        raise InputError(f"cannot resolve {shown(text)} ({err})", field=field, **where) from err
    if not resolved.is_relative_to(root):
        raise InputError(f"{shown(text)} leads outside the dataset's folder {root}", field=field, **where)
    return resolved


def existing_file(path: Path, field: str, where: dict) -> bool:
    """Whether anything is at `path`: False when nothing is, True for a regular image file within the
    image limit, InputError for anything else there (`input_files.existing`)."""
    return input_files.existing(path, input_files.IMAGE, where=where, field=field)


def decoded_format(source: bytes | Path, field: str, where: dict) -> str:
    """Fully decode an image (bytes or a file); returns its format's file suffix ('png', 'jpg', …)."""
    if isinstance(source, bytes):
        return _decoded_format(io.BytesIO(source), field, where)
    with input_files.opened(source, input_files.IMAGE, where=where, field=field) as handle:
        return _decoded_format(handle, field, where)


def _decoded_format(source: io.IOBase, field: str, where: dict) -> str:
    try:
        with Image.open(source) as image:
            image.load()
            kind = (image.format or "").lower()
    except UnidentifiedImageError as err:
        raise InputError("image cannot be decoded (not a format Pillow knows)", field=field, **where) from err
    except Exception as err:  # Pillow raises many types for truncated or corrupt data
        raise InputError(f"image cannot be decoded ({type(err).__name__}: {err})", field=field, **where) from err
    return {"jpeg": "jpg", "": "img"}.get(kind, kind)
