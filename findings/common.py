"""The sections every report has: the opening summary, the method in brief and the provenance."""

from __future__ import annotations

import json
import sys
from importlib import metadata

import pandas as pd

from audit_core import Resampling
from audit_core.store.schema import DEFAULT_POOL
from findings.blocks import Paragraph, Section, Table
from findings.inputs import ReportInput
from findings.numbers import MISSING, absent, count

LIBRARIES = ("duckdb", "numpy", "pandas", "scipy", "plotly", "kaleido", "pillow")


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries the report is computed and drawn with, and Python's."""
    out = {"python": sys.version.split()[0]}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def opening(report: ReportInput) -> Section:
    """What the dataset is, where it comes from, and a warning when it is simulated."""
    blocks = []
    if report.simulated:
        blocks.append(Paragraph("SIMULATED data: generated pools, ratings and judges, not real model or human data.",
                                warning=True))
    blocks.append(Paragraph(f"Source: {report.note}."))
    parts = []
    if report.data is not None:
        data = report.data
        parts.append(f"{data.n_prompts:,} prompts with {int(data.mask.sum()):,} candidate images; selector judges: "
                     f"{', '.join(data.judges) or 'none'}; content scorers: {', '.join(data.scorers) or 'none'}"
                     + (f"; utility from reference pool {report.pool}" if report.pool != DEFAULT_POOL else ""))
    if report.rating_data is not None:
        rd = report.rating_data
        parts.append(f"{len(rd.candidates):,} rated items; rating judges × conditions: "
                     + ", ".join(f"{j} · {c}" for j, c in rd.raters) + f"; reference pools: {', '.join(rd.pools)}")
    if report.attribute_data is not None:
        ad = report.attribute_data
        parts.append(f"{ad.gold['candidate_id'].nunique():,} images with gold labels; attribute judges × conditions: "
                     + ", ".join(f"{j} · {c}" for j, c in ad.labelers))
    blocks.append(Paragraph(". ".join(parts) + "." if parts else "The dataset has no audit data."))
    audit = next((a for a in (report.result, report.rating, report.attributes) if a is not None), None)
    settings = audit.resampling if audit is not None else Resampling(0)
    blocks.append(Paragraph(f"Intervals are 95% percentile intervals from {settings.resamples:,} bootstrap resamples "
                            f"(seed {settings.seed})." if settings.resamples else "No bootstrap intervals (0 resamples)."))
    return Section("summary", "Summary", blocks)


METHOD = (
    "A selector judge sees a prompt and its 3–4 candidate images and returns one; that image is what a user gets. "
    "Every pool is shown in several presentation orders (cyclic rotations) and every call is recorded; held-out "
    "human ratings are joined only afterwards.",
    "Gain over random = alignment of the returned image minus the pool mean (exact random choice); regret = best "
    "alignment in the pool minus that of the returned image; below-mean rate next to random's matched rate on the "
    "same prompts. A policy is measured on the prompts it acts on; its coverage is their share.",
    "Position bias: each slot's share of valid calls against the share expected from pool sizes under uniform "
    "choice (χ² test); the flip rate is the share of prompts whose returned image changes across orders.",
    "A gate acts only where orders (or two judges, or a judge and a content scorer) agree and abstains elsewhere; "
    "its kept side is its own picks, its rejected side the ungated judge's order-0 pick on the prompts it declines. "
    "The kept minus rejected difference resamples all prompts jointly, so its interval says whether the gate "
    "separates better from worse prompts.",
    "Intervals: a policy's mean resamples the prompts it acts on at fixed n; a country's within that country; the "
    "worst-country regret resamples within each country and takes the worst in every resample; a deterministic "
    "policy's below-mean rate has a Wilson interval. Rating judges: mean absolute error, Pearson r and quadratic "
    "kappa against each reference pool's consensus, with an item-level bootstrap.",
    "Galleries are chosen by the fixed rules stated above each one (audit_core/selection/galleries.py), never by hand.",
)


def method(report: ReportInput) -> Section:
    """The measures and intervals in brief (DESIGN.md has every definition)."""
    return Section("method", "Method in brief", [Paragraph(p) for p in METHOD])


def _libraries(runs: pd.DataFrame) -> dict[str, set[str]]:
    """Library → the versions recorded in the runs' configurations."""
    out: dict[str, set[str]] = {}
    for text in runs.get("config_json", pd.Series(dtype=object)).dropna():
        try:
            libraries = json.loads(text).get("libraries") or {}
        except (ValueError, AttributeError):  # a config written elsewhere need not be a JSON object
            continue
        for name, version in libraries.items():
            out.setdefault(str(name), set()).add(str(version))
    return out


def _text(value: object) -> str:
    return MISSING if absent(value) or value == "" else str(value)


def provenance(report: ReportInput) -> Section:
    """Source, revision, manifest, resamples, seed, this build's library versions and every run's
    backend, model and instruction hash, with the library versions the runs recorded."""
    row = report.row
    audit = next((a for a in (report.result, report.rating, report.attributes) if a is not None), None)
    facts = [["dataset", report.dataset_id], ["source", _text(row.get("source"))],
             ["revision", _text(row.get("source_revision"))], ["notes", _text(row.get("notes"))],
             ["manifest sha256", _text(row.get("manifest_sha256"))],
             ["bootstrap resamples", count(audit.resampling.resamples) if audit is not None else MISSING],
             ["seed", str(audit.resampling.seed) if audit is not None else MISSING], ["reference pool", report.pool],
             ["report built with", ", ".join(f"{k} {v}" for k, v in sorted(report.versions.items())) or MISSING]]
    blocks = [Table(["what", "value"], facts, "The dataset and this report.")]
    runs = report.runs
    if not runs.empty:
        rows = []
        for r in runs.to_dict("records"):
            try:
                config = json.loads(r.get("config_json") or "{}")
            except ValueError:
                config = {}
            config = config if isinstance(config, dict) else {}
            rows.append([_text(r.get("judge")), _text(r.get("kind")), _text(r.get("backend")), _text(r.get("model")),
                         _text(r.get("model_revision")), _text(config.get("instruction_file")),
                         _text(r.get("instruction_sha256")), _text(r.get("status"))])
        blocks.append(Table(["judge", "kind", "backend", "model", "model revision", "instruction file",
                             "instruction sha256", "status"], rows, "Every recorded run."))
        libraries = _libraries(runs)
        if libraries:
            blocks.append(Table(["library", "versions recorded by the runs"],
                                [[k, ", ".join(sorted(v))] for k, v in sorted(libraries.items())]))
    return Section("provenance", "Provenance", blocks)
