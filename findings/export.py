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
from findings.output_folder import OutputFolder

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


def export_figures(figures: Sequence[Figure], out: OutputFolder, name: str) -> list[Path]:
    """Write every figure as `<name>.svg` and `<name>.png` (2× scale) into the subfolder `name` of `out`
    (made when missing); returns the paths.

    kaleido writes into a fresh folder inside it (`OutputFolder.staging`), and each file is then put in
    place by `OutputFolder`, which replaces rather than follows a link planted under its name.
    Raises ExportError naming what is missing when no browser can be found or kaleido fails,
    OutputFolderError when the subfolder is a link or not a folder, and the OSError of a file that
    could not be written (a full disk).
    """
    browser = browser_path()
    if browser is None:
        raise ExportError("no Chrome or Chromium found for kaleido: install chromium or set BROWSER_PATH")
    with out.subfolder(name) as folder, folder.staging() as staging:
        specs, names = [], []
        for figure in figures:
            height = figure.figure.layout.height or 400
            for fmt in FORMATS:
                names.append(f"{figure.name}.{fmt}")
                opts = {"format": fmt, "width": WIDTH, "height": height, **({"scale": 2} if fmt == "png" else {})}
                specs.append({"fig": figure.figure, "path": staging / names[-1], "opts": opts})
        try:
            _render(specs, browser)
        except OSError as err:  # name the figure's own path, not the staging folder's
            raise OSError(err.errno, err.strerror, str(folder.path / Path(err.filename or "").name)) from err
        return [folder.adopt(staging / file, file) for file in names]


def _render(specs: list[dict], browser: str) -> None:
    """Have kaleido write every spec's figure to its path in one browser session, driving `browser`."""
    import kaleido  # only the report's export needs it

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
    unwritten = [e for e in errors or () if isinstance(e, OSError)]
    if unwritten:
        raise unwritten[0]  # a full disk is a write that failed, told as such (`runners.command`)
    if errors:
        raise ExportError(f"kaleido could not export {len(errors)} figure(s): {errors[0]}")
