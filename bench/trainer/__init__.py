"""Benchmarks of trainer/: throughput and MFU, kernels, checkpoints (`python -m bench.trainer.<name>`)."""
