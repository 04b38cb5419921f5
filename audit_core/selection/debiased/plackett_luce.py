"""`{judge} plackett-luce`: a Plackett–Luce model with slot effects, fitted to the judge's rankings
(DESIGN §4d).

A ranking i_1, …, i_m given in one order, image i_j shown in slot s_j, has probability

    P = Π_{j<m} exp(θ_{i_j} + β_{s_j}) / Σ_{l≥j} exp(θ_{i_l} + β_{s_l}),

with one strength θ per image within its prompt and one effect β per slot shared by every prompt
(β_A = 0). An order that returned a pick without a full ranking contributes its first factor only
(the pick out of all m images: the Luce choice model), an order without a pick nothing; so a judge
that answers with choices only is fitted as a choice model with slot effects.

Fit: maximum of log P summed over the calls minus (ridge/2)·(Σθ² + Σβ²), by Newton's method with a
backtracking (Armijo) line search on the exact gradient and Hessian, until every gradient entry is
within GRADIENT_TOLERANCE of 0 (or the objective can no longer resolve the step: `newton_maximum`).
The Hessian is block-diagonal in the prompts' strengths (one M × M block A_p each, with B_p its
strengths × slots block) bordered by the few slot effects, so each Newton step solves the prompts'
blocks (batched numpy) and the slot effects through its Schur complement: no loop over prompts, and
the objective is strictly convex (the ridge), so the steps converge from θ = β = 0. The ridge (default
0.1, a Gaussian prior of variance 10 on each parameter, i.e. MAP) keeps the estimate finite: without it
an image ranked above another in every order would have θ = +∞.
It is the objective of `choix.opt_rankings` with alpha = ridge/2 when there are no slot effects.
The pick is the image with the largest θ (ties within PL_TIE_TOLERANCE follow `ties.best_of`);
a prompt where no order returned a pick gets NO_PICK.

Partitions: the prompts are held in contiguous ranges (`PromptPartition`: its stages, θ and solved
blocks), and the driver (`newton_maximum`) holds only β, its step d_β and, per pass, the partitions'
`PassSums` added in partition order, of a size independent of P: log-likelihood, Σθ², the β gradient,
max |g_θ|, the slot block (S × S) and Σ_p B_pᵀ A_p⁻¹ [g_p | B_p] (S × (1 + S)). From these the driver
solves d_β = −(S − Σ BᵀA⁻¹B)⁻¹ (g_β − Σ BᵀA⁻¹g), and each partition sets d_θ = −(A_p⁻¹g_p + A_p⁻¹B_p·d_β)
and returns its part of the slope g·d. The driver reaches the partitions through a `PartitionMap`
(`LocalPartitions`: a loop in this process; on a cluster, one call per actor); `plackett_luce_fit` runs
one partition of every prompt, `fit_partitions` any list of ranges; the ranges change only the order of
sums (the tests hold fits over 3 and 7 ranges to the one-partition fit within 1e-8).

Memory: the stages are kept in prompt order at a byte per entry (`Stages`), and every pass over a
partition takes PROMPT_CHUNK prompts at a time: the chunk's softmax weights, its part of the objective
and the gradient, its prompts' Hessian blocks A_p and B_p, each solved at once against [g_p | B_p], and
the chunk's part of the Schur complement and its right-hand side; the solved blocks (P × M × M floats)
stay for d_θ once d_β is known. A pass evaluates a trial point and solves its blocks together, so a
point the line search takes needs no second pass for its step. A partition's memory beyond its stages is
thus a few P·M arrays (θ, trial θ, gradient, step, solved blocks) and one chunk's arrays, the driver's a
few S-vectors and S × (1 + S) matrices; the chunk size changes only the order of sums (the tests hold a
fit in chunks of 3 prompts to the one-chunk fit within 1e-10).

β is estimated jointly with P·m strengths each seen in K rankings only, so with few orders its
maximum-likelihood estimate is exaggerated (the incidental-parameter bias of fixed-effect choice
models: about +20% with K = m = 4 in the tests' simulation, shrinking as K grows); the strengths and
so the picks are what the policy uses.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Protocol

import numpy as np

from audit_core.chunks import row_chunks
from audit_core.selection.data import index_dtype
from audit_core.selection.debiased.calls import ABSENT, OrderedCalls
from audit_core.selection.debiased.ties import best_of

DEFAULT_RIDGE = 0.1
PL_TIE_TOLERANCE = 1e-6  # θ agreeing this closely are equal (the fit stops within about 1e-7 of its optimum)
GRADIENT_TOLERANCE = 1e-9  # on every entry of the gradient; θ is then within 1e-8 of the optimum (Hessian ≥ ridge)
ARMIJO = 1e-4  # sufficient decrease of the line search: f(x + t·d) ≤ f(x) + ARMIJO·t·∇f·d
MAX_NEWTON_STEPS = 200
PROMPT_CHUNK = 1 << 14  # prompts whose stages a pass lays out at once (~25 MB with 9 stages of 4)
MIN_STEP = 1e-12
VALUE_RESOLUTION = 1e-12  # relative: a predicted decrease below this is lost in the objective's rounding


@dataclass(frozen=True)
class Stages:
    """Every choice the rankings record, in prompt order: in stage t the image `images[t, 0]` was taken
    out of the images `images[t, :]` (canonical indices within the stage's prompt, chosen first; ABSENT
    padding), shown in slots `slots[t, :]`; prompt p's stages are the rows starts[p]:starts[p + 1]. Images
    and slots are of `index_dtype(width)` (a byte each up to 127 images): the passes derive the θ index
    of each entry a chunk of prompts at a time."""

    images: np.ndarray
    slots: np.ndarray
    starts: np.ndarray
    width: int

    @property
    def n_prompts(self) -> int:
        return len(self.starts) - 1


@dataclass(frozen=True)
class PlackettLuceFit:
    """pick: (P,) canonical index or NO_PICK; theta: (P, M) strengths (NaN in padding and on prompts
    without a pick); beta: (M,) slot effects (β_A = 0; all 0 without slot effects); full: (P,) every
    order gave a full ranking; partial: (P,) some order did not but one returned a pick; abstained:
    (P,) none did; converged: whether the optimiser met its tolerance; log_likelihood: at the fit
    (without the penalty)."""

    pick: np.ndarray
    theta: np.ndarray
    beta: np.ndarray
    full: np.ndarray
    partial: np.ndarray
    abstained: np.ndarray
    converged: bool
    log_likelihood: float

    def counts(self) -> dict[str, int]:
        """Prompts by what the fit had: full (rankings in every order), partial, abstained."""
        return {"full": int(self.full.sum()), "partial": int(self.partial.sum()),
                "abstained": int(self.abstained.sum())}


def ranking_stages(calls: OrderedCalls) -> Stages:
    """The choice stages of every call (module docstring): m − 1 per full ranking, 1 per pick alone; made
    a chunk of prompts at a time."""
    parts = [_chunk_stages(calls.rows(prompts)) for prompts in row_chunks(calls.n_prompts, PROMPT_CHUNK)]
    images, slots, counts = (np.concatenate(arrays) for arrays in zip(*parts))
    return Stages(images, slots, np.concatenate([[0], np.cumsum(counts)]), calls.width)


def _chunk_stages(calls: OrderedCalls) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(images, slots, stages per prompt) of the calls' choices, in prompt order (the layout of `Stages`)."""
    width, full = calls.width, calls.full_ranking
    slot_of = calls.slot_of
    prompts, images, slots = [], [], []
    p, k = np.nonzero(full)
    m = calls.pool_sizes[p]
    for j in range(width - 1):
        live = j < m - 1
        pj, kj = p[live], k[live]
        remaining = np.where(np.arange(width) >= j, calls.rankings[pj, kj], ABSENT)
        remaining = np.concatenate([remaining[:, j:], remaining[:, :j]], axis=1)  # chosen first
        prompts.append(pj)
        images.append(remaining)
        slots.append(_slots(slot_of, pj, kj, remaining))
    p, k = np.nonzero(calls.valid & ~full)
    pool = np.where(calls.mask[p], np.arange(width), ABSENT)
    chosen = calls.picks[p, k]
    first = _absent_last(np.concatenate([chosen[:, None], np.where(pool == chosen[:, None], ABSENT, pool)], axis=1))
    first = first[:, :width]
    prompts.append(p)
    images.append(first)
    slots.append(_slots(slot_of, p, k, first))
    prompt = np.concatenate(prompts)
    by_prompt = np.argsort(prompt, kind="stable")
    compact = index_dtype(width)
    return (np.concatenate(images)[by_prompt].astype(compact), np.concatenate(slots)[by_prompt].astype(compact),
            np.bincount(prompt, minlength=calls.n_prompts))


def _slots(slot_of: np.ndarray, prompts: np.ndarray, orders: np.ndarray, local: np.ndarray) -> np.ndarray:
    return np.where(local >= 0, slot_of[prompts[:, None], orders[:, None], np.clip(local, 0, None)], ABSENT)


def _absent_last(rows: np.ndarray) -> np.ndarray:
    """Each row with its ABSENT entries moved to the end, the others kept in order."""
    order = np.argsort(rows < 0, axis=1, kind="stable")
    return np.take_along_axis(rows, order, axis=1)


@dataclass(frozen=True)
class Hessian:
    """The penalised objective's Hessian in blocks: strengths (P, M, M), one block per prompt; strengths
    × slot effects (P, M, S); slot effects (S, S); S = M − 1 (β_A is fixed) or 0 without slot effects."""

    strengths: np.ndarray
    cross: np.ndarray
    slots: np.ndarray


@dataclass(frozen=True)
class _Chunk:
    """The stages of a range of P_c prompts at given parameters, entry j of every stage in row j (sums over
    a stage's entries run down the first axis). index: (M, n) each entry's θ among the range's P_c·M
    (P_c·M where ABSENT); image, slot: (M, n) its canonical index and the slot it was shown in (2M and M
    where ABSENT); weight: (M, n) the stage's softmax weights (0 where ABSENT); row: (n,) the stage's row
    in a (P_c, depth) layout of each prompt's stages; log_likelihood: Σ log P(chosen) over the stages."""

    n_prompts: int
    index: np.ndarray
    image: np.ndarray
    slot: np.ndarray
    weight: np.ndarray
    row: np.ndarray
    depth: int
    log_likelihood: float

    def gradient(self) -> tuple[np.ndarray, np.ndarray]:
        """(d(−log P)/dθ (P_c, M), d(−log P)/dβ (M,), slot A included): on each entry, Σ over the stages of
        softmax weight − 1[chosen]."""
        width = len(self.weight)
        excess = self.weight.copy()
        excess[0] -= 1.0
        on_image = np.bincount(self.index.ravel(), excess.ravel(), minlength=self.n_prompts * width + 1)[:-1]
        on_slot = np.bincount(self.slot.ravel(), excess.ravel(), minlength=width + 1)[:-1]
        return on_image.reshape(self.n_prompts, width), on_slot

    def hessian(self, ridge: float, n_slots: int) -> Hessian:
        """The prompts' blocks of `penalised_hessian` (strengths with the ridge), and their part of the slot
        block (without it). Each stage's weights laid out on its prompt's images (columns 0..M−1), its
        slots (M..2M−1), the absent entries (2M) and 1 (2M + 1) give every prompt's Σ w ⊗ (w, v, 0, 1) in
        one batched product."""
        width, n_prompts, columns = len(self.weight), self.n_prompts, 2 * len(self.weight) + 2
        grid = np.zeros((n_prompts * self.depth, columns))
        first = self.row * columns
        grid.ravel()[first + columns - 1] = 1.0
        grid.ravel()[first + self.image] = self.weight
        grid.ravel()[first + width + self.slot] = self.weight
        stacked = grid.reshape(n_prompts, self.depth, columns)
        outer = np.matmul(stacked[:, :, :width].transpose(0, 2, 1), stacked)
        strengths = -outer[:, :, :width]
        np.einsum("pii->pi", strengths)[...] += outer[:, :, -1] + ridge  # on the diagonal (a view)
        if not n_slots:
            return Hessian(strengths, np.zeros((n_prompts, width, 0)), np.zeros((0, 0)))
        n_pairs = n_prompts * width * width  # (θ, slot it was shown in); the absent entries' come after
        shown = (self.index * width + self.slot).ravel()
        cross = np.bincount(shown, self.weight.ravel(), minlength=n_pairs + width + 1)[:n_pairs]
        cross = cross.reshape(n_prompts, width, width) - outer[:, :, width:2 * width]
        gram = grid.T @ grid
        slot_block = np.diag(gram[width:2 * width, -1]) - gram[width:2 * width, width:2 * width]
        return Hessian(strengths, cross[:, :, 1:], slot_block[1:, 1:])


def _slot_effects(beta: np.ndarray, width: int) -> np.ndarray:
    """(M,) every slot's effect from the fitted β_B, … (S,): β_A = 0, and all 0 when S = 0."""
    return np.concatenate([[0.0], beta]) if len(beta) else np.zeros(width)


def _chunk_at(theta: np.ndarray, beta: np.ndarray, stages: Stages, prompts: slice) -> _Chunk:
    """The stages of the prompts in the slice `prompts` (a `row_chunks` slice) at strengths theta (P, M) and
    slot effects beta (M,): the softmax of the utilities θ_image + β_slot over each stage's images."""
    width, n_prompts = stages.width, prompts.stop - prompts.start
    starts = stages.starts[prompts.start:prompts.stop + 1]
    counts = np.diff(starts)
    prompt = np.repeat(np.arange(n_prompts), counts)
    depth = int(counts.max(initial=0))
    row = prompt * depth + np.arange(len(prompt)) - (starts[:-1] - starts[0])[prompt]
    image = np.ascontiguousarray(stages.images[starts[0]:starts[-1]].T, dtype=np.intp)
    slot = np.ascontiguousarray(stages.slots[starts[0]:starts[-1]].T, dtype=np.intp)
    absent = image < 0
    index = np.where(absent, n_prompts * width, prompt * width + image)
    image[absent], slot[absent] = 2 * width, width
    utility = np.take(np.append(theta[prompts], -np.inf), index) + np.take(np.append(beta, 0.0), slot)
    utility -= utility.max(axis=0)
    weight = np.exp(utility)
    total = weight.sum(axis=0)
    weight /= total
    return _Chunk(n_prompts, index, image, slot, weight, row, depth, float(utility[0].sum() - np.log(total).sum()))


@dataclass(frozen=True)
class PassSums:
    """A partition's part of one pass (`PromptPartition.evaluate`), of a size independent of its prompts;
    the driver adds the partitions' parts in partition order (`+`: sums, and the max of the maxima).
    log_likelihood: Σ log P(chosen) over its stages; squared_strengths: Σθ² of its trial θ;
    slot_gradient: (S,) d(−log P)/dβ_B, … (without the ridge); strength_gradient_max: max |g_θ| over its
    entries of the penalised objective's gradient; slot_block: (S, S) its part of the Hessian's slot
    block (without the ridge); coupling: (S, 1 + S) Σ_p Bₚᵀ [Aₚ⁻¹gₚ | Aₚ⁻¹Bₚ] over its prompts. The last
    two are 0 from a pass that did not solve its blocks."""

    log_likelihood: float
    squared_strengths: float
    slot_gradient: np.ndarray
    strength_gradient_max: float
    slot_block: np.ndarray
    coupling: np.ndarray

    def __add__(self, other: PassSums) -> PassSums:
        return PassSums(self.log_likelihood + other.log_likelihood, self.squared_strengths + other.squared_strengths,
                        self.slot_gradient + other.slot_gradient,
                        max(self.strength_gradient_max, other.strength_gradient_max),
                        self.slot_block + other.slot_block, self.coupling + other.coupling)


def _pass(theta: np.ndarray, beta: np.ndarray, stages: Stages, ridge: float,
          solved: np.ndarray | None = None) -> tuple[PassSums, np.ndarray]:
    """(the pass's `PassSums`, g_θ (P, M) the penalised objective's gradient in θ) at strengths theta (P, M)
    of the stages' prompts and slot effects beta (S,), a chunk of PROMPT_CHUNK prompts at a time; given
    `solved` ((P, M, 1 + S)), each prompt's Hessian block is solved into it against its gradient and cross
    block (`_solved_blocks`), and the sums take their slot block and coupling."""
    width, n_slots = stages.width, len(beta)
    effects = _slot_effects(beta, width)
    log_likelihood, g_theta, g_beta = 0.0, ridge * theta, np.zeros(n_slots)
    slot_block, coupling = np.zeros((n_slots, n_slots)), np.zeros((n_slots, 1 + n_slots))
    for prompts in row_chunks(stages.n_prompts, PROMPT_CHUNK):
        chunk = _chunk_at(theta, effects, stages, prompts)
        log_likelihood += chunk.log_likelihood
        on_image, on_slot = chunk.gradient()
        g_theta[prompts] += on_image
        g_beta += on_slot[1:n_slots + 1]
        if solved is not None:
            blocks = chunk.hessian(ridge, n_slots)
            solved[prompts] = _solved_blocks(blocks, g_theta[prompts])
            coupling += _coupling(blocks.cross, solved[prompts])
            slot_block += blocks.slots
    flat = theta.ravel()
    return PassSums(log_likelihood, float(flat @ flat), g_beta, float(np.abs(g_theta).max(initial=0.0)), slot_block,
                    coupling), g_theta


class PromptPartition:
    """A contiguous range of prompts as the Newton fit holds them (module docstring, Partitions): their
    stages (`stages`, starts from 0) and current strengths θ (P_part, M), and between the driver's calls
    the last evaluated point (trial θ, its gradient g_θ, its solved blocks [Aₚ⁻¹gₚ | Aₚ⁻¹Bₚ]) and the
    direction d_θ. Plain arrays, so picklable: on a cluster, an actor's state.

    The driver (`newton_maximum`) calls `start`, then `evaluate` at trial points, `accept` for the one it
    takes, `set_direction` once the taken point was solved; `theta()` reads the strengths at any time."""

    def __init__(self, stages: Stages) -> None:
        self.stages = stages
        self._theta = np.zeros((stages.n_prompts, stages.width))
        self._ridge: float | None = None
        self._trial: np.ndarray | None = None
        self._direction: np.ndarray | None = None
        self._gradient: np.ndarray | None = None
        self._solved: np.ndarray | None = None
        self._last_solved = False  # whether the last point evaluated had its blocks solved

    @classmethod
    def from_calls(cls, calls: OrderedCalls) -> PromptPartition:
        """The partition of these calls' prompts (e.g. `calls.rows(prompts)` for a range of a study)."""
        return cls(ranking_stages(calls))

    @property
    def width(self) -> int:
        return self.stages.width

    def theta(self) -> np.ndarray:
        """(P_part, M) the current strengths."""
        return self._theta

    def start(self, n_slots: int, ridge: float) -> None:
        """θ = 0 and room for the solved blocks of S = n_slots slot effects, penalised by `ridge`."""
        self._theta = np.zeros((self.stages.n_prompts, self.width))
        self._ridge, self._trial, self._direction, self._gradient = ridge, None, None, None
        self._solved = np.empty((self.stages.n_prompts, self.width, 1 + n_slots))
        self._last_solved = False

    def evaluate(self, beta: np.ndarray, step: float, solve: bool) -> PassSums:
        """The pass at the trial point θ + step·d_θ (θ itself before a direction is set) and slot effects beta
        (S,), kept with its gradient and, when `solve`, its solved blocks, which overwrite the current
        point's."""
        if self._ridge is None:
            raise RuntimeError("PromptPartition.evaluate before start: call start(n_slots, ridge) first")
        self._trial = self._gradient = None  # the last point's, freed before this one's are made
        self._trial = self._theta if self._direction is None else self._theta + step * self._direction
        self._last_solved = solve
        sums, self._gradient = _pass(self._trial, beta, self.stages, self._ridge, self._solved if solve else None)
        return sums

    def accept(self) -> None:
        """The last evaluated point becomes the current one (and the direction is spent)."""
        if self._trial is None:
            raise RuntimeError("PromptPartition.accept without a point evaluated since the last accept")
        self._theta, self._trial, self._direction = self._trial, None, None

    def set_direction(self, d_beta: np.ndarray) -> float:
        """Stores d_θ = −(Aₚ⁻¹gₚ + Aₚ⁻¹Bₚ·d_β) for every prompt, given the driver's step d_β (S,) of the slot
        effects; returns g_θ·d_θ, the partition's part of the slope. The current point must be the last
        evaluated, with its blocks solved."""
        if not (self._last_solved and self._trial is None):
            raise RuntimeError("PromptPartition.set_direction needs the last evaluated point accepted, with its "
                               "blocks solved: evaluate(beta, step, True), then accept()")
        self._direction = _strength_step(self._solved, d_beta)
        return float(self._gradient.ravel() @ self._direction.ravel())


class PartitionMap(Protocol):
    """Calls one method of every partition with the same arguments and returns the results in partition
    order: `LocalPartitions` here; on a cluster, the method of each partition's actor."""

    def __call__(self, method: str, *args: object) -> list: ...


@dataclass(frozen=True)
class LocalPartitions:
    """The partitions of this process, called one after another."""

    partitions: Sequence[PromptPartition]

    def __call__(self, method: str, *args: object) -> list:
        return [getattr(partition, method)(*args) for partition in self.partitions]


@dataclass(frozen=True)
class NewtonMaximum:
    """What the driver holds at the end of a fit: beta (M,) every slot's effect (β_A = 0; all 0 without
    slot effects); value: the penalised objective; log_likelihood (without the penalty); converged: the
    stopping rule met (`newton_maximum`). The strengths stay in the partitions (`PromptPartition.theta`)."""

    beta: np.ndarray
    value: float
    log_likelihood: float
    converged: bool


@dataclass(frozen=True)
class _Point:
    """The driver's view of one point, from the partitions' `PassSums` at slot effects β (S,): the penalised
    objective's value and log-likelihood, slot_gradient (S,) its gradient in β, max_gradient over every
    entry (θ and β), and the slot side of the Newton system (slot_block with the ridge, coupling)."""

    value: float
    log_likelihood: float
    slot_gradient: np.ndarray
    max_gradient: float
    slot_block: np.ndarray
    coupling: np.ndarray

    @classmethod
    def of(cls, parts: Sequence[PassSums], beta: np.ndarray, ridge: float) -> _Point:
        sums = reduce(operator.add, parts)
        slot_gradient = ridge * beta + sums.slot_gradient
        return cls(0.5 * ridge * (sums.squared_strengths + float(beta @ beta)) - sums.log_likelihood,
                   sums.log_likelihood, slot_gradient,
                   max(sums.strength_gradient_max, float(np.abs(slot_gradient).max(initial=0.0))),
                   sums.slot_block + ridge * np.eye(len(beta)), sums.coupling)

    def slot_step(self) -> np.ndarray:
        """The Newton step of the slot effects, d_β (`_slot_step`)."""
        return _slot_step(self.slot_block, self.coupling, self.slot_gradient)

    def maximum(self, beta: np.ndarray, width: int, converged: bool) -> NewtonMaximum:
        return NewtonMaximum(_slot_effects(beta, width), self.value, self.log_likelihood, converged)


def _slot_step(slot_block: np.ndarray, coupling: np.ndarray, g_beta: np.ndarray) -> np.ndarray:
    """The slot effects' part of −H⁻¹·gradient from the Schur complement: d_β = −(S − Σ BᵀA⁻¹B)⁻¹
    (g_β − Σ BᵀA⁻¹g), given the slot block S (with the ridge) and the coupling Σ Bₚᵀ[Aₚ⁻¹gₚ | Aₚ⁻¹Bₚ]."""
    return -np.linalg.solve(slot_block - coupling[:, 1:], g_beta - coupling[:, 0])


def _strength_step(solved: np.ndarray, d_beta: np.ndarray) -> np.ndarray:
    """The strengths' part of −H⁻¹·gradient given d_β: (P, M) d_θ = −(Aₚ⁻¹gₚ + Aₚ⁻¹Bₚ·d_β) from the solved
    blocks (P, M, 1 + S)."""
    return -(solved[:, :, 0] + solved[:, :, 1:] @ d_beta)


def _solved_blocks(blocks: Hessian, g_theta: np.ndarray) -> np.ndarray:
    """(P, M, 1 + S) each prompt's [Aₚ⁻¹gₚ | Aₚ⁻¹Bₚ] (A: strengths block, B: cross block, g: its gradient)."""
    return np.linalg.solve(blocks.strengths, np.concatenate([g_theta[:, :, None], blocks.cross], axis=2))


def _coupling(cross: np.ndarray, solved: np.ndarray) -> np.ndarray:
    """(S, 1 + S) Σ_p Bₚᵀ [Aₚ⁻¹gₚ | Aₚ⁻¹Bₚ]."""
    rows = cross.shape[0] * cross.shape[1]
    return cross.reshape(rows, cross.shape[2]).T @ solved.reshape(rows, solved.shape[2])


def penalised_objective(params: np.ndarray, stages: Stages, n_theta: int, ridge: float) -> tuple[float, np.ndarray]:
    """(−log-likelihood + (ridge/2)·‖params‖², its gradient) at params = (θ (n_theta), β_B, β_C, …)."""
    beta = params[n_theta:]
    sums, g_theta = _pass(params[:n_theta].reshape(-1, stages.width), beta, stages, ridge)
    at = _Point.of([sums], beta, ridge)
    return at.value, np.concatenate([g_theta.ravel(), at.slot_gradient])


def penalised_hessian(params: np.ndarray, stages: Stages, n_prompts: int, width: int, ridge: float) -> Hessian:
    """The Hessian of `penalised_objective` at params = (θ (P·M), β_B, …), for the whole study at once (the
    fit solves it a partition's chunk of prompts at a time: `PromptPartition.evaluate`).

    In stage t with softmax weights w over its images (w_c on image c, v_s = the weight on slot s), −log P
    has the Hessian diag(w) − w wᵀ in the utilities u = θ_image + β_slot: so the strengths' block of a
    prompt gathers diag(w) − w wᵀ over its stages, the cross block w_c (1[c shown in s] − v_s), the
    slot block diag(v) − v vᵀ over every stage; the ridge adds ridge·I.
    """
    n_theta, n_slots = n_prompts * width, len(params) - n_prompts * width
    theta, beta = params[:n_theta].reshape(n_prompts, width), _slot_effects(params[n_theta:], width)
    blocks = [_chunk_at(theta, beta, stages, prompts).hessian(ridge, n_slots)
              for prompts in row_chunks(n_prompts, PROMPT_CHUNK)]
    return Hessian(np.concatenate([b.strengths for b in blocks]), np.concatenate([b.cross for b in blocks]),
                   sum(b.slots for b in blocks) + ridge * np.eye(n_slots))


def newton_direction(hessian: Hessian, gradient: np.ndarray) -> np.ndarray:
    """−H⁻¹·gradient: every prompt's strengths block solved at once, the slot effects through the
    Schur complement S − Σ_p Bₚᵀ Aₚ⁻¹ Bₚ (A: the strengths blocks, B: the cross blocks, S: the slot
    block), then each prompt's strengths (`_slot_step`, `_strength_step`: the fit's own steps)."""
    n_prompts, width, _ = hessian.cross.shape
    n_theta = n_prompts * width
    solved = _solved_blocks(hessian, gradient[:n_theta].reshape(n_prompts, width))
    d_beta = _slot_step(hessian.slots, _coupling(hessian.cross, solved), gradient[n_theta:])
    return np.concatenate([_strength_step(solved, d_beta).ravel(), d_beta])


def newton_maximum(partitions: PartitionMap, width: int, n_slots: int, ridge: float) -> NewtonMaximum:
    """The minimum of `penalised_objective` over the partitions' prompts (their θ left there) with S =
    n_slots slot effects (M − 1, or 0 to fix β at 0): Newton steps from 0 with a backtracking line search
    (module docstring), the driver holding β, d_β and the summed `PassSums` only. Converged when max
    |gradient| ≤ GRADIENT_TOLERANCE, or when the step's predicted decrease −∇f·d falls below
    VALUE_RESOLUTION·|f| (the objective, a sum over every stage, cannot resolve it, so no line search can
    judge the step: the full Newton step is taken, which near the optimum squares the error, and the fit
    stops). Each pass over the stages evaluates the objective at a trial point and solves its prompts'
    Newton blocks, which serve if the point is taken."""
    _check_ridge(ridge)
    partitions("start", n_slots, ridge)
    beta = np.zeros(n_slots)
    at = _Point.of(partitions("evaluate", beta, 0.0, True), beta, ridge)
    partitions("accept")
    for _ in range(MAX_NEWTON_STEPS):
        if at.max_gradient <= GRADIENT_TOLERANCE:
            return at.maximum(beta, width, True)
        d_beta = at.slot_step()
        slope, step = sum(partitions("set_direction", d_beta)) + float(at.slot_gradient @ d_beta), 1.0
        if -slope <= VALUE_RESOLUTION * max(1.0, abs(at.value)):
            beta = beta + d_beta
            at = _Point.of(partitions("evaluate", beta, step, False), beta, ridge)
            partitions("accept")
            return at.maximum(beta, width, True)
        while True:
            trial_beta = beta + step * d_beta
            trial = _Point.of(partitions("evaluate", trial_beta, step, True), trial_beta, ridge)
            if trial.value <= at.value + ARMIJO * step * slope:
                break
            step /= 2
            if step < MIN_STEP:
                return at.maximum(beta, width, False)
        partitions("accept")
        beta, at = trial_beta, trial
    return at.maximum(beta, width, at.max_gradient <= GRADIENT_TOLERANCE)


def _check_ridge(ridge: float) -> None:
    if ridge <= 0:
        raise ValueError(f"the ridge must be positive (it keeps θ finite), got {ridge}")


def fit_partitions(partitions: Sequence[PromptPartition], ridge: float = DEFAULT_RIDGE,
                   slot_effects: bool = True) -> NewtonMaximum:
    """`newton_maximum` over these partitions in this process (one study's prompts, in any ranges: their
    strengths are then each partition's `theta()`); `slot_effects=False` fixes every β at 0."""
    widths = sorted({partition.width for partition in partitions})
    if len(widths) != 1:
        raise ValueError(f"the partitions of one fit must share the width M (the study's largest pool), got {widths}: "
                         "build each from `calls.rows(prompts)` of the same OrderedCalls")
    width = widths[0]
    return newton_maximum(LocalPartitions(partitions), width, width - 1 if slot_effects else 0, ridge)


def plackett_luce_fit(calls: OrderedCalls, ridge: float = DEFAULT_RIDGE, slot_effects: bool = True) -> PlackettLuceFit:
    """The fitted model and its pick per prompt (module docstring), every prompt in one partition;
    `slot_effects=False` fixes every β at 0 (plain Plackett–Luce, e.g. to compare with choix)."""
    _check_ridge(ridge)  # before the stages are laid out
    partition = PromptPartition.from_calls(calls)
    maximum = fit_partitions([partition], ridge, slot_effects)
    return plackett_luce_result(calls, partition.theta(), maximum)


def plackett_luce_result(calls: OrderedCalls, theta: np.ndarray, maximum: NewtonMaximum) -> PlackettLuceFit:
    """The `PlackettLuceFit` of the calls given their fitted strengths theta (P, M) (the partitions' `theta()`
    in prompt order) and the driver's result."""
    acted = calls.valid.any(axis=1)
    full = np.concatenate([calls.rows(prompts).full_ranking.all(axis=1)
                           for prompts in row_chunks(calls.n_prompts, PROMPT_CHUNK)])
    eligible = calls.mask & acted[:, None]
    return PlackettLuceFit(
        pick=best_of(theta, eligible, calls.tie_ranks, PL_TIE_TOLERANCE),
        theta=np.where(eligible, theta, np.nan),
        beta=maximum.beta,
        full=full,
        partial=acted & ~full,
        abstained=~acted,
        converged=maximum.converged,
        log_likelihood=maximum.log_likelihood,
    )
