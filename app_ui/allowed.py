"""Which databases the app may open: the ones the person who started it allowed, nothing else.

Allowed are the files named when the app was started (`streamlit run app.py --
--db PATH [--db PATH ...] [--data-dir DIR]`, and $JUDGE_AUDIT_DB) and the
`.duckdb` files inside the data folder (`--data-dir`, else $JUDGE_AUDIT_DATA_DIR,
else `data/`), symlinks included only when they point inside it. Each has a
name: its path inside the data folder, else its file name. A page or a link
names a database by that name, or by a path that resolves to an allowed file;
anything else is refused before any file is opened. Pure: no Streamlit.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath

DB_ENV = "JUDGE_AUDIT_DB"
DATA_DIR_ENV = "JUDGE_AUDIT_DATA_DIR"
DEFAULT_DATA_DIR = "data"
DEMO = "demo.duckdb"
SUFFIX = ".duckdb"


class Refused(ValueError):
    """A database the app may not open; str(err) says why without saying what is on disk."""


@dataclass(frozen=True)
class Allowance:
    """What the person who started the app allowed: named files, in order, and one data folder."""

    files: tuple[Path, ...]
    data_dir: Path


def allowance(argv: Sequence[str], environ: Mapping[str, str]) -> Allowance:
    """The allowance from the script's arguments (`--db`, repeatable; `--data-dir`) and environment.

    Arguments the app does not know are ignored (under a test runner the script
    sees the runner's own arguments).
    """
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--db", action="append", default=[])
    parser.add_argument("--data-dir")
    args, _ = parser.parse_known_args(list(argv))
    files = [*args.db, *([environ[DB_ENV]] if environ.get(DB_ENV) else [])]
    data_dir = args.data_dir or environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR
    return Allowance(tuple(Path(f) for f in files), Path(data_dir))


def databases(allowed: Allowance) -> dict[str, Path]:
    """name → resolved path of every database the app may open: the named files first (listed
    even when missing, so the page can say so), then the data folder's `.duckdb` files by name."""
    root = allowed.data_dir.resolve()
    found: dict[str, Path] = {}
    for given in allowed.files:
        real = _real(given)
        if real is None or real in found.values():
            continue
        name = _inside(real, root) or real.name
        found[_unique(name, found)] = real
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for file in sorted(f for f in files if f.endswith(SUFFIX)):
            link = Path(folder) / file
            real = _real(link)
            if real is None or real.suffix != SUFFIX or _inside(real, root) is None or not real.is_file():
                continue  # a symlink pointing out of the data folder, or to another kind of file
            if real not in found.values():
                found[_unique(link.relative_to(root).as_posix(), found)] = real
    return found


def default_name(found: Mapping[str, Path], allowed: Allowance) -> str | None:
    """The database opened when the page names none: the first named file, else the data
    folder's demo, else its first database; None when there is none at all."""
    if allowed.files:
        return next(iter(found))
    if DEMO in found:
        return DEMO
    return next(iter(found), None)


def database_name(value: str, found: Mapping[str, Path]) -> str:
    """The name of the allowed database that `value` names: a name, or a path that resolves
    (from the app's working folder, symlinks followed) to an allowed file. Refused otherwise."""
    if value in found:
        return value
    if PurePath(value).suffix != SUFFIX:
        raise Refused(f"only {SUFFIX} databases can be opened")
    real = _real(Path(value))
    for name, path in found.items():
        if path == real:
            return name
    if ".." in PurePath(value).parts:
        raise Refused("a path leaving the data folder is not allowed")
    raise Refused("not one of the databases this app was started with")


def _real(path: Path) -> Path | None:
    """`path` made absolute with every symlink followed; None when that fails (a loop, a NUL byte)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError, ValueError):
        return None


def _inside(path: Path, root: Path) -> str | None:
    """`path` relative to `root` (POSIX), or None when it lies outside."""
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else None


def _unique(name: str, taken: Mapping[str, Path]) -> str:
    """`name`, or `name (2)`, `name (3)`... when already taken by another file."""
    candidate, k = name, 1
    while candidate in taken:
        k += 1
        candidate = f"{name} ({k})"
    return candidate
