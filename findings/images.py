"""Candidate images as small embedded JPEGs (data URIs) for the self-contained report.

A candidate's thumbnail beside the database (`audit_core.store.thumbnails`) is used when it is
current; otherwise the image itself is scaled in memory (nothing is written). An image
that is missing or does not decode gives None, which a gallery tile shows as "no image".
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

from PIL import Image

from audit_core.store import thumbnails

SIZE = 160  # pixels on the long edge of an embedded image


def jpeg_uri(path: str | Path, size: int = SIZE) -> str | None:
    """The image at `path` scaled to at most `size` px (aspect kept) as a JPEG data URI, None when
    it cannot be read."""
    try:
        with Image.open(path) as image:
            image.draft("RGB", (size, size))
            shown = image.convert("RGBA")
    except Exception:  # Pillow raises many types (OSError, SyntaxError, DecompressionBombError...) for bad files
        return None
    shown.thumbnail((size, size), Image.Resampling.LANCZOS)
    flat = Image.new("RGB", shown.size, "white")
    flat.paste(shown, mask=shown.getchannel("A"))
    buffer = io.BytesIO()
    flat.save(buffer, format="JPEG", quality=82)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()


def candidate_uri(db_path: str | Path | None, dataset: str, candidate_id: str, path: str | None,
                  size: int = SIZE) -> str | None:
    """The embedded image of a candidate: from its current thumbnail beside `db_path` when there is
    one, else from its image file; None without a readable image."""
    if not path or not Path(path).is_file():
        return None
    if db_path is not None:
        thumb = thumbnails.thumbnail_path(db_path, dataset, candidate_id)
        if thumbnails.is_current(path, thumb):
            uri = jpeg_uri(thumb, size)
            if uri is not None:
                return uri
    return jpeg_uri(path, size)
