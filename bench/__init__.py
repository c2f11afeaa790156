"""Benchmarks of the training package against its peers; run each from the repository root as
`python -m bench.<name>` (results in bench/results/, figures in docs/BENCHMARKS.md)."""
