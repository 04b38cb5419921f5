"""Static export of the report's figures as SVG and PNG, by kaleido driving a Chromium browser.

kaleido (pinned in requirements.txt) finds Chrome or Chromium on PATH, or the browser named
by `BROWSER_PATH`; where none is on PATH, `SYSTEM_CHROMIUM` is used when it exists. MathJax
is switched off so nothing is fetched: the export works offline. All figures go through one
browser session.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from findings.blocks import Figure

SYSTEM_CHROMIUM = "/usr/bin/chromium"
FORMATS = ("svg", "png")
WIDTH = 1000  # pixels; each figure keeps its own height


class ExportError(RuntimeError):
    """The figures could not be exported (no browser, or the browser failed)."""


def browser_path() -> str | None:
    """The browser kaleido will drive: `BROWSER_PATH`, else Chrome/Chromium on PATH, else the system Chromium."""
    if os.environ.get("BROWSER_PATH"):
        return os.environ["BROWSER_PATH"]
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return SYSTEM_CHROMIUM if Path(SYSTEM_CHROMIUM).is_file() else None


def export_figures(figures: Sequence[Figure], folder: Path) -> list[Path]:
    """Write every figure as `<name>.svg` and `<name>.png` (2× scale) into `folder`; returns the paths.

    Raises ExportError naming what is missing when no browser can be found or kaleido fails.
    """
    import kaleido  # only the report's export needs it

    browser = browser_path()
    if browser is None:
        raise ExportError("no Chrome or Chromium found for kaleido: install chromium or set BROWSER_PATH")
    folder.mkdir(parents=True, exist_ok=True)
    specs, paths = [], []
    for figure in figures:
        height = figure.figure.layout.height or 400
        for fmt in FORMATS:
            path = folder / f"{figure.name}.{fmt}"
            opts = {"format": fmt, "width": WIDTH, "height": height, **({"scale": 2} if fmt == "png" else {})}
            specs.append({"fig": figure.figure, "path": path, "opts": opts})
            paths.append(path)
    previous = os.environ.get("BROWSER_PATH")
    os.environ["BROWSER_PATH"] = browser  # choreographer reads it when it launches the browser
    try:
        errors = kaleido.write_fig_from_object_sync(specs, kopts={"mathjax": False})
    except Exception as err:  # choreographer and kaleido raise their own types for a browser that fails
        raise ExportError(f"kaleido could not export the figures with {browser}: {err}") from err
    finally:
        if previous is None:
            os.environ.pop("BROWSER_PATH", None)
        else:
            os.environ["BROWSER_PATH"] = previous
    if errors:
        raise ExportError(f"kaleido could not export {len(errors)} figure(s): {errors[0]}")
    return paths
