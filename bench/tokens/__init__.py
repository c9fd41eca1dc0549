"""Benchmarks of tokens/: tokenize throughput against datatrove (`python -m bench.tokens.<name>`)."""
