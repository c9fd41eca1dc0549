"""Tests of the trainer package: fused kernels against their references, and the decoder model."""
