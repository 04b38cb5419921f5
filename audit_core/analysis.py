"""The selection audit: every policy's measures with prompt-level bootstrap intervals.

`audit(data)` evaluates random, the oracle and every policy of the naming contract
(`audit_core.policies`). Each policy is described per prompt by its choice (the
pick of a deterministic policy; for random the uniform distribution over the
pool, for the oracle the uniform distribution over the tied best images); every
measure is the mean over the prompts the policy acts on, and random is always
matched on exactly those prompts.

Intervals: every mean and paired difference gets a 95% percentile interval from
one shared set of prompt-level resamples (`audit_core.bootstrap`), so a prompt's
orders, judges and policies travel together. A deterministic policy's below-mean
rate gets a Wilson interval (random's, an average of fractions, is bootstrapped).
Country statistics and the worst group are recomputed inside every resample.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from audit_core import bootstrap, gates, metrics, position
from audit_core.audit_data import AuditData
from audit_core.cultural import cultural_table
from audit_core.groups import group_blocks, worst_group
from audit_core.policies import PolicySpec, policy_specs
from audit_core.schema import ERROR_OUTCOMES

LEVEL = 0.95
BONFERRONI_LEVEL = 1 - (1 - LEVEL) / len(ERROR_OUTCOMES)
SIDE_OUTCOMES = ("image_quality", "overall")
INTERVAL_STATS = ("utility", "regret", "gain", "best", "bmr", "bmr_delta")


@dataclass(frozen=True)
class Evaluated:
    """A policy as evaluated: its contract fields and its choice — (P,) picks for a
    deterministic policy, a (P, M) distribution for random and the oracle."""

    name: str
    kind: str
    base_judge: str | None
    choice: np.ndarray
    threshold: int | None = None
    orders: int | None = None
    partner: str | None = None
    report: bool = True  # False for internal comparisons (ungated judge on a gate's prompts)


@dataclass
class AuditResult:
    """All tables of the selection audit (see each frame's columns) and how intervals were made."""

    dataset_id: str
    resamples: int
    seed: int
    policies: pd.DataFrame
    judges: pd.DataFrame
    positions: pd.DataFrame
    generators: pd.DataFrame
    flips_by_range: pd.DataFrame
    groups: pd.DataFrame
    cultural: pd.DataFrame
    risk_coverage: pd.DataFrame
    gates: pd.DataFrame
    level: float = LEVEL
    notes: list[str] = field(default_factory=list)

    def tables(self) -> dict[str, pd.DataFrame]:
        """Table name -> frame, as written by the analyze command."""
        return {
            "policies": self.policies,
            "judges": self.judges,
            "positions": self.positions,
            "generators": self.generators,
            "flips_by_range": self.flips_by_range,
            "groups": self.groups,
            "cultural": self.cultural,
            "risk_coverage": self.risk_coverage,
            "gates": self.gates,
        }

    def to_summary(self) -> dict:
        """JSON-ready headline: per policy and per judge; shares are fractions in [0, 1]."""
        policies = []
        for row in self.policies.to_dict("records"):
            entry = {
                k: _json(row[k])
                for k in (
                    "policy", "kind", "base_judge", "n", "coverage", "utility", "regret", "gain",
                    "bmr", "bmr_random", "bmr_delta", "best", "best_random", "random_regret",
                    "worst_group_regret", "disparity", "countries_covered",
                )
            }
            for stat in ("utility", "regret", "gain", "bmr", "bmr_delta", "best", "worst_group_regret"):
                entry[f"{stat}_ci"] = [_json(row[f"{stat}_lo"]), _json(row[f"{stat}_hi"])]
            for outcome in (*ERROR_OUTCOMES, *SIDE_OUTCOMES):
                if f"{outcome}_delta" in row:
                    entry[f"{outcome}_delta"] = _json(row[f"{outcome}_delta"])
                    entry[f"{outcome}_delta_ci"] = [_json(row[f"{outcome}_delta_lo"]), _json(row[f"{outcome}_delta_hi"])]
            policies.append(entry)
        judges = {}
        for row in self.judges.to_dict("records"):
            name = row["judge"]
            pooled = self.positions[(self.positions["judge"] == name) & self.positions["m"].isna()]
            judges[name] = {k: _json(v) for k, v in row.items() if k != "judge"}
            judges[name]["slot_shares"] = {s: _json(v) for s, v in zip(pooled["slot"], pooled["share"])}
            judges[name]["slot_uniform"] = {s: _json(v) for s, v in zip(pooled["slot"], pooled["uniform"])}
        return {
            "dataset": self.dataset_id,
            "resamples": self.resamples,
            "seed": self.seed,
            "level": self.level,
            "policies": policies,
            "judges": judges,
            "gates": [{k: _json(v) for k, v in r.items()} for r in self.gates.to_dict("records")],
            "notes": self.notes,
        }


def _json(value: object) -> object:
    """Plain JSON value: NaN/NA -> None, numpy scalars -> Python."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    return value


def evaluated_policies(data: AuditData) -> list[Evaluated]:
    """random, oracle, every contract policy, and for each order gate (and majority) the
    ungated judge restricted to the prompts it keeps (internal, for the gates table)."""
    h = data.utility
    out = [
        Evaluated("random", "random", None, metrics.uniform_choice(h)),
        Evaluated("oracle", "oracle", None, metrics.oracle_choice(h)),
    ]
    specs: list[PolicySpec] = policy_specs(data)
    base = {spec.base_judge: spec.pick for spec in specs if spec.kind == "judge"}
    for spec in specs:
        out.append(
            Evaluated(spec.name, spec.kind, spec.base_judge, spec.pick, spec.threshold, spec.orders, spec.partner)
        )
        if spec.kind in ("order_gate", "majority"):  # other gates return the judge's own pick
            ungated = np.where(spec.pick >= 0, base[spec.base_judge], -1)
            out.append(Evaluated(f"{spec.name} ungated", "ungated", spec.base_judge, ungated, report=False))
    return out


class _Columns:
    """Per-prompt columns of the resampled matrix (rows in group order); a ratio is a
    (numerator, denominator) pair of column indices. Identical acted-on sets are stored once.

    Exact float64 totals (overall and per group) are kept as columns arrive; the
    columns themselves are stored in the bootstrap's working precision.
    """

    def __init__(self, order: np.ndarray, starts: np.ndarray) -> None:
        self.order = order
        self.starts = starts
        self.dtype = bootstrap.working_dtype(len(order))
        self.columns: list[np.ndarray] = []
        self.totals: list[float] = []
        self.block_totals: list[np.ndarray] = []
        self.shared: dict[bytes, int] = {}

    def add(self, values: np.ndarray, share: bool = False, same_as: int | None = None) -> int:
        """Store a column; `share` looks for an identical shared column, `same_as`
        reuses the given column when equal."""
        values = np.nan_to_num(np.asarray(values, dtype=float))[self.order]
        if same_as is not None and np.array_equal(values.astype(self.dtype), self.columns[same_as]):
            return same_as
        if share:
            key = hashlib.blake2b(values.tobytes(), digest_size=16).digest()
            if key in self.shared:
                return self.shared[key]
            self.shared[key] = len(self.columns)
        self.totals.append(float(values.sum()))
        self.block_totals.append(np.add.reduceat(values, self.starts) if len(values) else np.zeros(len(self.starts)))
        self.columns.append(values.astype(self.dtype))
        return len(self.columns) - 1

    def take_matrix(self) -> np.ndarray:
        """The (n, S) matrix; the column list is released."""
        matrix = np.column_stack(self.columns) if self.columns else np.zeros((len(self.order), 0), self.dtype)
        self.columns = []
        return matrix


def audit(data: AuditData, resamples: int = 10_000, seed: int = 0) -> AuditResult:
    """Run the whole selection audit on one dataset (DESIGN §4).

    resamples: prompt-level bootstrap resamples (0 skips intervals); seed: recorded
    with the result, the same seed gives the same intervals.
    """
    pools = metrics.pool_measures(data.outcomes)
    everything = evaluated_policies(data)
    evaluated = [ev for ev in everything if ev.report]
    order, countries, blocks = group_blocks(data.prompts["country"].to_numpy())
    starts = np.array([lo for lo, _ in blocks], dtype=np.int64)
    cols = _Columns(order, starts)
    n_prompts = data.n_prompts
    extra_outcomes = [o for o in (*ERROR_OUTCOMES, *SIDE_OUTCOMES) if o in data.outcomes]

    ratios: list[tuple[str, str, int, int]] = []  # (policy, stat, numerator, denominator)
    group_cols: list[tuple[int, int, int]] = []  # per reported policy: regret, gain, acted columns
    group_events: list[tuple[np.ndarray, np.ndarray]] = []  # per reported policy: bmr, bmr_random sums by group
    points: list[dict[str, object]] = []
    internal: list[dict[str, object]] = []
    regrets: dict[str, np.ndarray] = {}
    acted_col: dict[str, int] = {}
    for ev in everything:
        s = metrics.prompt_stats(pools, ev.choice)
        regrets[ev.name] = s["regret"]
        if not ev.report:
            internal.append({"policy": ev.name, **{k: _mean(s[k]) for k in ("regret", "gain", "bmr")}})
            continue
        acted = s["acted"]
        a = acted_col[ev.name] = cols.add(acted, share=True)
        column = {}
        for stat in INTERVAL_STATS:
            if stat == "bmr" and ev.kind not in ("random", "oracle"):
                continue  # a deterministic policy's BMR gets a Wilson interval
            value = s["bmr"] - s["bmr_random"] if stat == "bmr_delta" else s[stat]
            column[stat] = cols.add(value * acted)
            ratios.append((ev.name, "bmr_boot" if stat == "bmr" else stat, column[stat], a))
        for outcome in extra_outcomes:
            delta = s[f"{outcome}_delta"]
            rated = acted * ~np.isnan(delta)
            total = cols.add(delta * rated)
            ratios.append((ev.name, f"{outcome}_delta", total, cols.add(rated, same_as=a)))
            if outcome in ERROR_OUTCOMES:
                # delta is 0 on insensitive pools, so the numerator is shared; only the count differs
                sens = rated * s[f"{outcome}_sensitive"]
                ratios.append((ev.name, f"{outcome}_sensitive_delta", cols.add(delta * sens, same_as=total),
                               cols.add(sens, share=True)))
        group_cols.append((column["regret"], column["gain"], a))
        group_events.append(tuple(np.add.reduceat(np.nan_to_num(s[k])[order], starts) for k in ("bmr", "bmr_random")))
        points.append(_point_row(ev, s, n_prompts))

    # Paired difference of each gate with the ungated judge on the prompts it keeps.
    for ev in evaluated:
        if f"{ev.name} ungated" in regrets:
            own = np.nan_to_num(regrets[ev.name] - regrets[f"{ev.name} ungated"])
            ratios.append((ev.name, "regret_vs_ungated", cols.add(own), acted_col[ev.name]))

    sums = np.array(cols.totals)
    num = np.array([r[2] for r in ratios], dtype=np.int64)
    den = np.array([r[3] for r in ratios], dtype=np.int64)
    estimate = bootstrap.ratio(sums[num], sums[den])
    gidx = np.array(group_cols, dtype=np.int64).reshape(-1, 3)
    block_sums = np.stack(cols.block_totals, axis=1)[:, np.unique(gidx)]  # (G, kept columns)
    local = np.searchsorted(np.unique(gidx), gidx)

    lo = hi = lo_b = hi_b = np.full(len(ratios), np.nan)
    worst_lo = worst_hi = np.full(len(evaluated), np.nan)
    group_lo = np.full((len(evaluated), len(blocks), 2), np.nan)
    group_hi = np.full((len(evaluated), len(blocks), 2), np.nan)
    if resamples > 0 and n_prompts > 0:
        res = bootstrap.resampled_sums(cols.take_matrix(), resamples, seed, blocks, np.unique(gidx))
        samples = bootstrap.ratio(res.totals[:, num], res.totals[:, den])
        (lo, hi), (lo_b, hi_b) = bootstrap.percentile_intervals(samples, (LEVEL, BONFERRONI_LEVEL))
        del samples
        risk, gain, acted = (np.moveaxis(res.by_block[:, :, local[:, k]], 1, -1) for k in range(3))  # (B, policies, G)
        worst, _, _ = worst_group(risk, acted)
        worst_lo, worst_hi = bootstrap.percentile_interval(worst, LEVEL)
        for k, values in enumerate((risk, gain)):
            g_lo, g_hi = bootstrap.percentile_interval(bootstrap.ratio(values, acted).reshape(resamples, -1), LEVEL)
            group_lo[:, :, k] = g_lo.reshape(len(evaluated), len(blocks))
            group_hi[:, :, k] = g_hi.reshape(len(evaluated), len(blocks))

    ratio_frame = pd.DataFrame(
        {"policy": [r[0] for r in ratios], "stat": [r[1] for r in ratios], "value": estimate,
         "lo": lo, "hi": hi, "lo_bonf": lo_b, "hi_bonf": hi_b}
    )
    table = _attach_intervals(pd.DataFrame(points), ratio_frame)
    worst, disparity, covered = worst_group(block_sums[:, local[:, 0]].T, block_sums[:, local[:, 2]].T)
    table["worst_group_regret"] = worst
    table["worst_group_regret_lo"] = worst_lo
    table["worst_group_regret_hi"] = worst_hi
    table["disparity"] = disparity
    table["countries_covered"] = covered
    groups = _group_table(evaluated, countries, blocks, block_sums, local, group_lo, group_hi, group_events)
    ungated = pd.DataFrame(internal, columns=["policy", "regret", "gain", "bmr"]).set_index("policy")
    judges, positions, generators, flips = _judge_tables(data)
    return AuditResult(
        dataset_id=data.dataset_id,
        resamples=resamples,
        seed=seed,
        policies=table,
        judges=judges,
        positions=positions,
        generators=generators,
        flips_by_range=flips,
        groups=groups,
        cultural=cultural_table(table, extra_outcomes),
        risk_coverage=_risk_coverage(table),
        gates=gates.gate_table(table, ungated),
        notes=[
            "random and oracle are exact expectations (oracle: uniform over tied best images)",
            "bmr_lo/bmr_hi: Wilson for deterministic policies, bootstrap for random and oracle",
            "country groups: statistics recomputed inside each prompt-level resample",
        ],
    )


def _mean(values: np.ndarray) -> float:
    return float(np.nanmean(values)) if (~np.isnan(values)).any() else float("nan")


def _point_row(ev: Evaluated, s: dict[str, np.ndarray], n_prompts: int) -> dict[str, object]:
    """Point estimates that need no resampling: counts, random's matched values,
    Wilson interval of the below-mean rate, the sensitivity variants."""
    n = int(s["acted"].sum())
    row: dict[str, object] = {
        "policy": ev.name,
        "base_judge": ev.base_judge,
        "kind": ev.kind,
        "threshold": ev.threshold,
        "orders": ev.orders,
        "partner": ev.partner,
        "n": n,
        "coverage": n / n_prompts if n_prompts else float("nan"),
        "bmr": _mean(s["bmr"]),
        "random_utility": _mean(np.where(s["acted"] > 0, s["utility"] - s["gain"], np.nan)),
        "random_regret": _mean(s["random_regret"]),
        "oracle_utility": _mean(s["utility"] + s["regret"]),
        "bmr_random": _mean(s["bmr_random"]),
        "best_random": _mean(s["best_random"]),
        "regret_median": float(np.nanmedian(s["regret"])) if n else float("nan"),
        "bmr05": _mean(s["bmr05"]),
        "bmr05_random": _mean(s["bmr05_random"]),
        "near_best": _mean(s["near_best"]),
        "near_best_random": _mean(s["near_best_random"]),
    }
    if "overall_regret" in s:
        row["overall_regret"] = _mean(s["overall_regret"])
        row["overall_gain"] = _mean(s["overall_delta"])
    deterministic = ev.kind not in ("random", "oracle")
    wilson = metrics.wilson_interval(float(np.nansum(s["bmr"])), n) if deterministic else (np.nan, np.nan)
    row["bmr_wilson_lo"], row["bmr_wilson_hi"] = wilson
    for outcome in ERROR_OUTCOMES + SIDE_OUTCOMES:
        if outcome in s:
            rated = ~np.isnan(s[f"{outcome}_delta"])
            row[f"{outcome}_n"] = int(rated.sum())
            row[f"{outcome}_chosen"] = _mean(s[outcome])
            row[f"{outcome}_random"] = _mean(np.where(rated, s[f"{outcome}_random"], np.nan))
            if outcome in ERROR_OUTCOMES:
                sens = rated & (s[f"{outcome}_sensitive"] > 0)
                row[f"{outcome}_sensitive_n"] = int(sens.sum())
    return row


def _attach_intervals(table: pd.DataFrame, ratio_frame: pd.DataFrame) -> pd.DataFrame:
    """Widen (policy, stat) estimates into stat, stat_lo, stat_hi (and Bonferroni for errors)."""
    wide = {}
    for stat, part in ratio_frame.groupby("stat", sort=False):
        part = part.set_index("policy")
        wide[stat] = part["value"]
        wide[f"{stat}_lo"] = part["lo"]
        wide[f"{stat}_hi"] = part["hi"]
        if stat.split("_delta")[0].replace("_sensitive", "") in ERROR_OUTCOMES:
            wide[f"{stat}_lo_bonf"] = part["lo_bonf"]
            wide[f"{stat}_hi_bonf"] = part["hi_bonf"]
    frame = table.join(pd.DataFrame(wide), on="policy")
    deterministic = ~frame["kind"].isin(["random", "oracle"])
    frame["bmr_lo"] = frame["bmr_wilson_lo"].where(deterministic, frame["bmr_boot_lo"])
    frame["bmr_hi"] = frame["bmr_wilson_hi"].where(deterministic, frame["bmr_boot_hi"])
    frame = frame.drop(columns=["bmr_wilson_lo", "bmr_wilson_hi", "bmr_boot", "bmr_boot_lo", "bmr_boot_hi"])
    lead = ["policy", "base_judge", "kind", "threshold", "orders", "partner", "n", "coverage",
            "utility", "utility_lo", "utility_hi", "regret", "regret_lo", "regret_hi",
            "gain", "gain_lo", "gain_hi", "bmr", "bmr_lo", "bmr_hi", "bmr_random",
            "bmr_delta", "bmr_delta_lo", "bmr_delta_hi", "best", "best_lo", "best_hi", "best_random",
            "random_utility", "random_regret", "oracle_utility"]
    return frame[lead + [c for c in frame.columns if c not in lead]]


def _group_table(
    evaluated: list[Evaluated],
    countries: list[str],
    blocks: list[tuple[int, int]],
    block_sums: np.ndarray,
    local: np.ndarray,
    group_lo: np.ndarray,
    group_hi: np.ndarray,
    group_events: list[tuple[np.ndarray, np.ndarray]],
) -> pd.DataFrame:
    """One row per (policy, country): n, coverage, regret and gain with intervals, bmr.

    A country where the policy acts on nothing has n = 0, coverage 0 and NaN risk.
    """
    sizes = np.array([hi - lo for lo, hi in blocks])
    frames = []
    for i, ev in enumerate(evaluated):
        acted = block_sums[:, local[i, 2]]
        frames.append(pd.DataFrame({
            "policy": ev.name,
            "country": countries,
            "prompts": sizes,
            "n": np.rint(acted).astype(int),
            "coverage": acted / sizes,
            "regret": bootstrap.ratio(block_sums[:, local[i, 0]], acted),
            "regret_lo": group_lo[i, :, 0],
            "regret_hi": group_hi[i, :, 0],
            "gain": bootstrap.ratio(block_sums[:, local[i, 1]], acted),
            "gain_lo": group_lo[i, :, 1],
            "gain_hi": group_hi[i, :, 1],
            "bmr": bootstrap.ratio(group_events[i][0], acted),
            "bmr_random": bootstrap.ratio(group_events[i][1], acted),
        }))
    return pd.concat(frames, ignore_index=True)


def _judge_tables(data: AuditData) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """judges, positions, generators and flips_by_range frames (empty with their columns
    when the dataset has no selector judge)."""

    def concat(frames: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)

    judges = data.judges
    return (
        pd.DataFrame([position.judge_summary(data, j) for j in judges], columns=position.JUDGE_COLUMNS),
        concat([position.slot_table(data, j) for j in judges], position.SLOT_COLUMNS),
        concat([position.generator_table(data, j) for j in judges], position.GENERATOR_COLUMNS),
        concat([position.flip_by_range(data, j) for j in judges], position.FLIP_COLUMNS),
    )


def _risk_coverage(policies: pd.DataFrame) -> pd.DataFrame:
    """Coverage vs selective regret for every agreement threshold, next to matched random.

    Per judge: threshold 0 = the ungated order-0 pick, 1 = majority, k ≥ 2 = agree>=k/K;
    cross-judge and scorer agreement gates are added with their kind.
    """
    part = policies[policies["kind"].isin(["judge", "majority", "order_gate", "judge_gate", "scorer_gate"])].copy()
    part["judge"] = part["base_judge"]
    part.loc[part["kind"] == "judge", "threshold"] = 0
    part["tau"] = part["threshold"] / part["orders"]
    part.loc[part["kind"] == "judge", "tau"] = 0.0
    keep = ["judge", "policy", "kind", "threshold", "tau", "n", "coverage", "regret", "regret_lo", "regret_hi",
            "random_regret", "gain", "gain_lo", "gain_hi", "bmr", "bmr_random"]
    return part[keep].reset_index(drop=True)
