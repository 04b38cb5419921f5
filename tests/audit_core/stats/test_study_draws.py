"""The study's index draws from one shared stream (`audit_core.stats.study_draws`) are numpy's, draw for draw."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit_core.stats import study_draws
from audit_core.stats.study_draws import StudyDraws, stream_prefix


@pytest.fixture(autouse=True)
def fresh_streams(monkeypatch):
    monkeypatch.setattr(study_draws, "_streams", {})


def assert_same_draws(seed: int, calls: list[tuple[int, int]], dtype: type = np.int64) -> None:
    """StudyDraws(seed) and default_rng(seed) give the same arrays, call after call."""
    ours, numpys = StudyDraws(seed), np.random.default_rng(seed)
    for n, size in calls:
        expected = numpys.integers(0, n, size=size, dtype=dtype)
        drawn = ours.integers(0, n, size=size, dtype=dtype)
        assert drawn.dtype == expected.dtype
        np.testing.assert_array_equal(drawn, expected, err_msg=f"seed {seed}, n {n}, size {size}")


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("seed", [0, 20261002])
def test_each_length_draws_as_a_fresh_generator_of_the_seed(seed, dtype):
    for n in (1, 2, 3, 7, 64, 299, 300, 999, 1000):
        assert_same_draws(seed, [(n, 131_072), (n, 131_072), (n, 5_000), (n, 0), (n, 77)], dtype)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1),
       calls=st.lists(st.tuples(st.one_of(st.integers(1, 2_000), st.integers(1, 2**32)), st.integers(0, 20_000)),
                      min_size=1, max_size=8))
def test_one_generator_across_lengths_draws_as_numpy_does(seed, calls):
    # as the worst group draws its groups in turn; n of 2²¹ and more are numpy's own from then on
    assert_same_draws(seed, calls)


@pytest.mark.parametrize("seed, n, size", [
    (0, 1_500_000, 200_000),  # 2³² mod n = 467,296: about one output in 9,000 is skipped
    (7, 300, 3_000_000),      # a study's length, 10,000 resamples: 2³² mod 300 = 196, a skip near output 2.1 million
])
def test_an_output_numpy_skips_is_skipped(seed, n, size):
    u = stream_prefix(seed, size).astype(np.int64)
    assert ((u * n) % 2**32 < 2**32 % n).any()
    assert_same_draws(seed, [(n, size // 2), (n, size - size // 2), (n, 1_000)])


@pytest.mark.parametrize("limit", [1_000, 1_001])
def test_past_the_stream_limit_numpys_generator_draws_on(monkeypatch, limit):
    monkeypatch.setattr(study_draws, "STREAM_LIMIT", limit)
    assert_same_draws(5, [(300, 333), (17, 333), (300, 333), (1000, 5_000), (3, 7)])


def test_spawned_generators_are_the_seeds():
    ours, numpys = StudyDraws(3), np.random.default_rng(3)
    for _ in range(2):  # each spawn continues the seed sequence's children
        for a, b in zip(ours.spawn(2), numpys.spawn(2)):
            np.testing.assert_array_equal(a.random(5), b.random(5))


def test_the_stream_is_numpys_32_bit_outputs_and_read_only():
    numpys = np.random.default_rng(11).integers(0, 2**32, size=5_001, dtype=np.uint32)
    prefix = stream_prefix(11, 1_001)
    np.testing.assert_array_equal(prefix[:1_001], numpys[:1_001])
    assert not prefix.flags.writeable
    grown = stream_prefix(11, 5_001)  # extended past what it held
    np.testing.assert_array_equal(grown[:5_001], numpys)
    assert not grown.flags.writeable


@pytest.mark.parametrize("low, high", [(1, 10), (0, 0), (0, 2**32 + 1)])
def test_only_ranges_from_zero_within_32_bits_are_drawn(low, high):
    with pytest.raises(ValueError, match=r"\[0, n\)"):
        StudyDraws(0).integers(low, high, size=3)
