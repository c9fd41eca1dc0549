"""Mixture recipes and the sampler the trainer uses: from token shards to an exact, resumable data mix.

recipe.py   YAML recipe -> typed frozen dataclasses (sources, selectors, phases, budget, caps, seed)
selectors.py  `column: condition` document selectors (dolma-style: scores are columns, thresholds here)
plan.py     `python -m mixtures plan RECIPE`: tokens per source and phase, epochs, FLOPs, GPU-hours
sampler.py  deterministic, resumable fixed-length sequences over shards (pure Python + numpy)
"""
