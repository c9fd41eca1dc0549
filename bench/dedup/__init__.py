"""Benchmarks of dedup/: accuracy against brute force, scale, decontamination (`python -m bench.dedup.<name>`)."""
