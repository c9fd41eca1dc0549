"""Mixture recipes and the sampler the trainer uses: from token shards to an exact, resumable data mix.

recipe.py   YAML recipe -> validated models (core.config) -> the resolved recipe (sources, phases in
            exact tokens, budget, caps, seed); selectors are core.selectors (scores are columns,
            thresholds live in the recipe)
plan.py     `python -m mixtures plan RECIPE`: tokens per source and phase, epochs, FLOPs, GPU-hours
sampler.py  deterministic, resumable fixed-length sequences over shards (pure Python + numpy)
"""
