"""Benchmarks of classifiers/: quality, toxicity and perplexity scorers (`python -m bench.classifiers.<name>`)."""
