"""Image loading shared by the model backends: RGB, shrunk to fit a bounding box."""

from __future__ import annotations

from PIL import Image


def load_fitted(path: str, max_edge: int | None) -> Image.Image:
    """The image at `path` as RGB, scaled down (aspect kept) so its longer edge is ≤ `max_edge`.

    Smaller images are left at their size; `max_edge=None` keeps every size.
    """
    with Image.open(path) as opened:
        image = opened.convert("RGB")
    if max_edge is not None and max(image.size) > max_edge:
        scale = max_edge / max(image.size)
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        image = image.resize(size, Image.Resampling.BICUBIC)
    return image
