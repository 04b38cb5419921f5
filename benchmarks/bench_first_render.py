"""Time the overview's first render in a real browser: navigation to headline cards with intervals.

    python -m benchmarks.bench_first_render [--demo data/demo.duckdb] [--synthetic 100000]
                                            [--repeat 3] [--no-cold] [--script serve.py|app.py]

For each database a `streamlit run serve.py -- --db DB` server (the app with its warm start,
as scripts/app.sh serves it; `--script app.py` without) is started on 127.0.0.1 and headless
Chromium opens `?page=overview&dataset=...`; the figure is the time from
the navigation's start to the first frame painted with the focus judge's "Gain over random"
card showing its interval (`[lo, hi]`): a script installed before the page loads watches the
DOM and stamps `performance.now()` in the next animation frame. Also printed: the time until
the page has every chart drawn and its script has finished ("all", polled from outside).
Each "first" figure is on a fresh server process, so nothing is in the app's memory, only what
`<db stem>_cache/` holds:

- cold: the cache folder removed first, so the first render runs the audit (and fills it);
- cached: the cache present (median of --repeat fresh servers), each on a new port, so the
  browser holds none of Streamlit's static files either (a browser that never opened the app);
- restarted: the same, each fresh server on one port the browser has opened before, so it holds
  Streamlit's static files (served as immutable for a year): the app restarted and reopened;
- rerun: the same page opened again on the last server, --repeat times (median; everything in
  memory, the browser holding Streamlit's static files).

The overview draws its cards, waits for the browser to paint them (`app_ui.painted`) and then
its charts: "headline" is the cards, "all" the charts as well.

A fresh server's figures come with its start: launch to the health check's answer, which with
serve.py includes the warm start (and, cold, the audit it runs). Last, the floor: the same timing
of a Streamlit page that holds nothing but the card, the least any page takes on this machine.

The demo is built first when missing (`runners.demo`), the synthetic database
(`benchmarks.synthetic`, default /tmp/judge_audit_synthetic_N.duckdb) too; neither is timed.
The load average is printed before and after: other jobs on the machine slow every figure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from audit_core.store.audit_cache import cache_folder
from benchmarks.local_server import free_port, streamlit_server

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
POLL = 0.02
TIMEOUT = 1800.0  # a cold audit at 100,000 prompts takes minutes
# the card whose caption is the label "Gain over random", its heading (the value) holding an interval
HEADLINE_SHOWN = """Array.from(document.querySelectorAll('[data-testid="stCaptionContainer"]')).some(c =>
  c.textContent.trim() === 'Gain over random'
  && (c.closest('[data-testid="stVerticalBlock"]')?.querySelector('h3')?.textContent || '').includes('['))"""
# installed before any page script: stamps the first frame painted with the headline interval
WATCH = f"""window.__headline = null;
new MutationObserver((_, observer) => {{
  if (window.__headline === null && ({HEADLINE_SHOWN})) {{
    observer.disconnect();
    requestAnimationFrame(() => {{ window.__headline = performance.now() / 1000; }});
  }}
}}).observe(document, {{subtree: true, childList: true, characterData: true}});"""
DRAWN = """return window.__headline !== null && document.querySelectorAll('[data-testid="stPlotlyChart"] .main-svg').length > 0
  && !document.querySelector('[data-testid="stStatusWidget"]')"""
PAINTED = "return window.__headline !== null"
FAILED = """return Array.from(document.querySelectorAll('[data-testid="stException"], [data-testid="stAlertContentError"]'))
  .map(e => e.innerText).join(' | ')"""


@contextmanager
def app_server(db: Path, script: str = "serve.py", port: int | None = None) -> Iterator[tuple[str, float]]:
    """A Streamlit server of `script` (serve.py: the app with its warm start; app.py: without) allowed to
    open `db` only, on `port` (default a free one); yields (its URL, seconds from launch to its health
    check's answer) once healthy."""
    options = ["--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none", "--", "--db", str(db)]
    env = {k: v for k, v in os.environ.items() if k not in ("JUDGE_AUDIT_DB", "JUDGE_AUDIT_DATA_DIR")}
    with tempfile.TemporaryDirectory(prefix="bench-server-") as folder:
        with streamlit_server(script, port or free_port(), options, env, Path(folder) / "server.log",
                              start_seconds=120) as served:
            yield served


@contextmanager
def chromium() -> Iterator[object]:
    """Headless Chromium through chromedriver, with a throwaway profile."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="bench-chrome-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--no-first-run", "--window-size=1400,1600", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH})
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def time_overview(driver: object, url: str, dataset: str) -> tuple[float, float]:
    """(seconds from navigation start to the first frame painted with the gain card's interval,
    seconds from asking for the page to every chart drawn) for the overview of `dataset`."""
    return _time_page(driver, f"{url}/?{urllib.parse.urlencode({'page': 'overview', 'dataset': dataset})}", DRAWN)


def _time_page(driver: object, target: str, ready: str) -> tuple[float, float]:
    """(headline painted, `ready` true) seconds for the page at `target`, failing on an error box."""
    driver.get("about:blank")
    started = time.perf_counter()
    driver.get(target)
    while not driver.execute_script(ready):
        if time.perf_counter() - started > TIMEOUT:
            raise RuntimeError(f"{target} never showed its headline interval")
        if error := driver.execute_script(FAILED):
            raise RuntimeError(f"{target} shows an error: {error[:500]}")
        time.sleep(POLL)
    return driver.execute_script("return window.__headline"), time.perf_counter() - started


KINDS = ("cold", "cached", "restarted", "rerun")
Figure = tuple[float, float, float | None]  # (headline painted, all drawn, server start) seconds


def bench(driver: object, db: Path, visit: Callable[[str], tuple[float, float]], repeat: int, cold: bool,
          script: str = "serve.py") -> dict[str, Figure]:
    """{"cold", "cached", "restarted", "rerun"}: `visit(url)` of servers of `script` on `db` (module
    docstring); "cached" and "restarted" are medians over `repeat` fresh servers; a rerun has no server start."""
    figures: dict[str, Figure] = {}
    if cold:
        shutil.rmtree(cache_folder(db), ignore_errors=True)
        with app_server(db, script) as (url, start):
            figures["cold"] = (*visit(url), start)
    cached = []
    for i in range(max(1, repeat)):
        with app_server(db, script) as (url, start):
            cached.append((*visit(url), start))
            if i == repeat - 1:
                figures["rerun"] = (*_median([visit(url) for _ in range(max(1, repeat))], 2), None)
    figures["cached"] = _median(cached, 3)
    port = free_port()
    with app_server(db, script, port) as (url, _start):
        visit(url)  # the browser now holds this origin's static files
    restarted = []
    for _ in range(max(1, repeat)):
        with app_server(db, script, port) as (url, start):
            restarted.append((*visit(url), start))
    figures["restarted"] = _median(restarted, 3)
    return figures


def _median(runs: Sequence[Sequence[float]], width: int) -> tuple[float, ...]:
    return tuple(statistics.median(r[k] for r in runs) for k in range(width))


FLOOR_PAGE = """import streamlit as st
with st.container(width=360, gap=None):  # one card as app_ui.glance.cards draws it
    st.caption("Gain over random")
    st.subheader("+0.10 [+0.05, +0.15]", anchor=False)
"""


def bench_floor(driver: object, repeat: int) -> dict[str, Figure]:
    """The same figures for a page holding only the card (FLOOR_PAGE): Streamlit's own cost here."""
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as folder:
        page = Path(folder) / "floor.py"
        page.write_text(FLOOR_PAGE, encoding="utf-8")
        return bench(driver, page, partial(_time_page, driver, ready=PAINTED), repeat, False, str(page))


def _figures(figures: dict[str, Figure]) -> str:
    return " · ".join(f"{kind} ({_figure(figures[kind])})" for kind in KINDS if kind in figures)


def _figure(figure: Figure) -> str:
    start = "" if figure[2] is None else f"start {figure[2]:.2f} s, "
    return f"{start}headline {figure[0]:.2f} s, all {figure[1]:.2f} s"


def _ensure(db: Path, command: list[str]) -> None:
    if not db.is_file():
        subprocess.run([sys.executable, "-m", *command], cwd=ROOT, check=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_first_render", description=__doc__.splitlines()[0])
    parser.add_argument("--demo", type=Path, default=ROOT / "data" / "demo.duckdb")
    parser.add_argument("--synthetic", type=int, default=0, help="also a generated dataset of this many prompts")
    parser.add_argument("--synthetic-db", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=3, help="fresh servers per cached figure (median)")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold (no cache) figure")
    parser.add_argument("--script", default="serve.py", choices=("serve.py", "app.py"),
                        help="what the server runs: serve.py (warm start, as scripts/app.sh) or app.py (without)")
    args = parser.parse_args(argv)

    runs = [(args.demo.resolve(), "demo", ["runners.demo", "--db", str(args.demo)])]
    if args.synthetic:
        db = (args.synthetic_db or Path(f"/tmp/judge_audit_synthetic_{args.synthetic}.duckdb")).resolve()
        runs.append((db, f"synthetic-{args.synthetic}",
                     ["benchmarks.synthetic", "--db", str(db), "--prompts", str(args.synthetic)]))
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    with chromium() as driver:
        for db, dataset, command in runs:
            _ensure(db, command)
            figures = bench(driver, db, partial(time_overview, driver, dataset=dataset), args.repeat,
                            not args.no_cold, args.script)
            print(f"{dataset} ({db.name}, {args.script}): {_figures(figures)}", flush=True)
        print(f"floor (a page with only the card): {_figures(bench_floor(driver, args.repeat))}", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
