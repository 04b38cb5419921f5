"""The Plackett–Luce fit over prompt partitions (DESIGN §4d; what a partitioned audit's workers hold): the
driver sees only the slot effects and the partitions' summed pieces, and a fit over any contiguous ranges
of a study — single prompts, prompts without a pick — is the whole fit up to the order of the sums."""

from __future__ import annotations

import pickle
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit_core.selection.data import NO_CALL
from audit_core.selection.debiased.plackett_luce import (
    PromptPartition,
    fit_partitions,
    newton_maximum,
    plackett_luce_fit,
    plackett_luce_result,
)
from tests.support.debiased import plackett_luce_rankings, rotated_calls

BETA = np.array([0.0, -0.5, -0.9, -0.3])
KINDS = {"full rankings": (1.0, 0.0, 0.0), "choices only": (0.0, 0.85, 0.1), "mixed": (0.6, 0.25, 0.1)}


def random_study(n_prompts: int, seed: int, kind: str, n_orders: int = 3):
    """A Plackett–Luce judge with slot effects BETA on pools of 2–4 images in `n_orders` rotations; each call
    a full ranking, a pick alone or a failed call at the rates of KINDS[kind], else no call; prompts 3, 20
    and every 11th have no pick at all."""
    rng = np.random.default_rng(seed)
    ranked, alone, failed = np.cumsum(KINDS[kind])
    sizes = rng.integers(2, 5, size=n_prompts)
    rankings, picks = [], []
    for p, m in enumerate(sizes):
        theta = rng.normal(size=m)
        prompt_rankings, prompt_picks = [], []
        for k in range(n_orders):
            ranking = plackett_luce_rankings(theta[[(s + k) % m for s in range(m)]] + BETA[:m], rng)
            u = 1.0 if p in (3, 20) or p % 11 == 10 else rng.random()
            prompt_rankings.append(ranking if u < ranked else None)
            prompt_picks.append(ranking[0] if u < alone else (None if u < failed else NO_CALL))
        rankings.append(prompt_rankings)
        picks.append(prompt_picks)
    return rotated_calls(sizes.tolist(), n_orders, slot_rankings=rankings, slot_picks=picks)


def split(n: int, bounds) -> list[slice]:
    """Consecutive slices of range(n) cut at the sorted `bounds`."""
    edges = [0, *sorted(set(bounds)), n]
    return [slice(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def partitioned_fit(calls, ranges: list[slice], slot_effects: bool):
    """The PlackettLuceFit of the calls fitted with each range of prompts in its own partition."""
    partitions = [PromptPartition.from_calls(calls.rows(rows)) for rows in ranges]
    maximum = fit_partitions(partitions, slot_effects=slot_effects)
    return plackett_luce_result(calls, np.concatenate([partition.theta() for partition in partitions]), maximum)


def assert_same_fit(fit, whole):
    assert whole.converged and fit.converged
    assert fit.counts() == whole.counts()
    assert np.array_equal(fit.pick, whole.pick)
    assert np.array_equal(np.isnan(fit.theta), np.isnan(whole.theta))
    assert np.nanmax(np.abs(fit.theta - whole.theta)) < 1e-8
    assert np.abs(fit.beta - whole.beta).max() < 1e-8
    assert fit.log_likelihood == pytest.approx(whole.log_likelihood, rel=1e-8)


# 3 uneven ranges, one a single prompt; 7 ranges, three of them single prompts (prompt 20 has no pick)
LAYOUTS = {"one": [], "three uneven": [1, 9], "seven": [5, 6, 19, 20, 21, 33]}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("slot_effects", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_fit_over_partitions_is_the_whole_fit(seed, slot_effects, kind):
    calls = random_study(48, seed, kind)
    whole = plackett_luce_fit(calls, slot_effects=slot_effects)
    assert whole.counts()["abstained"] >= 5 and (whole.beta[1:] != 0).any() == slot_effects
    for name, bounds in LAYOUTS.items():
        ranges = split(calls.n_prompts, bounds)
        assert len(ranges) == {"one": 1, "three uneven": 3, "seven": 7}[name]
        assert_same_fit(partitioned_fit(calls, ranges, slot_effects), whole)


def test_one_partition_of_every_prompt_is_plackett_luce_fit_to_the_bit():
    calls = random_study(48, 3, "mixed")
    whole, fit = plackett_luce_fit(calls), partitioned_fit(calls, [slice(0, 48)], True)
    for name in ("pick", "theta", "beta", "full", "partial", "abstained"):
        assert np.array_equal(getattr(fit, name), getattr(whole, name), equal_nan=name == "theta"), name
    assert (fit.converged, fit.log_likelihood) == (whole.converged, whole.log_likelihood)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), bounds=st.lists(st.integers(1, 39), max_size=8),
       slot_effects=st.booleans(), kind=st.sampled_from(sorted(KINDS)))
def test_any_contiguous_partitions_give_the_whole_fit(seed, bounds, slot_effects, kind):
    calls = random_study(40, seed, kind)
    assert_same_fit(partitioned_fit(calls, split(calls.n_prompts, bounds), slot_effects),
                    plackett_luce_fit(calls, slot_effects=slot_effects))


@dataclass
class PickledPartitions:
    """A PartitionMap that keeps its partitions pickled and sends arguments and results through pickle, as
    a transport to remote workers does: a fit through it needs every partition's state to be its own."""

    blobs: list[bytes]

    def __call__(self, method: str, *args: object) -> list:
        partitions = [pickle.loads(blob) for blob in self.blobs]
        results = [getattr(partition, method)(*pickle.loads(pickle.dumps(args))) for partition in partitions]
        self.blobs = [pickle.dumps(partition) for partition in partitions]
        return pickle.loads(pickle.dumps(results))


def test_partitions_are_plain_state_a_fit_through_pickle_is_the_same_to_the_bit():
    calls = random_study(48, 4, "mixed")
    ranges = split(calls.n_prompts, LAYOUTS["seven"])
    local = [PromptPartition.from_calls(calls.rows(rows)) for rows in ranges]
    expected = fit_partitions(local)
    remote = PickledPartitions([pickle.dumps(PromptPartition.from_calls(calls.rows(rows))) for rows in ranges])
    maximum = newton_maximum(remote, calls.width, calls.width - 1, 0.1)
    assert np.array_equal(maximum.beta, expected.beta) and maximum.converged
    assert (maximum.value, maximum.log_likelihood) == (expected.value, expected.log_likelihood)
    for blob, partition in zip(remote.blobs, local):
        assert np.array_equal(pickle.loads(blob).theta(), partition.theta())


def test_the_partition_protocol_refuses_calls_out_of_order():
    calls = random_study(12, 5, "mixed")
    partition = PromptPartition.from_calls(calls)
    beta = np.zeros(calls.width - 1)
    with pytest.raises(RuntimeError, match="before start"):
        partition.evaluate(beta, 0.0, True)
    partition.start(calls.width - 1, 0.1)
    partition.evaluate(beta, 0.0, True)
    with pytest.raises(RuntimeError, match="accepted"):
        partition.set_direction(beta)  # the point is still a trial
    partition.accept()
    with pytest.raises(RuntimeError, match="accept without"):
        partition.accept()
    partition.set_direction(beta)
    partition.evaluate(beta, 1.0, False)
    partition.accept()
    with pytest.raises(RuntimeError, match="solved"):
        partition.set_direction(beta)  # the point taken was not solved
    wide = PromptPartition.from_calls(rotated_calls([5], 1, slot_picks=[[0]]))
    with pytest.raises(ValueError, match="share the width"):
        fit_partitions([partition, wide])
