"""Sampling plans: which items a campaign draws, seeded and reproducible (docs/campaigns.md).

The population is the dataset's prompts (alignment: an item is a prompt with its whole pool) or
its candidates (rubric, labels: an item is one image). A plan splits it into strata and gives each
stratum a quota; within a stratum, the drawn units are the `quota` with the smallest
`id_hash(f"{seed}:{item_id}", DRAW_PURPOSE)`, so a draw depends on the seed and the ids only
(never on row order), and the same seed draws the same items. Plans:

- `uniform`: one stratum, the whole population.
- `stratified:ATTR`: one stratum per value of ATTR, a prompt field (`country`, `category`,
  `split`) or, for rubric and labels, an item attribute (`candidate_attributes`); units without a
  value form the stratum "" . Proportional allocation by largest remainder: stratum s of N_s units
  gets ⌊size·N_s/N⌋, and the units still missing go one each to the strata with the largest
  remainders size·N_s/N − ⌊size·N_s/N⌋ (ties by stratum name), so quotas sum to size and
  each lies within one of size·N_s/N.
- `gate:NAME[:kept=F]`: the named gate's kept side (prompts where the gate acts) and rejected
  side (prompts it declines where its base judge acts; `audit_core.selection.policies`), with
  ⌊size·F + ½⌋ kept items and the rest rejected (F = 0.5 by default, strictly between 0 and 1,
  so both sides get items). For rubric and labels an item is the image each side returns: the
  gate's pick when kept, the base judge's order-0 pick when rejected.
- `picks-differ:A,B`: prompts where judges A and B both made an order-0 pick and the picks
  differ; for rubric and labels, both picked images of each such prompt.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import duckdb
import numpy as np
import pandas as pd

from audit_core import store
from audit_core.campaigns.records import CampaignError
from audit_core.selection.data import load_selection_data
from audit_core.selection.policies import policy_specs
from audit_core.stats.id_hash import id_hash
from audit_core.user_text import shown

DRAW_PURPOSE = "campaign-draw"
PROMPT_FIELDS: tuple[str, ...] = ("country", "category", "split")
GATE_KINDS: tuple[str, ...] = ("order_gate", "judge_gate", "scorer_gate")
DEFAULT_KEPT = 0.5
FLAG = "--sample"


@dataclass(frozen=True)
class Drawn:
    """A drawn item (see `campaigns.schema`, campaign_items) in draw order."""

    item_id: str
    prompt_id: str
    candidate_ids: tuple[str, ...]
    stratum: str


def units(con: duckdb.DuckDBPyConnection, dataset_id: str, task: str) -> pd.DataFrame:
    """item_id, prompt_id, candidate_ids (tuple, canonical order) and the prompt fields: one row per
    prompt for alignment, one per candidate for the single-image tasks."""
    prompts = store.load_prompts(con, dataset_id)
    candidates = store.load_candidates(con, dataset_id)
    if task == "alignment":
        pools = candidates.groupby("prompt_id", sort=True)["candidate_id"].agg(tuple)
        frame = prompts.assign(item_id=prompts["prompt_id"], candidate_ids=prompts["prompt_id"].map(pools))
        return frame.loc[frame["candidate_ids"].notna()].reset_index(drop=True)
    frame = candidates.merge(prompts, on="prompt_id", how="left")
    return frame.assign(item_id=frame["candidate_id"], candidate_ids=[(c,) for c in frame["candidate_id"]])


def draw_rank(item_ids: pd.Series, seed: int) -> np.ndarray:
    """The draw's key of each item id: id_hash(f"{seed}:{item_id}", DRAW_PURPOSE) as uint64."""
    return np.array([id_hash(f"{seed}:{i}", DRAW_PURPOSE) for i in item_ids], dtype=np.uint64)


def proportional_quotas(sizes: dict[str, int], size: int) -> dict[str, int]:
    """Largest-remainder allocation of `size` over strata of `sizes` units (module docstring)."""
    total = sum(sizes.values())
    exact = {s: size * n / total for s, n in sizes.items()}
    quotas = {s: math.floor(x) for s, x in exact.items()}
    left = size - sum(quotas.values())
    for s in sorted(sizes, key=lambda s: (-(exact[s] - quotas[s]), s))[:left]:
        quotas[s] += 1
    return quotas


def draw(con: duckdb.DuckDBPyConnection, dataset_id: str, task: str, plan: str, size: int,
         seed: int) -> tuple[list[Drawn], dict]:
    """The items `plan` draws (draw order: by draw key) and a record of the draw: plan, seed, and
    each stratum's population and quota. CampaignError naming --sample or --size when the plan
    cannot be drawn (an unknown attribute, gate or judge; a size above a stratum's population)."""
    population = _strata(con, dataset_id, task, plan)
    sizes = population.groupby("stratum", sort=True).size().to_dict()
    total = int(sum(sizes.values()))
    if size > total:
        raise CampaignError(f"{size} items asked, but plan {shown(plan)} has only {total} to draw from", field="--size")
    if plan.startswith("gate:"):
        kept_share = _gate_parts(plan)[1]
        kept = math.floor(size * kept_share + 0.5)
        quotas = {"kept": kept, "rejected": size - kept}
        for side, quota in quotas.items():
            if quota < 1:
                raise CampaignError(f"{size} items with kept={kept_share:g} leave the {side} side without items; "
                                    "draw more items or move kept towards 0.5", field="--size")
            if quota > sizes.get(side, 0):
                raise CampaignError(f"the {side} side needs {quota} items but the gate {side} only "
                                    f"{sizes.get(side, 0)}", field="--size")
    else:
        quotas = proportional_quotas(sizes, size)
    population = population.assign(rank=draw_rank(population["item_id"], seed))
    chosen = [part.nsmallest(quotas.get(stratum, 0), "rank")
              for stratum, part in population.groupby("stratum", sort=True)]
    picked = pd.concat(chosen).sort_values(["rank", "item_id"])
    drawn = [Drawn(str(r.item_id), str(r.prompt_id), tuple(r.candidate_ids), str(r.stratum))
             for r in picked.itertuples(index=False)]
    record = {"plan": plan, "seed": seed, "size": size,
              "strata": {s: {"population": int(n), "quota": int(quotas.get(s, 0))} for s, n in sizes.items()}}
    return drawn, record


def _strata(con: duckdb.DuckDBPyConnection, dataset_id: str, task: str, plan: str) -> pd.DataFrame:
    """The units the plan draws from, with their stratum (column `stratum`)."""
    frame = units(con, dataset_id, task)
    if plan == "uniform":
        return frame.assign(stratum="all")
    kind, sep, rest = plan.partition(":")
    if kind == "stratified" and sep:
        return frame.assign(stratum=_attribute_values(con, dataset_id, task, frame, rest))
    if kind == "gate" and sep:
        return _gate_sides(con, dataset_id, task, frame, _gate_parts(plan)[0])
    if kind == "picks-differ" and sep:
        return _differing_picks(con, dataset_id, task, frame, rest)
    raise CampaignError(f"unknown plan {shown(plan)}; expected uniform, stratified:ATTR, gate:NAME[:kept=F] "
                        "or picks-differ:JUDGE_A,JUDGE_B", field=FLAG)


def _attribute_values(con: duckdb.DuckDBPyConnection, dataset_id: str, task: str, frame: pd.DataFrame,
                      attribute: str) -> pd.Series:
    """Each unit's value of `attribute` ("" when it has none)."""
    if attribute in PROMPT_FIELDS:
        return frame[attribute].fillna("").astype(str)
    known = list(PROMPT_FIELDS)
    if task != "alignment":
        attrs = store.load_candidate_attributes(con, dataset_id)
        known += sorted(attrs["attribute"].unique())
        if attribute in set(attrs["attribute"]):
            values = attrs.loc[attrs["attribute"] == attribute].set_index("candidate_id")["value"]
            return frame["item_id"].map(values).fillna("").astype(str)
    raise CampaignError(f"no attribute {shown(attribute)} to stratify by (known: {', '.join(known)})", field=FLAG)


def _gate_parts(plan: str) -> tuple[str, float]:
    """(gate name, kept share) of `gate:NAME[:kept=F]`."""
    body = plan[len("gate:"):]
    name, sep, share = body.rpartition(":kept=")
    if not sep:
        return body, DEFAULT_KEPT
    try:
        kept = float(share)
    except ValueError:
        kept = math.nan
    if not 0 < kept < 1:
        raise CampaignError(f"kept={shown(share)}: expected a share strictly between 0 and 1, so both sides "
                            "of the gate get items", field=FLAG)
    return name, kept


def _selection(con: duckdb.DuckDBPyConnection, dataset_id: str):
    try:
        return load_selection_data(con, dataset_id)
    except (KeyError, ValueError) as err:
        raise CampaignError(f"dataset {shown(dataset_id)} has no recorded selections ({err})", field=FLAG) from None


def _gate_sides(con: duckdb.DuckDBPyConnection, dataset_id: str, task: str, frame: pd.DataFrame,
                gate: str) -> pd.DataFrame:
    """Units of the gate's kept and rejected sides, stratum = side."""
    data = _selection(con, dataset_id)
    specs = {s.name: s for s in policy_specs(data)}
    spec = specs.get(gate)
    if spec is None or spec.kind not in GATE_KINDS:
        names = [s.name for s in specs.values() if s.kind in GATE_KINDS]
        listed = ", ".join(names[:12]) + (", …" if len(names) > 12 else "")
        raise CampaignError(f"no gate {shown(gate)} on dataset {shown(dataset_id)} (gates: {listed or 'none'})",
                            field=FLAG)
    sides = {"kept": spec.pick, "rejected": specs[f"{gate} rejected"].pick}
    return _picked_units(data, task, frame, sides)


def _differing_picks(con: duckdb.DuckDBPyConnection, dataset_id: str, task: str, frame: pd.DataFrame,
                     pair: str) -> pd.DataFrame:
    """Units where the two judges' order-0 picks differ, stratum "differ"."""
    data = _selection(con, dataset_id)
    judges = data.judges
    splits = [(pair[:i], pair[i + 1:]) for i, ch in enumerate(pair) if ch == ","]
    known = [(a, b) for a, b in splits if a in judges and b in judges and a != b]
    if len(known) != 1:
        raise CampaignError(f"{shown(pair)}: expected two different judges JUDGE_A,JUDGE_B "
                            f"(judges: {', '.join(judges) or 'none'})", field=FLAG)
    a, b = (data.picks[j][:, 0] for j in known[0])
    differ = (a >= 0) & (b >= 0) & (a != b)
    if task == "alignment":
        return _picked_units(data, task, frame, {"differ": np.where(differ, a, -1)})
    sides = {"differ": np.where(differ, a, -1), "differ ": np.where(differ, b, -1)}
    out = _picked_units(data, task, frame, sides)
    return out.assign(stratum="differ")


def _picked_units(data, task: str, frame: pd.DataFrame, sides: dict[str, np.ndarray]) -> pd.DataFrame:
    """Per side, the units of prompts where its pick is a candidate: the prompt (alignment) or the picked image."""
    parts = []
    for side, pick in sides.items():
        rows = np.nonzero(pick >= 0)[0]
        if task == "alignment":
            ids = data.prompts["prompt_id"].to_numpy()[rows]
        else:
            ids = data.candidate_ids[rows, pick[rows]]
        parts.append(frame.loc[frame["item_id"].isin(ids)].assign(stratum=side))
    return pd.concat(parts, ignore_index=True)
