"""Benchmarks of workflows/: the chain on local folders against S3 (`python -m bench.workflows.<name>`)."""
