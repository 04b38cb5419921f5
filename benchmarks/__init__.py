"""Speed and memory benchmarks (`python -m benchmarks.X`) and the synthetic data they use;
figures go in docs/benchmarks.md, never into timed tests."""
