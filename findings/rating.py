"""The report's sections on rating judges (datasets with rating runs or votes on the rubric):
alignment per pool, tilt between pools, the rating distributions and the pools' reliability,
all from `audit_core.rating.audit`."""

from __future__ import annotations

from audit_core.rating.audit import rating_distribution
from findings import figures
from findings.blocks import Figure, Paragraph, Section, Table
from findings.inputs import ReportInput
from findings.numbers import UNDEFINED, estimate_of, number, percent


def alignment(report: ReportInput) -> Section:
    """Each rating judge × condition against each pool's consensus over all items."""
    table = report.rating.alignment
    overall = table[table["group"] == "all"]
    rows = [[str(r["judge"]), str(r["condition"]), str(r["pool"]), str(int(r["n"])), str(int(r["abstained"])),
             estimate_of(r, "mae", missing=UNDEFINED), estimate_of(r, "pearson", missing=UNDEFINED),
             number(r["qwk"], missing=UNDEFINED),
             f"{percent(r['floor_share'])} vs {percent(r['pool_floor_share'])}"]
            for r in overall.to_dict("records")]
    blocks = [Table(["judge", "condition", "pool", "items rated", "abstained", "MAE [95% CI]", "Pearson r [95% CI]",
                     "quadratic κ", "floor share: judge vs pool"], rows,
                    f"Agreement of each rating judge with each reference pool's consensus on the "
                    f"{report.rating.outcome} scale {report.rating.scale[0]}–{report.rating.scale[1]} (all items; "
                    "item-level bootstrap intervals).")]
    mae = overall.assign(group=overall["judge"] + " · " + overall["condition"])
    pools = figures.pool_colours(mae["pool"].unique())
    blocks.append(Figure("rating_mae", figures.group_bars(mae, "pool", "mae", "n", "Mean absolute error against each pool",
                                                          "MAE (lower is closer)", pools),
                         "MAE of each judge · condition against each pool's consensus, with 95% intervals."))
    return Section("alignment", "Rating judges: alignment per pool", blocks)


def tilt(report: ReportInput) -> Section | None:
    """Δ = MAE_a − MAE_b and the normalised tilt T between each pair of pools."""
    table = report.rating.tilt
    overall = table[table["group"] == "all"]
    if overall.empty:
        return None
    rows = [[str(r["judge"]), str(r["condition"]), f"{r['pool_a']} vs {r['pool_b']}",
             estimate_of(r, "delta", True, UNDEFINED),
             estimate_of(r, "tilt", True, UNDEFINED), str(int(r["n_tilt"]))] for r in overall.to_dict("records")]
    shown = overall.assign(rater=overall["judge"] + " · " + overall["condition"])
    return Section("tilt", "Rating judges: tilt between pools", [
        Table(["judge", "condition", "pools", "Δ = MAE a − MAE b [95% CI]", "tilt T [95% CI]", "items (T)"], rows,
              "Negative Δ: closer to the first pool. T is the normalised tilt on the items where the pools differ."),
        Figure("rating_tilt", figures.forest(shown, "rater", "tilt", "Normalised tilt T", "T (0 = no tilt)"),
               "Normalised tilt of each judge · condition with its 95% interval."),
    ])


def distributions(report: ReportInput) -> Section:
    """How often each point of the scale is given, by judges and by the pools."""
    dist = rating_distribution(report.rating_data)
    return Section("distribution", "Rating judges: rating distributions", [
        Figure("rating_distribution", figures.distribution_chart(dist, report.colours, report.rating_data.scale),
               "Share of items given each point, per judge · condition (colours) and per pool's consensus (greys, "
               "hatched); the bottom two points are shaded so a positivity floor shows."),
    ])


def reliability(report: ReportInput) -> Section | None:
    """Krippendorff's alpha of each pool and the pools' agreement with each other."""
    rel, agree = report.rating.reliability, report.rating.pool_agreement
    if rel.empty:
        return None
    blocks = [Table(["pool", "α ordinal", "α interval", "items", "annotators"],
                    [[str(r["pool"]), number(r["alpha_ordinal"]), number(r["alpha_interval"]), str(int(r["n_items"])),
                      str(int(r["n_annotators"]))] for r in rel.to_dict("records")],
                    "Krippendorff's alpha of each reference pool's votes.")]
    if not agree.empty:
        blocks.append(Table(["pools", "items", "Pearson r of consensus", "mean |difference|"],
                            [[f"{r['pool_a']} vs {r['pool_b']}", str(int(r["n"])), number(r["pearson"]),
                              number(r["mean_abs_diff"])] for r in agree.to_dict("records")]))
    else:
        blocks.append(Paragraph("One reference pool: no agreement between pools to report."))
    return Section("reliability", "Rating judges: reliability of the pools", blocks)


BUILDERS = (alignment, tilt, distributions, reliability)
