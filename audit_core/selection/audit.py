"""The selection audit: every policy's measures with prompt-level bootstrap intervals.

`audit_selection(data)` evaluates random, the oracle and every policy of the naming contract
(`audit_core.selection.policies`). Each policy is described per prompt by its choice (the
pick of a deterministic policy; for random the uniform distribution over the
pool, for the oracle the uniform distribution over the tied best images); every
measure is the mean over the prompts the policy acts on, and random is always
matched on exactly those prompts.

Intervals (95% percentile, `audit_core.stats.bootstrap`), as the published study makes them:

- a policy's mean (and its gain, regret against the ungated judge or cultural delta: per-prompt
  differences on the prompts it acts on) resamples those prompts at fixed n, its acted-on
  count; a group's figures (country, slice) resample the policy's prompts within the group;
- the worst-group regret resamples within each represented country (stratified) and takes
  the worst country mean in every resample;
- a gate's kept minus rejected side (`gain_vs_rejected`, `regret_vs_rejected`: the sides act
  on different prompts) resamples all prompts jointly, so both sides move together;
- a deterministic policy's below-mean rate gets a Wilson interval (random's, an average of
  fractions, is bootstrapped). A prompt's orders and judges travel together in every scheme.

Above `poisson.POISSON_ABOVE` prompts the policies, slices and groups tables come from the
Poisson bootstrap over partial sums instead (`audit_core.selection.partials`: each mean a ratio
of weighted sums, memory bounded by the chunk size, the same result however the prompts are
ordered or split); below it the schemes above hold exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from audit_core.selection import gates, groups, metrics, position, slices
from audit_core.selection.composition import composition_table
from audit_core.selection.costs import POLICY_COST_COLUMNS, policy_costs
from audit_core.selection.cultural import cultural_table
from audit_core.selection.data import SelectionData
from audit_core.selection.debiased.calls import OrderedCalls, ordered_calls
from audit_core.selection.debiased.specs import DEBIASED_KIND, with_debiased
from audit_core.selection.partials import poisson_policy_frames
from audit_core.selection.policies import PolicySpec, policy_specs
from audit_core.selection.policy_rows import (
    BONFERRONI_LEVEL,
    LEVEL,
    SIDE_OUTCOMES,
    attach_intervals,
    bonferroni,
    point_row,
    point_values,
    policy_values,
    side_differences,
    value_sums,
)
from audit_core.selection.timing import TIMING_CALL_COLUMNS, timing_table, timing_table_from_arrays
from audit_core.stats import bootstrap
from audit_core.stats.poisson import POISSON_ABOVE
from audit_core.stats.resampling import Resampling
from audit_core.store.schema import ERROR_OUTCOMES

# The selector calls' columns the audit reads (`store.load_calls(..., columns=CALL_COLUMNS)`): never the
# accepted calls' raw outputs, request keys or timestamps, which are most of a large study's calls. Given the
# judges' ordered calls already (`debiased.load_ordered_calls`), it reads only TIMING_CALL_COLUMNS, and given
# the calls that carry text instead (`store.load_call_texts`), no call rows at all.
CALL_COLUMNS = (*TIMING_CALL_COLUMNS, "slot_candidate_ids", "ranking", "label_probs")


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
class SelectionAudit:
    """All tables of the selection audit (see each frame's columns) and how intervals were made
    (`resampling`: the bootstrap's resamples and seed)."""

    dataset_id: str
    resampling: Resampling
    policies: pd.DataFrame
    judges: pd.DataFrame
    positions: pd.DataFrame
    generators: pd.DataFrame
    flips_by_range: pd.DataFrame
    groups: pd.DataFrame
    cultural: pd.DataFrame
    risk_coverage: pd.DataFrame
    gates: pd.DataFrame
    slices: pd.DataFrame
    slice_prompts: dict[str, dict[str, int]]  # slice -> value -> prompts
    composition: pd.DataFrame  # what the dataset is, per country and generator (`composition.composition_table`)
    flips_by_near_ties: pd.DataFrame
    # from the recorded calls, when `audit` is given them: generator x slot choice rates, validity and cost
    generator_slots: pd.DataFrame | None = None
    timing: pd.DataFrame | None = None
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
            "slices": self.slices,
            "composition": self.composition,
            "flips_by_near_ties": self.flips_by_near_ties,
            **({"generator_slots": self.generator_slots} if self.generator_slots is not None else {}),
            **({"timing": self.timing} if self.timing is not None else {}),
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
            entry.update({k: _json(row.get(k)) for k in POLICY_COST_COLUMNS})
            for stat in ("utility", "regret", "gain", "bmr", "bmr_delta", "best", "random_regret", "worst_group_regret"):
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
            "resamples": self.resampling.resamples,
            "seed": self.resampling.seed,
            "level": self.level,
            "policies": policies,
            "judges": judges,
            "gates": [{k: _json(v) for k, v in r.items()} for r in self.gates.to_dict("records")],
            "slices": self.slice_prompts,
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


def evaluated_policies(data: SelectionData, ordered: Mapping[str, OrderedCalls] | None = None,
                       specs: Sequence[PolicySpec] | None = None) -> list[Evaluated]:
    """random, oracle, every contract policy, the debiased policies of the judges in `ordered` (judge ->
    its calls; after each judge's majority, `debiased.specs`), and for each order gate, majority and
    debiased policy the ungated judge restricted to the prompts it acts on (internal: the gates table,
    regret_vs_ungated). `specs`: those policies as `with_debiased(policy_specs(data), ordered)` makes
    them, when the caller has made them already."""
    h = data.utility
    out = [
        Evaluated("random", "random", None, metrics.uniform_choice(h)),
        Evaluated("oracle", "oracle", None, metrics.oracle_choice(h)),
    ]
    if specs is None:
        specs = with_debiased(policy_specs(data), ordered or {})
    base = {spec.base_judge: spec.pick for spec in specs if spec.kind == "judge"}
    for spec in specs:
        out.append(
            Evaluated(spec.name, spec.kind, spec.base_judge, spec.pick, spec.threshold, spec.orders, spec.partner)
        )
        if spec.kind in ("order_gate", "majority", DEBIASED_KIND):  # other gates return the judge's own pick
            ungated = np.where(spec.pick >= 0, base[spec.base_judge], -1)
            out.append(Evaluated(f"{spec.name} ungated", "ungated", spec.base_judge, ungated, report=False))
    return out


def evaluate_policies(
    data: SelectionData, everything: Sequence[Evaluated], parts: Sequence[slices.Partition], resampling: Resampling
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(policies, ungated, slices) frames of the given policies, as `audit` makes them for its own.

    policies: one row per reported policy (`report`), with fixed-n intervals, worst group and,
    for a gate whose `<name> rejected` side is among them, the kept minus rejected side;
    ungated: regret, gain and bmr of the internal comparisons, by policy; slices: one row per
    (slice, value, reported policy) of `parts` (as `slices.partitions` returns them, country
    second). Every interval depends only on the policy's own values and `resampling`, so a
    policy gets the same numbers whichever others it is evaluated with. Above
    `poisson.POISSON_ABOVE` prompts the intervals come from the Poisson bootstrap over partial
    sums (`partials`, made in chunks on this machine; `partitioned` makes the same sums on partitions).
    """
    if data.n_prompts > POISSON_ABOVE:
        return poisson_policy_frames(data, everything, parts, resampling)
    country = parts[1]
    pools = metrics.pool_measures(data.outcomes)
    evaluated = [ev for ev in everything if ev.report]
    n_prompts = data.n_prompts
    extra_outcomes = [o for o in (*ERROR_OUTCOMES, *SIDE_OUTCOMES) if o in data.outcomes]

    means = bootstrap.FixedNMeans()
    cells: list[tuple[str, str, int]] = []  # (policy, stat, index into means)
    sliced: list[tuple[str, dict[str, np.ndarray], list[np.ndarray]]] = []  # per policy: stats, cell indices per slice
    strata: list[list[np.ndarray]] = []  # per policy: regret within each represented country
    country_sums: list[tuple[np.ndarray, np.ndarray]] = []
    points: list[dict[str, object]] = []
    internal: list[dict[str, object]] = []
    stats: dict[str, dict[str, np.ndarray]] = {}
    for ev in everything:
        s = stats[ev.name] = metrics.prompt_stats(pools, ev.choice)
        if not ev.report:
            internal.append({"policy": ev.name, **{k: _mean(s[k]) for k in ("regret", "gain", "bmr")}})
            continue
        cells += [(ev.name, stat, means.add(v, every_level=bonferroni(stat)))
                  for stat, v in policy_values(ev.kind, s, extra_outcomes).items()]
        sliced.append((ev.name, s, [slices.register_cells(means, part, s) for part in parts]))
        strata.append(groups.represented_strata(s["regret"], country.members))
        country_sums.append(tuple(np.bincount(country.codes, weights=np.nan_to_num(s[k]), minlength=len(country.values))
                                  for k in ("regret", "acted")))
        points.append(_point_row(ev, s, n_prompts))
    # the gate minus the ungated judge on the prompts it keeps: a per-prompt difference, fixed n
    for ev in evaluated:
        if f"{ev.name} ungated" in stats:
            difference = stats[ev.name]["regret"] - stats[f"{ev.name} ungated"]["regret"]
            cells.append((ev.name, "regret_vs_ungated", means.add(difference)))

    estimate = means.means()
    (lo, hi), (lo_b, hi_b) = means.intervals(resampling, (LEVEL, BONFERRONI_LEVEL))
    index = np.array([c[2] for c in cells], dtype=np.int64)
    long = pd.DataFrame({"policy": [c[0] for c in cells], "stat": [c[1] for c in cells], "value": estimate[index],
                         "lo": lo[index], "hi": hi[index], "lo_bonf": lo_b[index], "hi_bonf": hi_b[index]})
    long = pd.concat([long, _kept_minus_rejected(evaluated, stats, resampling)], ignore_index=True)
    table = attach_intervals(pd.DataFrame(points), long)

    worst, disparity, covered = groups.worst_group(*(np.stack(side) for side in zip(*country_sums)))
    worst_lo, worst_hi = bootstrap.percentile_interval(bootstrap.stratified_max(strata, resampling), LEVEL)
    table["worst_group_regret"] = worst
    table["worst_group_regret_lo"] = worst_lo
    table["worst_group_regret_hi"] = worst_hi
    table["disparity"] = disparity
    table["countries_covered"] = covered

    rows = [slices.slice_rows(part, name, s, idx, estimate, lo, hi) for name, s, indices in sliced
            for part, idx in zip(parts, indices)]
    slice_frame = pd.DataFrame({k: np.concatenate([r[k] for r in rows]) for k in rows[0]})
    ungated = pd.DataFrame(internal, columns=["policy", "regret", "gain", "bmr"]).set_index("policy")
    return table, ungated, slice_frame


def audit_selection(
    data: SelectionData,
    resampling: Resampling = Resampling(),
    by: Sequence[str] = (),
    calls: pd.DataFrame | None = None,
    ordered: Mapping[str, OrderedCalls] | None = None,
    specs: Sequence[PolicySpec] | None = None,
    call_texts: pd.DataFrame | None = None,
) -> SelectionAudit:
    """Run the whole selection audit on one dataset (DESIGN §4).

    resampling: the prompt-level bootstrap's resamples (0 skips intervals) and seed, kept
    with the result (the same settings give the same intervals); by: prompt attributes
    (columns of the prompts table) to slice by besides the built-in slices
    (InputError naming an unknown one); calls: the selector calls as `store.load_calls`
    returns them (CALL_COLUMNS suffice), for what needs each call's slot order, ranking, label
    probabilities and seconds: the debiased policies (`debiased.specs`), generator_slots, timing and the
    policies' seconds_per_prompt (none of them without the calls; every other number is the same either
    way); ordered: every judge's
    `OrderedCalls` as `debiased.load_ordered_calls` reads them from the store, when `calls` holds only
    TIMING_CALL_COLUMNS (a large study's calls as lists of ids would not fit in memory), else made
    from `calls`; specs: every policy as `with_debiased(policy_specs(data), ordered)` makes them, when
    the caller has them already (`runners.audits` keeps their picks for the app too), else made here;
    call_texts: the calls that carry text as `store.load_call_texts` reads them, which with
    `ordered` stand in for `calls` (generator_slots and the same timing, from `data.statuses` and the
    ordered calls' seconds; ValueError without `ordered`) when `calls` is None.
    """
    if calls is None and call_texts is not None and ordered is None:
        raise ValueError("audit_selection: call_texts stand in for calls only with the judges' ordered calls")
    parts, slice_notes = slices.partitions(data, by)
    if ordered is None:
        ordered = {} if calls is None else ordered_calls(data, calls)
    # every policy first, the debiased fits included: the tables below are made while the policies are
    # evaluated, and never beside the fits, whose working sets (Plackett-Luce's) are the audit's largest
    everything = evaluated_policies(data, ordered, specs)
    with ThreadPoolExecutor(1) as side:
        judge_tables = side.submit(_judge_tables, data, resampling)
        recorded = calls is not None or call_texts is not None
        generator_slots = side.submit(lambda: None if not recorded else _concat(
            [position.generator_slot_table(data, j, ordered[j]) for j in data.judges], position.GENERATOR_SLOT_COLUMNS))
        timing = side.submit(_timing, data, calls, ordered, call_texts)
        table, ungated, slice_frame = evaluate_policies(data, everything, parts, resampling)
        table[POLICY_COST_COLUMNS] = policy_costs(table, data, ordered)
        judges, positions, generators, flips, near_ties = judge_tables.result()
    slice_prompts = {part.name: dict(zip(part.values, part.sizes.tolist())) for part in parts}
    extra_outcomes = [o for o in (*ERROR_OUTCOMES, *SIDE_OUTCOMES) if o in data.outcomes]
    return selection_audit(data.dataset_id, resampling, extra_outcomes, table, ungated, slice_frame, slice_prompts,
                           slice_notes, (judges, positions, generators, flips, near_ties), composition_table(data),
                           generator_slots.result(), timing.result())


def selection_audit(dataset_id: str, resampling: Resampling, extra_outcomes: Sequence[str], table: pd.DataFrame,
                    ungated: pd.DataFrame,
                    slice_frame: pd.DataFrame, slice_prompts: dict[str, dict[str, int]], slice_notes: Sequence[str],
                    judge_tables: Sequence[pd.DataFrame], composition: pd.DataFrame,
                    generator_slots: pd.DataFrame | None, timing: pd.DataFrame | None) -> SelectionAudit:
    """The `SelectionAudit` of evaluated frames, however they were made (`audit_selection` here, or
    `partitioned.audit` from partitions): the outcomes beside alignment (ERROR_OUTCOMES and SIDE_OUTCOMES the
    study rates), `evaluate_policies`' (table with its cost columns, ungated,
    slice_frame), each slice's prompts per value and the notes on slices left out, `_judge_tables`' five
    frames, the composition, generator_slots and timing tables (None without the calls)."""
    judges, positions, generators, flips, near_ties = judge_tables
    return SelectionAudit(
        dataset_id=dataset_id,
        resampling=resampling,
        policies=table,
        judges=judges,
        positions=positions,
        generators=generators,
        flips_by_range=flips,
        groups=_group_table(slice_frame[slice_frame["slice"] == "country"]),
        cultural=cultural_table(table, extra_outcomes),
        risk_coverage=_risk_coverage(table),
        gates=gates.gate_table(table, ungated),
        slices=slice_frame[slices.SLICE_COLUMNS].reset_index(drop=True),
        slice_prompts=slice_prompts,
        composition=composition,
        flips_by_near_ties=near_ties,
        generator_slots=generator_slots,
        timing=timing,
        notes=[
            "random and oracle are exact expectations (oracle: uniform over tied best images)",
            "bmr_lo/bmr_hi: Wilson for deterministic policies, bootstrap for random and oracle",
            "a policy's means: bootstrap over the prompts it acts on at fixed n; a group's (country, slice)"
            " within the group; worst group: stratified within each represented country, max per resample",
            "gain_vs_rejected / regret_vs_rejected (a gate's kept minus rejected side): all prompts resampled jointly",
            *slice_notes,
        ],
    )


def _kept_minus_rejected(evaluated: list[Evaluated], stats: dict[str, dict[str, np.ndarray]],
                         resampling: Resampling) -> pd.DataFrame:
    """Long rows (policy, stat, value, lo, hi) of each gate's kept minus rejected gain and regret.

    The two sides act on different prompts, so all prompts are resampled jointly and each
    side's mean is a ratio of weighted sums over its prompts in the same resample.
    """
    names = {ev.name for ev in evaluated}
    pairs = [ev.name for ev in evaluated if ev.kind in gates.GATE_KINDS and f"{ev.name} rejected" in names]
    columns = []
    for name in pairs:
        for side in (name, f"{name} rejected"):
            s = stats[side]
            columns += [s["acted"], np.nan_to_num(s["gain"]), np.nan_to_num(s["regret"])]
    if not pairs:
        nothing = np.zeros(0)
        return pd.DataFrame({"policy": [], "stat": [], "value": nothing, "lo": nothing, "hi": nothing})
    x = np.column_stack(columns)
    value = side_differences(x.sum(axis=0, keepdims=True), len(pairs))[0]
    lo = hi = np.full(len(value), np.nan)
    if resampling.resamples > 0:
        sums = bootstrap.resampled_sums(x, resampling).totals
        lo, hi = bootstrap.percentile_interval(side_differences(sums, len(pairs)), LEVEL)
    return pd.DataFrame({"policy": np.repeat(pairs, 2), "stat": ["gain_vs_rejected", "regret_vs_rejected"] * len(pairs),
                         "value": value, "lo": lo, "hi": hi})


def _mean(values: np.ndarray) -> float:
    return float(np.nanmean(values)) if (~np.isnan(values)).any() else float("nan")


def _point_row(ev: Evaluated, s: dict[str, np.ndarray], n_prompts: int) -> dict[str, object]:
    """`policy_rows.point_row` of a policy from its whole per-prompt statistics."""
    n = int(s["acted"].sum())
    median = float(np.nanmedian(s["regret"])) if n else float("nan")
    fields = {"base_judge": ev.base_judge, "threshold": ev.threshold, "orders": ev.orders, "partner": ev.partner}
    return point_row(ev.name, ev.kind, fields, value_sums(point_values(s)), median, n_prompts)


def _group_table(country: pd.DataFrame) -> pd.DataFrame:
    """One row per (policy, country) from the country slice: prompts, n, coverage, regret and
    gain with their within-country intervals, bmr and bmr_random.

    A country where the policy acts on nothing has n = 0, coverage 0 and NaN risk.
    """
    columns = ["policy", "country", "prompts", "n", "coverage", "regret", "regret_lo", "regret_hi",
               "gain", "gain_lo", "gain_hi", "bmr", "bmr_random"]
    return country.rename(columns={"value": "country"})[columns].reset_index(drop=True)


def _timing(data: SelectionData, calls: pd.DataFrame | None, ordered: Mapping[str, OrderedCalls],
            call_texts: pd.DataFrame | None) -> pd.DataFrame | None:
    """The timing table of the call rows when given, else of the judges' statuses and ordered seconds with
    `call_texts`; None with neither."""
    if calls is not None:
        return timing_table(calls)
    if call_texts is None:
        return None
    return timing_table_from_arrays(data.statuses, {j: ordered[j].seconds for j in data.statuses}, call_texts)


def _concat(frames: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    """The frames stacked, or an empty frame with `columns` when there are none."""
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def _judge_tables(data: SelectionData, resampling: Resampling) -> tuple[pd.DataFrame, ...]:
    """judges, positions, generators, flips_by_range and flips_by_near_ties frames (empty with
    their columns when the dataset has no selector judge); group intervals under the audit's
    `resampling`."""
    judges = data.judges
    return (
        pd.DataFrame([position.judge_summary(data, j, resampling) for j in judges], columns=position.JUDGE_COLUMNS),
        _concat([position.slot_table(data, j) for j in judges], position.SLOT_COLUMNS),
        _concat([position.generator_table(data, j, resampling) for j in judges], position.GENERATOR_COLUMNS),
        _concat([position.flip_by_range(data, j, resampling) for j in judges], position.FLIP_COLUMNS),
        _concat([position.flip_by_near_ties(data, j, resampling) for j in judges], position.NEAR_TIE_COLUMNS),
    )


def _risk_coverage(policies: pd.DataFrame) -> pd.DataFrame:
    """Coverage vs selective regret for every agreement threshold, next to matched random.

    Per judge: threshold 0 = the ungated order-0 pick, 1 = majority, k ≥ 2 = agree>=k/K;
    the debiased policies, cross-judge and scorer agreement gates are added with their kind
    (no threshold).
    """
    part = policies[policies["kind"].isin(["judge", "majority", DEBIASED_KIND, "order_gate", "judge_gate",
                                           "scorer_gate"])].copy()
    part["judge"] = part["base_judge"]
    part.loc[part["kind"] == "judge", "threshold"] = 0
    part["tau"] = part["threshold"] / part["orders"]
    part.loc[part["kind"] == "judge", "tau"] = 0.0
    keep = ["judge", "policy", "kind", "threshold", "tau", "n", "coverage", "regret", "regret_lo", "regret_hi",
            "random_regret", "gain", "gain_lo", "gain_hi", "bmr", "bmr_random"]
    return part[keep].reset_index(drop=True)
