"""Rating judges against each reference pool (DESIGN §4b): alignment, tilt, floor, Wilcoxon.

A *rater* is one (judge, condition). A *pool* is a named group of annotators; its
consensus c_p(i) on item i is its consensus row where there is one, else the mean
of its votes on i (`pool_consensus`). Inputs are long frames, as the store loads them:

    ratings    judge, condition, candidate_id, rating, status (rating NaN unless status ok)
    votes      candidate_id, outcome, pool, annotator, value     (or consensus, or both)
    consensus  candidate_id, pool, value [, outcome]
    items      candidate_id plus attribute columns: the breakdown groups

Ratings are integers on the rubric scale lo..hi. Abstentions and failures are counted,
never scored. Bad input raises ValueError naming the frame, the row and the field.

Intervals: one item-level percentile bootstrap serves every figure. The resampled
items are the audited ones (every item with some pool's consensus, sorted by id),
drawn with replacement as seeded count weights (`bootstrap.count_weights`). Each
cell's statistic is a ratio of weighted sums over the items it covers, so its n
varies across resamples as a judge's abstentions and a group's size would in a
new sample of items, and all raters, pools and groups see the same draws (Δ and T
are paired). The sums are columns of one per-item matrix X, summed as W @ X once
per resample chunk in float32, so an interval endpoint computed in another chunking
(another WEIGHT_ELEMENTS, a table computed alone) agrees within `resample_tolerance(n, scale)`
= n·2⁻²⁴·(hi − lo) for n items: a float32 sum of n terms, each at most the scale's span, far
below bootstrap noise.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd
from scipy import stats

from audit_core.chunks import row_chunks
from audit_core.rating.reliability import pool_consensus, require_columns
from audit_core.stats.bootstrap import count_weights, percentile_interval, ratio
from audit_core.stats.resampling import Resampling
from audit_core.store.schema import RATING_STATUSES

SCALE = (1, 5)
ANCHOR = "anchor"  # the breakdown by anchors (high / low / contested), beside the items' attributes
ALIGNMENT_COLUMNS = (
    "judge", "condition", "pool", "group", "n", "abstained", "mae", "mae_lo", "mae_hi",
    "pearson", "pearson_lo", "pearson_hi", "qwk", "floor_share", "pool_floor_share",
    "floor_recovery", "failed",
)
TILT_COLUMNS = (
    "judge", "condition", "pool_a", "pool_b", "group", "delta", "delta_lo", "delta_hi",
    "tilt", "tilt_lo", "tilt_hi", "n_tilt", "n_delta",
)
WILCOXON_COLUMNS = (
    "judge", "condition_a", "condition_b", "pool_a", "pool_b", "n", "n_nonzero", "mean_diff",
    "statistic", "p_value",
)
TIE = 1e-9  # consensus values (means of votes) closer than this are equal
# Pearson is undefined where a side's variance is below this share of (hi − lo)²: exact
# zero up to float64 rounding for point estimates, float32 rounding for resamples.
POINT_TOL, RESAMPLE_TOL = 1e-12, 1e-6
WEIGHT_ELEMENTS = 12_500_000  # elements of one chunk of resample weights (50 MB in float32)
GROUP_ELEMENTS = 25_000_000  # elements of one chunk of per-group sums
STAT_BLOCK = 512  # statistics per percentile call (bounds the float64 copy it makes)


@dataclass(frozen=True)
class AlignmentTables:
    """Both bootstrap tables from one pass: `alignment` (ALIGNMENT_COLUMNS), `tilt` (TILT_COLUMNS)."""

    alignment: pd.DataFrame
    tilt: pd.DataFrame


@dataclass(frozen=True)
class _Audit:
    """The inputs as aligned arrays over the audited items (sorted ids)."""

    items: pd.Index
    pools: list[str]
    consensus: np.ndarray  # (n, P), NaN where the pool has no consensus
    raters: list[tuple[str, str]]  # (judge, condition), sorted
    ratings: np.ndarray  # (n, J), NaN unless status ok
    status: np.ndarray  # (n, J) index into RATING_STATUSES, −1 where the rater has no row
    scale: tuple[int, int]


def alignment_tables(
    ratings: pd.DataFrame,
    *,
    votes: pd.DataFrame | None = None,
    consensus: pd.DataFrame | None = None,
    items: pd.DataFrame | None = None,
    scale: tuple[int, int] = SCALE,
    outcome: str = "rubric",
    resampling: Resampling = Resampling(),
    group_by: Sequence[str] | None = None,
) -> AlignmentTables:
    """The alignment and tilt tables from one bootstrap pass (see `alignment_table`, `tilt_table`)."""
    return _tables(ratings, votes, consensus, items, scale, outcome, resampling, group_by, True, True)


def alignment_table(
    ratings: pd.DataFrame,
    *,
    votes: pd.DataFrame | None = None,
    consensus: pd.DataFrame | None = None,
    items: pd.DataFrame | None = None,
    scale: tuple[int, int] = SCALE,
    outcome: str = "rubric",
    resampling: Resampling = Resampling(),
    group_by: Sequence[str] | None = None,
) -> pd.DataFrame:
    """One row per judge × condition × pool × group (ALIGNMENT_COLUMNS).

    Over the items the judge rated that have pool p's consensus (n of them):
    mae = mean |r − c_p|; pearson = corr(r, c_p), NaN when either side is constant;
    qwk = Cohen's kappa with quadratic weights between r and c_p rounded half up to
    the scale's points, = 1 − Σ(r − q)² / Σ_ab n_a m_b (a − b)² / n; floor_share and
    pool_floor_share = shares of r and of c_p in the bottom two points (≤ lo + 1);
    floor_recovery = share of r there among the items whose c_p is there.
    abstained and failed (parse or runtime) count the other items with p's consensus.
    group: 'all'; '<column>=<value>' per attribute value of `items`; 'anchor=high'
    (every pool's consensus in the top two points, ≥ hi − 1), 'anchor=low' (every
    one in the bottom two) or 'anchor=contested', over the pools with a consensus on
    the item (with two pools: both). group_by: the breakdowns in order, 'anchor' and
    column names of `items` (default: 'anchor' then every attribute column).
    Intervals: 95% item-level percentile bootstrap under `resampling` (module docstring); attrs
    record its resamples and seed.
    """
    return _tables(ratings, votes, consensus, items, scale, outcome, resampling, group_by, True, False).alignment


def tilt_table(
    ratings: pd.DataFrame,
    *,
    votes: pd.DataFrame | None = None,
    consensus: pd.DataFrame | None = None,
    items: pd.DataFrame | None = None,
    scale: tuple[int, int] = SCALE,
    outcome: str = "rubric",
    resampling: Resampling = Resampling(),
    group_by: Sequence[str] | None = None,
) -> pd.DataFrame:
    """One row per judge × condition × pool pair (pool_a < pool_b by name) × group (TILT_COLUMNS).

    delta Δ = MAE_a − MAE_b (positive: closer to b) over the n_delta items rated with
    both pools' consensus (the alignment table's MAE_a − MAE_b when every item has both);
    tilt T = mean_i clip((2 r_i − c_a − c_b) / (c_a − c_b), −1, 1) over the n_tilt of them
    where c_a ≠ c_b (+1: at a's consensus, −1: at b's, 0: midway). Groups as in
    `alignment_table`, anchors taken from the two pools of the pair.
    """
    return _tables(ratings, votes, consensus, items, scale, outcome, resampling, group_by, False, True).tilt


def paired_wilcoxon(
    ratings: pd.DataFrame,
    *,
    votes: pd.DataFrame | None = None,
    consensus: pd.DataFrame | None = None,
    scale: tuple[int, int] = SCALE,
    outcome: str = "rubric",
) -> pd.DataFrame:
    """Paired Wilcoxon signed-rank tests of per-item absolute error e = |r − c| (WILCOXON_COLUMNS).

    One row per judge × condition × pool pair (e under pool_a vs pool_b, items rated with
    both consensuses; condition_a = condition_b) and per judge × pool × condition pair
    (e under condition_a vs condition_b, items rated under both; pool_a = pool_b).
    mean_diff = mean(e_a − e_b); differences are rounded to 9 decimals so that float noise
    neither breaks ties nor hides zeros; zero differences are dropped (Wilcoxon's method;
    n_nonzero remain). statistic = min(W+, W−) and the two-sided p-value of
    scipy.stats.wilcoxon (method 'auto'); NaN when no difference is non-zero.
    """
    audit = _audit(ratings, votes, consensus, outcome, scale)
    errors = np.abs(audit.ratings[:, :, None] - audit.consensus[:, None, :])  # (n, J, P)
    rows = []
    for j, (judge, condition) in enumerate(audit.raters):
        for a, b in combinations(range(len(audit.pools)), 2):
            rows.append((judge, condition, condition, audit.pools[a], audit.pools[b],
                         *_wilcoxon(errors[:, j, a], errors[:, j, b])))
    by_judge: dict[str, list[int]] = {}
    for j, (judge, _) in enumerate(audit.raters):
        by_judge.setdefault(judge, []).append(j)
    for judge, raters in by_judge.items():
        for p, pool in enumerate(audit.pools):
            for a, b in combinations(raters, 2):
                rows.append((judge, audit.raters[a][1], audit.raters[b][1], pool, pool,
                             *_wilcoxon(errors[:, a, p], errors[:, b, p])))
    return pd.DataFrame(rows, columns=list(WILCOXON_COLUMNS)).astype({"n": int, "n_nonzero": int})


def round_half_up(values: np.ndarray) -> np.ndarray:
    """Nearest integer, halves rounded up (2.5 → 3, 3.5 → 4), tolerating float noise of means."""
    return np.floor(np.asarray(values, dtype=float) + 0.5 + TIE)


# ---------------------------------------------------------------------------- inputs


def _rating_row(frame: pd.DataFrame, mask: pd.Series) -> str:
    """Where the first flagged rating row is, for error messages."""
    first = frame[mask].iloc[0]
    return (f"ratings row {frame.index[mask.to_numpy()][0]} (judge {first['judge']!r}, condition "
            f"{first['condition']!r}, candidate {first['candidate_id']!r})")


def resample_tolerance(n: int, scale: tuple[int, int] = SCALE) -> float:
    """n·2⁻²⁴·(hi − lo): how far an interval endpoint over `n` items may move with the chunking of
    its float32 resampled sums (float32's unit roundoff per term, each term at most the scale's span)."""
    lo, hi = scale
    return n * 2.0**-24 * (hi - lo)


def _check_scale(scale: tuple[int, int]) -> tuple[int, int]:
    lo, hi = scale
    if int(lo) != lo or int(hi) != hi or hi - lo < 3:
        raise ValueError(f"scale {scale}: need integer points lo..hi with at least 4 points "
                         "(so that the top two and bottom two points are distinct)")
    return int(lo), int(hi)


def _audit(
    ratings: pd.DataFrame,
    votes: pd.DataFrame | None,
    consensus: pd.DataFrame | None,
    outcome: str,
    scale: tuple[int, int],
) -> _Audit:
    """Validate the inputs and align them on the audited items (those with some pool's consensus)."""
    lo, hi = _check_scale(scale)
    cons = pool_consensus(votes, consensus, outcome)
    off_scale = (cons["value"] < lo - TIE) | (cons["value"] > hi + TIE)
    if off_scale.any():
        first = cons[off_scale].iloc[0]
        raise ValueError(f"consensus of pool {first['pool']!r} on candidate {first['candidate_id']!r} is "
                         f"{first['value']:g}, outside the scale {lo}..{hi}")
    items = pd.Index(sorted(cons["candidate_id"].unique()))
    pools = sorted(cons["pool"].unique())
    matrix = np.full((len(items), len(pools)), np.nan)
    matrix[items.get_indexer(cons["candidate_id"]), pd.Index(pools).get_indexer(cons["pool"])] = cons["value"]

    require_columns(ratings, "ratings", ("judge", "condition", "candidate_id", "rating", "status"))
    status = ratings["status"]
    unknown = ~status.isin(RATING_STATUSES)
    if unknown.any():
        raise ValueError(f"{_rating_row(ratings, unknown)}: field 'status' is {status[unknown].iloc[0]!r}, "
                         f"expected one of {', '.join(RATING_STATUSES)}")
    value = pd.to_numeric(ratings["rating"], errors="coerce")
    problems = (
        (ratings["rating"].notna() & value.isna(), "is not a number"),
        ((status == "ok") & value.isna(), "is empty although the status is 'ok'"),
        ((status != "ok") & value.notna(), "must be empty unless the status is 'ok' (abstentions are never numbers)"),
        (value.notna() & ((value % 1 != 0) | (value < lo) | (value > hi)), f"is not an integer on the scale {lo}..{hi}"),
    )
    for bad, why in problems:
        if bad.any():
            raise ValueError(f"{_rating_row(ratings, bad)}: field 'rating' {ratings['rating'][bad].iloc[0]!r} {why}")
    duplicated = ratings.duplicated(["judge", "condition", "candidate_id"])
    if duplicated.any():
        raise ValueError(f"{_rating_row(ratings, duplicated)}: a second rating of the same item by the same "
                         "judge and condition")

    keys = pd.MultiIndex.from_frame(ratings[["judge", "condition"]].astype(str))
    raters = keys.unique().sort_values()
    item = items.get_indexer(ratings["candidate_id"])
    known = item >= 0  # ratings of items without any consensus have nothing to be compared with
    rater = raters.get_indexer(keys)
    rating_matrix = np.full((len(items), len(raters)), np.nan)
    status_matrix = np.full((len(items), len(raters)), -1, dtype=np.int8)
    rating_matrix[item[known], rater[known]] = value.to_numpy(dtype=float)[known]
    status_matrix[item[known], rater[known]] = pd.Index(RATING_STATUSES).get_indexer(status)[known]
    return _Audit(items, pools, matrix, list(raters), rating_matrix, status_matrix, (lo, hi))


# ---------------------------------------------------------------------------- groups


def _anchor_groups(consensus: np.ndarray, scale: tuple[int, int]) -> list[tuple[str, np.ndarray]]:
    """high / low / contested over items with a consensus from every pool in `consensus`'s
    columns that has one (at least one): all in the top two points, all in the bottom two, else."""
    lo, hi = scale
    present = ~np.isnan(consensus)
    rated = present.any(axis=1)
    high = rated & np.where(present, consensus >= hi - 1 - TIE, True).all(axis=1)
    low = rated & np.where(present, consensus <= lo + 1 + TIE, True).all(axis=1)
    return [("anchor=high", high), ("anchor=low", low), ("anchor=contested", rated & ~high & ~low)]


def _breakdowns(
    audit: _Audit, items: pd.DataFrame | None, group_by: Sequence[str] | None
) -> tuple[np.ndarray, dict[object, list[tuple[str, int]]]]:
    """members (n, G) bool and, per scope (None: per-pool cells; (a, b): that pair's tilt
    cells), the (label, group index) list in output order; anchors differ by scope."""
    attributes = [c for c in items.columns if c != "candidate_id"] if items is not None else []
    if items is not None:
        require_columns(items, "items", ("candidate_id",))
        if items["candidate_id"].duplicated().any():
            raise ValueError(f"items: candidate {items['candidate_id'][items['candidate_id'].duplicated()].iloc[0]!r} "
                             "appears twice")
    group_by = list(group_by) if group_by is not None else [ANCHOR, *attributes]
    unknown = [g for g in group_by if g != ANCHOR and g not in attributes]
    if unknown:
        raise ValueError(f"group_by: {', '.join(map(repr, unknown))} is neither 'anchor' nor an attribute "
                         f"column of items ({', '.join(attributes) or 'none given'})")
    n = len(audit.items)
    pairs = list(combinations(range(len(audit.pools)), 2))
    members = [np.ones(n, dtype=bool)]
    layout: dict[object, list[tuple[str, int]]] = {scope: [("all", 0)] for scope in [None, *pairs]}

    def add(scope: object, label: str, mask: np.ndarray) -> None:
        members.append(mask)
        for target in layout if scope == "every" else [scope]:
            layout[target].append((label, len(members) - 1))

    for name in group_by:
        if name == ANCHOR:
            for label, mask in _anchor_groups(audit.consensus, audit.scale):
                add(None, label, mask)
            for a, b in pairs:
                both = audit.consensus[:, [a, b]]
                for label, mask in _anchor_groups(both, audit.scale):
                    add((a, b), label, mask & ~np.isnan(both).any(axis=1))
        else:
            column = items.set_index("candidate_id")[name].reindex(audit.items)
            for value in sorted(column.dropna().unique(), key=str):
                add("every", f"{name}={value}", (column == value).to_numpy())
    return np.column_stack(members), layout


@dataclass(frozen=True)
class _Units:
    """How item weights sum into groups: items `order[bounds[k]:bounds[k+1]]` form unit k,
    whose sums add to the groups `groups[k]`."""

    order: np.ndarray
    bounds: np.ndarray
    groups: list[np.ndarray]


def _units(members: np.ndarray) -> _Units:
    """Units = the items' distinct group-membership patterns (one product over all items however
    many breakdowns overlap), or the groups themselves when that sums fewer numbers."""
    n, width = members.shape
    patterns, inverse = np.unique(np.packbits(members, axis=1), axis=0, return_inverse=True)
    inverse = inverse.ravel()
    if n + len(patterns) * width <= members.sum():
        order = np.argsort(inverse, kind="stable")
        sizes = np.bincount(inverse, minlength=len(patterns))
        groups = [np.flatnonzero(row) for row in np.unpackbits(patterns, axis=1, count=width)]
    else:
        order = np.concatenate([np.flatnonzero(members[:, g]) for g in range(width)])
        sizes = members.sum(axis=0)
        groups = [np.array([g]) for g in range(width)]
    return _Units(order, np.concatenate([[0], np.cumsum(sizes)]), groups)


# ---------------------------------------------------------------------------- sums


class _Columns:
    """Per-item columns x·1[mask] whose sums the statistics need, shared by every cell that
    asks for the same value on the same items (a judge with no abstentions, pools with a
    consensus on every item ... share most columns)."""

    def __init__(self) -> None:
        self._masks: dict[bytes, int] = {}
        self._index: dict[tuple, int] = {}
        self.values: list[np.ndarray] = []
        self.resampled: list[bool] = []

    def add(self, mask: np.ndarray, name: tuple, value: np.ndarray | float, resampled: bool) -> int:
        """Index of the column value·1[mask]; `name` identifies `value` (e.g. ('r', rater))."""
        key = (self._masks.setdefault(np.packbits(mask).tobytes(), len(self._masks)), name)
        if key not in self._index:
            self._index[key] = len(self.values)
            self.values.append(np.where(mask, value, 0.0))
            self.resampled.append(resampled)
        self.resampled[self._index[key]] |= resampled
        return self._index[key]


@dataclass(frozen=True)
class _Cells:
    """Cells (rows of one table): their keys, the group of each and, per sum name, its column."""

    keys: list[tuple]
    group: np.ndarray
    columns: dict[str, np.ndarray]

    def taker(self, sums: np.ndarray, position: np.ndarray | None = None):
        """name → (cells, b) sums of that column in each cell's group; sums: (groups, b, columns);
        position maps column indices to the columns of `sums` when it holds only some."""
        def take(name: str) -> np.ndarray:
            cols = self.columns[name] if position is None else position[self.columns[name]]
            return sums[self.group, :, cols].astype(float)
        return take


def _resampled_group_sums(
    x: np.ndarray, units: _Units, n_groups: int, resampling: Resampling
) -> Iterator[tuple[slice, np.ndarray]]:
    """Per chunk of resamples: (rows, sums (groups, b, columns)) with sums[g, b, s] =
    Σ_{i in g} w_bi x_is for count weights w drawn over the n items in their given order
    (`resampling.resamples` rows b in all, drawn from `default_rng(resampling.seed)`)."""
    n, width = x.shape
    ordered = np.ascontiguousarray(x[units.order], dtype=np.float32)
    chunk = max(1, min(WEIGHT_ELEMENTS // max(n, 1), GROUP_ELEMENTS // max(n_groups * width, 1)))
    rng = np.random.default_rng(resampling.seed)
    for rows in row_chunks(resampling.resamples, chunk):
        weights = np.take(count_weights(rng, rows.stop - rows.start, n, np.float32), units.order, axis=1)
        sums = np.zeros((n_groups, rows.stop - rows.start, width), dtype=np.float32)
        for k, groups in enumerate(units.groups):
            lo, hi = units.bounds[k], units.bounds[k + 1]
            block = weights[:, lo:hi] @ ordered[lo:hi]
            for g in groups:
                sums[g] += block
        yield rows, sums


# ---------------------------------------------------------------------------- statistics


def _pearson_from_sums(take, tol: float) -> np.ndarray:
    """corr from Σ1, Σr, Σc, Σr², Σc², Σrc; NaN where a side's variance ≤ tol."""
    n = take("one")
    mr, mc = ratio(take("r"), n), ratio(take("c"), n)
    vr, vc = ratio(take("rr"), n) - mr**2, ratio(take("cc"), n) - mc**2
    defined = (vr > tol) & (vc > tol)  # False where NaN (no items)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (ratio(take("rc"), n) - mr * mc) / np.sqrt(np.where(defined, vr * vc, 1.0))
    return np.where(defined, np.clip(r, -1.0, 1.0), np.nan)


def _alignment_estimates(take, tol: float) -> dict[str, np.ndarray]:
    """The resampled figures of alignment cells: mae, pearson."""
    return {"mae": ratio(take("abs"), take("one")), "pearson": _pearson_from_sums(take, tol)}


def _tilt_estimates(take) -> dict[str, np.ndarray]:
    """The resampled figures of tilt cells: delta, tilt."""
    return {"delta": ratio(take("abs_a") - take("abs_b"), take("one")), "tilt": ratio(take("t"), take("one_t"))}


def _alignment_point(take, tol: float) -> dict[str, np.ndarray]:
    """The point-only figures of alignment cells: counts, qwk (closed form), floor shares."""
    n, sq, sr = take("one"), take("q"), take("r")
    expected = n * take("rr") + n * take("qq") - 2 * sr * sq  # n · Σ_ab n_a m_b (a − b)² / n
    with np.errstate(invalid="ignore", divide="ignore"):
        qwk = 1 - n * take("rq") / expected
    return {
        "n": n, "abstained": take("abstained"), "failed": take("failed"),
        "qwk": np.where(expected > tol * n**2, qwk, np.nan),
        "floor_share": ratio(take("floor_r"), n), "pool_floor_share": ratio(take("floor_c"), n),
        "floor_recovery": ratio(take("floor_rc"), take("floor_c")),
    }


def _tilt_point(take) -> dict[str, np.ndarray]:
    """The point-only figures of tilt cells: their two item counts."""
    return {"n_delta": take("one"), "n_tilt": take("one_t")}


ALIGNMENT_SUMS = ("one", "r", "rr", "c", "cc", "rc", "abs", "abstained", "failed", "q", "qq", "rq",
                  "floor_r", "floor_c", "floor_rc")
TILT_SUMS = ("one", "abs_a", "abs_b", "one_t", "t")
OK, ABSTAINED = RATING_STATUSES.index("ok"), RATING_STATUSES.index("abstained")
FAILED = [RATING_STATUSES.index("parse_fail"), RATING_STATUSES.index("runtime_fail")]


def _cells(audit: _Audit, layout: dict, columns: _Columns, alignment: bool, tilt: bool) -> dict[str, _Cells]:
    """Register every column the wanted cells need; return the alignment and tilt cells in table
    order (rater, then pool or pool pair, then group), none of a kind not wanted."""
    lo, hi = audit.scale
    mid = (lo + hi) / 2  # centred values: smaller magnitudes, less float32 cancellation
    has = ~np.isnan(audit.consensus)
    c = np.nan_to_num(audit.consensus - mid)
    q = np.nan_to_num(np.clip(round_half_up(audit.consensus), lo, hi) - mid)
    floor_c = audit.consensus <= lo + 1 + TIE
    pairs = list(combinations(range(len(audit.pools)), 2))
    entries: dict[str, list[tuple[tuple, dict[str, int], list[tuple[str, int]]]]] = {"alignment": [], "tilt": []}
    for j, rater in enumerate(audit.raters):
        rated = audit.status[:, j] == OK
        abstained = audit.status[:, j] == ABSTAINED
        failed = np.isin(audit.status[:, j], FAILED)
        r = np.nan_to_num(audit.ratings[:, j] - mid)
        floor_r = rated & (audit.ratings[:, j] <= lo + 1)
        for p, pool in enumerate(audit.pools if alignment else []):
            m, cp = rated & has[:, p], c[:, p]
            resampled = (("one", ("one",), 1.0), ("r", ("r", j), r), ("rr", ("rr", j), r * r),
                         ("c", ("c", p), cp), ("cc", ("cc", p), cp * cp), ("rc", ("rc", j, p), r * cp),
                         ("abs", ("abs", j, p), np.abs(r - cp)))
            cols = {name: columns.add(m, key, value, True) for name, key, value in resampled}
            point_only = (("q", ("q", p), q[:, p]), ("qq", ("qq", p), q[:, p] ** 2),
                          ("rq", ("rq", j, p), (r - q[:, p]) ** 2), ("floor_r", ("floor_r", j), floor_r),
                          ("floor_c", ("floor_c", p), floor_c[:, p]),
                          ("floor_rc", ("floor_rc", j, p), floor_r & floor_c[:, p]))
            cols |= {name: columns.add(m, key, value, False) for name, key, value in point_only}
            cols["abstained"] = columns.add(has[:, p] & abstained, ("one",), 1.0, False)
            cols["failed"] = columns.add(has[:, p] & failed, ("one",), 1.0, False)
            entries["alignment"].append(((*rater, pool), cols, layout[None]))
        for a, b in pairs if tilt else []:
            m = rated & has[:, a] & has[:, b]
            differ = m & (np.abs(c[:, a] - c[:, b]) > TIE)
            with np.errstate(invalid="ignore", divide="ignore"):
                t = np.clip((2 * r - c[:, a] - c[:, b]) / (c[:, a] - c[:, b]), -1.0, 1.0)
            cols = {
                "one": columns.add(m, ("one",), 1.0, True),
                "abs_a": columns.add(m, ("abs", j, a), np.abs(r - c[:, a]), True),
                "abs_b": columns.add(m, ("abs", j, b), np.abs(r - c[:, b]), True),
                "one_t": columns.add(differ, ("one",), 1.0, True),
                "t": columns.add(differ, ("t", j, a, b), t, True),
            }
            entries["tilt"].append(((*rater, audit.pools[a], audit.pools[b]), cols, layout[(a, b)]))
    return {
        kind: _Cells(
            [(*key, label) for key, _, groups in rows for label, _ in groups],
            np.array([g for _, _, groups in rows for _, g in groups], dtype=np.int64),
            {name: np.array([cols[name] for _, cols, groups in rows for _ in groups], dtype=np.int64)
             for name in names},
        )
        for (kind, rows), names in zip(entries.items(), (ALIGNMENT_SUMS, TILT_SUMS))
    }


def _tables(
    ratings: pd.DataFrame,
    votes: pd.DataFrame | None,
    consensus: pd.DataFrame | None,
    items: pd.DataFrame | None,
    scale: tuple[int, int],
    outcome: str,
    resampling: Resampling,
    group_by: Sequence[str] | None,
    alignment: bool,
    tilt: bool,
) -> AlignmentTables:
    """Both tables; the kind not wanted is left empty (and costs nothing)."""
    audit = _audit(ratings, votes, consensus, outcome, scale)
    members, layout = _breakdowns(audit, items, group_by)
    columns = _Columns()
    cells = _cells(audit, layout, columns, alignment, tilt)
    range2 = float(audit.scale[1] - audit.scale[0]) ** 2
    x = np.column_stack([*columns.values, np.zeros(len(audit.items))])  # a zero column keeps x 2-D
    point_sums = (members.T.astype(float) @ x)[:, None, :]  # (groups, 1, columns), float64
    take_a, take_t = cells["alignment"].taker(point_sums), cells["tilt"].taker(point_sums)
    point = {
        "alignment": _alignment_estimates(take_a, POINT_TOL * range2) | _alignment_point(take_a, POINT_TOL * range2),
        "tilt": _tilt_estimates(take_t) | _tilt_point(take_t),
    }
    point = {kind: {name: values[:, 0] for name, values in figures.items()} for kind, figures in point.items()}
    resampled = np.flatnonzero([*columns.resampled, False])
    position = np.full(x.shape[1], -1, dtype=np.int64)
    position[resampled] = np.arange(len(resampled))
    samples = {}
    if resampling.resamples and (len(cells["alignment"].keys) or len(cells["tilt"].keys)):
        samples = _bootstrap(x[:, resampled], members, cells, position, resampling, RESAMPLE_TOL * range2)
    frames = {}
    for kind, names, table_columns in (("alignment", ("mae", "pearson"), ALIGNMENT_COLUMNS),
                                      ("tilt", ("delta", "tilt"), TILT_COLUMNS)):
        key_columns = [c for c in table_columns if c not in point[kind] and not c.endswith(("_lo", "_hi"))]
        frame = pd.DataFrame(cells[kind].keys, columns=key_columns)
        for name, values in point[kind].items():
            frame[name] = values
        for name in names:
            lo, hi = _interval(samples.get(name), point[kind][name])
            frame[f"{name}_lo"], frame[f"{name}_hi"] = lo, hi
        counts = [c for c in ("n", "abstained", "failed", "n_tilt", "n_delta") if c in frame]
        frame = frame.astype({c: int for c in counts})[list(table_columns)]
        frame.attrs.update(resamples=resampling.resamples, seed=resampling.seed)
        frames[kind] = frame
    return AlignmentTables(frames["alignment"], frames["tilt"])


def _bootstrap(
    x: np.ndarray,
    members: np.ndarray,
    cells: dict[str, _Cells],
    position: np.ndarray,
    resampling: Resampling,
    tol: float,
) -> dict[str, np.ndarray]:
    """figure name → (cells, resamples) float32 bootstrap samples of mae, pearson, delta, tilt."""
    samples = {name: np.empty((len(cells[kind].keys), resampling.resamples), dtype=np.float32)
               for kind, name in (("alignment", "mae"), ("alignment", "pearson"), ("tilt", "delta"), ("tilt", "tilt"))}
    for rows, sums in _resampled_group_sums(x, _units(members), members.shape[1], resampling):
        figures = _alignment_estimates(cells["alignment"].taker(sums, position), tol)
        figures |= _tilt_estimates(cells["tilt"].taker(sums, position))
        for name, values in figures.items():
            samples[name][:, rows] = values
    return samples


def _interval(samples: np.ndarray | None, point: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """95% percentile interval per cell, computed in blocks of cells; NaN where the point is NaN."""
    lo, hi = np.full(len(point), np.nan), np.full(len(point), np.nan)
    if samples is not None:
        for block in row_chunks(len(point), STAT_BLOCK):
            lo[block], hi[block] = percentile_interval(samples[block].T)
    undefined = np.isnan(point)
    lo[undefined], hi[undefined] = np.nan, np.nan
    return lo, hi


def _wilcoxon(e_a: np.ndarray, e_b: np.ndarray) -> tuple[int, int, float, float, float]:
    """n, n_nonzero, mean_diff, statistic, p_value of a paired signed-rank test of e_a − e_b."""
    both = ~np.isnan(e_a) & ~np.isnan(e_b)
    d = np.round(e_a[both] - e_b[both], 9)
    nonzero = int(np.count_nonzero(d))
    mean = float(d.mean()) if len(d) else np.nan
    if not nonzero:
        return len(d), 0, mean, np.nan, np.nan
    result = stats.wilcoxon(d, zero_method="wilcox", alternative="two-sided", method="auto")
    return len(d), nonzero, mean, float(result.statistic), float(result.pvalue)
