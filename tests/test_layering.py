"""The layers import one way: runners record, audit_core computes, findings renders, pages draw.

Every import statement of every module is read from its source (module level and
inside functions alike), so a late import cannot slip a forbidden dependency in.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.paths import REPO

MODELS = {"torch", "torchvision", "transformers", "open_clip", "ray"}
PAGES = {"streamlit", "app_ui", "app_pages", "app"}
# package → top-level modules it must never import
FORBIDDEN = {
    "audit_core": MODELS | PAGES | {"runners", "findings", "benchmarks", "tests"},
    "findings": MODELS | PAGES | {"runners", "benchmarks", "tests"},
    "app_ui": MODELS | {"runners", "benchmarks", "tests"},
    "app_pages": MODELS | {"runners", "benchmarks", "tests"},
    "runners": PAGES | {"benchmarks", "tests"},
}


def imported_modules(path: Path) -> set[str]:
    """Top-level names of every module `path` imports (relative imports are within its package)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def modules_of(package: str) -> list[Path]:
    return sorted((REPO / package).rglob("*.py")) + ([REPO / "app.py"] if package == "app_pages" else [])


def test_imported_modules_reads_nested_and_from_imports(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import os.path\nfrom a.b import c\ndef f():\n    import streamlit as st\nfrom . import x\n")
    assert imported_modules(source) == {"os", "a", "streamlit"}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_module_imports_across_its_layer(package):
    modules = modules_of(package)
    assert modules, f"{package} holds no module"
    crossings = {str(path.relative_to(REPO)): sorted(imported_modules(path) & FORBIDDEN[package]) for path in modules}
    assert {path: names for path, names in crossings.items() if names} == {}
