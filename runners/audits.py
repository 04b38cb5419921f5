"""Every audit of one dataset, as `runners.analyze` and `runners.report` both need them.

`run_audits` reads the dataset once, runs the selection, rating, attribute and
rubric-vs-scorer audits that its data allows, and keeps the selection and rating
audits (and the loaded arrays; on request every policy's picks, which the app's explorer
opens) in the cache beside the database (`audit_core.store.audit_cache`), so an unchanged
dataset is not audited twice by either command or by the app. When the cache could not keep
them, `Audits.cache_problem` says why (a command that was asked only to fill the cache must not
announce it as kept).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from audit_core import (
    AttributeAudit,
    AttributeData,
    RatingAudit,
    RatingData,
    Resampling,
    SelectionAudit,
    SelectionData,
    audit_attributes,
    audit_rating,
    audit_selection,
    load_attribute_data,
    load_rating_data,
    load_selection_data,
    store,
)
from audit_core.rating.audit import consensus_pools
from audit_core.rating.rubric_vs_scorer import RubricVsScorer, rubric_vs_scorer
from audit_core.selection import audit as selection_audit
from audit_core.selection import browse
from audit_core.selection.browse import load_image_paths
from audit_core.selection.debiased import load_ordered_calls
from audit_core.selection.debiased.specs import with_debiased
from audit_core.selection.policies import picks_of, policy_specs
from audit_core.selection.slices import check_slice_columns
from audit_core.store import audit_cache
from audit_core.store.schema import DEFAULT_POOL


@dataclass
class Audits:
    """A dataset's row, data and audit results; None where the dataset has no such data."""

    row: dict
    data: SelectionData | None
    result: SelectionAudit | None
    rating_data: RatingData | None
    rating: RatingAudit | None
    attribute_data: AttributeData | None
    attributes: AttributeAudit | None
    rubric: RubricVsScorer | None
    runs: pd.DataFrame
    image_paths: dict[str, str | None]
    content: str  # the dataset's content fingerprint, which every result kept in the cache is keyed by
    cache_problem: str | None = None  # why the audits could not be kept in the cache; None when they are


# The selection audit of a study above poisson.POISSON_ABOVE prompts made elsewhere, never loaded here:
# (db, dataset, prompts, resampling, pool, by) -> SelectionAudit (`runners.analyze_ray.ray_audit`).
LargeAudit = Callable[[Path, str, int, Resampling, str, Sequence[str]], SelectionAudit]


def run_audits(db: Path, dataset: str, resampling: Resampling, pool: str = DEFAULT_POOL,
               by: Sequence[str] = (), large: LargeAudit | None = None, *, image_paths: bool = True,
               picks: bool = False) -> Audits:
    """Load `dataset` from `db` and run its audits (module docstring), every interval under `resampling`;
    `large` makes the selection audit of a study above `poisson.POISSON_ABOVE` prompts without loading it
    here (`runners.analyze_ray.ray_audit`: `Audits.data` is then None, and the cache keeps the audit but not
    the arrays), unless `picks` is asked for (the arrays the app opens are then loaded and kept). With
    `image_paths` False, `Audits.image_paths` is left empty (a report needs them, the tables do not: a
    million-prompt study has millions); with `picks`, every policy's picks are kept in the cache too
    (`browse.every_policy` under `browse.picks_key`, what the app's explorer would otherwise compute).

    Raises KeyError (unknown dataset, or no alignment ratings in `pool` where the dataset
    needs them) and ValueError with a message in args[0], InputError for an unknown `by`
    column, DatabaseFileError for a file that cannot be opened.
    """
    con = store.connect(db, read_only=True)
    try:
        row = store.dataset_row(con, dataset)
        if row is None:
            known = ", ".join(store.list_datasets(con)["dataset_id"]) or "none"
            raise KeyError(f"dataset {dataset!r} is not in {db} (known: {known})")
        pools = consensus_pools(con, dataset)
        rating_data = load_rating_data(con, dataset)
        # the scorers' outputs by candidate id serve the rubric comparison only (the selection data has its own)
        scores = store.load_scores(con, dataset) if rating_data is not None else None
        attribute_data = load_attribute_data(con, dataset)
        if pool not in pools and (pools or (rating_data is None and attribute_data is None)):
            hint = f"; choose one with --pool NAME (pools: {', '.join(pools)})" if pools else ""
            raise KeyError(f"dataset {dataset!r} has no alignment ratings in pool {pool!r}{hint}")
        n_prompts = store.prompt_count(con, dataset)
        elsewhere = large is not None and not picks and bool(pools) and n_prompts > selection_audit.POISSON_ABOVE
        # None: a rating or attribute study only, or a large study audited elsewhere
        data = load_selection_data(con, dataset, pool=pool) if pools and not elsewhere else None
        # the calls as the audit reads them: every judge's slot orders, rankings and seconds as arrays made in
        # DuckDB, and only the calls that carry text (timing's not-JSON count); never a frame of a row per call
        ordered = load_ordered_calls(con, data) if data is not None else {}
        texts = store.load_call_texts(con, dataset) if data is not None else None
        runs = store.load_runs(con, dataset)
        paths = load_image_paths(con, dataset) if image_paths else {}
        content = audit_cache.dataset_fingerprint(con, dataset)
    finally:
        con.close()
    problems = []
    if data is not None:  # the loaded arrays too, which the app opens first
        data_key = audit_cache.data_key(content, dataset, pool)
        if not audit_cache.has(db, data_key):
            problems.append(audit_cache.store(db, data_key, data))
    result = rating = None
    if elsewhere:
        check_slice_columns(store.PROMPT_COLUMNS, by)  # at once, not after the study was copied out
        selection_key = audit_cache.selection_key(content, dataset, resampling, pool, tuple(by))
        result, problem = audit_cache.cached(db, selection_key, SelectionAudit, lambda: large(
            db, dataset, n_prompts, resampling, pool, by))
        problems.append(problem)
    elif data is not None:
        specs = None
        if picks and not audit_cache.has(db, picks_key := browse.picks_key(content, dataset, pool)):
            # every policy once, for the explorer (`browse.every_policy`) and the audit alike
            specs = with_debiased(policy_specs(data), ordered)
            problems.append(audit_cache.store(db, picks_key, picks_of(specs)))
        selection_key = audit_cache.selection_key(content, dataset, resampling, pool, tuple(by))
        result, problem = audit_cache.cached(db, selection_key, SelectionAudit, lambda: audit_selection(
            data, resampling, by=by, ordered=ordered, specs=specs, call_texts=texts))
        problems.append(problem)
    if rating_data is not None:
        rating_key = audit_cache.rating_key(content, dataset, resampling)
        rating, problem = audit_cache.cached(db, rating_key, RatingAudit, lambda: audit_rating(rating_data, resampling))
        problems.append(problem)
    rubric = (rubric_vs_scorer(rating_data.ratings, scores, rating_data.scale, resampling)
              if rating_data is not None and not rating_data.ratings.empty and not scores.empty else None)
    attributes = audit_attributes(attribute_data, resampling) if attribute_data is not None else None
    return Audits(row=row, data=data, result=result, rating_data=rating_data, rating=rating,
                  attribute_data=attribute_data, attributes=attributes, rubric=rubric, runs=runs,
                  image_paths=paths, content=content, cache_problem=next((p for p in problems if p), None))
