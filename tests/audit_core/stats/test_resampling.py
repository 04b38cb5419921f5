"""The bootstrap settings as one value: what it refuses, what equal settings share, and how it is written."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from audit_core import Resampling, audit_selection
from audit_core.store import audit_cache
from tests.support.selection_data import random_data


@pytest.mark.parametrize("field, value, error, message", [
    ("resamples", -1, ValueError, "resamples must be a whole number at least 0, got -1"),
    ("seed", -3, ValueError, "seed must be a whole number at least 0, got -3"),
    ("resamples", True, TypeError, "resamples must be a whole number, got True"),
    ("seed", False, TypeError, "seed must be a whole number, got False"),
    ("resamples", 1.5, TypeError, "resamples must be a whole number, got 1.5"),
    ("resamples", 1000.0, TypeError, "resamples must be a whole number, got 1000.0"),  # whole, but not an integer
    ("seed", "7", TypeError, "seed must be a whole number, got '7'"),
    ("seed", None, TypeError, "seed must be a whole number, got None"),
])
def test_refuses_what_is_not_a_whole_number_at_least_0_naming_the_field(field, value, error, message) -> None:
    with pytest.raises(error) as raised:
        Resampling(**{field: value})
    assert str(raised.value) == message


def test_equal_settings_are_equal_hashable_and_frozen() -> None:
    assert Resampling() == Resampling(10_000, 0) == Resampling(resamples=10_000, seed=0)
    assert Resampling(1_000, 3) == Resampling(np.int64(1_000), np.uint32(3))
    assert {Resampling(1_000, 3), Resampling(1_000, 3), Resampling(1_000, 4), Resampling(999, 3)} == {
        Resampling(1_000, 3), Resampling(1_000, 4), Resampling(999, 3)}
    assert hash(Resampling(1_000, 3)) == hash(Resampling(np.int64(1_000), 3))
    numpy_given = Resampling(np.int64(50), np.int32(2))
    assert type(numpy_given.resamples) is int and type(numpy_given.seed) is int  # written to JSON as given
    assert json.dumps(dataclasses.asdict(numpy_given)) == '{"resamples": 50, "seed": 2}'
    assert Resampling(0, 0).resamples == 0  # estimates without intervals
    with pytest.raises(dataclasses.FrozenInstanceError):
        Resampling().seed = 1


def test_the_same_settings_give_identical_tables_and_another_seed_other_intervals() -> None:
    data = random_data(n=50, seed=6)
    settings = Resampling(300, 5)
    first, again = audit_selection(data, settings), audit_selection(data, Resampling(300, 5))
    assert first.resampling == again.resampling == settings
    for name, frame in first.tables().items():
        pd.testing.assert_frame_equal(frame, again.tables()[name], check_exact=True, obj=name)
    other = audit_selection(data, Resampling(300, 6)).policies
    estimates = [c for c in first.policies.columns if c in ("utility", "regret", "gain", "bmr")]
    pd.testing.assert_frame_equal(other[estimates], first.policies[estimates], check_exact=True)  # points do not resample
    for bound in ("utility_lo", "regret_hi", "gain_lo"):
        assert not np.allclose(other[bound], first.policies[bound], equal_nan=True), bound
    default = audit_selection(data).resampling
    assert default == Resampling(10_000, 0)


def test_the_settings_are_written_as_resamples_and_seed() -> None:
    """summary.json and the audit cache's keys keep the two keys they had before the value object."""
    summary = audit_selection(random_data(n=20, seed=1), Resampling(40, 9)).to_summary()
    assert (summary["resamples"], summary["seed"]) == (40, 9) and "resampling" not in summary
    key = audit_cache.selection_key("content", "d", Resampling(40, 9), "all", ("split",))
    assert json.dumps(key, sort_keys=True) == json.dumps(audit_cache.cache_key(
        "content", "d", "selection", resamples=40, seed=9, pool="all", by=["split"]), sort_keys=True)
    assert audit_cache.rating_key("content", "d", Resampling(40, 9)) == audit_cache.cache_key(
        "content", "d", "rating", resamples=40, seed=9)
