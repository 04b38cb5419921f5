"""The judge change the Judge comparison page opens with, kept beside the database by `runners.analyze --cache-only`.

The page compares the dataset's first selector judge with the first other one (`judge_change.default_pair`)
under the standard gates, seed 0 and the sidebar's resample count, and reads that result from the audit cache
before computing it (`app_ui.judge_change_views`); `keep_default_change` computes and keeps it for the pool and
resampling the audits were kept with, so that the page's first opening reads it.
"""

from __future__ import annotations

from pathlib import Path

from audit_core.selection.judge_change import compare_judges, default_pair, pair_judges
from audit_core.store import audit_cache
from runners.audits import Audits


def keep_default_change(db: Path, audits: Audits, pool: str) -> str | None:
    """Keep the judge change of the default pair (module docstring) of `audits`' selection data, under its
    selection audit's resampling and with its utility from `pool`, in the cache beside `db` unless kept
    already; None once it is kept (or when there is none: no selection audit, fewer than two selector
    judges), else why it could not be (`audit_cache.store`)."""
    data = audits.data
    pair = default_pair(data.judges) if data is not None and audits.result is not None else None
    if pair is None:
        return None
    resampling = audits.result.resampling
    key = audit_cache.judge_change_key(audits.content, data.dataset_id, resampling, pool, *pair)
    if audit_cache.has(db, key):
        return None
    return audit_cache.store(db, key, compare_judges(pair_judges(data, *pair), resampling=resampling))
