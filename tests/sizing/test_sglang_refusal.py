"""Which models kvplan cannot size SGLang for, at any release (engines/sglang.py
`sglang_refusal`): a plan for another engine leaves SGLang's flags out for them
(tests/planning/test_plan_flags_left_out.py)."""

from __future__ import annotations

import pytest

from service.catalog.seed import load_seed
from service.sizing import architecture_from_dict
from service.sizing.engines.sglang import sglang_refusal

MODELS = {m["slug"]: m for m in load_seed("models.json")}


@pytest.mark.parametrize(
    ("slug", "refused"),
    [
        # engines/unmodelled.py refuse_unmodelled and sglang.py check_mamba_support
        ("deepseek-v4-flash", "DeepSeek-V4's compressed sparse attention"),
        ("kimi-k3", "Kimi Delta Attention"),
        ("lfm2-350m", "LFM2's short-convolution state"),
        ("minimax-m3", "MiniMax-M3's sparse-attention index keys"),
        ("jamba-v0.1", "Mamba-1 layers beside attention"),
        ("llama-3.1-8b", None),
        ("qwen3-next-80b-a3b-thinking", None),  # gated delta net: SGLang sizes it
    ],
)
def test_sglang_refusal_names_what_kvplan_cannot_size(slug: str, refused: str | None) -> None:
    arch = architecture_from_dict(MODELS[slug]["architecture"])
    refusal = sglang_refusal(arch)
    if refused is None:
        assert refusal is None
    else:
        assert refusal is not None
        assert refused in refusal.reason
