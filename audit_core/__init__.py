"""Judge Audit's computing layer: VLM judges audited against held-out human references.

Every judge kind has the same three entry points, a loader, an audit and its typed result
(with `tables()`, the frames `runners.analyze` writes, and `to_summary()`, its JSON):

=================  ===================  ==================  ==============
kind               loader               audit               result
=================  ===================  ==================  ==============
selectors          load_selection_data  audit_selection     SelectionAudit
raters             load_rating_data     audit_rating        RatingAudit
attribute judges   load_attribute_data  audit_attributes    AttributeAudit
=================  ===================  ==================  ==============

A loader reads one dataset from a store opened with `store.connect(path, read_only=True)`
(a database made by `runners.ingest` or `runners.demo`)::

    from audit_core import Resampling, audit_selection, load_selection_data, store

    con = store.connect("data/demo.duckdb", read_only=True)
    result = audit_selection(load_selection_data(con, "demo"), Resampling(1_000, seed=0))
    result.policies  # one row per policy: regret, gain over random, below-mean rate, ...

Every audit takes its bootstrap settings as one value, `Resampling(resamples=10_000, seed=0)`
by default (0 resamples: estimates without intervals), and its result keeps it as `resampling`.

Or audit pandas DataFrames shaped like the table contract, validated as `runners.ingest table`
validates files, with no database file of yours: `store_from_frames(pools, dataset="mine",
decisions={"judge": frame})` returns an in-memory store the loaders read.

A selection study above 200,000 prompts can also be audited in partitions, no process holding it
whole: `store.partitions.export_partitions` copies its prompts' rows into Parquet partitions, and
`selection.partitioned.audit_partitions` makes the same `SelectionAudit` from passes over one
`PartitionWorker` per partition (`LocalWorkers` here; Ray actors in `runners.analyze_ray`).

Subpackages, one place per concept: `selection`, `rating` and `attributes` (one per judge
kind; none imports another), `stats` (bootstrap schemes and draws, shared by every kind),
`store` (DuckDB schema and store, audit cache, what is kept beside a database) and `ingest`
(every importer and the table contract's validation); `errors`, `user_text` and `chunks` (the
consecutive row chunks every pass over a large study walks) are leaves every layer may use.
audit_core imports neither streamlit nor torch nor `runners`.
"""

from audit_core import store
from audit_core.attributes.audit import AttributeAudit, AttributeData, audit_attributes, load_attribute_data
from audit_core.errors import DatabaseFileError, InputError
from audit_core.ingest.frames import store_from_frames
from audit_core.rating.audit import RatingAudit, RatingData, audit_rating, load_rating_data
from audit_core.selection.audit import SelectionAudit, audit_selection
from audit_core.selection.data import SelectionData, load_selection_data
from audit_core.stats.resampling import Resampling

__all__ = [
    "AttributeAudit",
    "AttributeData",
    "DatabaseFileError",
    "InputError",
    "RatingAudit",
    "RatingData",
    "Resampling",
    "SelectionAudit",
    "SelectionData",
    "audit_attributes",
    "audit_rating",
    "audit_selection",
    "load_attribute_data",
    "load_rating_data",
    "load_selection_data",
    "store",
    "store_from_frames",
]
