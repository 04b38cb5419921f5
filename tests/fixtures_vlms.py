"""Kept only for `benchmarks/bench_inference.py`, which puts tests/ on sys.path and imports `fixtures_vlms`:
the tiny model builders now live in `tests.support.vlms`. Not for tests."""

from tests.support.vlms import BUILDERS, build_qwen3_vl, build_smolvlm

__all__ = ["BUILDERS", "build_qwen3_vl", "build_smolvlm"]
