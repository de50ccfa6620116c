"""Hugging Face `config.json` files the catalog tests import: the published files that
tests/sizing/test_hf_config.py already parses, one copy for both."""

from __future__ import annotations

from tests.sizing.test_hf_config import (
    DEEPSEEK_V3,
    GPT_OSS_120B,
    LLAMA_3_1_8B,
    NEMOTRON_H_56B,
    QWEN3_5_27B,
)

__all__ = ["DEEPSEEK_V3", "GPT_OSS_120B", "LLAMA_3_1_8B", "NEMOTRON_H_56B", "QWEN3_5_27B"]
