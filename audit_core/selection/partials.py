"""The selection audit's policy and slice means above `poisson.POISSON_ABOVE` prompts, from partial sums.

Every mean of `audit.evaluate_policies` is a ratio Σ_p v_p / Σ_p a_p over the prompts: v a per-prompt
value (0 where undefined) and a = 1 where it is defined (the policy acts, the outcome is rated, the
pool is sensitive). Above the threshold the audit walks through the prompts CHUNK_WEIGHTS // B at a
time and, for each chunk (`chunk_partials`), computes every policy's per-prompt statistics of that
chunk only and adds them up into `Partials`:

- exact float64 sums Σv and Σa per column (the point estimates) and the point-only means' totals
  and counts (`policy_rows.point_values`), the same per value of every slice;
- (B, k) Poisson-weighted sums Σ_p w_pb·v_p and Σ_p w_pb·a_p, with w_pb the weight of
  (seed, prompt id, resample b) of `poisson.poisson_weights`, per column and per slice value;
- each reported policy's regret values with their counts (for the median).

Partials of any split of the prompts add up (`Partials.__add__`), so chunks, files and machines can be
reduced in any order (a partition's worker makes its own: `partitioned.worker`). From the total (`policy_frames`):

- a mean's interval is the 95% percentile interval of Σw·v / Σw·a over resamples (resamples where the
  policy acts on no drawn prompt are left out), Bonferroni intervals for the error deltas as below;
- the worst group takes, in every resample, the largest country ratio over the countries the policy
  covers in the point estimate (the number of prompts in each country varies with the weights instead
  of being held fixed, as the stratified scheme does below the threshold);
- a gate's kept minus rejected side is the difference of the two sides' ratios in the same resample
  (joint, as below the threshold);
- what is not prompt-local is fixed from the whole study's point data, as below the threshold: the
  slices' cut points (range tertiles, the consensus median) and the policies themselves (the debiased
  selectors' fits); the bootstrap does not recompute them. The regret median is exact.

Sums run in float32 within a chunk and float64 across chunks: a resampled sum moves by a relative
~1e-6 with another chunking (SUM_TOLERANCE), far below the bootstrap's noise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from audit_core.chunks import row_chunks
from audit_core.selection import gates, groups, metrics
from audit_core.selection.data import SelectionData
from audit_core.selection.policy_rows import (
    BONFERRONI_LEVEL,
    LEVEL,
    SIDE_OUTCOMES,
    attach_intervals,
    bonferroni,
    mean_of,
    point_row,
    point_values,
    policy_values,
    side_differences,
)
from audit_core.selection.slices import INTERVAL_STATS, POINT_STATS, SLICE_COLUMNS
from audit_core.stats import bootstrap
from audit_core.stats.poisson import poisson_weights, prompt_keys
from audit_core.stats.resampling import Resampling
from audit_core.store.schema import ERROR_OUTCOMES

CHUNK_WEIGHTS = 1 << 22  # prompts × resamples of one chunk's weights (16 MB as float32)
CHUNK_PROMPTS = 4_096  # prompts of one chunk at most (its per-policy statistics: ~60 policies × 40 values each)
SUM_TOLERANCE = 1e-5  # relative change of a resampled sum with another chunking (float32 within a chunk)
FIELDS = ("base_judge", "threshold", "orders", "partner")
DRAWN_KINDS = ("random", "oracle")  # policies whose choice is a distribution made from the ratings
SLICE_BOOT = ("regret", "gain", "random_regret", "stereotype_delta", "acted", "stereotype")  # boot columns per policy


@dataclass(frozen=True)
class PolicyRef:
    """What the sums need of an evaluated policy: its name, kind, contract fields, whether it is reported,
    and for a gate with an ungated comparison the name of that comparison."""

    name: str
    kind: str
    fields: tuple[object, ...]
    report: bool
    ungated: str | None = None


@dataclass(frozen=True)
class Layout:
    """What every chunk computes, fixed before the first: the policies, the outcomes beside alignment,
    the slices (name and value names; codes come with each chunk) and the resampling."""

    policies: tuple[PolicyRef, ...]
    outcomes: tuple[str, ...]
    slices: tuple[tuple[str, tuple[str, ...]], ...]
    resampling: Resampling

    @property
    def reported(self) -> list[PolicyRef]:
        return [p for p in self.policies if p.report]

    @property
    def values(self) -> int:
        """Slice values over all slices."""
        return sum(len(values) for _, values in self.slices)


def layout_of(everything: Sequence, outcomes: Sequence[str], parts: Sequence, resampling: Resampling) -> Layout:
    """The Layout of evaluated policies (`audit.Evaluated`), the outcomes beside alignment and the slices
    (`slices.Partition`) under `resampling`."""
    names = {ev.name for ev in everything}
    refs = tuple(PolicyRef(ev.name, ev.kind, tuple(getattr(ev, f) for f in FIELDS), ev.report,
                           f"{ev.name} ungated" if ev.report and f"{ev.name} ungated" in names else None)
                 for ev in everything)
    return Layout(refs, tuple(outcomes), tuple((p.name, tuple(p.values)) for p in parts), resampling)


@dataclass
class Partials:
    """Sums over some of the prompts (module docstring); `a + b` is the sums over both sets.

    names / sums / resampled: the policy columns (`policy\\tstat` values, `policy\\t#support` indicators),
    exact (k,) and Poisson-weighted (B, k); points / totals / counts: the point-only means' totals and
    counts; slice_sums (V, 9·policies) exact, slice_resampled (V, B, 6·policies) weighted per slice value
    (columns per reported policy: SLICE_BOOT then POINT_STATS); slice_prompts (V,) prompts per value;
    regrets: policy -> (distinct regret values, their counts); prompts: how many prompts were added.
    """

    names: tuple[str, ...]
    sums: np.ndarray
    resampled: np.ndarray
    points: tuple[str, ...]
    totals: np.ndarray
    counts: np.ndarray
    slice_sums: np.ndarray
    slice_resampled: np.ndarray
    slice_prompts: np.ndarray
    regrets: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    prompts: int = 0

    def __add__(self, other: Partials) -> Partials:
        if self.names != other.names or self.points != other.points:
            raise ValueError("partial sums of different layouts cannot be added")
        return Partials(self.names, self.sums + other.sums, self.resampled + other.resampled, self.points,
                        self.totals + other.totals, self.counts + other.counts, self.slice_sums + other.slice_sums,
                        self.slice_resampled + other.slice_resampled, self.slice_prompts + other.slice_prompts,
                        {k: _merged_counts(v, other.regrets[k]) for k, v in self.regrets.items()},
                        self.prompts + other.prompts)


def _merged_counts(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values, counts) of two such multisets together."""
    distinct, inverse = np.unique(np.concatenate([a[0], b[0]]), return_inverse=True)
    counts = np.bincount(inverse, weights=np.concatenate([a[1], b[1]]), minlength=len(distinct))
    return distinct, counts.astype(np.int64)


def _support(stat: str) -> str:
    """Which indicator a policy value's mean is over: its outcome rated (`<o>_delta`), sensitive
    (`<o>_sensitive_delta`), else acted; per `metrics.prompt_stats` a value is defined exactly there."""
    if stat.endswith("_delta") and stat != "bmr_delta":
        return stat[: -len("_delta")]
    return "acted"


def chunk_rows(resampling: Resampling) -> int:
    """Prompts per chunk: CHUNK_PROMPTS and CHUNK_WEIGHTS weights at most (one prompt at least)."""
    return max(1, min(CHUNK_PROMPTS, CHUNK_WEIGHTS // max(resampling.resamples, 1)))


def chunk_partials(layout: Layout, keys: np.ndarray, outcomes: Mapping[str, np.ndarray],
                   picks: Mapping[str, np.ndarray], codes: Sequence[np.ndarray]) -> Partials:
    """Partials of one chunk of c prompts: keys (c,) `poisson.prompt_keys` of their ids; outcomes:
    name -> (c, M) ratings (alignment and layout.outcomes); picks: deterministic policy -> (c,) canonical
    picks (−1 abstains; random and the oracle come from the ratings); codes: per slice, (c,) value index."""
    h = outcomes["alignment"]
    pools = metrics.pool_measures(dict(outcomes))
    drawn = {"random": metrics.uniform_choice(h), "oracle": metrics.oracle_choice(h)}
    stats = {ref.name: metrics.prompt_stats(pools, drawn[ref.kind] if ref.kind in DRAWN_KINDS else picks[ref.name])
             for ref in layout.policies}
    names, columns, points, point_columns, slice_columns = [], [], [], [], []
    regrets = {}
    missing = np.full(len(h), np.nan)
    for ref in layout.policies:
        s = stats[ref.name]
        if not ref.report:
            for k in ("regret", "gain", "bmr"):
                points.append(f"{ref.name}\t{k}")
                point_columns.append(s[k])
            continue
        supports = {}
        values = policy_values(ref.kind, s, list(layout.outcomes))
        if ref.ungated is not None:
            values["regret_vs_ungated"] = s["regret"] - stats[ref.ungated]["regret"]
        for stat, v in values.items():
            key = "regret_vs_ungated" if stat == "regret_vs_ungated" else _support(stat)
            names.append(f"{ref.name}\t{stat}")
            columns.append(v)
            if key not in supports:
                supports[key] = v
        for key, v in supports.items():
            names.append(f"{ref.name}\t#{key}")
            columns.append(np.where(np.isnan(v), np.nan, 1.0))
        for k, v in point_values(s).items():
            points.append(f"{ref.name}\t{k}")
            point_columns.append(v)
        regret = s["regret"][~np.isnan(s["regret"])]
        regrets[ref.name] = tuple(np.unique(regret, return_counts=True))
        stereotype = s.get("stereotype_delta", missing)
        slice_columns += [s["regret"], s["gain"], s["random_regret"], stereotype, s["acted"],
                          np.where(np.isnan(stereotype), np.nan, 1.0), *(s[k] for k in POINT_STATS)]
    x = _filled_rows(columns)
    point_matrix = np.stack(point_columns)
    defined = ~np.isnan(point_matrix)
    point_matrix[~defined] = 0.0
    resampling = layout.resampling
    weights = poisson_weights(keys, resampling.seed, 0, resampling.resamples).astype(np.float32)
    slice_sums, slice_resampled, slice_prompts = _slice_partials(layout, _filled_rows(slice_columns), weights, codes)
    return Partials(tuple(names), x.sum(axis=0), weights.T @ x.astype(np.float32), tuple(points),
                    point_matrix.sum(axis=1), defined.sum(axis=1).astype(np.int64),
                    slice_sums, slice_resampled, slice_prompts, regrets, len(h))


def _filled_rows(columns: list[np.ndarray]) -> np.ndarray:
    """(c, k) float64 matrix of the k per-prompt columns, 0 where undefined (NaN)."""
    rows = np.stack(columns, axis=1)
    rows[np.isnan(rows)] = 0.0
    return rows


def _slice_partials(layout: Layout, rows: np.ndarray, weights: np.ndarray,
                    codes: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(exact sums (V, k), weighted sums (V, B, boot columns), prompts (V,)) of the slice columns (c, k) per
    value of every slice (V values in all), columns laid out per reported policy as SLICE_BOOT then POINT_STATS."""
    per = len(SLICE_BOOT) + len(POINT_STATS)
    c = len(rows)
    boot = np.ascontiguousarray(rows.reshape(c, -1, per)[:, :, :len(SLICE_BOOT)].reshape(c, -1), dtype=np.float32)
    sums = np.zeros((layout.values, rows.shape[1]))
    resampled = np.zeros((layout.values, weights.shape[1], boot.shape[1]))
    prompts = np.zeros(layout.values, dtype=np.int64)
    start = 0
    for (_, values), code in zip(layout.slices, codes):
        order = np.argsort(code, kind="stable")
        bounds = np.searchsorted(code[order], np.arange(len(values) + 1))
        prompts[start:start + len(values)] = np.diff(bounds)
        whole = len(values) == 1 and bounds[1] == len(order)  # one value holding every prompt: no reordering
        ordered, drawn, kept = (rows, weights, boot) if whole else (rows[order], weights[order], boot[order])
        for g in range(len(values)):
            lo, hi = bounds[g], bounds[g + 1]
            if hi > lo:
                sums[start + g] = ordered[lo:hi].sum(axis=0)
                resampled[start + g] = drawn[lo:hi].T @ kept[lo:hi]
        start += len(values)
    return sums, resampled, prompts


def _median(distinct: np.ndarray, counts: np.ndarray) -> float:
    """The median of the multiset (distinct ascending, counts) as numpy's (mean of the middle two)."""
    n = int(counts.sum())
    if n == 0:
        return float("nan")
    ends = np.cumsum(counts)
    middle = distinct[np.searchsorted(ends, [(n - 1) // 2, n // 2], side="right")]
    return float(np.mean(middle))


def _intervals(num: np.ndarray, den: np.ndarray, levels: tuple[float, ...]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Percentile intervals per column of the resample ratios num / den (NaN where den is 0)."""
    return bootstrap.percentile_intervals(bootstrap.ratio(num, den), levels)


def policy_frames(layout: Layout, total: Partials) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(policies, ungated, slices) frames as `audit.evaluate_policies` returns them, from the sums over
    every prompt (module docstring for the intervals)."""
    column = {name: k for k, name in enumerate(total.names)}
    point = {name: k for k, name in enumerate(total.points)}
    reported = layout.reported
    n_prompts = total.prompts

    def sums_of(policy: str) -> dict[str, tuple[float, int]]:
        prefix = f"{policy}\t"
        return {name[len(prefix):]: (float(total.totals[k]), int(total.counts[k]))
                for name, k in point.items() if name.startswith(prefix)}

    rows, cells = [], []
    for ref in reported:
        regret = total.regrets[ref.name]
        rows.append(point_row(ref.name, ref.kind, dict(zip(FIELDS, ref.fields)), sums_of(ref.name),
                              _median(*regret), n_prompts))
        for name in total.names:
            if name.startswith(f"{ref.name}\t") and "\t#" not in name:
                stat = name.split("\t", 1)[1]
                support = "regret_vs_ungated" if stat == "regret_vs_ungated" else _support(stat)
                cells.append((ref.name, stat, column[name], column[f"{ref.name}\t#{support}"]))
    num = np.array([c[2] for c in cells], dtype=np.int64)
    den = np.array([c[3] for c in cells], dtype=np.int64)
    (lo, hi), (lo_b, hi_b) = _intervals(total.resampled[:, num], total.resampled[:, den], (LEVEL, BONFERRONI_LEVEL))
    every = np.array([bonferroni(c[1]) for c in cells], dtype=bool)
    long = pd.DataFrame({"policy": [c[0] for c in cells], "stat": [c[1] for c in cells],
                         "value": bootstrap.ratio(total.sums[num], total.sums[den]), "lo": lo, "hi": hi,
                         "lo_bonf": np.where(every, lo_b, np.nan), "hi_bonf": np.where(every, hi_b, np.nan)})
    long = pd.concat([long, _kept_minus_rejected(reported, total, column)], ignore_index=True)
    table = attach_intervals(pd.DataFrame(rows), long)
    table = _with_worst_group(table, layout, total)
    internal = [ref.name for ref in layout.policies if not ref.report]
    ungated = pd.DataFrame([{"policy": name, **{k: mean_of(sums_of(name), k) for k in ("regret", "gain", "bmr")}}
                            for name in internal],
                           columns=["policy", "regret", "gain", "bmr"]).set_index("policy")
    return table, ungated, _slice_frame(layout, total)


def _kept_minus_rejected(reported: list[PolicyRef], total: Partials, column: dict[str, int]) -> pd.DataFrame:
    """Long rows (policy, stat, value, lo, hi) of each gate's kept minus rejected gain and regret, both
    sides' ratios taken in the same resample."""
    names = {ref.name for ref in reported}
    pairs = [ref.name for ref in reported if ref.kind in gates.GATE_KINDS and f"{ref.name} rejected" in names]
    index = [column[f"{side}\t{stat}"] for name in pairs for side in (name, f"{name} rejected")
             for stat in ("#acted", "gain", "regret")]
    value = side_differences(total.sums[index][None, :], len(pairs))[0] if pairs else np.zeros(0)
    lo = hi = np.full(len(value), np.nan)
    if pairs and len(total.resampled):
        lo, hi = bootstrap.percentile_interval(side_differences(total.resampled[:, index], len(pairs)), LEVEL)
    return pd.DataFrame({"policy": np.repeat(pairs, 2), "stat": ["gain_vs_rejected", "regret_vs_rejected"] * len(pairs),
                         "value": value, "lo": lo, "hi": hi})


def _slice_block(layout: Layout, name: str) -> tuple[int, int]:
    """(first row, value count) of slice `name` in the slice sums."""
    start = 0
    for slice_name, values in layout.slices:
        if slice_name == name:
            return start, len(values)
        start += len(values)
    raise KeyError(name)


def _with_worst_group(table: pd.DataFrame, layout: Layout, total: Partials) -> pd.DataFrame:
    """`table` with the worst-group regret (and interval), disparity and countries covered of every policy."""
    start, width = _slice_block(layout, layout.slices[1][0])  # country is the second slice
    per = len(SLICE_BOOT) + len(POINT_STATS)
    country = total.slice_sums[start:start + width].reshape(width, -1, per)  # (G, policies, columns)
    regret, acted = country[:, :, 0].T, country[:, :, SLICE_BOOT.index("acted")].T
    worst, disparity, covered = groups.worst_group(regret, acted)
    boot = total.slice_resampled[start:start + width].reshape(width, len(total.slice_resampled[0]), -1, len(SLICE_BOOT))
    ratios = bootstrap.ratio(boot[..., 0], boot[..., SLICE_BOOT.index("acted")])  # (G, B, policies)
    ratios[np.broadcast_to((acted.T <= 0)[:, None, :], ratios.shape)] = np.nan
    samples = np.fmax.reduce(ratios, axis=0) if width else np.full(ratios.shape[1:], np.nan)
    worst_lo, worst_hi = bootstrap.percentile_interval(samples, LEVEL)
    return table.assign(worst_group_regret=worst, worst_group_regret_lo=worst_lo, worst_group_regret_hi=worst_hi,
                        disparity=disparity, countries_covered=covered)


def _slice_frame(layout: Layout, total: Partials) -> pd.DataFrame:
    """One row per (reported policy, slice, value) in that order, SLICE_COLUMNS plus prompts."""
    per = len(SLICE_BOOT) + len(POINT_STATS)
    reported = layout.reported
    sums = total.slice_sums.reshape(layout.values, len(reported), per)
    boot = total.slice_resampled.reshape(layout.values, len(total.slice_resampled[0]), len(reported), len(SLICE_BOOT))
    has_stereotype = "stereotype" in layout.outcomes
    acted_at, stereotype_at = SLICE_BOOT.index("acted"), SLICE_BOOT.index("stereotype")
    frames = []
    for i, ref in enumerate(reported):
        start = 0
        for name, values in layout.slices:
            block = slice(start, start + len(values))
            own, drawn = sums[block, i], boot[block, :, i]
            acted = own[:, acted_at]
            rows: dict[str, np.ndarray] = {
                "slice": np.full(len(values), name, dtype=object), "value": np.array(values, dtype=object),
                "policy": np.full(len(values), ref.name, dtype=object), "prompts": total.slice_prompts[block],
                "n": np.rint(acted).astype(np.int64), "coverage": acted / total.slice_prompts[block],
            }
            for k, stat in enumerate(INTERVAL_STATS):
                support = stereotype_at if stat == "stereotype_delta" else acted_at
                if stat == "stereotype_delta" and not has_stereotype:
                    rows[stat] = rows[f"{stat}_lo"] = rows[f"{stat}_hi"] = np.full(len(values), np.nan)
                    continue
                rows[stat] = bootstrap.ratio(own[:, k], own[:, support])
                lo, hi = _intervals(drawn[:, :, k].T, drawn[:, :, support].T, (LEVEL,))[0]
                rows[f"{stat}_lo"], rows[f"{stat}_hi"] = lo, hi
            for k, stat in enumerate(POINT_STATS):
                rows[stat] = bootstrap.ratio(own[:, len(SLICE_BOOT) + k], acted)
            frames.append(pd.DataFrame(rows))
            start += len(values)
    return pd.concat(frames, ignore_index=True)[[*SLICE_COLUMNS[:3], "prompts", *SLICE_COLUMNS[3:]]]


def local_partials(layout: Layout, data: SelectionData, everything: Sequence, parts: Sequence) -> Partials:
    """The Partials of every prompt of `data` on this machine, chunk_rows(resampling) prompts at a time;
    `everything` the evaluated policies (`audit.Evaluated`) and `parts` the slices the layout was made of.

    W = `bootstrap.WORKERS` threads share the chunks, of 1/W the rows each (so that the W chunks in
    progress hold what one chunk did), added up by `bootstrap.chunked_sum` in an order that does not
    depend on the threads' timing, BLAS on one thread meanwhile (a chunk's products are small: waking
    its threads cost more than they saved)."""
    keys = prompt_keys(data.prompts["prompt_id"])
    codes = [p.codes for p in parts]
    workers = max(1, min(bootstrap.WORKERS, len(row_chunks(data.n_prompts, chunk_rows(layout.resampling)))))

    def chunk_sum(rows: slice) -> Partials:
        return chunk_partials(layout, keys[rows], {k: v[rows] for k, v in data.outcomes.items()},
                              {ev.name: ev.choice[rows] for ev in everything if ev.kind not in DRAWN_KINDS},
                              [code[rows] for code in codes])

    return bootstrap.chunked_sum(data.n_prompts, max(1, chunk_rows(layout.resampling) // workers), chunk_sum)


def poisson_policy_frames(data: SelectionData, everything: Sequence, parts: Sequence, resampling: Resampling
                          ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """`policy_frames` of a whole `SelectionData`, its sums made on this machine (`local_partials`)."""
    outcomes = [o for o in (*ERROR_OUTCOMES, *SIDE_OUTCOMES) if o in data.outcomes]
    layout = layout_of(everything, outcomes, parts, resampling)
    return policy_frames(layout, local_partials(layout, data, everything, parts))
