"""A warm start: what the server does before it takes its first visitor (`serve.py`'s lifespan).

A fresh Streamlit process imports a page's modules and loads its data on the first visit, which
then takes seconds more than every later one. `warm_start` does both while the server starts:
it imports every module app.py and the pages import, then loads the view a bare link opens
(`context.default_view`) into the caches all sessions share, so the first overview reads them
as any later one does. Last, `lifespan` freezes what is then alive out of the garbage collector's
sight (`gc.freeze`): Streamlit's full collection after every page run no longer rescans it.
"""

from __future__ import annotations

import ast
import gc
import importlib
import importlib.util
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import streamlit as st

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = (ROOT / "app.py", *sorted((ROOT / "app_pages").glob("*.py")))
log = logging.getLogger("judge_audit")


def imported_modules(scripts: Iterable[Path]) -> list[str]:
    """The modules the top level of each script imports, in order, once each: `import a.b` gives a.b;
    `from a import b, c` gives a, then a.b and a.c where they are modules (finding them imports a).
    Relative imports and `__future__` are left out."""
    names: dict[str, None] = {}
    for script in scripts:
        for node in ast.parse(script.read_text(encoding="utf-8"), str(script)).body:
            if isinstance(node, ast.Import):
                names.update((alias.name, None) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level and node.module != "__future__":
                names[node.module] = None
                if hasattr(importlib.import_module(node.module), "__path__"):  # a package: its names may be modules
                    names.update((f"{node.module}.{a.name}", None) for a in node.names
                                 if importlib.util.find_spec(f"{node.module}.{a.name}") is not None)
    return list(names)


def warm_start(argv: Sequence[str], environ: Mapping[str, str]) -> str:
    """Import what the pages import, then preload the default view of an app started with `argv` and
    `environ`; returns one line saying what was done and how long it took."""
    started = time.perf_counter()
    for name in imported_modules(SCRIPTS):
        importlib.import_module(name)
    imported = time.perf_counter() - started
    from app_ui import context  # imported above; named here for the preload

    quiet = logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # each cached load and element outside a page run warns of no page context
    try:
        # Streamlit's first element in a process inspects the whole call stack (its check for a REPL,
        # about 0.1 s here): an element drawn outside any page, which goes nowhere, pays that now.
        st.empty()
        view = context.default_view(argv, environ)
        if view is None:
            return f"warm start: modules imported in {imported:.1f} s; no database or dataset to preload"
        context.preload(view)
    finally:
        quiet.setLevel(level)
    what = "selection audit" if view.pool is not None else "rating audit"
    return (f"warm start: modules imported in {imported:.1f} s; {what} of dataset {view.dataset_id!r} "
            f"({view.resamples:,} resamples) ready after {time.perf_counter() - started:.1f} s")


@asynccontextmanager
async def lifespan(_app: Any) -> AsyncIterator[None]:
    """st.App lifespan: the warm start before the server listens (the runtime is already up, so the
    caches filled are the ones sessions read). A failure is logged, never fatal: the pages then load
    as they would on a cold server, and say what is wrong."""
    try:
        print(warm_start(sys.argv[1:], os.environ), file=sys.stderr, flush=True)
    except Exception:  # the page that needs what failed reports it to its visitor
        log.exception("warm start failed; pages will load on first visit")
    # Streamlit runs a full garbage collection after every page run (runner.postScriptGC). With the
    # modules and data loaded above in view it takes about 0.1 s, holding the interpreter lock that
    # the thread sending the page's last elements needs. They live as long as the server, so the
    # collector stops scanning them; what the page runs create is collected as before.
    gc.freeze()
    yield
