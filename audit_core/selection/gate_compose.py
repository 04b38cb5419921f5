"""Composed gates: a base judge acts only where conditions joined with AND/OR hold.

Text form (what the Gate lab keeps in its URL), e.g.

    strong-judge: orders>=3/3 and scorer(content-scorer) or judge(weak-judge)

is `<base judge>: <clause> or <clause> ...`, each clause `<condition> and <condition> ...`:
AND binds tighter than OR and there are no parentheses, so a gate is an OR of AND-clauses.
Conditions (J a selector judge, S a content scorer; `(J)` may be left out of `orders` and
`entropy`, meaning the base judge):

- `orders(J)>=k/K`  every order of J parsed and at least k of its K orders agree (q ≥ k/K);
- `judge(J)`        the base judge's order-0 pick equals J's order-0 pick (J ≠ the base judge);
- `scorer(S)`       the base judge's order-0 pick equals S's argmax (`policies.scorer_pick`);
- `entropy(J)<=x`   J's order-consistency entropy (`position.order_entropy`, every order parsed) ≤ x;
- `margin(S)>=x`    S's top minus second content score in the pool ≥ x (pools with ≥ 2 scores).

A name is written bare when it has no space, quote, parenthesis, `:`, `<`, `>`, `=` or `/` and
is not `and`/`or` (keywords are read in any case); otherwise in double quotes, with `\\"` and
`\\\\` inside. `format_gate` writes the canonical form; `parse_gate(format_gate(g)) == g`.

What the gate returns where it acts: the base judge's majority pick over its orders when the
gate has an order condition (`orders` or `entropy`) on the base judge, else its order-0 pick
(so `J: orders>=k/K` is `J agree>=k/K`, `J: judge(O)` is `J+O agree` and `J: scorer(S)` is
`J+S agree`, number for number). It acts where the conditions hold and that pick exists. The
rejected side is the base judge's order-0 pick on the prompts the gate declines (`gates.rejected`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from audit_core.errors import InputError
from audit_core.selection import metrics, slices
from audit_core.selection.audit import Evaluated, evaluate_policies
from audit_core.selection.costs import POLICY_COST_COLUMNS, policy_costs, reads_cost
from audit_core.selection.data import SelectionData
from audit_core.selection.gates import gate_table, rejected
from audit_core.selection.policies import scorer_pick
from audit_core.selection.position import order_entropy
from audit_core.selection.votes import ABSTAIN, majority_vote, valid_picks
from audit_core.stats.resampling import Resampling
from audit_core.user_text import shown as quoted  # `take` has an argument named shown

KINDS = ("orders", "judge", "scorer", "entropy", "margin")
ORDER_KINDS = ("orders", "entropy")  # conditions on a judge's orders
SCORER_KINDS = ("scorer", "margin")  # conditions on a content scorer
KEYWORDS = ("and", "or")
FIELD = "compose"  # the Gate lab's URL parameter: errors name it
_TOKEN = re.compile(r'\s*(?:(?P<string>"(?:[^"\\]|\\.)*")|(?P<op>>=|<=|[:()/])|(?P<word>[^\s"():<>=/]+))')
_BARE = re.compile(r'[^\s"():<>=/\\]+')
COUNTRY_COLUMNS = ["policy", "country", "prompts", "n", "coverage", "regret", "regret_lo", "regret_hi",
                   "gain", "gain_lo", "gain_hi", "bmr", "bmr_random"]  # as the audit's groups table


@dataclass(frozen=True)
class Condition:
    """One condition: `kind` ∈ KINDS on judge or scorer `name`; `k` of `of` orders for
    `orders`, bound `x` for `entropy` (at most) and `margin` (at least)."""

    kind: str
    name: str
    k: int = 0
    of: int = 0
    x: float = 0.0


@dataclass(frozen=True)
class ComposedGate:
    """A base judge and an OR of AND-clauses of conditions (each clause non-empty)."""

    judge: str
    clauses: tuple[tuple[Condition, ...], ...]

    @property
    def conditions(self) -> tuple[Condition, ...]:
        return tuple(c for clause in self.clauses for c in clause)

    @property
    def returns_majority(self) -> bool:
        """Whether the gate returns the base judge's majority pick (an order condition on it)."""
        return any(c.kind in ORDER_KINDS and c.name == self.judge for c in self.conditions)

    def joined(self, condition: Condition, joint: str) -> ComposedGate:
        """This gate with `condition` added at the end, joined by `joint` ("and": to the last clause)."""
        if joint == "and":
            return ComposedGate(self.judge, (*self.clauses[:-1], (*self.clauses[-1], condition)))
        return ComposedGate(self.judge, (*self.clauses, (condition,)))

    def without_last(self) -> ComposedGate | None:
        """This gate without its last condition; None when that was its only one."""
        last = self.clauses[-1][:-1]
        clauses = (*self.clauses[:-1], last) if last else self.clauses[:-1]
        return ComposedGate(self.judge, clauses) if clauses else None

    def rebased(self, judge: str) -> ComposedGate:
        """The same gate on base judge `judge`: order conditions on the old base judge move with it."""
        def moved(c: Condition) -> Condition:
            return Condition(c.kind, judge, c.k, c.of, c.x) if c.kind in ORDER_KINDS and c.name == self.judge else c
        return ComposedGate(judge, tuple(tuple(moved(c) for c in clause) for clause in self.clauses))


# ------------------------------------------------------------ text form


def _name(name: str) -> str:
    if _BARE.fullmatch(name) and name.lower() not in KEYWORDS:
        return name
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _number(x: float) -> str:
    return repr(float(x) + 0.0)  # shortest text that reads back as the same float; no "-0.0"


def format_condition(condition: Condition, judge: str) -> str:
    """One condition in the text form; `(J)` left out of an order condition on the base `judge`."""
    kind, name = condition.kind, condition.name
    own = "" if kind in ORDER_KINDS and name == judge else f"({_name(name)})"
    if kind == "orders":
        return f"orders{own}>={condition.k}/{condition.of}"
    if kind == "entropy":
        return f"entropy{own}<={_number(condition.x)}"
    if kind == "margin":
        return f"margin({_name(name)})>={_number(condition.x)}"
    return f"{kind}({_name(name)})"


def format_gate(gate: ComposedGate) -> str:
    """The canonical text form of `gate` (module docstring)."""
    clauses = (" and ".join(format_condition(c, gate.judge) for c in clause) for clause in gate.clauses)
    return f"{_name(gate.judge)}: " + " or ".join(clauses)


class _Reader:
    """Tokens of a gate's text, read left to right; errors name the position (1-based)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []  # (type, value, position)
        pos = 0
        while pos < len(text):
            match = _TOKEN.match(text, pos)
            if match is None or match.end() == pos:
                if not text[pos:].strip():
                    break
                raise self.error(f"unexpected {text[pos:].lstrip()[0]!r}", len(text) - len(text[pos:].lstrip()))
            kind = match.lastgroup
            value = match.group(kind)
            if kind == "string":
                value = re.sub(r"\\(.)", r"\1", value[1:-1], flags=re.DOTALL)
            self.tokens.append((kind, value, match.start(kind)))
            pos = match.end()
        self.i = 0

    def error(self, what: str, position: int | None = None) -> InputError:
        if position is None:
            position = self.tokens[self.i][2] if self.i < len(self.tokens) else len(self.text)
        return InputError(f"composed gate {quoted(self.text)}, character {position + 1}: {what}", field=FIELD)

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i][:2] if self.i < len(self.tokens) else None

    def take(self, expected: str, shown: str | None = None) -> str:
        """The next token's value; `expected` is an operator, "name" (bare or quoted) or "word"
        (bare), `shown` what the error calls it."""
        token = self.peek()
        ok = token is not None and (token[1] == expected if expected not in ("name", "word") else
                                    token[0] in ("word", "string") if expected == "name" else token[0] == "word")
        if not ok:
            shown = shown or ("a judge or scorer name" if expected == "name" else repr(expected))
            raise self.error(f"expected {shown}, found {quoted(token[1])}" if token else f"expected {shown}, found the end")
        self.i += 1
        return token[1]

    def keyword(self) -> str | None:
        """`and` / `or` when the next token is one (bare, any case), else None."""
        token = self.peek()
        return token[1].lower() if token and token[0] == "word" and token[1].lower() in KEYWORDS else None


def _int(reader: _Reader) -> int:
    text = reader.take("word", "a whole number")
    if not re.fullmatch(r"[0-9]+", text):
        reader.i -= 1
        raise reader.error(f"expected a whole number, found {quoted(text)}")
    return int(text)


def _float(reader: _Reader) -> float:
    text = reader.take("word", "a number")
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        reader.i -= 1
        raise reader.error(f"expected a finite number, found {quoted(text)}")
    return value + 0.0


def _condition(reader: _Reader, judge: str) -> Condition:
    kind = reader.take("word", f"a condition ({', '.join(KINDS)})")
    if kind.lower() not in KINDS:
        reader.i -= 1
        raise reader.error(f"unknown condition {quoted(kind)} (conditions: {', '.join(KINDS)})")
    kind = kind.lower()
    name = judge
    if kind not in ORDER_KINDS or reader.peek() == ("op", "("):
        reader.take("(")
        name = reader.take("name")
        reader.take(")")
    if kind == "orders":
        reader.take(">=")
        k = _int(reader)
        reader.take("/")
        of = _int(reader)
        if not 1 <= k <= of:
            raise reader.error(f"orders>={k}/{of}: k must be between 1 and K")
        return Condition(kind, name, k=k, of=of)
    if kind == "entropy":
        reader.take("<=")
        return Condition(kind, name, x=_float(reader))
    if kind == "margin":
        reader.take(">=")
        return Condition(kind, name, x=_float(reader))
    return Condition(kind, name)


def parse_gate(text: str) -> ComposedGate:
    """The gate written as `text` (module docstring); InputError naming the character that
    does not fit, and what was expected there."""
    reader = _Reader(text)
    if reader.peek() is None:
        raise reader.error("empty: write a base judge, a colon and at least one condition")
    judge = reader.take("name")
    reader.take(":")
    clauses, clause = [], [_condition(reader, judge)]
    while reader.peek() is not None:
        joint = reader.keyword()
        if joint is None:
            raise reader.error(f"expected 'and' or 'or', found {quoted(reader.peek()[1])}")
        reader.i += 1
        if joint == "or":
            clauses.append(tuple(clause))
            clause = []
        clause.append(_condition(reader, judge))
    clauses.append(tuple(clause))
    return ComposedGate(judge, tuple(clauses))


# ------------------------------------------------------------ what the gate does


def check(gate: ComposedGate, data: SelectionData) -> None:
    """InputError naming the first judge, scorer or order count of `gate` that `data` lacks."""
    def known(name: str, names: list[str], what: str) -> None:
        if name not in names:
            raise InputError(f"composed gate: no {what} {name!r} in dataset {data.dataset_id!r} "
                             f"({what}s: {', '.join(names) or 'none'})", field=FIELD)

    known(gate.judge, data.judges, "judge")
    for c in gate.conditions:
        known(c.name, data.scorers if c.kind in SCORER_KINDS else data.judges,
              "scorer" if c.kind in SCORER_KINDS else "judge")
        if c.kind == "orders" and c.of != data.n_orders(c.name):
            raise InputError(f"composed gate: orders({c.name})>={c.k}/{c.of}, but {c.name!r} has "
                             f"{data.n_orders(c.name)} orders", field=FIELD)
        if c.kind == "judge" and c.name == gate.judge:
            raise InputError(f"composed gate: judge({c.name}) compares the base judge with itself", field=FIELD)


def score_margin(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """(P,) top minus second content score over a pool's scored candidates; NaN below two."""
    filled = np.where(mask & ~np.isnan(scores), scores, -np.inf)
    top = -np.sort(-filled, axis=1)[:, :2] if filled.shape[1] >= 2 else np.full((len(filled), 2), -np.inf)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(top).all(axis=1), top[:, 0] - top[:, 1], np.nan)


def holds(condition: Condition, judge: str, data: SelectionData) -> np.ndarray:
    """(P,) bool: where `condition` holds for base `judge` (an undefined value never holds)."""
    width = data.mask.shape[1]
    base = valid_picks(data.picks[judge][:, 0])
    c = condition
    if c.kind == "orders":
        return majority_vote(valid_picks(data.picks[c.name]), width)[1] >= c.k
    if c.kind == "judge":
        return (base >= 0) & (base == valid_picks(data.picks[c.name][:, 0]))
    if c.kind == "scorer":
        return (base >= 0) & (base == scorer_pick(data.scores[c.name], data.mask))
    with np.errstate(invalid="ignore"):
        if c.kind == "entropy":
            return order_entropy(valid_picks(data.picks[c.name]), data.pool_sizes, width) <= c.x
        return score_margin(data.scores[c.name], data.mask) >= c.x


def gate_picks(gate: ComposedGate, data: SelectionData) -> tuple[np.ndarray, np.ndarray]:
    """(kept, rejected) (P,) canonical picks, ABSTAIN elsewhere (module docstring); InputError
    when `data` lacks a judge, scorer or order count the gate names (`check`)."""
    check(gate, data)
    picks = valid_picks(data.picks[gate.judge])
    base = picks[:, 0]
    returned = majority_vote(picks, data.mask.shape[1])[0] if gate.returns_majority else base
    passes = np.zeros(data.n_prompts, dtype=bool)
    for clause in gate.clauses:
        passes |= np.logical_and.reduce([holds(c, gate.judge, data) for c in clause])
    kept = np.where(passes & (returned >= 0), returned, ABSTAIN)
    return kept, rejected(base, kept)


# ------------------------------------------------------------ its audit


@dataclass(frozen=True)
class ComposedResult:
    """A composed gate's audit: `name` (its canonical text); `policies` (random, the oracle and
    its kept and rejected sides, as rows of the audit's policies table); `gates` (its two rows,
    as the audit's gates table); `countries` (the kept side per country, COUNTRY_COLUMNS);
    `point` (its risk–coverage row); `resampling` (how its intervals were made)."""

    name: str
    policies: pd.DataFrame
    gates: pd.DataFrame
    countries: pd.DataFrame
    point: pd.DataFrame
    resampling: Resampling


def evaluated(gate: ComposedGate, data: SelectionData) -> list[Evaluated]:
    """random, the oracle, the gate, its rejected side and, when it returns the majority pick, the
    ungated judge on the prompts it keeps (internal), named as the policies contract names a gate's."""
    name = format_gate(gate)
    kept, declined = gate_picks(gate, data)
    out = [Evaluated("random", "random", None, metrics.uniform_choice(data.utility)),
           Evaluated("oracle", "oracle", None, metrics.oracle_choice(data.utility)),
           Evaluated(name, "composed_gate", gate.judge, kept),
           Evaluated(f"{name} rejected", "composed_gate_rejected", gate.judge, declined)]
    if gate.returns_majority:
        ungated = np.where(kept >= 0, valid_picks(data.picks[gate.judge][:, 0]), ABSTAIN)
        out.append(Evaluated(f"{name} ungated", "ungated", gate.judge, ungated, report=False))
    return out


def gate_reads(gate: ComposedGate, data: SelectionData) -> tuple[dict[str, np.ndarray], bool]:
    """(judge -> (P, K) True for the calls the gate reads, whether no content scorer is among its parts).

    Every condition is evaluated on every prompt: the base judge's order-0 call, every order of a judge
    an `orders` or `entropy` condition names, the order-0 call of a `judge` condition's judge; `scorer`
    and `margin` conditions read a content scorer (no judge call, time not recorded)."""
    reads = {gate.judge: np.zeros((data.n_prompts, data.n_orders(gate.judge)), dtype=bool)}
    reads[gate.judge][:, 0] = True
    for c in gate.conditions:
        if c.kind in ORDER_KINDS or c.kind == "judge":
            used = reads.setdefault(c.name, np.zeros((data.n_prompts, data.n_orders(c.name)), dtype=bool))
            used[:, slice(None) if c.kind in ORDER_KINDS else 0] = True
    return reads, not any(c.kind in SCORER_KINDS for c in gate.conditions)


def evaluate(gate: ComposedGate, data: SelectionData, resampling: Resampling = Resampling()) -> ComposedResult:
    """Audit `gate` as `audit.audit_selection` audits a standard gate, under the same `resampling`
    (so the same numbers for the same picks; calls per prompt from `gate_reads`, no seconds: the Gate
    lab has no calls' seconds); InputError as `gate_picks`."""
    parts, _ = slices.partitions(data)
    policies, ungated, sliced = evaluate_policies(data, evaluated(gate, data), parts, resampling)
    costs = policy_costs(policies, data, {})
    composed = policies["kind"].isin(["composed_gate", "composed_gate_rejected"]).to_numpy()
    reads, timed = gate_reads(gate, data)
    for column, value in zip(POLICY_COST_COLUMNS, reads_cost(reads, {}, timed)):
        costs.loc[composed, column] = value
    policies[POLICY_COST_COLUMNS] = costs
    name = format_gate(gate)
    country = sliced[(sliced["slice"] == "country") & (sliced["policy"] == name)]
    kept = policies[policies["policy"] == name]
    point = kept[["policy", "base_judge", "kind", "n", "coverage", "regret", "regret_lo", "regret_hi",
                  "random_regret", "gain", "gain_lo", "gain_hi", "bmr", "bmr_random"]]
    return ComposedResult(
        name=name,
        policies=policies,
        gates=gate_table(policies, ungated),
        countries=country.rename(columns={"value": "country"})[COUNTRY_COLUMNS].reset_index(drop=True),
        point=point.rename(columns={"base_judge": "judge"}).reset_index(drop=True),
        resampling=resampling,
    )
