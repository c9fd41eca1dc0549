"""Tests of the mixtures package (recipes, selectors, plan, sampler) and the shared document corpus."""
