"""Speculative decoding's drafter (engines/speculative.py), worked by hand.

vLLM 0.33.0: config/speculative.py SpeculativeConfig, v1/spec_decode/llm_base_proposer.py
load_model (the drafter's attention layers get their own KV-cache specs beside the target's;
MTP shares the target's embeddings and head), models/deepseek_mtp.py (an MTP layer: enorm,
hnorm, eh_proj, one full decoder layer, shared_head), models/llama_eagle3.py (an EAGLE3 head).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from service.sizing.capacity import Parallelism, Workload, compute_capacity
from service.sizing.engines.common import Engine, EngineOptions
from service.sizing.engines.speculative import parse_speculative_config, sglang_speculative_config
from service.sizing.errors import SizingError
from service.sizing.model.architecture import FullAttention, ModelArchitecture
from service.sizing.model.hf_config import architecture_from_hf_config

from .models import H100_TORCH, H200_TORCH, LLAMA_31_8B

CONFIGS = Path(__file__).parent.parent / "fixtures" / "hf_configs"
DEEPSEEK_V3 = architecture_from_hf_config(
    json.loads((CONFIGS / "deepseek-ai--DeepSeek-V3.json").read_text(encoding="utf-8"))
)


def _fp8_block(rows: int, cols: int) -> int:
    """An fp8 weight with 128 x 128 block scales (DeepSeek-V3 quantization_config
    weight_block_size [128, 128]): 1 B a value + one fp32 scale a block."""
    return rows * cols + -(-rows // 128) * -(-cols // 128) * 4


def test_deepseek_v3_declares_one_mtp_layer_and_its_loaded_bytes() -> None:
    # config.json num_nextn_predict_layers 1; checkpoint layer 61 (hidden 7168, q_lora_rank 1536,
    # kv_lora_rank 512, rope 64, nope 128, v 128, 128 heads, 256 experts of 2048, one shared)
    # without its embed_tokens and shared_head.head (the target's, in vLLM):
    attention = (
        _fp8_block(1536, 7168)  # q_a_proj: 11,010,048 + 12 x 56 x 4 = 11,012,736
        + _fp8_block(128 * 192, 1536)  # q_b_proj: 37,748,736 + 9,216 = 37,757,952
        + _fp8_block(512 + 64, 7168)  # kv_a_proj_with_mqa: 4,128,768 + 5 x 56 x 4 = 4,129,888
        + _fp8_block(128 * 256, 512)  # kv_b_proj: 16,777,216 + 4,096 = 16,781,312
        + _fp8_block(7168, 128 * 128)  # o_proj: 117,440,512 + 28,672 = 117,469,184
    )
    assert attention == 187_151_072
    experts = 256 * 3 * _fp8_block(2048, 7168)  # 768 x 14,683,648 = 11,277,041,664
    shared = 3 * _fp8_block(2048, 7168)  # 44,050,944
    router = 256 * 7168 * 2 + 256 * 2  # gate.weight bf16 3,670,016 + e_score_correction_bias
    eh_proj = _fp8_block(7168, 2 * 7168)  # 102,760,448 + 56 x 112 x 4 = 102,785,536
    norms = 5 * 7168 * 2 + 1536 * 2 + 512 * 2  # enorm, hnorm, two layer norms, shared_head.norm
    total = attention + experts + shared + router + eh_proj + norms
    assert total == 11_614_775_520  # 10.82 GiB
    assert DEEPSEEK_V3.num_nextn_predict_layers == 1
    assert DEEPSEEK_V3.mtp_weight_bytes == total


MTP = parse_speculative_config({"method": "deepseek_mtp", "num_speculative_tokens": 1})


def test_mtp_adds_one_mla_latent_per_token_and_its_weights_on_8_x_h200() -> None:
    question = (H200_TORCH, Workload(32768), Parallelism(tensor_parallel_size=8))
    plain = compute_capacity(DEEPSEEK_V3, *question, EngineOptions(engine_version="0.33.0"))
    mtp = compute_capacity(
        DEEPSEEK_V3, *question, EngineOptions(engine_version="0.33.0", speculative_config=MTP)
    )
    # MLA keeps one latent of kv_lora_rank 512 + rope 64 = 576 values x 2 B = 1,152 B per token
    # per layer, replicated on every TP rank: 61 layers -> 62 with the MTP layer
    assert plain.kv_bytes_per_token_per_gpu == 61 * 1152 == 70_272
    assert mtp.kv_bytes_per_token_per_gpu == 62 * 1152 == 71_424
    # one uniform MLA group of 16-token blocks on Hopper (0.18+ FLASH_ATTN_MLA)
    assert mtp.layout.bytes_per_block == 16 * 71_424
    # the drafter's weights over 8 ranks: 11,614,775,520 / 8 = 1,451,846,940 B
    line = next(line for line in mtp.budget.lines if line.name == "speculative_draft_weights")
    assert line.bytes == -1_451_846_940
    assert mtp.num_gpu_blocks < plain.num_gpu_blocks
    assert any("1 MTP layer" in warning for warning in mtp.warnings)


# An EAGLE3 head for Llama-3.1-8B (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B's layout in vLLM
# models/llama_eagle3.py): one decoder layer whose qkv_proj reads 2 x hidden, fc from 3 x hidden
# to hidden, a draft vocabulary of 32,000 and its d2t map; embeddings shared with the target.
EAGLE3_PARAMETERS = (
    (4096 + 1024 + 1024) * 2 * 4096  # qkv_proj from 8192: 50,331,648
    + 4096 * 4096  # o_proj: 16,777,216
    + 2 * 14336 * 4096  # gate_up_proj: 117,440,512
    + 4096 * 14336  # down_proj: 58,720,256
    + 4 * 4096  # input_layernorm, hidden_norm, post_attention_layernorm, norm: 16,384
    + 4096 * 3 * 4096  # fc: 50,331,648
    + 32000 * 4096  # lm_head over the draft vocabulary: 131,072,000
)
EAGLE3_BYTES = EAGLE3_PARAMETERS * 2 + 32000 * 8  # bf16, + d2t int64: 849,635,328
EAGLE3_HEAD = ModelArchitecture(
    layers=(FullAttention(num_kv_heads=8, head_dim=128),),
    num_attention_heads=32,
    hidden_size=4096,
    intermediate_size=14336,
    vocab_size=32000,
    weight_bytes=EAGLE3_BYTES,
)


def test_an_eagle3_head_on_llama_3_1_8b_adds_one_layer_and_its_weights() -> None:
    assert EAGLE3_BYTES == 849_635_328
    config = parse_speculative_config(
        {"method": "eagle3", "model": "eagle3-llama3.1-8b", "num_speculative_tokens": 3}
    )
    # the draft resolved as the planning service resolves `model` (a catalog slug or inline)
    spec = EngineOptions(
        engine_version="0.33.0", speculative_config=replace(config, draft=EAGLE3_HEAD)
    )
    capacity = compute_capacity(LLAMA_31_8B, H100_TORCH, Workload(8192), Parallelism(), spec)
    # 32 + 1 layers of 8 KV heads x 128 x 2 (K, V) x 2 B = 4,096 B per token per layer
    assert capacity.kv_bytes_per_token == 33 * 4096 == 135_168
    # one group of 33 full-attention layers, 16-token blocks: 16 x 135,168 = 2,162,688 B
    assert capacity.layout.bytes_per_block == 2_162_688
    line = next(line for line in capacity.budget.lines if line.name == "speculative_draft_weights")
    assert line.bytes == -EAGLE3_BYTES
    assert any("3 lookahead slots" in warning for warning in capacity.warnings)


def test_ngram_drafts_with_no_weights_and_no_kv() -> None:
    ngram = parse_speculative_config(
        {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 5}
    )
    plain = compute_capacity(LLAMA_31_8B, H100_TORCH, Workload(8192), Parallelism())
    drafted = compute_capacity(
        LLAMA_31_8B,
        H100_TORCH,
        Workload(8192),
        Parallelism(),
        EngineOptions(speculative_config=ngram),
    )
    assert drafted.kv_pool_bytes == plain.kv_pool_bytes
    assert drafted.num_gpu_blocks == plain.num_gpu_blocks
    assert ngram.lookahead_tokens == 0


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"num_speculative_tokens": 1}, "speculative_config.method"),
        ({"method": "medusa", "num_speculative_tokens": 1}, "speculative_config.method"),
        ({"method": "mtp"}, "speculative_config.num_speculative_tokens"),
        ({"method": "eagle3", "num_speculative_tokens": 2}, "speculative_config.model"),
        ({"method": "mtp", "model": "x", "num_speculative_tokens": 1}, "speculative_config.model"),
        (
            {"method": "mtp", "num_speculative_tokens": 1, "quantization": "fp8"},
            "speculative_config.quantization",
        ),
    ],
)
def test_a_config_vllm_or_kvplan_would_not_size_is_refused_by_key(
    value: dict[str, object], field: str
) -> None:
    with pytest.raises(SizingError) as refused:
        parse_speculative_config(value)
    assert refused.value.field == field


def test_mtp_on_a_model_without_mtp_layers_is_refused() -> None:
    with pytest.raises(SizingError) as refused:
        compute_capacity(
            LLAMA_31_8B,
            H100_TORCH,
            Workload(8192),
            Parallelism(),
            EngineOptions(speculative_config=MTP),
        )
    assert refused.value.field == "speculative_config.method"


# --- SGLang 0.5.23 (pool_configurator.py, spec_aux_hidden_state.py) -------------------------


def test_sglang_nextn_grows_the_cell_by_the_mtp_layer_at_the_target_s_size() -> None:
    question = (H200_TORCH, Workload(32768), Parallelism(tensor_parallel_size=8))
    plain = compute_capacity(DEEPSEEK_V3, *question, EngineOptions(engine=Engine.SGLANG))
    nextn = compute_capacity(
        DEEPSEEK_V3,
        *question,
        EngineOptions(
            engine=Engine.SGLANG, speculative_config=sglang_speculative_config("NEXTN", None, 2)
        ),
    )
    # cell 61 x 1,152 = 70,272 B; + int(70,272 x 1 / 61) = 1,152: 71,424 B a token
    assert plain.kv_bytes_per_token_per_gpu == 70_272
    assert nextn.kv_bytes_per_token_per_gpu == 71_424
    # the same pool (the draft's weights load from mem_fraction_static's reserve), split over
    # the larger cell: 71,424 / 70,272 fewer tokens
    assert nextn.kv_pool_bytes == plain.kv_pool_bytes
    assert nextn.kv_cache_tokens == nextn.kv_pool_bytes // 71_424


def test_sglang_refuses_an_unknown_algorithm_and_a_draft_without_its_path() -> None:
    with pytest.raises(SizingError) as unknown:
        sglang_speculative_config("MEDUSA", None, None)
    assert unknown.value.field == "speculative_algorithm"
    with pytest.raises(SizingError) as no_path:
        sglang_speculative_config("EAGLE3", None, None)
    assert no_path.value.field == "speculative_draft_model_path"
