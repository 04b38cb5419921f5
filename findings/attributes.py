"""The report's sections on attribute judges (datasets with label answers and gold labels): accuracy per
attribute under both abstention policies with coverage, the published ablations side by side, and the
CLIP zero-shot baseline beside the judges, all from `audit_core.attributes.audit` (DESIGN §4c)."""

from __future__ import annotations

import pandas as pd

from audit_core.attributes.audit import DEFAULT_CONDITION
from findings import figures
from findings.blocks import Figure, Paragraph, Section, Table
from findings.inputs import ReportInput
from findings.numbers import MISSING, UNDEFINED, percent, share_of

BASELINE_BACKEND = "clip"  # the contrastive zero-shot baseline's runs (runners/labels/clip_labels.py)
POLICIES = (("accuracy_miss", "abstentions count as misses"), ("accuracy_exclude", "abstentions left out"))




def _who(row: dict) -> str:
    """The judge's name, marked when it is the CLIP baseline."""
    return f"{row['judge']} (CLIP baseline)" if row.get("backend") == BASELINE_BACKEND else str(row["judge"])


def _default_cells(report: ReportInput) -> pd.DataFrame:
    """Each judge's cells under the default condition (its first condition when it has no default)."""
    cells = report.attributes.cells
    conditions = cells.groupby("judge", sort=False)["condition"].unique()
    chosen = {j: DEFAULT_CONDITION if DEFAULT_CONDITION in list(c) else c[0] for j, c in conditions.items()}
    return cells[cells["condition"] == cells["judge"].map(chosen)]


def accuracy(report: ReportInput) -> Section:
    """Coverage and accuracy under both policies per judge and attribute, default condition, with two figures."""
    shown = _default_cells(report)
    rows = [[_who(r), str(r["condition"]), str(r["attribute"]), str(int(r["n"])), percent(r["coverage"]),
             share_of(r, "accuracy_miss", UNDEFINED), share_of(r, "accuracy_exclude", UNDEFINED), percent(r["off_taxonomy"]),
             str(r["abstention"])] for r in shown.to_dict("records")]
    blocks = [
        Paragraph("Coverage = answered / asked. Accuracy with abstentions as misses = correct / asked; with "
                  "abstentions left out = correct / (asked − abstained), where answers off the taxonomy and failed "
                  "calls stay in the denominator as wrong. Each attribute's own policy (taxonomy file) is in the "
                  "last column; both are shown so the ranking's dependence on it is visible."),
        Table(["judge", "condition", "attribute", "images", "coverage", "accuracy, misses [95% CI]",
               "accuracy, excluded [95% CI]", "off taxonomy", "policy"], rows,
              "Each judge under its default condition, per attribute (image-level bootstrap intervals)."),
    ]
    series = shown.assign(group=shown["attribute"], labeler=[_who(r) for r in shown.to_dict("records")])
    colours = {who: report.colours.get(judge) for who, judge in zip(series["labeler"], series["judge"])}
    for stat, words in POLICIES:
        bars = figures.group_bars(series, "labeler", stat, "n", f"Accuracy per attribute, {words}", "accuracy",
                                  colours).update_layout(xaxis_title="attribute")
        blocks.append(Figure(f"attribute_{stat}", bars,
                             f"Accuracy per attribute ({words}) of each judge under its default condition, with 95% "
                             "intervals; an attribute with nothing left to score has no bar."))
    return Section("attributes", "Attribute judges: accuracy per attribute", blocks)


def ablations(report: ReportInput) -> Section | None:
    """Every condition of every judge side by side: macro means, then coverage and answers off the taxonomy
    per attribute with the conditions as columns."""
    macro = report.attributes.macro
    judges = [j for j in dict.fromkeys(macro["judge"]) if macro["judge"].eq(j).sum() > 1]
    if not judges:
        return None
    mine = macro[macro["judge"].isin(judges)]
    rows = [[str(r["judge"]), str(r["condition"]), str(int(r["attributes"])), percent(r["coverage"]),
             percent(r["abstain_share"]), percent(r["off_taxonomy"]), share_of(r, "accuracy_miss", UNDEFINED),
             share_of(r, "accuracy_exclude", UNDEFINED)] for r in mine.to_dict("records")]
    blocks = [Table(["judge", "condition", "attributes", "coverage", "abstained", "off taxonomy",
                     "accuracy, misses", "accuracy, excluded"], rows,
                    "Macro means over each judge's populated attributes, per condition: no_label_list withholds the "
                    "label lists (free text drifts off the taxonomy), no_unspecified the abstention option.")]
    cells = report.attributes.cells
    cells = cells[cells["judge"].isin(judges)]
    conditions = list(dict.fromkeys(cells["condition"]))
    wide = []
    for (judge, attribute), part in cells.groupby(["judge", "attribute"], sort=False):
        by = part.set_index("condition")
        wide.append([str(judge), str(attribute), *(
            f"{percent(by.loc[c, 'coverage'])} · {percent(by.loc[c, 'abstain_share'])} · "
            f"{percent(by.loc[c, 'off_taxonomy'])}" if c in by.index else MISSING for c in conditions)])
    blocks.append(Table(["judge", "attribute", *conditions], wide,
                        "Per attribute and condition: coverage · abstained · off the taxonomy."))
    return Section("ablations", "Attribute judges: the ablations side by side", blocks)


def baseline(report: ReportInput) -> Section:
    """The CLIP zero-shot baseline's accuracy per attribute next to each judge's (default condition)."""
    shown = _default_cells(report)
    clip = shown[shown["backend"] == BASELINE_BACKEND]
    if clip.empty:
        return Section("baseline", "Attribute judges: the CLIP baseline", [Paragraph(
            "No CLIP zero-shot baseline is recorded on this dataset; record one with `python -m runners.score "
            "--task labels --backend clip ...` to see each attribute's contrastive baseline here.")])
    judges = [j for j in dict.fromkeys(shown["judge"]) if j not in set(clip["judge"])]
    by = shown.set_index(["judge", "attribute"])
    rows = []
    for base in dict.fromkeys(clip["judge"]):
        for attribute in dict.fromkeys(clip["attribute"]):
            cells = [by.loc[(j, attribute)].to_dict() if (j, attribute) in by.index else None for j in [base, *judges]]
            rows.append([str(base), str(attribute), *(
                f"{share_of(c, 'accuracy_miss', UNDEFINED)} · {share_of(c, 'accuracy_exclude', UNDEFINED)}" if c is not None else MISSING
                for c in cells)])
    return Section("baseline", "Attribute judges: the CLIP baseline", [
        Paragraph("The baseline answers every image with the label whose templated prompts score highest (no "
                  "abstention), so its two accuracies are equal."),
        Table(["baseline", "attribute", "baseline accuracy", *judges], rows,
              "Accuracy with abstentions as misses · with them left out [95% CI], each judge under its default "
              "condition."),
    ])


BUILDERS = (accuracy, ablations, baseline)
