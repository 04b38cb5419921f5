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
The Hessian is block-diagonal in the prompts' strengths (one M × M block each) bordered by the few
slot effects, so each Newton step solves the prompts' blocks (batched numpy) and the slot effects
through its Schur complement: no loop over prompts, and the objective is strictly convex (the ridge),
so the steps converge from θ = β = 0. The ridge (default 0.1, a Gaussian prior of
variance 10 on each parameter, i.e. MAP) keeps the estimate finite: without it an image ranked
above another in every order would have θ = +∞.
It is the objective of `choix.opt_rankings` with alpha = ridge/2 when there are no slot effects.
The pick is the image with the largest θ (ties within PL_TIE_TOLERANCE follow `ties.best_of`);
a prompt where no order returned a pick gets NO_PICK.

Memory: the stages are kept in prompt order at a byte per entry (`Stages`), and every pass over them
takes PROMPT_CHUNK prompts at a time: the chunk's softmax weights, its part of the objective and the
gradient, its prompts' Hessian blocks A_p (strengths) and B_p (strengths × slots), each solved at once
against [g_p | B_p]; Σ B_pᵀ A_p⁻¹ [g_p | B_p] accumulates the Schur complement and its right-hand side,
and the solved blocks (P × M × M floats) stay for d_θ = A_p⁻¹g_p − A_p⁻¹B_p·d_β once d_β is known. A
pass evaluates a trial point and solves its blocks together, so a point the line search takes needs no
second pass for its step. The fit's memory beyond the calls is thus a few P·M arrays (parameters,
gradient, step, solved blocks) and one chunk's arrays; the chunk size changes only the order of sums
(the tests hold a fit in chunks of 3 prompts to the one-chunk fit within 1e-10).

β is estimated jointly with P·m strengths each seen in K rankings only, so with few orders its
maximum-likelihood estimate is exaggerated (the incidental-parameter bias of fixed-effect choice
models: about +20% with K = m = 4 in the tests' simulation, shrinking as K grows); the strengths and
so the picks are what the policy uses.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def _slot_effects(params: np.ndarray, n_theta: int, width: int) -> np.ndarray:
    """(M,) β of params = (θ (n_theta), β_B, …), β_A = 0; all 0 when params hold θ alone."""
    return np.concatenate([[0.0], params[n_theta:]]) if len(params) > n_theta else np.zeros(width)


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
class _Evaluation:
    """The penalised objective's value and gradient at some params and, when the pass solved each prompt's
    block (`_evaluate`), the slot effects' side of the Newton system: slot_block the Hessian's (S, S) slot
    block, coupling Σ_p Bₚᵀ [Aₚ⁻¹gₚ | Aₚ⁻¹Bₚ] (S, 1 + S)."""

    value: float
    gradient: np.ndarray
    slot_block: np.ndarray
    coupling: np.ndarray

    def direction(self, solved: np.ndarray) -> np.ndarray:
        """The Newton step from here, given the pass's solved blocks (`_direction`)."""
        return _direction(solved, self.slot_block, self.coupling, self.gradient)


def _evaluate(params: np.ndarray, stages: Stages, n_theta: int, ridge: float,
              solved: np.ndarray | None = None) -> _Evaluation:
    """The penalised objective and its gradient at params, a chunk of prompts at a time; given `solved`
    ((P, M, 1 + S)), also each prompt's Hessian block solved against its gradient and cross block into it,
    and the slot effects' side of the Newton system (`_Evaluation`)."""
    width, n_slots = stages.width, len(params) - n_theta
    value, gradient = 0.5 * ridge * float(params @ params), ridge * params
    theta, beta = params[:n_theta].reshape(-1, width), _slot_effects(params, n_theta, width)
    g_theta = gradient[:n_theta].reshape(-1, width)
    slot_block, coupling = ridge * np.eye(n_slots), np.zeros((n_slots, 1 + n_slots))
    for prompts in row_chunks(stages.n_prompts, PROMPT_CHUNK):
        chunk = _chunk_at(theta, beta, stages, prompts)
        value -= chunk.log_likelihood
        on_image, on_slot = chunk.gradient()
        g_theta[prompts] += on_image
        gradient[n_theta:] += on_slot[1:n_slots + 1]
        if solved is not None:
            blocks = chunk.hessian(ridge, n_slots)
            solved[prompts] = _solved_blocks(blocks, g_theta[prompts])
            coupling += _coupling(blocks.cross, solved[prompts])
            slot_block += blocks.slots
    return _Evaluation(value, gradient, slot_block, coupling)


def _direction(solved: np.ndarray, slot_block: np.ndarray, coupling: np.ndarray, gradient: np.ndarray) -> np.ndarray:
    """−H⁻¹·gradient from the prompts' solved blocks (P, M, 1 + S) [Aₚ⁻¹gₚ | Aₚ⁻¹Bₚ] and their coupling
    Σ Bₚᵀ[Aₚ⁻¹gₚ | Aₚ⁻¹Bₚ]: d_β from the Schur complement, (S − Σ BᵀA⁻¹B) d_β = g_β − Σ BᵀA⁻¹g, then each
    prompt's d_θ = A⁻¹g − A⁻¹B d_β."""
    n_theta = solved.shape[0] * solved.shape[1]
    d_beta = np.linalg.solve(slot_block - coupling[:, 1:], gradient[n_theta:] - coupling[:, 0])
    return -np.concatenate([(solved[:, :, 0] - solved[:, :, 1:] @ d_beta).ravel(), d_beta])


def _solved_blocks(blocks: Hessian, g_theta: np.ndarray) -> np.ndarray:
    """(P, M, 1 + S) each prompt's [Aₚ⁻¹gₚ | Aₚ⁻¹Bₚ] (A: strengths block, B: cross block, g: its gradient)."""
    return np.linalg.solve(blocks.strengths, np.concatenate([g_theta[:, :, None], blocks.cross], axis=2))


def _coupling(cross: np.ndarray, solved: np.ndarray) -> np.ndarray:
    """(S, 1 + S) Σ_p Bₚᵀ [Aₚ⁻¹gₚ | Aₚ⁻¹Bₚ]."""
    rows = cross.shape[0] * cross.shape[1]
    return cross.reshape(rows, cross.shape[2]).T @ solved.reshape(rows, solved.shape[2])


def penalised_objective(params: np.ndarray, stages: Stages, n_theta: int, ridge: float) -> tuple[float, np.ndarray]:
    """(−log-likelihood + (ridge/2)·‖params‖², its gradient) at params = (θ (n_theta), β_B, β_C, …)."""
    evaluation = _evaluate(params, stages, n_theta, ridge)
    return evaluation.value, evaluation.gradient


def penalised_hessian(params: np.ndarray, stages: Stages, n_prompts: int, width: int, ridge: float) -> Hessian:
    """The Hessian of `penalised_objective` at params = (θ (P·M), β_B, …), for the whole study at once (the
    fit solves it a chunk of prompts at a time: `newton_maximum`).

    In stage t with softmax weights w over its images (w_c on image c, v_s = the weight on slot s), −log P
    has the Hessian diag(w) − w wᵀ in the utilities u = θ_image + β_slot: so the strengths' block of a
    prompt gathers diag(w) − w wᵀ over its stages, the cross block w_c (1[c shown in s] − v_s), the
    slot block diag(v) − v vᵀ over every stage; the ridge adds ridge·I.
    """
    n_theta, n_slots = n_prompts * width, len(params) - n_prompts * width
    theta, beta = params[:n_theta].reshape(n_prompts, width), _slot_effects(params, n_theta, width)
    blocks = [_chunk_at(theta, beta, stages, prompts).hessian(ridge, n_slots)
              for prompts in row_chunks(n_prompts, PROMPT_CHUNK)]
    return Hessian(np.concatenate([b.strengths for b in blocks]), np.concatenate([b.cross for b in blocks]),
                   sum(b.slots for b in blocks) + ridge * np.eye(n_slots))


def newton_direction(hessian: Hessian, gradient: np.ndarray) -> np.ndarray:
    """−H⁻¹·gradient: every prompt's strengths block solved at once, the slot effects through the
    Schur complement S − Σ_p Bₚᵀ Aₚ⁻¹ Bₚ (A: the strengths blocks, B: the cross blocks, S: the slot
    block)."""
    n_prompts, width, _ = hessian.cross.shape
    solved = _solved_blocks(hessian, gradient[: n_prompts * width].reshape(n_prompts, width))
    return _direction(solved, hessian.slots, _coupling(hessian.cross, solved), gradient)


def newton_maximum(stages: Stages, n_prompts: int, width: int, n_slots: int, ridge: float
                   ) -> tuple[np.ndarray, float, bool]:
    """(params at the minimum of `penalised_objective`, its value, converged): Newton steps from 0 with a
    backtracking line search (module docstring). Converged when max |gradient| ≤ GRADIENT_TOLERANCE, or
    when the step's predicted decrease −∇f·d falls below VALUE_RESOLUTION·|f| (the objective, a sum over
    every stage, cannot resolve it, so no line search can judge the step: the full Newton step is taken,
    which near the optimum squares the error, and the fit stops). Each pass over the stages evaluates the
    objective at a trial point and solves its prompts' Newton blocks, which serve if the point is taken."""
    n_theta = n_prompts * width
    params = np.zeros(n_theta + n_slots)
    solved = np.empty((n_prompts, width, 1 + n_slots))
    at = _evaluate(params, stages, n_theta, ridge, solved)
    for _ in range(MAX_NEWTON_STEPS):
        if np.abs(at.gradient).max(initial=0.0) <= GRADIENT_TOLERANCE:
            return params, at.value, True
        direction = at.direction(solved)
        value, slope, step = at.value, float(at.gradient @ direction), 1.0
        del at  # frees its gradient for the trials' (the step is known)
        if -slope <= VALUE_RESOLUTION * max(1.0, abs(value)):
            params = params + direction
            return params, _evaluate(params, stages, n_theta, ridge).value, True
        while True:
            trial = params + step * direction
            at = _evaluate(trial, stages, n_theta, ridge, solved)
            if at.value <= value + ARMIJO * step * slope:
                break
            step /= 2
            if step < MIN_STEP:
                return params, value, False
        params = trial
    return params, at.value, bool(np.abs(at.gradient).max(initial=0.0) <= GRADIENT_TOLERANCE)


def plackett_luce_fit(calls: OrderedCalls, ridge: float = DEFAULT_RIDGE, slot_effects: bool = True) -> PlackettLuceFit:
    """The fitted model and its pick per prompt (module docstring); `slot_effects=False` fixes every
    β at 0 (plain Plackett–Luce, e.g. to compare with choix)."""
    if ridge <= 0:
        raise ValueError(f"the ridge must be positive (it keeps θ finite), got {ridge}")
    n_prompts, width = calls.n_prompts, calls.width
    n_theta = n_prompts * width
    stages = ranking_stages(calls)
    params, value, converged = newton_maximum(stages, n_prompts, width, width - 1 if slot_effects else 0, ridge)
    theta = params[:n_theta].reshape(n_prompts, width)
    beta = np.concatenate([[0.0], params[n_theta:]]) if slot_effects else np.zeros(width)
    acted = calls.valid.any(axis=1)
    full = np.concatenate([calls.rows(prompts).full_ranking.all(axis=1)
                           for prompts in row_chunks(n_prompts, PROMPT_CHUNK)])
    eligible = calls.mask & acted[:, None]
    penalty = 0.5 * ridge * float(params @ params)
    return PlackettLuceFit(
        pick=best_of(theta, eligible, calls.tie_ranks, PL_TIE_TOLERANCE),
        theta=np.where(eligible, theta, np.nan),
        beta=beta,
        full=full,
        partial=acted & ~full,
        abstained=~acted,
        converged=converged,
        log_likelihood=-(value - penalty),
    )
