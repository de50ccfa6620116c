"""Parameter counts of the 2026 layouts `param_count_2026` writes, from their configs verbatim
(tests/fixtures/hf_configs, sources in SOURCES.md), checked tensor class by tensor class
against hand arithmetic from vLLM's model file and in total against the published figure
(residual stated beside it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from service.sizing.hf_config import checkpoint_weights
from service.sizing.param_count import TensorClass

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


def test_mimo_v2_flash_by_class_and_against_the_model_card() -> None:
    counts = checkpoint_weights(load("XiaomiMiMo--MiMo-V2-Flash")).parameters
    by = dict(counts.by_class)
    # vLLM mimo_v2.py; config: hidden 4096, vocab 152576, 48 layers, hybrid_layer_pattern with
    # 9 full layers (0, 5, 11, 17, 23, 29, 35, 41, 47) and 39 sliding ones.
    # embed_tokens and the untied lm_head: 152576 x 4096 = 624_951_296 each.
    assert by[TensorClass.EMBEDDING] == 624_951_296
    assert by[TensorClass.LM_HEAD] == 624_951_296
    # Full layer (64 heads, 4 KV heads, K 192, V 128): q 64*192*4096 = 50_331_648,
    # k 4*192*4096 = 3_145_728, v 4*128*4096 = 2_097_152, o 4096*64*128 = 33_554_432
    # -> 89_128_960. Sliding layer (64 heads, 8 KV heads, K 192, V 128, sink per head):
    # 50_331_648 + 6_291_456 + 4_194_304 + 33_554_432 + 64 = 94_371_904.
    # 9 * 89_128_960 + 39 * 94_371_904 = 802_160_640 + 3_680_504_256 = 4_482_664_896.
    assert by[TensorClass.ATTENTION] == 4_482_664_896
    # moe_layer_freq[0] = 0: one dense MiMoV2MLP, 3 * 4096 * 16384 = 201_326_592.
    assert by[TensorClass.MLP] == 201_326_592
    # 47 MoE layers of 256 experts (3 * 4096 * 2048 = 25_165_824 each):
    # 47 * 256 * 25_165_824 = 302_795_194_368; gate 256 * 4096 + bias 256 = 1_048_832, x 47.
    assert by[TensorClass.ROUTED_EXPERTS] == 302_795_194_368
    assert by[TensorClass.ROUTER] == 47 * 1_048_832
    # Two RMSNorms per layer and the final one: (2 * 48 + 1) * 4096 = 397_312.
    assert by[TensorClass.NORM] == 397_312
    # Sum: 308_778_780_864. github:XiaomiMiMo/MiMo-V2-Flash README.md: "309B total parameters"
    # (the 3 MTP layers, "0.33B params/block", are released apart and vLLM skips "mtp" names:
    # MiMoV2Model.load_weights). Residual (308.78 - 309) / 309 = -0.07 %.
    assert counts.total == 308_778_780_864 == counts.served_total
    assert abs(counts.total - 309e9) <= 309e9 * 0.001
