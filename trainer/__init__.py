"""Refinery trainer: the Llama-style decoder (`trainer.model`) and its fused Triton kernels (`trainer.kernels`).

Importing this package pulls in neither Triton nor DeepSpeed: the kernels are imported only when the Triton
backend is chosen, and DeepSpeed wraps the model from the training entry point, never from here.
"""
