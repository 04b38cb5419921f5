"""Kept only for `benchmarks/bench_inference.py` and `benchmarks/bench_recording.py`, which put tests/ on
sys.path and import `fixtures_pools`: the pool builders now live in `tests.support.pools`. Not for tests."""

from tests.support.pools import make_pool_set, write_tiny_dataset

__all__ = ["make_pool_set", "write_tiny_dataset"]
