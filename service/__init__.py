"""kvplan: capacity planning for LLM inference on GPUs."""

__version__ = "0.1.0"
