"""Attribute judges against gold labels (DESIGN §4c): coverage, accuracy under both abstention
policies, macro-F1, confusion, accuracy by gold label and answers off the taxonomy.

A *labeler* is one (judge, condition); a *cell* is a labeler × attribute. Inputs are long frames,
as the store loads them:

    answers  judge, backend, condition, candidate_id, attribute, status, label, answer, rationale,
             call_status, raw_output, parse_note (`store.load_label_answers`)
    gold     candidate_id, attribute, label (`store.load_gold_labels`)

A cell scores the images it was asked about whose gold label is one of the attribute's labels:
asked n; answered = status ok; correct = ok and label = gold;
coverage = answered / n; accuracy_miss = correct / n (abstained, off-taxonomy and missing answers
get no credit); accuracy_exclude = correct / (n − abstained) (only abstentions leave the
denominator, so junk cannot raise it), undefined (NaN) when that is 0; off_taxonomy = share of
answers off the taxonomy. An image whose gold label is the abstention label (no evidence) has no
label to score against: it is left out of those figures and shown in the confusion matrix only.
macro-F1 averages F1_L = 2 TP / (2 TP + FP + FN) over the gold labels L present in the cell,
every non-label answer counting as a miss. Macro means average a labeler's populated cells
(n > 0; an undefined accuracy_exclude is left out of its mean).

Intervals: one image-level percentile bootstrap serves every cell. The resampled units are the
scored images (sorted by id), drawn with replacement as seeded count weights
(`bootstrap.resampled_sums`); each cell's accuracy is a ratio of weighted sums over its images,
so all labelers and attributes see the same draws and a resample's denominator moves as a new
sample of images would move it.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import pandas as pd

from audit_core import store
from audit_core.attributes.taxonomy import Taxonomy
from audit_core.rating.audit import json_rows
from audit_core.stats.bootstrap import percentile_interval, ratio, resampled_sums
from audit_core.stats.resampling import Resampling

OFF_TAXONOMY, MISSING = "(off taxonomy)", "(missing)"  # predicted columns beside the labels and the abstention label
DEFAULT_CONDITION = "default"
ATTRIBUTE_COLUMNS = (
    "judge", "condition", "attribute", "n", "answered", "coverage",
    "accuracy_miss", "accuracy_miss_lo", "accuracy_miss_hi",
    "accuracy_exclude", "accuracy_exclude_lo", "accuracy_exclude_hi", "macro_f1", "off_taxonomy",
    "correct", "abstained", "missing", "abstain_share", "abstention", "backend",
)
CONFUSION_COLUMNS = ("judge", "condition", "attribute", "gold", "predicted", "count")
BY_LABEL_COLUMNS = ("judge", "condition", "attribute", "gold", "n", "correct", "abstained", "coverage",
                    "accuracy_miss", "accuracy_exclude")
MACRO_COLUMNS = ("judge", "condition", "attributes", "n", "coverage", "accuracy_miss", "accuracy_exclude",
                 "macro_f1", "off_taxonomy", "abstain_share", "backend")
DISAGREEMENT_COLUMNS = ("judge", "condition", "candidate_id", "attribute", "gold", "status", "predicted", "answer",
                        "rationale", "raw_output", "parse_note", "prompt", "image_path")
CELL = ["judge", "condition", "attribute"]


@dataclass(frozen=True)
class AttributeData:
    """One dataset's attribute-audit inputs. taxonomy: the one stored with its gold labels (None
    without gold labels, and then nothing can be scored); answers, gold: see the module docstring;
    candidates: candidate_id, prompt_id, prompt, source_model, image_path."""

    dataset_id: str
    taxonomy: Taxonomy | None
    gold: pd.DataFrame
    answers: pd.DataFrame
    candidates: pd.DataFrame

    @property
    def labelers(self) -> list[tuple[str, str]]:
        """(judge, condition) pairs with recorded answers: judges sorted, each judge's 'default' first."""
        pairs = self.answers[["judge", "condition"]].drop_duplicates().itertuples(index=False, name=None)
        return sorted(pairs, key=lambda p: (p[0], p[1] != DEFAULT_CONDITION, p[1]))

    @property
    def image_paths(self) -> dict[str, str | None]:
        """candidate_id → image file (None when there is none)."""
        return {c: p if isinstance(p, str) else None
                for c, p in zip(self.candidates["candidate_id"], self.candidates["image_path"])}


@dataclass(frozen=True)
class AttributeAudit:
    """Every table of the attribute audit and how its intervals were made (image-level bootstrap).

    cells: ATTRIBUTE_COLUMNS, one row per judge × condition × attribute; confusion:
    CONFUSION_COLUMNS (every gold label present × every predicted column, zeros included);
    by_label: BY_LABEL_COLUMNS; macro: MACRO_COLUMNS, one row per judge × condition.
    """

    dataset_id: str
    taxonomy: Taxonomy | None
    resampling: Resampling
    cells: pd.DataFrame
    confusion: pd.DataFrame
    by_label: pd.DataFrame
    macro: pd.DataFrame

    def tables(self) -> dict[str, pd.DataFrame]:
        """Table name → frame, as the analyze command writes them (name.csv)."""
        return {"attributes": self.cells, "confusion": self.confusion, "attributes_by_label": self.by_label}

    def to_summary(self) -> dict:
        """JSON-ready cells and macro means (NaN → null), with the taxonomy, resamples and seed."""
        tax = self.taxonomy
        return {
            "taxonomy": None if tax is None else {"name": tax.name, "version": tax.version, "sha256": tax.sha256},
            "cells": json_rows(self.cells), "macro": json_rows(self.macro),
            "resamples": self.resampling.resamples, "seed": self.resampling.seed,
        }


def load_attribute_data(con: duckdb.DuckDBPyConnection, dataset_id: str) -> AttributeData | None:
    """The dataset's attribute-audit inputs, or None when no attribute judge is recorded on it."""
    answers = store.load_label_answers(con, dataset_id)
    if answers.empty:
        return None
    candidates = store.load_candidates(con, dataset_id).merge(
        store.load_prompts(con, dataset_id)[["prompt_id", "prompt"]], on="prompt_id", how="left")
    return AttributeData(
        dataset_id=dataset_id,
        taxonomy=store.load_taxonomy(con, dataset_id),
        gold=store.load_gold_labels(con, dataset_id),
        answers=answers,
        candidates=candidates[["candidate_id", "prompt_id", "prompt", "source_model", "image_path"]],
    )


def predicted(answers: pd.DataFrame, abstain: dict[str, str]) -> pd.Series:
    """What each answer counts as in a confusion matrix: its label when ok, the attribute's abstention
    label (`abstain`: attribute → label) when abstained, else OFF_TAXONOMY or MISSING."""
    status = answers["status"]
    out = answers["label"].astype(object).where(status == "ok")
    out = out.where(status != "abstained", answers["attribute"].map(abstain))
    out = out.where(status != "off_taxonomy", OFF_TAXONOMY)
    return out.where(status.isin(["ok", "abstained", "off_taxonomy"]), MISSING)


def _joined(data: AttributeData) -> pd.DataFrame:
    """Answers with a gold label (inner join), with `gold`, `predicted`, `scored` (gold is a label of
    the attribute, not its abstention label) and `correct`."""
    if data.taxonomy is None or data.gold.empty:
        return pd.DataFrame(columns=[*data.answers.columns, "gold", "predicted", "scored", "correct"])
    tax = data.taxonomy
    gold = data.gold.rename(columns={"label": "gold"})
    joined = data.answers.merge(gold, on=["candidate_id", "attribute"], how="inner")
    joined = joined[joined["attribute"].isin(tax.names())].reset_index(drop=True)
    joined["predicted"] = predicted(joined, {a.name: a.abstain for a in tax.attributes})
    labels = {a.name: set(a.labels) for a in tax.attributes}
    joined["scored"] = [g in labels[a] for a, g in zip(joined["attribute"], joined["gold"])]
    joined["correct"] = (joined["status"] == "ok") & (joined["label"] == joined["gold"])
    return joined


def pair_counts(frame: pd.DataFrame) -> pd.DataFrame:
    """CELL…, gold, predicted, count: how often each (gold, predicted) pair occurs in each cell."""
    return frame.groupby([*CELL, "gold", "predicted"], sort=False).size().rename("count").reset_index()


def macro_f1(pairs: pd.DataFrame) -> pd.Series:
    """Per cell (`pair_counts` rows), the mean over the gold labels L present of
    F1_L = 2 TP / (2 TP + FP + FN) = 2 TP / (support of L + predictions of L); a prediction that
    is no gold label present (an abstention, junk) counts only as a miss."""
    hit = pairs["gold"] == pairs["predicted"]
    per_gold = pairs.groupby([*CELL, "gold"], sort=False)["count"].sum().rename("support").reset_index()
    tp = pairs[hit].groupby([*CELL, "gold"], sort=False)["count"].sum().rename("tp")
    shown = pairs.groupby([*CELL, "predicted"], sort=False)["count"].sum().rename("shown")
    per_gold = per_gold.merge(tp.reset_index(), on=[*CELL, "gold"], how="left").merge(
        shown.reset_index().rename(columns={"predicted": "gold"}), on=[*CELL, "gold"], how="left").fillna(
        {"tp": 0, "shown": 0})
    per_gold["f1"] = 2 * per_gold["tp"] / (per_gold["support"] + per_gold["shown"])
    return per_gold.groupby(CELL, sort=False)["f1"].mean()


def audit_attributes(data: AttributeData, resampling: Resampling = Resampling()) -> AttributeAudit:
    """Every cell's figures with 95% image-level bootstrap intervals, the confusion matrices, accuracy
    by gold label and each labeler's macro means (module docstring)."""
    joined = _joined(data)
    order = {a: i for i, a in enumerate(data.taxonomy.names())} if data.taxonomy else {}
    rank = {p: i for i, p in enumerate(data.labelers)}
    scored = joined[joined["scored"].astype(bool)]
    cells = _cells(scored, data, resampling)

    def ordered(frame: pd.DataFrame) -> pd.DataFrame:  # labelers as `data.labelers`, attributes as the taxonomy
        key = [(rank[(j, c)], order[a]) for j, c, a in zip(frame["judge"], frame["condition"], frame["attribute"])]
        return frame.iloc[sorted(range(len(frame)), key=key.__getitem__)].reset_index(drop=True)

    return AttributeAudit(
        dataset_id=data.dataset_id, taxonomy=data.taxonomy, resampling=resampling,
        cells=ordered(cells), confusion=ordered(_confusion(joined, data.taxonomy)),
        by_label=ordered(_by_label(scored)), macro=_macro(cells, rank),
    )


def _counts(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """keys…, n, answered, correct, abstained, off, missing of the answers in `frame`."""
    status = frame["status"]
    flags = pd.DataFrame({
        "n": 1, "answered": status == "ok", "correct": frame["correct"].astype(bool),
        "abstained": status == "abstained", "off": status == "off_taxonomy", "missing": ~status.isin(
            ["ok", "abstained", "off_taxonomy"])}, index=frame.index).astype(int)
    return pd.concat([frame[keys], flags], axis=1).groupby(keys, sort=False).sum().reset_index()


def _cells(scored: pd.DataFrame, data: AttributeData, resampling: Resampling) -> pd.DataFrame:
    if scored.empty:
        return pd.DataFrame(columns=list(ATTRIBUTE_COLUMNS))
    cells = _counts(scored, CELL)
    cells["coverage"] = cells["answered"] / cells["n"]
    cells["accuracy_miss"] = cells["correct"] / cells["n"]
    kept = cells["n"] - cells["abstained"]
    cells["accuracy_exclude"] = (cells["correct"] / kept.where(kept > 0)).astype(float)
    cells["off_taxonomy"] = cells["off"] / cells["n"]
    cells["abstain_share"] = cells["abstained"] / cells["n"]
    cells = cells.merge(macro_f1(pair_counts(scored)).rename("macro_f1").reset_index(), on=CELL)
    for name, (lo, hi) in _intervals(scored, cells, resampling).items():
        cells[f"{name}_lo"], cells[f"{name}_hi"] = lo, hi
    policy = {a.name: a.abstention for a in data.taxonomy.attributes}
    cells["abstention"] = cells["attribute"].map(policy)
    backends = data.answers.drop_duplicates("judge").set_index("judge")["backend"]
    cells["backend"] = cells["judge"].map(backends)
    return cells[list(ATTRIBUTE_COLUMNS)]


def _intervals(scored: pd.DataFrame, cells: pd.DataFrame, resampling: Resampling
               ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """95% intervals of accuracy_miss and accuracy_exclude per cell (rows of `cells`): one joint
    resampling of the scored images, each cell's accuracies ratios of its weighted sums."""
    images = np.sort(scored["candidate_id"].unique())
    image = np.searchsorted(images, scored["candidate_id"].to_numpy())
    cell = scored[CELL].merge(cells[CELL].reset_index(), on=CELL, how="left")["index"].to_numpy()
    x = np.zeros((len(images), 3 * len(cells)))  # per cell: correct, asked, asked − abstained
    for k, column in enumerate((scored["correct"].astype(float), np.ones(len(scored)),
                                (scored["status"] != "abstained").astype(float))):
        np.add.at(x, (image, 3 * cell + k), np.asarray(column, dtype=float))
    if resampling.resamples == 0:
        nan = np.full(len(cells), np.nan)
        return {"accuracy_miss": (nan, nan), "accuracy_exclude": (nan, nan)}
    totals = resampled_sums(x, resampling).totals
    correct, asked, kept = totals[:, 0::3], totals[:, 1::3], totals[:, 2::3]
    return {"accuracy_miss": percentile_interval(ratio(correct, asked)),
            "accuracy_exclude": percentile_interval(ratio(correct, kept))}


def _confusion(joined: pd.DataFrame, taxonomy: Taxonomy | None) -> pd.DataFrame:
    """Counts per cell × gold label present × predicted column (the labels, the abstention label,
    OFF_TAXONOMY, MISSING, then any other label a judge gave), zeros included."""
    if joined.empty:
        return pd.DataFrame(columns=list(CONFUSION_COLUMNS))
    rows = []
    for cell, part in pair_counts(joined).groupby(CELL, sort=False):
        a = taxonomy.attribute(cell[2])
        counts = dict(zip(zip(part["gold"], part["predicted"]), part["count"]))
        columns = [*a.answers(), OFF_TAXONOMY, MISSING]
        columns += sorted(set(part["predicted"]) - set(columns))
        golds = [g for g in a.answers() if g in set(part["gold"])]
        rows += [(*cell, g, p, counts.get((g, p), 0)) for g in golds for p in columns]
    return pd.DataFrame(rows, columns=list(CONFUSION_COLUMNS))


def _by_label(scored: pd.DataFrame) -> pd.DataFrame:
    if scored.empty:
        return pd.DataFrame(columns=list(BY_LABEL_COLUMNS))
    rows = _counts(scored, [*CELL, "gold"])
    rows["coverage"] = rows["answered"] / rows["n"]
    rows["accuracy_miss"] = rows["correct"] / rows["n"]
    kept = rows["n"] - rows["abstained"]
    rows["accuracy_exclude"] = (rows["correct"] / kept.where(kept > 0)).astype(float)
    return rows[list(BY_LABEL_COLUMNS)]


def _macro(cells: pd.DataFrame, rank: dict[tuple[str, str], int]) -> pd.DataFrame:
    """Each labeler's mean over its populated cells (n > 0); NaN figures are left out of their mean."""
    populated = cells[cells["n"] > 0]
    if populated.empty:
        return pd.DataFrame(columns=list(MACRO_COLUMNS))
    means = ["coverage", "accuracy_miss", "accuracy_exclude", "macro_f1", "off_taxonomy", "abstain_share"]
    grouped = populated.groupby(["judge", "condition"], sort=False)
    out = grouped[means].mean().reset_index()  # pandas' mean skips NaN
    out["attributes"] = grouped.size().to_numpy()
    out["n"] = grouped["n"].sum().to_numpy()
    out["backend"] = grouped["backend"].first().to_numpy()
    out = out.assign(_r=[rank[p] for p in zip(out["judge"], out["condition"])]).sort_values("_r")
    return out[list(MACRO_COLUMNS)].reset_index(drop=True)


def disagreements(data: AttributeData, *, include_abstained: bool = False) -> pd.DataFrame:
    """DISAGREEMENT_COLUMNS: every scored answer that is not the gold label (wrong, off the taxonomy or
    missing; abstentions too with `include_abstained`), with its rationale, raw output and image."""
    joined = _joined(data)
    wrong = joined[joined["scored"].astype(bool) & ~joined["correct"].astype(bool)]
    if not include_abstained:
        wrong = wrong[wrong["status"] != "abstained"]
    out = wrong.merge(data.candidates[["candidate_id", "prompt", "image_path"]], on="candidate_id", how="left")
    return out[list(DISAGREEMENT_COLUMNS)].reset_index(drop=True)
