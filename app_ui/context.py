"""What every page shares: the sidebar selection, URL parameters and cached loads.

Heavy results are cached per (database path, file stamp, dataset, and the
reference pool for selection results): a rewritten database gets a new stamp
and therefore fresh results. Cached objects are shared
between sessions and must be treated as read-only.

URL parameters are the source of truth for a view. A widget bound with `adopt`
takes its value from the URL whenever the URL differs from what the app last
wrote there (a pasted link, a page link, the browser's back button) and keeps
its own state otherwise; `publish` writes the value back.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import streamlit as st

from app_ui import allowed, store_lock
from audit_core import (
    RatingAudit,
    RatingData,
    Resampling,
    SelectionAudit,
    SelectionData,
    audit_rating,
    audit_selection,
    load_rating_data,
    load_selection_data,
    store,
)
from audit_core.errors import DatabaseFileError, DatabaseHeld
from audit_core.rating.audit import consensus_pools
from audit_core.selection import browse
from audit_core.selection.debiased import load_ordered_calls
from audit_core.selection.outcomes import prompt_outcomes
from audit_core.selection.policies import PolicyPicks, valid_picks
from audit_core.store import audit_cache
from audit_core.store.schema import DEFAULT_POOL
from audit_core.user_text import excerpt, visible

DEMO_COMMAND = "python -m runners.demo --db data/demo.duckdb"
RESAMPLE_CHOICES: tuple[int, ...] = (1_000, 2_000, 10_000)
LARGE_DATASET = 20_000  # prompts; above this the default resample count drops to keep the first load short
_SEEN = "_url_seen"
_SELECTION = "_selection"
_REFUSED = "_url_refused"
_VIEWS = "_url_views"  # page -> the URL parameters of its view when last drawn (`remember_view`)
PAGE_DIR = Path(__file__).resolve().parents[1] / "app_pages"  # app.py names each page after its file there
# The pages' names, listed once: a `page` value from a URL is looked up here, never made into a path.
PAGE_NAMES = frozenset(p.stem for p in PAGE_DIR.glob("*.py"))

UrlValue = str | int | bool | tuple[str, ...]


def db_stamp(path: str) -> float:
    """Last modification of the database file or its write-ahead log."""
    stamps = [p.stat().st_mtime for p in (Path(path), Path(path + ".wal")) if p.exists()]
    return max(stamps, default=0.0)


def is_simulated(row: Mapping[str, object]) -> bool:
    """A dataset is simulated when its source is the demo or its notes say so."""
    notes = str(row.get("notes") or "")
    return row.get("source") == "demo" or "simulated" in notes.lower()


# ------------------------------------------------------------ URL binding


def _read_url(key: str, default: UrlValue) -> UrlValue | None:
    if isinstance(default, tuple):
        values = tuple(st.query_params.get_all(key))
        return values or None
    return st.query_params.get(key)


_TRUE, _FALSE = ("1", "true", "yes"), ("0", "false", "no")


def _parse(raw: UrlValue | None, default: UrlValue, options: Sequence[object] | None) -> tuple[UrlValue, UrlValue | None]:
    """(the value to show, what the URL named that does not exist or does not parse, else None).

    A refused single value gives way to `default`; refused members of a list are left out.
    """
    if raw is None:
        return default, None
    try:
        if isinstance(default, bool):
            if raw not in (*_TRUE, *_FALSE):
                return default, raw
            value: UrlValue = raw in _TRUE
        elif isinstance(default, int):
            value = int(raw)  # type: ignore[arg-type]
        else:
            value = raw
    except ValueError:
        return default, raw
    if options is not None:
        if isinstance(value, tuple):
            refused = tuple(v for v in value if v not in options)
            return tuple(v for v in value if v in options), refused or None
        if value not in options:
            return default, raw
    return value, None


def refuse(key: str, value: object, shown: object = None) -> None:
    """Note that the URL's `key` names `value`, which does not exist here (`shown` is shown instead;
    None: the value is left out); `warn_refused` draws the note."""
    st.session_state.setdefault(_REFUSED, []).append((key, value, shown))


def warn_refused() -> None:
    """Draw one warning per URL value refused since the last call, naming its key and value (escaped)."""
    for key, value, shown in st.session_state.pop(_REFUSED, []):
        values = value if isinstance(value, tuple) else (value,)
        named = ", ".join(quote(str(v)) for v in values)
        instead = f"showing {quote(str(shown))} instead" if shown is not None else "left out"
        st.warning(f"This link's {quote(key)} names {named}, which does not exist here: {instead}.",
                   icon=":material/link_off:")


def adopt(key: str, default: UrlValue, options: Sequence[object] | None = None, *, sticky: bool = False) -> None:
    """Set the widget state of `key` from the URL when the URL changed since `publish`.

    `sticky` keeps the current state when the URL lacks the key (the sidebar's
    database, dataset and judge survive moving between pages). A URL value that
    is not among `options` (or does not parse) is `refuse`d: the default is shown,
    and the next `warn_refused` names it.
    """
    seen = st.session_state.setdefault(_SEEN, {})
    raw = _read_url(key, default)
    if key in st.session_state:
        current = st.session_state[key]
        valid = options is None or (
            all(v in options for v in current) if isinstance(current, (list, tuple)) else current in options
        )
        if valid and (raw == seen.get(key) or (raw is None and sticky)):
            return
    value, refused = _parse(raw, default, options)
    if refused is not None:
        refuse(key, refused, None if isinstance(value, tuple) else value)
    st.session_state[key] = list(value) if isinstance(value, tuple) else value


def single(key: str, value: str | None) -> str | None:
    """`value`, the only choice URL parameter `key` has here (None: none at all), with no widget drawn:
    a link naming anything else is `refuse`d and the key leaves the URL."""
    if (raw := st.query_params.get(key)) is not None and raw != value:
        refuse(key, raw, value)
    publish(key, value, value)
    warn_refused()
    return value


def publish(key: str, value: object, default: object) -> None:
    """Write a widget's value to the URL; a default value leaves the URL clean."""
    seen = st.session_state.setdefault(_SEEN, {})
    if isinstance(value, list):
        value = tuple(value)
    if value == default or value in ("", ()):
        st.query_params.pop(key, None)
        seen[key] = None
        return
    if isinstance(value, tuple):
        st.query_params[key] = list(value)
    elif isinstance(value, bool):
        st.query_params[key] = "1" if value else "0"
    else:
        st.query_params[key] = str(value)
    seen[key] = value if isinstance(value, tuple) else st.query_params[key]


# ------------------------------------------------------------ cached loads


@st.cache_data(ttl=5, max_entries=4, show_spinner=False)
def _databases(files: tuple[str, ...], data_dir: str) -> dict[str, Path]:
    # Walks the data folder: cached briefly, so a database written meanwhile shows up within seconds.
    return allowed.databases(allowed.Allowance(tuple(Path(f) for f in files), Path(data_dir)))


@st.cache_data(max_entries=8, show_spinner=False)
def _datasets(db_path: str, stamp: float) -> pd.DataFrame:
    with store_lock.reading(db_path) as con:
        return store.list_datasets(con)


@st.cache_data(max_entries=8, show_spinner=False)
def _judge_pages(db_path: str, stamp: float, dataset_id: str) -> str:
    """Where a dataset without a selection audit has its judges: "its rating judges are on the Alignment
    page", its attribute judges on the Attributes page, or both (the Alignment page when it has neither)."""
    with store_lock.reading(db_path) as con:
        labels = con.execute("SELECT count(*) FROM label_calls JOIN runs USING (run_id) WHERE dataset_id = ?",
                             [dataset_id]).fetchone()[0]
        try:
            ratings = load_rating_data(con, dataset_id) is not None
        except ValueError:  # rating data the audit refuses: the Alignment page says why
            ratings = True
    pages = [*(["its rating judges are on the Alignment page"] if ratings or not labels else []),
             *(["its attribute judges are on the Attributes page"] if labels else [])]
    return " and ".join(pages)


@st.cache_data(max_entries=8, show_spinner=False)
def _selection_pools(db_path: str, stamp: float, dataset_id: str) -> tuple[str, ...]:
    with store_lock.reading(db_path) as con:
        return tuple(consensus_pools(con, dataset_id, "alignment"))


@st.cache_data(max_entries=16, show_spinner=False)
def _content(db_path: str, stamp: float, dataset_id: str) -> str:
    # what the results beside the database are keyed by (`audit_core.store.audit_cache`): one scan per file stamp
    with store_lock.reading(db_path) as con:
        return audit_cache.dataset_fingerprint(con, dataset_id)


@st.cache_resource(max_entries=4, show_spinner="Loading the dataset…")
def _audit_data(db_path: str, stamp: float, dataset_id: str, pool: str) -> SelectionData:
    key = audit_cache.data_key(_content(db_path, stamp, dataset_id), dataset_id, pool)
    if (kept := audit_cache.load(db_path, key, SelectionData)) is not None:
        return kept
    with store_lock.reading(db_path) as con:
        data = load_selection_data(con, dataset_id, pool=pool)
    audit_cache.store(db_path, key, data)
    return data


@st.cache_resource(max_entries=4, show_spinner=False)
def _image_paths(db_path: str, stamp: float, dataset_id: str) -> dict[str, str | None]:
    with store_lock.reading(db_path) as con:
        return browse.load_image_paths(con, dataset_id)


@st.cache_data(max_entries=64, show_spinner=False)
def _some_image_paths(db_path: str, stamp: float, dataset_id: str, candidate_ids: tuple[str, ...]) -> dict[str, str | None]:
    with store_lock.reading(db_path) as con:
        return browse.load_image_paths(con, dataset_id, candidate_ids)


@st.cache_resource(max_entries=16, show_spinner="Joining ratings to picks…")
def _outcomes(db_path: str, stamp: float, dataset_id: str, pool: str, judge: str) -> pd.DataFrame:
    return prompt_outcomes(_audit_data(db_path, stamp, dataset_id, pool), judge)


@st.cache_resource(max_entries=4, show_spinner="Applying every policy…")
def _picks(db_path: str, stamp: float, dataset_id: str, pool: str) -> PolicyPicks:
    # every policy, the debiased ones from the ordered calls: computed once per dataset content and kept
    # beside the database, as the audit is
    data = _audit_data(db_path, stamp, dataset_id, pool)
    key = browse.picks_key(_content(db_path, stamp, dataset_id), dataset_id, pool)
    if (kept := audit_cache.load(db_path, key, PolicyPicks)) is not None:
        return kept
    with store_lock.reading(db_path) as con:
        ordered = load_ordered_calls(con, data)
    picks = browse.every_policy(data, ordered)
    audit_cache.store(db_path, key, picks)
    return picks


@st.cache_data(max_entries=8, show_spinner=False)
def _filter_options(db_path: str, stamp: float, dataset_id: str, pool: str) -> dict[str, list[str]]:
    return filter_options(_audit_data(db_path, stamp, dataset_id, pool))


@st.cache_resource(max_entries=4, show_spinner="Indexing the pools…")
def _pool_table(db_path: str, stamp: float, dataset_id: str, pool: str, judge: str) -> pa.Table:
    return browse.pool_table(_audit_data(db_path, stamp, dataset_id, pool), _outcomes(db_path, stamp, dataset_id, pool, judge))


@st.cache_resource(max_entries=8, show_spinner=False)
def _policy_table(db_path: str, stamp: float, dataset_id: str, pool: str, judge: str, policy: str) -> pa.Table:
    data = _audit_data(db_path, stamp, dataset_id, pool)
    # the order-0 pick is in the data; any other policy's picks are computed once (`_picks`)
    pick = _picks(db_path, stamp, dataset_id, pool).picks[policy] if policy else valid_picks(data.picks[judge][:, 0])
    return browse.with_policy(_pool_table(db_path, stamp, dataset_id, pool, judge), data, pick)


@st.cache_resource(max_entries=4, show_spinner="Running the audit (prompt-level bootstrap)…")
def _audit(db_path: str, stamp: float, dataset_id: str, pool: str, resamples: int) -> SelectionAudit:
    # computed once per dataset content beside the database (`audit_core.store.audit_cache`), then kept in memory
    settings = resampling(resamples)
    key = audit_cache.selection_key(_content(db_path, stamp, dataset_id), dataset_id, settings, pool=pool)
    if (kept := audit_cache.load(db_path, key, SelectionAudit)) is not None:
        return kept
    data = _audit_data(db_path, stamp, dataset_id, pool)
    with store_lock.reading(db_path) as con:  # the calls as `runners.audits` reads them: slot orders, rankings
        ordered = load_ordered_calls(con, data)  # and seconds as arrays made in DuckDB, and the calls with text
        texts = store.load_call_texts(con, dataset_id)
    result = audit_selection(data, settings, ordered=ordered, call_texts=texts)
    audit_cache.store(db_path, key, result)
    return result


@st.cache_resource(max_entries=4, show_spinner="Loading the rating data…")
def _rating_data(db_path: str, stamp: float, dataset_id: str) -> RatingData | None:
    with store_lock.reading(db_path) as con:
        return load_rating_data(con, dataset_id)


@st.cache_resource(max_entries=4, show_spinner="Running the rating audit (item-level bootstrap)…")
def _rating_audit(db_path: str, stamp: float, dataset_id: str, resamples: int) -> RatingAudit | None:
    settings = resampling(resamples)
    key = audit_cache.rating_key(_content(db_path, stamp, dataset_id), dataset_id, settings)
    if (kept := audit_cache.load(db_path, key, RatingAudit)) is not None:
        return kept
    data = _rating_data(db_path, stamp, dataset_id)
    if data is None:
        return None
    result = audit_rating(data, settings)
    audit_cache.store(db_path, key, result)
    return result


@st.cache_data(max_entries=64, show_spinner=False)
def _pool_records(
    db_path: str, stamp: float, dataset_id: str, prompt_id: str, candidate_ids: tuple[str, ...]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    with store_lock.reading(db_path) as con:
        return browse.load_pool_calls(con, dataset_id, prompt_id), store.load_votes(con, dataset_id, candidate_ids)


@dataclass(frozen=True)
class Selection:
    """The sidebar's choice: database, dataset, reference pool and focus judge (None if it has no selector).

    `db_name` is what pages show and links carry (`app_ui.allowed`); `db_path`
    stays on the server. `pool` is the reference pool whose alignment consensus
    is the selection audit's utility, one of `pools` (the dataset's pools with
    alignment ratings; empty when it has none, and then no selection audit).
    """

    db_name: str
    db_default: bool
    db_path: str
    stamp: float
    dataset_id: str
    dataset_name: str
    simulated: bool
    judges: tuple[str, ...]
    judge: str | None
    resamples: int
    pool: str = DEFAULT_POOL
    pools: tuple[str, ...] = (DEFAULT_POOL,)

    def _require_selection(self) -> None:
        """Stop the page with a note when the dataset has no alignment ratings (a rating study only)."""
        if not self.pools:
            where = _judge_pages(self.db_path, self.stamp, self.dataset_id)
            st.info("This dataset has no alignment ratings, so it has no selection audit. "
                    f"{where[0].upper()}{where[1:]}.")
            st.stop()

    def data(self) -> SelectionData:
        """The dataset's dense arrays with `pool`'s utility (cached per database file, dataset and pool)."""
        self._require_selection()
        return _audit_data(self.db_path, self.stamp, self.dataset_id, self.pool)

    def content(self) -> str:
        """The dataset's content fingerprint, which results kept beside the database are keyed by (`audit_cache`)."""
        return _content(self.db_path, self.stamp, self.dataset_id)

    def outcomes(self, judge: str | None = None) -> pd.DataFrame:
        """prompt_outcomes of `judge` (default: the focus judge)."""
        self._require_selection()
        return _outcomes(self.db_path, self.stamp, self.dataset_id, self.pool, judge or self.judge)

    def picks(self) -> dict[str, np.ndarray]:
        """Every policy's (P,) pick, −1 where it abstains: `policies.policy_specs` and each judge's debiased
        policies (`audit_core.selection.debiased`), in display order."""
        return self.policies().picks

    def policies(self) -> PolicyPicks:
        """Every policy's picks, kind and base judge (`picks`)."""
        self._require_selection()
        return _picks(self.db_path, self.stamp, self.dataset_id, self.pool)

    def judge_policies(self) -> dict[str, str]:
        """The focus judge's policies in the audit (those resting on it), its order-0 policy first -> kind;
        none without a judge. Read from the audit's policies table, so no policy's picks are computed."""
        table = self.audit_selection().policies
        mine = table[table["base_judge"] == self.judge] if self.judge else table.iloc[:0]
        return dict(zip(mine["policy"], mine["kind"]))

    def filter_options(self) -> dict[str, list[str]]:
        """The values the explorer's filter offers (`filter_options`), cached."""
        self._require_selection()
        return _filter_options(self.db_path, self.stamp, self.dataset_id, self.pool)

    def pool_table(self, policy: str = "") -> pa.Table:
        """The focus judge's `browse.pool_table` with `policy`'s picks ("" its order-0 pick), for the explorer's queries."""
        self._require_selection()
        return _policy_table(self.db_path, self.stamp, self.dataset_id, self.pool, self.judge, policy)

    def audit_selection(self) -> SelectionAudit:
        """The full selection audit with the chosen number of bootstrap resamples, seed 0."""
        self._require_selection()
        return _audit(self.db_path, self.stamp, self.dataset_id, self.pool, self.resamples)

    def rating_data(self) -> RatingData | None:
        """The rating audit's inputs on the rubric outcome, None when the dataset has no rating data."""
        return _rating_data(self.db_path, self.stamp, self.dataset_id)

    def audit_rating(self) -> RatingAudit | None:
        """The rating audit (item-level bootstrap, the chosen resample count, seed 0), None without rating data."""
        return _rating_audit(self.db_path, self.stamp, self.dataset_id, self.resamples)

    def dataset_row(self) -> dict[str, object]:
        """The dataset's `datasets` row (source, revision, notes, counts)."""
        rows = _datasets(self.db_path, self.stamp)
        return rows[rows["dataset_id"] == self.dataset_id].iloc[0].to_dict()

    def image_paths(self, candidate_ids: Sequence[str] | None = None) -> dict[str, str | None]:
        """candidate_id → image file (None when the dataset has no image for it), of every candidate or of
        `candidate_ids` only (one query for a page's images, however large the dataset)."""
        if candidate_ids is None:
            return _image_paths(self.db_path, self.stamp, self.dataset_id)
        return _some_image_paths(self.db_path, self.stamp, self.dataset_id, tuple(candidate_ids))

    def pool_records(self, prompt_id: str, candidate_ids: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(calls, votes) of one pool: every selector call on it and its candidates' individual ratings."""
        return _pool_records(self.db_path, self.stamp, self.dataset_id, prompt_id, tuple(candidate_ids))

    def link(self, page: str, **params: UrlValue) -> dict[str, str | list[str]]:
        """Query parameters of a link to `page` that keeps this selection."""
        query: dict[str, str | list[str]] = {"page": page, "dataset": self.dataset_id}
        if not self.db_default:
            query["db"] = self.db_name
        if self.judge:
            query["judge"] = self.judge
        if self.pool != default_pool(self.pools):
            query["pool"] = self.pool
        for key, value in params.items():
            if value in ("", (), None):
                continue
            query[key] = list(value) if isinstance(value, tuple) else str(value)
        return query


def default_pool(pools: Sequence[str]) -> str:
    """The reference pool a selection audit takes unless one is chosen: `all` if present, else the first."""
    return DEFAULT_POOL if DEFAULT_POOL in pools or not pools else pools[0]


def default_dataset(datasets: pd.DataFrame) -> str:
    """The dataset a link that names none opens: the newest with selector judges (the overview's
    subject), else the newest (`store.list_datasets` rows, newest first)."""
    with_judges = datasets.loc[datasets["selectors"] > 0, "dataset_id"]
    return str((with_judges if len(with_judges) else datasets["dataset_id"]).iloc[0])


def default_resample_count(prompts: int) -> int:
    """Bootstrap resamples of a dataset's intervals unless chosen: the most up to LARGE_DATASET prompts, the fewest above."""
    return RESAMPLE_CHOICES[-1] if prompts <= LARGE_DATASET else RESAMPLE_CHOICES[0]


def resampling(resamples: int) -> Resampling:
    """The app's bootstrap settings for the sidebar's resample count: seed 0 on every page, as
    `runners.analyze` defaults to, so the app opens the audits that command kept in the cache."""
    return Resampling(resamples, seed=0)


@dataclass(frozen=True)
class DefaultView:
    """What a bare link to the app shows: the default database's default dataset, pool and resamples."""

    db_path: str
    dataset_id: str
    pool: str | None  # None: the dataset has no alignment ratings, so no selection audit
    resamples: int


def default_view(argv: Sequence[str], environ: Mapping[str, str]) -> DefaultView | None:
    """The view the sidebar opens for a link naming no database, dataset, pool or resamples, for an app
    started with `argv` and `environ`; None when there is no database or dataset to open."""
    allowance = allowed.allowance(argv, environ)
    found = _databases(tuple(str(f) for f in allowance.files), str(allowance.data_dir))
    name = allowed.default_name(found, allowance)
    if name is None or not Path(found[name]).is_file():
        return None
    db_path = str(found[name])
    stamp = db_stamp(db_path)
    datasets = _datasets(db_path, stamp)
    if datasets.empty:
        return None
    dataset_id = default_dataset(datasets)
    pools = _selection_pools(db_path, stamp, dataset_id)
    prompts = int(datasets.set_index("dataset_id").loc[dataset_id, "prompts"])
    return DefaultView(db_path, dataset_id, default_pool(pools) if pools else None, default_resample_count(prompts))


def preload(view: DefaultView) -> None:
    """Load what `view`'s sidebar and overview read into the caches every session shares: its selection
    data and audit (or its rating audit), from the audit cache beside the database when that holds them,
    else by loading and running them (and keeping them there)."""
    stamp = db_stamp(view.db_path)
    if view.pool is None:
        _rating_audit(view.db_path, stamp, view.dataset_id, view.resamples)
    else:
        _audit_data(view.db_path, stamp, view.dataset_id, view.pool)
        _audit(view.db_path, stamp, view.dataset_id, view.pool, view.resamples)


def quote(text: str, cut: bool = True) -> str:
    """`text` as a Markdown code span: shown literally (backticks, which would end it, become quotes),
    invisible and direction-steering characters as markers (`visible`), line breaks as spaces; with
    `cut`, a long value (a URL's) as a short marked excerpt (`audit_core.user_text.excerpt`)."""
    return "`" + visible(excerpt(text) if cut else text).replace("`", "'").replace("\r", " ").replace("\n", " ") + "`"


def sidebar() -> Selection:
    """Draw the sidebar (database, dataset, judge), keep it in the URL and remember it."""
    side = st.sidebar
    st.session_state[_REFUSED] = []  # a run stopped before drawing its warnings leaves none for the next
    db_name, db_path, db_default = _database(side)
    if not Path(db_path).is_file():
        side.error(f"{quote(db_name)}: no such database. Build the demo with `{DEMO_COMMAND}`.")
        st.stop()
    stamp = db_stamp(db_path)
    try:
        datasets = _datasets(db_path, stamp)
    except DatabaseFileError as err:  # not a DuckDB file, or held by a job writing to it
        hint = " A runner or an ingest is writing to it: wait for it to finish, or open a copy." \
            if isinstance(err, DatabaseHeld) else ""
        side.error(f"{quote(db_name)} cannot be opened read-only: {quote(err.message.replace(db_path, db_name), cut=False)}.{hint}")
        st.stop()
    if datasets.empty:
        side.error(f"{quote(db_name)} holds no dataset yet: import one with `python -m runners.ingest`.")
        st.stop()
    names = {r.dataset_id: visible(f"{r.name} ({r.prompts} prompts){' · SIMULATED' if is_simulated(r._asdict()) else ''}")
             for r in datasets.itertuples()}
    ids = list(names)
    adopt("dataset", default_dataset(datasets), ids, sticky=True)
    dataset_id = side.selectbox("Dataset", ids, key="dataset", format_func=names.get)
    publish("dataset", dataset_id, None)
    row = datasets.set_index("dataset_id").loc[dataset_id]
    simulated = is_simulated(row.to_dict())
    if simulated:
        side.warning("SIMULATED data: generated pools, ratings and judges, not real model or human data.")
    pools = _selection_pools(db_path, stamp, dataset_id)
    pool = default_pool(pools)
    if len(pools) > 1:
        adopt("pool", pool, pools, sticky=True)
        pool = side.selectbox(
            "Reference pool", pools, key="pool", format_func=visible,
            help="Whose alignment ratings are the utility of every selection page: each pool's consensus "
            "gives its own regret, gain and below-mean rate.",
        )
        publish("pool", pool, default_pool(pools))
    else:
        single("pool", pool)  # nothing to choose: a pool named by a link for another dataset leaves the URL
    judges = tuple(_audit_data(db_path, stamp, dataset_id, pool).judges) if pools else ()
    judge = None
    if not pools:
        side.info("This dataset has no alignment ratings, so there is no selection audit; "
                  f"{_judge_pages(db_path, stamp, dataset_id)}.")
    elif judges:
        adopt("judge", judges[0], judges, sticky=True)
        judge = side.selectbox("Judge", judges, key="judge", format_func=visible)
        publish("judge", judge, None)
    else:
        side.info("No selector judge has been recorded on this dataset yet.")
    default_resamples = default_resample_count(int(row["prompts"]))
    adopt("resamples", default_resamples, RESAMPLE_CHOICES, sticky=True)
    resamples = side.selectbox(
        "Bootstrap resamples", RESAMPLE_CHOICES, key="resamples", format_func="{:,}".format,
        help="Prompt-level bootstrap behind every interval (seed 0). Large datasets default to "
        f"{RESAMPLE_CHOICES[0]:,} so the first load stays short; each choice is computed once and cached.",
    )
    publish("resamples", resamples, default_resamples)
    selection = Selection(
        db_name=db_name, db_default=db_default, db_path=db_path, stamp=stamp, dataset_id=dataset_id,
        dataset_name=str(row["name"]), simulated=simulated, judges=judges, judge=judge, resamples=resamples,
        pool=pool, pools=pools,
    )
    st.session_state[_SELECTION] = selection
    return selection


def _database(side: Any) -> tuple[str, str, bool]:
    """(name, server path, is the default) of the database the sidebar opens.

    Only a database allowed when the app was started (`app_ui.allowed`) is
    offered or followed from a link; a link naming anything else is refused
    and the page stops before any file is opened.
    """
    allowance = allowed.allowance(sys.argv[1:], os.environ)
    found = _databases(tuple(str(f) for f in allowance.files), str(allowance.data_dir))
    default = allowed.default_name(found, allowance)
    raw = st.query_params.get("db")
    refusal = None
    if raw is not None and raw not in found:
        found = allowed.databases(allowance)  # the listing may predate the file the link names
        try:
            st.query_params["db"] = allowed.database_name(raw, found)  # a path to an allowed file: its name
        except allowed.Refused as err:
            refusal = f"This link names the database {quote(raw)}, which this app may not open: {err}. Nothing was opened."
            st.query_params.pop("db")
    if default is None:
        side.error(f"No database to open. Build the demo with `{DEMO_COMMAND}`, or start the app with "
                   "`streamlit run app.py -- --db PATH`.")
        st.stop()
    names = list(found)
    adopt("db", default, names, sticky=True)
    name = side.selectbox(
        "Database", names, key="db", format_func=visible,
        help="The databases this app was started with (`-- --db PATH`, $JUDGE_AUDIT_DB) and those in its data folder.",
    )
    publish("db", name, default)
    if refusal:
        st.error(refusal + " Pick a database in the sidebar.")
        st.stop()
    return name, str(found[name]), name == default


def current_selection() -> Selection | None:
    """The sidebar's selection of this run, if it has drawn one (for drawing helpers)."""
    return st.session_state.get(_SELECTION)


def selection(page: str) -> Selection:
    """The selection the sidebar made in this run (app.py draws it first); names `page` in the URL.

    A `page` parameter naming no page of the app is refused (`refuse`): this page is shown instead.
    """
    requested = st.query_params.get("page")
    if requested is not None and requested != page and requested not in PAGE_NAMES:
        refuse("page", requested, page)
    st.query_params["page"] = page
    return st.session_state[_SELECTION]


def restore_view(page: str, keys: Sequence[str]) -> None:
    """Put back the URL parameters `keys` that `page` showed when last drawn (`remember_view`) when
    the URL names none of them: the sidebar's page links drop the query string, so a page left
    and reopened through them keeps its view. Call before binding the page's widgets; a link
    that names any of `keys` is followed as it is."""
    if any(key in st.query_params for key in keys):
        return
    for key, values in st.session_state.get(_VIEWS, {}).get(page, {}).items():
        st.query_params[key] = values


def remember_view(page: str, keys: Sequence[str]) -> None:
    """Keep the URL parameters `keys` of `page`'s view for `restore_view` (call once they are published)."""
    st.session_state.setdefault(_VIEWS, {})[page] = {k: st.query_params.get_all(k) for k in keys if k in st.query_params}


def filter_options(data: SelectionData) -> dict[str, list[str]]:
    """The values the explorer's filter offers: "country", "category" and "generator" → sorted values."""
    return {"country": sorted(data.prompts["country"].dropna().unique()),
            "category": sorted(data.prompts["category"].dropna().unique()),
            "generator": sorted({g for g in data.source_models[data.mask].tolist() if g})}


def pool_filter_from_url(options: Mapping[str, Sequence[str]], policies: Sequence[str]) -> browse.PoolFilter:
    """The explorer filter named by the URL (the detail page uses it for previous/next); a country,
    category or generator not among `options` (`filter_options`), a policy not among `policies` (the
    focus judge's, its order-0 policy first: `Selection.judge_policies`), an outcome or sort key that
    does not exist, or a `desc` that is not a flag is `refuse`d."""
    q = st.query_params
    order0 = policies[0] if policies else ""
    policy, refused = _parse(q.get("policy"), order0, list(policies))
    if refused is not None:
        refuse("policy", refused, order0)
    chosen = {}
    for key in ("country", "category", "generator"):
        chosen[key], refused = _parse(tuple(q.get_all(key)) or None, (), list(options[key]))
        if refused:
            refuse(key, refused)
    outcomes, refused = _parse(tuple(q.get_all("outcome")) or None, (), list(browse.OUTCOME_FILTERS))
    if refused:
        refuse("outcome", refused)
    sort, refused = _parse(q.get("sort"), "regret", list(browse.SORT_KEYS))
    if refused:
        refuse("sort", refused, sort)
    descending, refused = _parse(q.get("desc"), True, None)
    if refused is not None:
        refuse("desc", refused, True)
    return browse.PoolFilter(
        countries=chosen["country"],
        categories=chosen["category"],
        generators=chosen["generator"],
        text=q.get("q", ""),
        outcomes=outcomes,
        sort=sort,
        descending=bool(descending),
        policy="" if policy == order0 else str(policy),
    )


def filter_params(flt: browse.PoolFilter) -> dict[str, UrlValue]:
    """URL parameters of an explorer filter (defaults left out)."""
    params: dict[str, UrlValue] = {
        "country": flt.countries,
        "category": flt.categories,
        "generator": flt.generators,
        "q": flt.text,
        "outcome": flt.outcomes,
    }
    if flt.sort != "regret":
        params["sort"] = flt.sort
    if not flt.descending:
        params["desc"] = "0"
    if flt.policy:
        params["policy"] = flt.policy
    return params


def bound(
    widget: Callable[..., Any],
    label: str,
    key: str,
    default: UrlValue,
    options: Sequence[object] | None = None,
    *,
    always: bool = False,
    **kwargs: Any,
) -> Any:
    """Draw `widget` (e.g. `st.multiselect` or a column's method) bound to URL parameter `key`.

    `always` keeps the value in the URL even when it equals the default (a
    default that depends on other state, like the first pool of a filter).
    Options are shown through their `format_func` (default `str`) made `visible`.
    """
    adopt(key, default, options)
    if options is not None:
        shown = kwargs.get("format_func", str)
        kwargs["format_func"] = lambda option: visible(shown(option))
    value = widget(label, options, key=key, **kwargs) if options is not None else widget(label, key=key, **kwargs)
    publish(key, value, None if always else default)
    warn_refused()
    return value
