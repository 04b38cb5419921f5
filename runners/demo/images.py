"""Procedurally drawn demo images whose pixels carry a content signal.

Each prompt has a key colour (from a hash of its text). An image of latent
quality q draws a share of its shapes in that colour; `content_signal` measures
the key-colour share back from the pixels. A simulated judge or scorer thus
sees quality only through the image, the way a real judge would, and
imperfectly: drawing adds noise, and the reading is blind to the ratings.
"""

from __future__ import annotations

import colorsys
import hashlib
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

SIZE = 96
KEY_SHARE_FLOOR = 0.04  # key-colour share of an image of quality 0
KEY_SHARE_SPAN = 0.36  # added share at quality 1
KEY_TOLERANCE = 30  # max per-channel distance counted as the key colour


def key_colour(prompt: str) -> tuple[int, int, int]:
    """The prompt's key colour: a saturated hue from the hash of its text."""
    hue = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:2], "little") / 65536
    r, g, b = colorsys.hsv_to_rgb(hue, 0.9, 0.95)
    return round(r * 255), round(g * 255), round(b * 255)


def _distractor(rng: np.random.Generator, key: tuple[int, int, int]) -> tuple[int, int, int]:
    while True:
        colour = tuple(int(v) for v in rng.integers(0, 256, size=3))
        if max(abs(a - b) for a, b in zip(colour, key)) > 3 * KEY_TOLERANCE:
            return colour


def draw_image(prompt: str, quality: float, seed: int, style: int = 0) -> Image.Image:
    """A SIZE×SIZE RGB image whose key-colour share rises linearly with `quality`.

    `style` (one per generator) sets the background tone and shape vocabulary.
    """
    rng = np.random.default_rng(seed)
    key = key_colour(prompt)
    background = [(236, 232, 224), (40, 44, 52), (214, 230, 240), (245, 240, 200)][style % 4]
    image = Image.new("RGB", (SIZE, SIZE), background)
    pen = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(6, 12))):
        x0, y0 = (int(v) for v in rng.integers(0, SIZE - 16, size=2))
        w, h = (int(v) for v in rng.integers(10, 40, size=2))
        box = (x0, y0, min(SIZE - 1, x0 + w), min(SIZE - 1, y0 + h))
        kind = (style + int(rng.integers(0, 3))) % 3
        fill = _distractor(rng, key)
        if kind == 0:
            pen.ellipse(box, fill=fill)
        elif kind == 1:
            pen.rectangle(box, fill=fill)
        else:
            pen.pieslice(box, start=int(rng.integers(0, 180)), end=int(rng.integers(200, 360)), fill=fill)
    # The key colour goes in last as one band (wrapping at the edge), so its share is exact.
    rows = round(SIZE * (KEY_SHARE_FLOOR + KEY_SHARE_SPAN * float(np.clip(quality, 0, 1))))
    band_rows = (int(rng.integers(0, SIZE)) + np.arange(rows)) % SIZE
    pixels = np.asarray(image).copy()
    pixels[band_rows, :, :] = key
    return Image.fromarray(pixels)


def content_signal(image_path: str | Path, prompt: str) -> float:
    """Quality read back from pixels: (key-colour share − floor) / span, in [0, 1]."""
    pixels = np.asarray(Image.open(image_path).convert("RGB"), dtype=np.int16)
    key = np.array(key_colour(prompt), dtype=np.int16)
    share = float((np.abs(pixels - key).max(axis=2) <= KEY_TOLERANCE).mean())
    return float(np.clip((share - KEY_SHARE_FLOOR) / KEY_SHARE_SPAN, 0.0, 1.0))
