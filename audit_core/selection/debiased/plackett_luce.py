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
slot effects, so each Newton step solves every prompt's block at once (batched numpy) and the slot
effects through its Schur complement: no loop over prompts, and the objective is strictly convex
(the ridge), so the steps converge from θ = β = 0. The ridge (default 0.1, a Gaussian prior of
variance 10 on each parameter, i.e. MAP) keeps the estimate finite: without it an image ranked
above another in every order would have θ = +∞.
It is the objective of `choix.opt_rankings` with alpha = ridge/2 when there are no slot effects.
The pick is the image with the largest θ (ties within PL_TIE_TOLERANCE follow `ties.best_of`);
a prompt where no order returned a pick gets NO_PICK.

β is estimated jointly with P·m strengths each seen in K rankings only, so with few orders its
maximum-likelihood estimate is exaggerated (the incidental-parameter bias of fixed-effect choice
models: about +20% with K = m = 4 in the tests' simulation, shrinking as K grows); the strengths and
so the picks are what the policy uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from audit_core.selection.data import index_dtype
from audit_core.selection.debiased.calls import ABSENT, OrderedCalls
from audit_core.selection.debiased.ties import best_of

DEFAULT_RIDGE = 0.1
PL_TIE_TOLERANCE = 1e-6  # θ agreeing this closely are equal (the fit stops within about 1e-7 of its optimum)
GRADIENT_TOLERANCE = 1e-9  # on every entry of the gradient; θ is then within 1e-8 of the optimum (Hessian ≥ ridge)
ARMIJO = 1e-4  # sufficient decrease of the line search: f(x + t·d) ≤ f(x) + ARMIJO·t·∇f·d
MAX_NEWTON_STEPS = 200
HESSIAN_CHUNK = 1 << 18  # prompts whose stages are laid out at once in the Hessian (~150 MB with 9 stages of 4)
MIN_STEP = 1e-12
VALUE_RESOLUTION = 1e-12  # relative: a predicted decrease below this is lost in the objective's rounding


@dataclass(frozen=True)
class Stages:
    """Every choice the rankings record: in stage t the image `chosen[t]` was taken out of the images
    `images[t, :]` (chosen first; ABSENT padding), shown in slots `slots[t, :]` (images index θ as
    prompt · width + canonical index, for n_prompts prompts; int32 while that fits, slots int8). The index arrays the fit reads at every
    step are computed once (cached)."""

    images: np.ndarray
    slots: np.ndarray
    n_prompts: int
    width: int

    @cached_property
    def present(self) -> np.ndarray:
        return self.images >= 0

    @cached_property
    def entry_images(self) -> np.ndarray:
        """θ index of every present entry, row by row."""
        return self.images[self.present]

    @cached_property
    def entry_slots(self) -> np.ndarray:
        """Slot of every present entry, row by row."""
        return self.slots[self.present]

    @cached_property
    def entry_rows(self) -> np.ndarray:
        """Stage of every present entry."""
        return np.nonzero(self.present)[0].astype(self.images.dtype)

    @cached_property
    def places(self) -> tuple[np.ndarray, np.ndarray, int]:
        """(prompt of each stage, its place among its prompt's stages, the most stages of a prompt): lays
        the stages out as a (P, depth) grid, so sums over a prompt's stages are batched products."""
        prompt = self.images[:, 0] // self.width
        counts = np.bincount(prompt, minlength=self.n_prompts)
        order = np.argsort(prompt, kind="stable")
        place = np.empty(len(prompt), dtype=np.int64)
        place[order] = np.arange(len(prompt)) - (np.cumsum(counts) - counts)[prompt[order]]
        return prompt, place, int(counts.max(initial=0))

    def log_weights(self, params: np.ndarray) -> np.ndarray:
        """(T, width) the log-softmax of the utilities θ_image + β_slot over each stage's images (−∞
        where absent); params = (θ, β_B, …) or θ alone."""
        n_theta = self.n_prompts * self.width
        utility = np.full(self.images.shape, -np.inf)
        utility[self.present] = params[self.entry_images]
        if len(params) > n_theta:
            utility[self.present] += np.concatenate([[0.0], params[n_theta:]])[self.entry_slots]
        utility -= utility.max(axis=1, keepdims=True)
        return utility - np.log(np.exp(utility).sum(axis=1, keepdims=True))


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
    """The choice stages of every call (module docstring): m − 1 per full ranking, 1 per pick alone."""
    width, full, valid = calls.width, calls.full_ranking, calls.valid
    slot_of = calls.slot_of
    images, slots = [], []
    p, k = np.nonzero(full)
    m = calls.pool_sizes[p]
    for j in range(width - 1):
        live = j < m - 1
        pj, kj = p[live], k[live]
        ranked = calls.rankings[pj, kj]
        remaining = np.where(np.arange(width) >= j, ranked, ABSENT)
        remaining = np.concatenate([remaining[:, j:], remaining[:, :j]], axis=1)  # chosen first
        images.append(_global(remaining, pj, width))
        slots.append(_slots(slot_of, pj, kj, remaining))
    p, k = np.nonzero(valid & ~full)
    pool = np.where(calls.mask[p], np.arange(width), ABSENT)
    chosen = calls.picks[p, k]
    first = _absent_last(np.concatenate([chosen[:, None], np.where(pool == chosen[:, None], ABSENT, pool)], axis=1))
    first = first[:, :width]
    images.append(_global(first, p, width))
    slots.append(_slots(slot_of, p, k, first))
    # in prompt order (so a range of prompts is a range of stages); compact: θ indices in 32 bits while
    # they fit, slots as canonical indices are (`index_dtype`)
    images, slots = np.concatenate(images), np.concatenate(slots)
    by_prompt = np.argsort(images[:, 0] // width, kind="stable")
    image_type = np.int32 if calls.n_prompts * width <= np.iinfo(np.int32).max else np.int64
    return Stages(images[by_prompt].astype(image_type), slots[by_prompt].astype(index_dtype(width)),
                  calls.n_prompts, width)


def _global(local: np.ndarray, prompts: np.ndarray, width: int) -> np.ndarray:
    return np.where(local >= 0, prompts[:, None] * width + local, ABSENT)


def _slots(slot_of: np.ndarray, prompts: np.ndarray, orders: np.ndarray, local: np.ndarray) -> np.ndarray:
    return np.where(local >= 0, slot_of[prompts[:, None], orders[:, None], np.clip(local, 0, None)], ABSENT)


def _absent_last(rows: np.ndarray) -> np.ndarray:
    """Each row with its ABSENT entries moved to the end, the others kept in order."""
    order = np.argsort(rows < 0, axis=1, kind="stable")
    return np.take_along_axis(rows, order, axis=1)


def penalised_objective(params: np.ndarray, stages: Stages, n_theta: int, ridge: float) -> tuple[float, np.ndarray]:
    """(−log-likelihood + (ridge/2)·‖params‖², its gradient) at params = (θ (n_theta), β_B, β_C, …)."""
    log_weight = stages.log_weights(params)
    value = -log_weight[:, 0].sum() + 0.5 * ridge * float(params @ params)
    weight = np.exp(log_weight)
    weight[:, 0] -= 1.0  # d(−log P)/du = softmax − 1[chosen]
    entries = weight[stages.present]
    gradient = ridge * params
    gradient[:n_theta] += np.bincount(stages.entry_images, weights=entries, minlength=n_theta)
    if len(params) > n_theta:
        gradient[n_theta:] += np.bincount(stages.entry_slots, weights=entries, minlength=len(params) - n_theta + 1)[1:]
    return value, gradient


@dataclass(frozen=True)
class Hessian:
    """The penalised objective's Hessian in blocks: strengths (P, M, M), one block per prompt; strengths
    × slot effects (P, M, S); slot effects (S, S); S = M − 1 (β_A is fixed) or 0 without slot effects."""

    strengths: np.ndarray
    cross: np.ndarray
    slots: np.ndarray


def penalised_hessian(params: np.ndarray, stages: Stages, n_prompts: int, width: int, ridge: float) -> Hessian:
    """The Hessian of `penalised_objective` at params = (θ (P·M), β_B, …).

    In stage t with softmax weights w over its images (w_c on image c, v_s = the weight on slot s), −log P
    has the Hessian diag(w) − w wᵀ in the utilities u = θ_image + β_slot: so the strengths' block of a
    prompt gathers diag(w) − w wᵀ over its stages, the cross block w_c (1[c shown in s] − v_s), the
    slot block diag(v) − v vᵀ over every stage; the ridge adds ridge·I.
    """
    n_theta, n_slots = n_prompts * width, len(params) - n_prompts * width
    weight = np.exp(stages.log_weights(params))
    w, image, slot = weight[stages.present], stages.entry_images % width, stages.entry_slots.astype(np.int32)
    prompt, place, depth = stages.places
    outer = np.empty((n_prompts, width, 2 * width))  # Σ over the prompt's stages of w ⊗ (w, v)
    slot_total, slot_outer = np.zeros(width), np.zeros((width, width))  # Σ v and Σ v vᵀ over every stage
    for lo in range(0, n_prompts, HESSIAN_CHUNK):  # the stages are in prompt order: a chunk is a range of them
        first, last = np.searchsorted(prompt, [lo, lo + HESSIAN_CHUNK])
        begin, end = np.searchsorted(stages.entry_rows, [first, last])
        rows = stages.entry_rows[begin:end]
        grid = np.zeros((min(HESSIAN_CHUNK, n_prompts - lo), depth, 2 * width))  # w on each image, then each slot
        grid[prompt[rows] - lo, place[rows], image[begin:end]] = w[begin:end]
        grid[prompt[rows] - lo, place[rows], width + slot[begin:end]] = w[begin:end]
        outer[lo:lo + len(grid)] = np.matmul(grid[:, :, :width].transpose(0, 2, 1), grid)
        on_slot = grid[:, :, width:].reshape(-1, width)
        slot_total += on_slot.sum(axis=0)
        slot_outer += on_slot.T @ on_slot
    strengths = -outer[:, :, :width]
    strengths[:, np.arange(width), np.arange(width)] += (
        np.bincount(stages.entry_images, w, minlength=n_theta).reshape(n_prompts, width) + ridge)
    if not n_slots:
        return Hessian(strengths, np.zeros((n_prompts, width, 0)), np.zeros((0, 0)))
    cross = np.bincount(stages.entry_images.astype(np.int64) * width + slot, w, minlength=n_theta * width).reshape(
        n_prompts, width, width) - outer[:, :, width:]
    slot_block = np.diag(slot_total) - slot_outer
    return Hessian(strengths, cross[:, :, 1:], slot_block[1:, 1:] + ridge * np.eye(n_slots))


def newton_direction(hessian: Hessian, gradient: np.ndarray) -> np.ndarray:
    """−H⁻¹·gradient: every prompt's strengths block solved at once, the slot effects through the
    Schur complement S − Σ_p Bₚᵀ Aₚ⁻¹ Bₚ (A: the strengths blocks, B: the cross blocks, S: the slot
    block)."""
    n_prompts, width, n_slots = hessian.cross.shape
    g_theta = gradient[: n_prompts * width].reshape(n_prompts, width)
    solved = np.linalg.solve(hessian.strengths, np.concatenate([g_theta[:, :, None], hessian.cross], axis=2))
    d_theta = solved[:, :, 0]
    if not n_slots:
        return -d_theta.ravel()
    schur = hessian.slots - np.einsum("pcs,pcr->sr", hessian.cross, solved[:, :, 1:])
    d_beta = np.linalg.solve(schur, gradient[n_prompts * width:] - np.einsum("pcs,pc->s", hessian.cross, d_theta))
    return -np.concatenate([(d_theta - solved[:, :, 1:] @ d_beta).ravel(), d_beta])


def newton_maximum(stages: Stages, n_prompts: int, width: int, n_slots: int, ridge: float
                   ) -> tuple[np.ndarray, float, bool]:
    """(params at the minimum of `penalised_objective`, its value, converged): Newton steps from 0 with a
    backtracking line search (module docstring). Converged when max |gradient| ≤ GRADIENT_TOLERANCE, or
    when the step's predicted decrease −∇f·d falls below VALUE_RESOLUTION·|f| (the objective, a sum over
    every stage, cannot resolve it, so no line search can judge the step: the full Newton step is taken,
    which near the optimum squares the error, and the fit stops)."""
    n_theta = n_prompts * width
    params = np.zeros(n_theta + n_slots)
    value, gradient = penalised_objective(params, stages, n_theta, ridge)
    for _ in range(MAX_NEWTON_STEPS):
        if np.abs(gradient).max(initial=0.0) <= GRADIENT_TOLERANCE:
            return params, value, True
        direction = newton_direction(penalised_hessian(params, stages, n_prompts, width, ridge), gradient)
        slope, step = float(gradient @ direction), 1.0
        if -slope <= VALUE_RESOLUTION * max(1.0, abs(value)):
            params = params + direction
            return params, penalised_objective(params, stages, n_theta, ridge)[0], True
        while True:
            trial_value, trial_gradient = penalised_objective(params + step * direction, stages, n_theta, ridge)
            if trial_value <= value + ARMIJO * step * slope:
                break
            step /= 2
            if step < MIN_STEP:
                return params, value, False
        params, value, gradient = params + step * direction, trial_value, trial_gradient
    return params, value, bool(np.abs(gradient).max(initial=0.0) <= GRADIENT_TOLERANCE)


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
    full = calls.full_ranking.all(axis=1)
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
