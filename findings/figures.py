"""Plotly figure builders shared by the app's pages (through `app_ui.draw`) and the report.

No Streamlit here: every builder takes audit frames and returns a `go.Figure`. Data text
(names, countries) passes through `plain` before Plotly sees it, because Plotly reads a
subset of HTML in names and tick labels, and a direction override in a name would reorder
the numbers drawn beside it. Colours come from `findings.colours`: a judge
keeps its colour everywhere, random and the oracle have theirs, and a gate's kept and
rejected sides are drawn in `SIDE_COLOURS`, never in a judge's colour.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from audit_core.selection.costs import cost_front
from audit_core.user_text import escape_html
from findings import colours
from findings.numbers import percent

POOL_COLOURS: tuple[str, ...] = ("#555555", "#999999", "#333333", "#BBBBBB")  # people in greys, judges in colour
SELECTED_BAND = "rgba(255, 194, 10, 0.22)"  # behind a selected gate's row


def layout(fig: go.Figure, title: str, x_title: str, y_title: str, height: int = 380) -> go.Figure:
    """The shared look of every figure: title, axis titles, legend below, readable font."""
    fig.update_layout(
        title=title,
        xaxis_title=x_title,
        yaxis_title=y_title,
        height=height,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        legend={"orientation": "h", "y": -min(0.2, 90 / height)},  # a fixed gap below tall figures too
        font={"size": 14},
    )
    return fig


def plain(text: object) -> object:
    """Data text for Plotly, which reads a subset of HTML in names and tick labels: escaped, with
    invisible and direction-steering characters shown as markers (`audit_core.user_text.escape_html`).

    A pandas Series is escaped element-wise.
    """
    if isinstance(text, pd.Series):
        return text.astype(str).map(escape_html)
    return escape_html(text)




def with_coverage(name: object, coverage: object) -> str:
    """"qwen agree>=3/3 (41% of prompts)": a policy's name with the share of prompts it acts on
    (idempotent: a name already carrying this coverage is returned as it is)."""
    suffix = f" ({percent(coverage)} of prompts)"
    return str(name) if str(name).endswith(suffix) else f"{name}{suffix}"


def _error(frame: pd.DataFrame, value: str) -> dict:
    """Asymmetric error bars from `value`_lo/_hi (none below 0 length)."""
    return {"type": "data", "symmetric": False, "array": (frame[f"{value}_hi"] - frame[value]).clip(lower=0),
            "arrayminus": (frame[value] - frame[f"{value}_lo"]).clip(lower=0)}


def forest(frame: pd.DataFrame, label: str, value: str, title: str, x_title: str, colour: str | None = None) -> go.Figure:
    """Horizontal point-and-interval plot: one row per `label`, `value` with `value`_lo/_hi, 0 marked.

    Rows without an estimate (a policy that never acts) are left out.
    """
    ordered = frame.dropna(subset=[value]).sort_values(value)
    fig = go.Figure()
    groups = ordered.groupby(colour, sort=False) if colour else [(None, ordered)]
    for name, part in groups:
        fig.add_trace(
            go.Scatter(
                x=part[value],
                y=plain(part[label]),
                mode="markers",
                name=plain(name) if name is not None else value,
                marker={"size": 10},
                error_x={"type": "data", "symmetric": False,
                         "array": part[f"{value}_hi"] - part[value], "arrayminus": part[value] - part[f"{value}_lo"]},
                showlegend=colour is not None,
            )
        )
    fig.add_vline(x=0, line_dash="dash", line_color=colours.RANDOM)
    fig.update_yaxes(categoryorder="array", categoryarray=list(plain(ordered[label])))
    return layout(fig, title, x_title, "", height=max(300, 28 * len(ordered) + 120))


def policy_forest(policies: pd.DataFrame, names: Mapping[str, str], value: str, title: str, x_title: str) -> go.Figure:
    """Each policy's `value` (with `value`_lo/_hi) as a point and interval, one row per policy, its
    coverage beside its name: coloured by the judge it rests on (`colours.policy_colour`), one
    marker per kind (`colours.KIND_SYMBOLS`, named in the legend), 0 dashed. Rows without an
    estimate are left out."""
    ordered = policies.dropna(subset=[value]).sort_values(value)
    labels = pd.Series([plain(with_coverage(p, c)) for p, c in zip(ordered["policy"], ordered["coverage"])],
                       index=ordered.index)
    fig = go.Figure()
    for kind, part in ordered.groupby("kind", sort=False):
        fig.add_trace(go.Scatter(
            x=part[value], y=labels[part.index], mode="markers", name=plain(str(kind).replace("_", " ")),
            marker={"size": 11, "symbol": colours.KIND_SYMBOLS.get(kind, "circle"), "line": {"width": 2},
                    "color": [colours.policy_colour(k, b if isinstance(b, str) else None, names, p)
                              for k, b, p in zip(part["kind"], part["base_judge"], part["policy"])]},
            error_x=_error(part, value), customdata=part["n"],
            hovertemplate="%{y}: %{x:.3f} on %{customdata} prompts",
        ))
    fig.add_vline(x=0, line_dash="dash", line_color=colours.RANDOM)
    fig.update_yaxes(categoryorder="array", categoryarray=list(labels))
    return layout(fig, title, x_title, "", height=max(300, 28 * len(ordered) + 140))


COST_DODGE = 0.012  # sideways spread between judges at one cost, as a share of the cost range
COST_LABEL_STEP = 0.12  # vertical gap between the stacked names of the best points, as a share of the gain range
COST_TITLES = {"calls_per_prompt": "judge calls per prompt", "seconds_per_prompt": "judge seconds per prompt"}


def cost_gain_chart(policies: pd.DataFrame, names: Mapping[str, str], cost: str = "calls_per_prompt") -> go.Figure:
    """Gain over random (95% interval) against `cost` (calls or seconds per prompt) for every policy of each
    judge that picks on every prompt (`audit_core.selection.costs.cost_front`): colour = the judge, marker =
    the kind (both in the legend); each judge's gain–cost front as a dotted staircase, its best point (the
    cheapest with the judge's highest gain) ringed and named, the names stacked above the points, highest
    gain on top; random's 0 dashed. Judges sharing a cost are drawn side by side, COST_DODGE of the cost
    range (or of the cost, when every policy costs the same) apart; the hover states the exact cost."""
    points = cost_front(policies, cost)
    judges = sorted(points["base_judge"].unique())
    costs = points["cost"].to_numpy(dtype=float)
    spread = COST_DODGE * (float(np.ptp(costs)) or float(np.abs(costs).max())) if len(points) else 0.0
    gains = points[["gain", "gain_lo", "gain_hi"]].to_numpy(dtype=float)
    top, bottom = (float(np.nanmax(gains)), float(np.nanmin(gains))) if len(points) else (0.0, 0.0)
    step = COST_LABEL_STEP * max(top - min(bottom, 0.0), 1e-9)
    label_rank = {p: r for r, p in enumerate(points[points["best"]].sort_values("gain", ascending=False)["policy"])}
    fig = go.Figure()
    for i, judge in enumerate(judges):
        part = points[points["base_judge"] == judge]
        x = part["cost"] + spread * (i - (len(judges) - 1) / 2)
        colour = names.get(judge, colours.RANDOM)
        front = part["front"].to_numpy()
        fig.add_trace(go.Scatter(x=x[front], y=part["gain"][front], mode="lines", hoverinfo="skip", showlegend=False,
                                 line={"color": colour, "dash": "dot", "shape": "hv"}))
        fig.add_trace(go.Scatter(
            x=x, y=part["gain"], mode="markers", name=plain(judge), legendgroup="judges", showlegend=False,
            marker={"size": 11, "color": colour, "line": {"width": 1, "color": "black"},
                    "symbol": [colours.KIND_SYMBOLS.get(k, "circle") for k in part["kind"]]},
            error_y=_error(part, "gain"), customdata=list(zip(plain(part["policy"]), part["n"], part["cost"])),
            hovertemplate="%{customdata[0]}: gain %{y:.3f} on %{customdata[1]} prompts, %{customdata[2]:.3g} per "
                          "prompt<extra></extra>",
        ))
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=plain(judge), legendgroup="judges",
                                 marker={"size": 11, "color": colour, "symbol": "circle"}))
        for row, at in zip(part[part["best"]].to_dict("records"), x[part["best"].to_numpy()]):
            ring = {"size": 22, "color": "rgba(0,0,0,0)", "line": {"width": 2, "color": colour}}
            fig.add_trace(go.Scatter(x=[at], y=[row["gain"]], mode="markers", hoverinfo="skip", showlegend=False,
                                     marker=ring))
            fig.add_annotation(x=at, y=row["gain"], text=plain(f"best: {row['policy']}"), showarrow=True, arrowhead=0,
                               axref="x", ayref="y", ax=at, ay=top + step * (len(label_rank) - label_rank[row["policy"]]),
                               font={"color": colour}, arrowcolor=colour)
    for kind in dict.fromkeys(points["kind"]):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=str(kind), legendgroup="kinds", marker={
            "size": 11, "color": colours.RANDOM, "symbol": colours.KIND_SYMBOLS.get(kind, "circle")}))
    fig.add_hline(y=0, line_dash="dash", line_color=colours.RANDOM, annotation_text="random",
                  annotation_position="bottom right")
    fig.update_yaxes(range=[min(bottom, 0.0) - step, top + step * (len(label_rank) + 1)])
    return layout(fig, "Gain against cost, judge by judge", COST_TITLES[cost], "gain over random (alignment)",
                  height=460)


def slot_chart(positions: pd.DataFrame, names: Mapping[str, str]) -> go.Figure:
    """Share of calls choosing each slot per judge (pooled over pool sizes), uniform marked."""
    pooled = positions[positions["m"].isna()] if positions["m"].isna().any() else positions
    fig = go.Figure()
    for judge, part in pooled.groupby("judge", sort=True):
        fig.add_trace(go.Bar(x=part["slot"], y=part["share"], name=plain(judge), marker_color=names.get(judge)))
    uniform = pooled.groupby("slot", sort=True)["uniform"].mean()
    fig.add_trace(go.Scatter(x=uniform.index, y=uniform.values, mode="markers", name="uniform expectation",
                             marker={"symbol": "line-ew", "size": 40, "line": {"width": 3, "color": "black"}}))
    fig.update_yaxes(tickformat=".0%")
    return layout(fig, "Which slot each judge picks", "slot (A = shown first)", "share of valid calls")


def gate_chart(gates: pd.DataFrame, selected: str | None = None, composed: str | None = None) -> go.Figure:
    """Gain over random on the prompts each gate keeps and rejects (bars in `SIDE_COLOURS`), with
    the ungated judge there (open diamonds); each gate's name carries its kept side's coverage.

    Horizontal bars, one row per gate, so long gate names stay readable; the rows of the gate
    named `selected` and of the `composed` gate (named "composed: …") are shaded and bold.
    """
    order = list(dict.fromkeys(gates["gate"]))
    kept_coverage = gates[gates["side"] == "kept"].set_index("gate")["coverage"]
    marked = [g for g in dict.fromkeys((selected, composed)) if g in order]
    label = {}
    for g in order:
        text = plain(with_coverage(f"composed: {g}" if g == composed else g, kept_coverage.get(g)))
        label[g] = f"<b>{text}</b>" if g in marked else text
    fig = go.Figure()
    for side, colour in colours.SIDE_COLOURS.items():
        part = gates[gates["side"] == side]
        fig.add_trace(go.Bar(
            y=part["gate"].map(label), x=part["gain"], orientation="h", name=f"gate's pick, {side} prompts",
            marker_color=colour, offsetgroup=side, customdata=part["n"],
            hovertemplate="%{y}: gain %{x:.3f} on %{customdata} prompts", error_x=_error(part, "gain"),
        ))
        fig.add_trace(go.Scatter(
            y=part["gate"].map(label), x=part["ungated_gain"], mode="markers", offsetgroup=side, orientation="h",
            name=f"ungated judge, {side} prompts",
            marker={"symbol": "diamond-open", "size": 12, "color": colours.ORACLE, "line": {"width": 2}},
        ))
    for g in marked:
        row = order.index(g)
        fig.add_hrect(y0=row - 0.5, y1=row + 0.5, fillcolor=SELECTED_BAND, line_width=0, layer="below")
    fig.add_vline(x=0, line_dash="dash", line_color=colours.RANDOM, annotation_text="random", annotation_position="top")
    fig.update_layout(barmode="group", scattermode="group")
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=[label[g] for g in order])
    return layout(fig, "What each gate keeps and rejects", "gain over random (alignment)", "",
                  height=max(320, 56 * len(order) + 140))


def gate_difference_chart(policies: pd.DataFrame, stat: str = "gain_vs_rejected") -> go.Figure:
    """Each gate's kept minus rejected `stat` (gain or regret) with its joint 95% interval, in the
    kept side's colour when the interval lies above 0, the rejected side's when below, grey otherwise."""
    part = policies.dropna(subset=[stat]).sort_values(stat)
    labels = [plain(with_coverage(p, c)) for p, c in zip(part["policy"], part["coverage"])]
    side = ["kept" if lo > 0 else "rejected" if hi < 0 else None for lo, hi in zip(part[f"{stat}_lo"], part[f"{stat}_hi"])]
    fig = go.Figure(go.Scatter(
        x=part[stat], y=labels, mode="markers", name="kept − rejected",
        marker={"size": 11, "symbol": "diamond", "color": [colours.SIDE_COLOURS.get(s, colours.RANDOM) for s in side]},
        error_x=_error(part, stat), hovertemplate="%{y}: %{x:+.3f}", showlegend=False,
    ))
    fig.add_vline(x=0, line_dash="dash", line_color=colours.RANDOM)
    fig.update_yaxes(categoryorder="array", categoryarray=labels)
    what = "gain" if stat.startswith("gain") else "regret"
    return layout(fig, f"Kept minus rejected {what}, each gate", f"kept − rejected {what} (all prompts resampled jointly)",
                  "", height=max(300, 30 * len(part) + 140))


def country_chart(groups: pd.DataFrame, policies: pd.DataFrame, names: Mapping[str, str]) -> go.Figure:
    """Regret of each judge's order-0 pick per country (bars with within-country 95% intervals),
    random's regret on the same prompts as a dash; each judge's worst country is outlined in black
    and named with the judge's disparity (worst − best country) in the legend."""
    by_policy = policies.set_index("policy")
    judges = [p for p in policies.loc[policies["kind"] == "judge", "policy"]]
    countries = sorted(groups["country"].dropna().unique(), key=str)
    shown = [plain(str(c).replace("_", " ")) for c in countries]
    position = dict(zip(countries, shown))
    fig = go.Figure()
    for judge in judges:
        part = groups[(groups["policy"] == judge) & (groups["n"] > 0)].sort_values("country", key=lambda s: s.astype(str))
        if part.empty:
            continue
        worst = part.loc[part["regret"].idxmax(), "country"]
        disparity = by_policy.loc[judge, "disparity"]
        fig.add_trace(go.Bar(
            x=part["country"].map(position), y=part["regret"], customdata=part["n"],
            name=f"{plain(judge)} (worst {plain(str(worst).replace('_', ' '))}, disparity {disparity:.3f})",
            marker={"color": names.get(judge, colours.RANDOM),
                    "line": {"color": ["black" if c == worst else "rgba(0,0,0,0)" for c in part["country"]], "width": 3}},
            error_y={"type": "data", "symmetric": False, "array": (part["regret_hi"] - part["regret"]).clip(lower=0),
                     "arrayminus": (part["regret"] - part["regret_lo"]).clip(lower=0)},
            hovertemplate="%{x}: regret %{y:.3f} (n = %{customdata})",
        ))
    rand = groups[groups["policy"] == "random"]
    fig.add_trace(go.Scatter(x=rand["country"].map(position), y=rand["regret"], mode="markers", name="random",
                             marker={"symbol": "line-ew", "size": 30, "line": {"width": 3, "color": colours.RANDOM}}))
    fig.update_layout(barmode="group")
    fig.update_xaxes(categoryorder="array", categoryarray=shown)
    return layout(fig, "Regret by country (worst country outlined)", "country", "mean regret (best − picked)", height=440)


def cultural_chart(cultural: pd.DataFrame, policies: pd.DataFrame, names: Mapping[str, str],
                   kinds: Sequence[str]) -> go.Figure:
    """Cultural-error deltas (chosen image's error rate minus random's on the same prompts, all
    pools) of the policies of `kinds`, with their 95% intervals: one row per error type, one
    point per policy (its judge's colour, its kind's marker); negative = fewer errors than random."""
    part = cultural[(cultural["subset"] == "all") & cultural["kind"].isin(kinds)].dropna(subset=["delta"])
    base_judge = policies.set_index("policy")["base_judge"]
    fig = go.Figure()
    for policy, rows in part.groupby("policy", sort=True):
        kind, base = rows["kind"].iloc[0], base_judge.get(policy)
        fig.add_trace(go.Scatter(
            x=rows["delta"], y=rows["outcome"].str.replace("_", " "), mode="markers", name=plain(policy),
            orientation="h", offsetgroup=plain(policy),
            marker={"size": 11, "symbol": colours.KIND_SYMBOLS.get(kind, "circle"),
                    "color": colours.policy_colour(kind, base if isinstance(base, str) else None, names, policy)},
            error_x=_error(rows, "delta"), customdata=rows["n"], hovertemplate="%{y}: %{x:+.3f} (n = %{customdata})",
        ))
    fig.add_vline(x=0, line_dash="dash", line_color=colours.RANDOM, annotation_text="random", annotation_position="top")
    fig.update_layout(scattermode="group")
    return layout(fig, "Cultural errors: chosen image minus random", "error-rate delta (negative = fewer errors)", "",
                  height=max(320, 90 * part["outcome"].nunique() + 160))


def pool_colours(pools: Sequence[str]) -> dict[str, str]:
    """A stable grey per reference pool (by position in the sorted pool list)."""
    return {p: POOL_COLOURS[i % len(POOL_COLOURS)] for i, p in enumerate(sorted(pools))}


def distribution_chart(dist: pd.DataFrame, names: Mapping[str, str], scale: tuple[int, int]) -> go.Figure:
    """Grouped bars: the share of each point per judge · condition (`audit_core.rating.audit.rating_distribution`
    rows; a judge's colour from `names`) and per pool (greys, hatched), with the bottom two points
    shaded so a positivity floor shows at a glance."""
    fig = go.Figure()
    points = list(dict.fromkeys(dist["point"]))
    for (judge, condition), part in dist[dist["source"] == "judge"].groupby(["judge", "condition"], sort=True):
        fig.add_trace(go.Bar(x=part["point"], y=part["share"], name=f"{plain(judge)} · {plain(condition)}",
                             marker_color=names.get(judge),
                             customdata=part["count"], hovertemplate="%{x}: %{y:.0%} (%{customdata} items)"))
    greys = pool_colours(dist["pool"].dropna().unique())
    for pool, part in dist[dist["source"] == "pool"].groupby("pool", sort=True):
        fig.add_trace(go.Bar(x=part["point"], y=part["share"], name=f"pool {plain(pool)} (consensus)",
                             marker={"color": greys[pool], "pattern": {"shape": "/"}},
                             customdata=part["count"], hovertemplate="%{x}: %{y:.0%} (%{customdata} items)"))
    lo = scale[0]
    fig.add_vrect(x0=-0.5, x1=1.5, fillcolor="#D55E00", opacity=0.1, line_width=0,
                  annotation_text=f"floor ({lo}–{lo + 1})", annotation_position="top left")
    fig.update_layout(barmode="group")
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=points)
    fig.update_yaxes(tickformat=".0%")
    return layout(fig, "How often each point is given", "rating", "share of items")


def group_bars(
    frame: pd.DataFrame, series: str, value: str, count: str, title: str, y_title: str, names: Mapping[str, str]
) -> go.Figure:
    """`value` per item group (x, in the frame's order) for each `series` value, as bars with their
    95% intervals (`value`_lo/_hi) and the group's n (`count`) on hover; groups without a value have no bar."""
    fig = go.Figure()
    order = list(plain(pd.Series(list(dict.fromkeys(frame["group"])))))
    for name, part in frame.groupby(series, sort=True):
        fig.add_trace(go.Bar(
            x=plain(part["group"]), y=part[value], name=plain(name), customdata=part[count],
            marker_color=names.get(name), hovertemplate="%{x}: %{y:.2f} (n = %{customdata})",
            error_y={"type": "data", "symmetric": False, "array": (part[f"{value}_hi"] - part[value]).clip(lower=0),
                     "arrayminus": (part[value] - part[f"{value}_lo"]).clip(lower=0)},
        ))
    fig.update_layout(barmode="group")
    fig.update_xaxes(categoryorder="array", categoryarray=order)
    return layout(fig, title, "item group", y_title)
