"""Small JPEG copies of candidate images, kept beside the database, so grids of real photographs stay fast.

A candidate's thumbnail lives at `<db folder>/<db stem>_thumbs/<dataset>/<candidate id>.jpg`
(a dataset or id that is not a safe file name is replaced by a hash of it). It is
the image scaled to at most `size` pixels on its long edge (aspect kept, never
enlarged), made at ingest and by the app when missing; one whose source image is
newer is made again.

Nothing is written outside the thumbnail folder: `<db stem>_thumbs` and `<dataset>` are
reached without following links (`audit_core.store.owned_files`), so when either is a link (or
a file) no thumbnail is made there (OSError; the app then shows the image itself). A
thumbnail is written under a fresh name and renamed into place, which replaces a link
planted at its name instead of writing through it. A thumbnail counts as current only
when it is a regular file of bounded size (not a link, FIFO, device or folder), so one
is never read from anything else.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

from PIL import Image

from audit_core.ingest.culturalframes import file_stem
from audit_core.store import owned_files

THUMBNAIL_SIZE = 256
MAX_THUMBNAIL_BYTES = 8 << 20  # a 256 px JPEG is tens of kilobytes; anything far larger is not one of ours


def thumbnail_folder(db_path: str | Path, dataset: str) -> Path:
    """The folder holding the thumbnails of `dataset` in the database `db_path`."""
    db = Path(db_path)
    return db.with_name(f"{db.stem}_thumbs") / file_stem(dataset)


def thumbnail_path(db_path: str | Path, dataset: str, candidate_id: str) -> Path:
    """Where the thumbnail of `candidate_id` in `dataset` of the database `db_path` is kept."""
    return thumbnail_folder(db_path, dataset) / f"{file_stem(candidate_id)}.jpg"


def _folder(dst: Path) -> tuple[Path, list[str]]:
    """(the database's folder, [`<db stem>_thumbs`, `<dataset>`]) for a thumbnail path of `thumbnail_path`'s layout."""
    return dst.parent.parent.parent, [dst.parent.parent.name, dst.parent.name]


def make_thumbnail(src: str | Path, dst: str | Path, size: int = THUMBNAIL_SIZE) -> Path:
    """Write `src` as a JPEG at most `size` px on its long edge to `dst` (atomically); returns `dst`.

    `dst` is laid out as `thumbnail_path` lays it out: its folder and the one above it are
    made when missing and must not be links (module docstring). Transparency is flattened
    onto white. Raises OSError (or Pillow's errors) when `src` cannot be decoded or `dst`
    cannot be written there; a failed write leaves no file.
    """
    dst = Path(dst)
    with Image.open(src) as image:
        image.draft("RGB", (size, size))  # JPEG: decode at a reduced scale, much faster for photographs
        shown = image.convert("RGBA")
    shown.thumbnail((size, size), Image.Resampling.LANCZOS)
    flat = Image.new("RGB", shown.size, "white")
    flat.paste(shown, mask=shown.getchannel("A"))
    encoded = io.BytesIO()
    flat.save(encoded, format="JPEG", quality=85)
    base, names = _folder(dst)
    with owned_files.owned_folder(base, names, create=True) as folder:
        owned_files.replace_file(folder, dst.name, encoded.getvalue())
    return dst


def is_current(src: str | Path, dst: str | Path) -> bool:
    """Whether the thumbnail `dst` is a regular file of bounded size in a folder that is not a link
    (module docstring), not older than its source image `src`."""
    dst = Path(dst)
    try:
        base, names = _folder(dst)
        with owned_files.owned_folder(base, names) as folder:
            thumb = owned_files.regular_stat(folder, dst.name)
        return (thumb is not None and thumb.st_size <= MAX_THUMBNAIL_BYTES
                and thumb.st_mtime >= Path(src).stat().st_mtime)
    except OSError:
        return False


def make_thumbnails(db_path: str | Path, dataset: str, images: Mapping[str, str]) -> dict[str, int]:
    """Make the thumbnail of every candidate in `images` (candidate id → image file) that has
    none or an older one; returns the counts {"made", "current", "failed"}.

    A failure (an unwritable folder, an image gone since ingest) is counted, not
    raised: thumbnails are a cache the app remakes when it finds one missing.
    """
    counts = {"made": 0, "current": 0, "failed": 0}
    for candidate_id, src in images.items():
        dst = thumbnail_path(db_path, dataset, candidate_id)
        if is_current(src, dst):
            counts["current"] += 1
            continue
        try:
            make_thumbnail(src, dst)
            counts["made"] += 1
        except Exception:  # Pillow raises many types for unreadable files; the app shows the full image instead
            counts["failed"] += 1
    return counts
