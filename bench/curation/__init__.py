"""Benchmarks of curation/: throughput and agreement against datatrove, extraction quality, LID, PII, readers
(`python -m bench.curation.<name>`)."""
