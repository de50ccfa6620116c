"""Issue 19 part B: DeepSeek-V4, Kimi-K3 (MLA + KDA) and MiniMax-M3 (indexed GQA) from their
published config.json files (tests/fixtures/hf_configs, SOURCES.md), worked by hand.

vLLM rules read in the 0.26.0-0.33.0 wheels: docs/engines/vllm.md#kda,
#minimax-m3-index-keys and #deepseek-v4-compressed-sparse-attention.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from service.sizing.capacity import Capacity, Gpu, Parallelism, Workload, compute_capacity
from service.sizing.engines.common import Engine, EngineOptions
from service.sizing.engines.kv import kv_bytes_per_sequence, kv_bytes_per_token
from service.sizing.errors import SizingError, UnknownLayerKind
from service.sizing.model.architecture import (
    FullAttention,
    KimiDeltaAttention,
    LightningAttention,
    MixtureOfExperts,
    ModelArchitecture,
    MultiHeadLatentAttention,
)
from service.sizing.model.config_view import HFConfig
from service.sizing.model.dtypes import FloatDtype, KvCacheDtype
from service.sizing.model.hf_config import architecture_from_hf_config
from service.sizing.model.hf_deepseek_v4 import deepseek_v4_layers, sequence_bytes

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"
GiB = 2**30
MiB = 2**20
ONE_MILLION = 1_048_576  # max_position_embeddings of the V4 configs, 2^20
H200 = Gpu(memory_bytes=140 * GiB, name="NVIDIA H200", slug="h200-sxm-141gb")


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


def capacity(arch: ModelArchitecture, tp: int, max_model_len: int, **options: Any) -> Capacity:
    dtype = options.pop("kv_cache_dtype", "auto")
    return compute_capacity(
        arch,
        H200,
        Workload(max_model_len=max_model_len, kv_cache_dtype=dtype),
        Parallelism(tensor_parallel_size=tp),
        EngineOptions(**options),
    )


# --- DeepSeek-V4 -----------------------------------------------------------------------------


def test_deepseek_v4_pro_holds_vllms_published_9_62_gib_per_million_tokens_in_16_bits() -> None:
    # vLLM blog "DeepSeek V4 in vLLM: Efficient Long-context Attention" (vllm.ai/blog/
    # deepseek-v4): about 9.62 GiB per sequence in bf16 at the full 1M context, 8.7x less
    # than DeepSeek-V3.2. V4-Pro's compress_ratios (61 layers, the 62nd entry is the MTP
    # layer): 128, 128, then (4, 128) x 29, then 4 -> 30 C4 layers and 31 C128 layers.
    layers = deepseek_v4_layers(HFConfig(load("deepseek-ai--DeepSeek-V4-Pro")))
    assert [layer.compress_ratio for layer in layers].count(4) == 30
    assert [layer.compress_ratio for layer in layers].count(128) == 31
    pro = sequence_bytes(layers, ONE_MILLION, "16-bit")
    # C4: 2^20 / 4 = 262,144 latents of 512 x 2 B and as many indexer keys of 128 x 2 B.
    assert pro.compressed_bytes == 30 * 262_144 * 1024 + 31 * 8192 * 1024  # C128: 2^20 / 128
    assert pro.indexer_bytes == 30 * 262_144 * 256
    assert pro.window_bytes == 61 * 128 * 1024  # the 128-token window on every layer
    published = pro.compressed_bytes + pro.indexer_bytes + pro.window_bytes
    # 7.5 GiB + 0.2421875 GiB + 1.875 GiB + 0.00745 GiB = 9.6246 GiB
    assert round(published / GiB, 2) == 9.62
    # DeepSeek-V3.2 in 16 bits, from its config: 61 MLA layers x ((kv_lora_rank 512 +
    # qk_rope_head_dim 64) x 2 B + index_head_dim 128 x 2 B) x 2^20 tokens = 83.875 GiB;
    # 83.875 / 9.6246 = 8.71, the blog's 8.7x.
    v32 = load("deepseek-ai--DeepSeek-V3.2")
    per_token = v32["num_hidden_layers"] * (
        (v32["kv_lora_rank"] + v32["qk_rope_head_dim"]) * 2 + v32["index_head_dim"] * 2
    )
    assert per_token == 61 * 1408
    assert round(per_token * ONE_MILLION / published, 1) == 8.7
    # The compressor states (float32, beside the published figure) add 0.017 GiB:
    # C4 30 x 8 tokens x (2 x 2 x 512 + 2 x 2 x 128) x 4 B, C128 31 x 128 x 2 x 512 x 4 B.
    assert pro.compressor_state_bytes == 30 * 8 * (2048 + 512) * 4 + 31 * 128 * 1024 * 4


def test_deepseek_v4_flash_holds_the_bytes_vllm_stores_per_sequence_and_per_token() -> None:
    # Flash: 43 layers, compress_ratios 0, 0, (4, 128) x 20, 4 (the 44th entry is MTP).
    # As vLLM stores them: fp8_ds_mla rows of 584 B, indexer keys of 128 + 128/128 x 4 = 132 B.
    window = 43 * 128 * 584
    c4 = 21 * 262_144 * (584 + 132)
    c128 = 20 * 8192 * 584
    states = 21 * 8 * (2048 + 512) * 4 + 20 * 128 * 1024 * 4
    expected = window + c4 + c128 + states
    assert expected == 4_052_700_160
    arch = architecture_from_hf_config(load("deepseek-ai--DeepSeek-V4-Flash"))
    assert len(arch.compressed_layers) == 43
    assert kv_bytes_per_sequence(arch, KvCacheDtype.FP8_DS_MLA, ONE_MILLION) == expected
    # Per token: every 128 tokens add 21 x 32 C4 rows of 716 B and 20 x 1 C128 row of 584 B
    # = 481,152 + 11,680 = 492,832 B; / 128 = 3,850.25 -> 3,851 B rounded up.
    assert kv_bytes_per_token(arch, KvCacheDtype.FP8_DS_MLA) == 3851
    # ... and no other engine sizes it: their pools for it are not modelled.
    for engine in (Engine.SGLANG, Engine.TRTLLM):
        with pytest.raises(SizingError) as caught:
            capacity(arch, 1, 65_536, engine=engine, kv_pool_bytes=GiB)
        assert caught.value.field == "engine"
        assert "DeepSeek-V4" in caught.value.reason


@pytest.mark.parametrize(
    ("key", "value"),
    [("compress_ratios", [0, 0, 8]), ("head_dim", 256), ("num_key_value_heads", 2)],
)
def test_a_deepseek_v4_config_vllm_would_not_build_names_the_key(key: str, value: Any) -> None:
    config = load("deepseek-ai--DeepSeek-V4-Flash")
    config[key] = value
    with pytest.raises(SizingError) as caught:
        architecture_from_hf_config(config)
    assert caught.value.field.startswith(key)


# --- Kimi-K3 (MLA + KDA) ---------------------------------------------------------------------


def kimi_k3() -> ModelArchitecture:
    return architecture_from_hf_config(load("moonshotai--Kimi-K3"))


def test_kimi_k3_reads_kda_and_mla_layers_from_its_one_based_lists() -> None:
    arch = kimi_k3()
    # text_config.linear_attn_config: full_attn_layers 4, 8, ..., 92 and 93 (24 layers),
    # kda_layers the other 69, numbered from 1.
    assert arch.num_layers == 93
    assert [i for i, layer in enumerate(arch.layers) if isinstance(layer, FullAttention)] == []
    mla = [i for i, layer in enumerate(arch.layers) if isinstance(layer, MultiHeadLatentAttention)]
    assert mla == [*range(3, 92, 4), 92]
    kda = arch.layers[0]
    assert kda == KimiDeltaAttention(96, 96, 128, 128, 4)
    assert arch.state_dtype == "float32"  # vLLM kda_state_dtype: "auto" -> float32
    # num_experts 896, num_experts_per_token 16, moe_intermediate_size 3072, and
    # num_shared_experts 2 (Kimi's spelling of n_shared_experts) x 3072.
    assert arch.moe == MixtureOfExperts(896, 16, 3072, 2 * 3072)


def test_kimi_k3_bytes_per_token_and_per_sequence_by_hand() -> None:
    arch = kimi_k3()
    # MLA: 24 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 B = 27,648 B per token.
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 24 * 576 * 2 == 27_648
    # KDA per layer (kda_state_shape, tp 1): conv (4 - 1) x (96 x 128 x 3) = 110,592 bf16
    # values, recurrent 96 x 128 x 128 = 1,572,864 float32 values: 6,512,640 B, 69 layers.
    state = 110_592 * 2 + 1_572_864 * 4
    assert state == 6_512_640
    assert kv_bytes_per_sequence(arch, KvCacheDtype.AUTO, 8192) == 27_648 * 8192 + 69 * state


def test_kimi_k3_on_vllm_0_33_with_tp8_by_hand() -> None:
    # TP 8: a KDA state page is conv 3 x 36,864 / 8 x 2 B = 27,648 B + recurrent
    # 96 / 8 x 128 x 128 x 4 B = 786,432 B = 814,080 B. An MLA token is 1,152 B on every rank.
    # _align_hybrid_block_size (0.27+): MLA hybrids align to max(16, 128) = 128 tokens:
    # 128 x ceil(814,080 / (128 x 1,152)) = 128 x 6 = 768 tokens, a page of 884,736 B.
    answer = capacity(kimi_k3(), 8, 131_072, engine_version="0.33.0", kv_pool_bytes=40 * GiB)
    layout = answer.layout
    assert layout.block_size == 768
    assert {group.page_bytes for group in layout.groups} == {884_736}
    # 24 MLA layers, 69 KDA layers: groups of 24 (69 > 1.5 x 24): 1 MLA group, 3 KDA groups
    # of 23 (3 padding layers); a block is 24 pages = 21,233,664 B.
    assert sorted((g.kind, g.layers) for g in layout.groups) == [
        ("kda", 23),
        ("kda", 23),
        ("kda", 23),
        ("mla", 24),
    ]
    assert layout.bytes_per_block == 24 * 884_736
    # A request: ceil(131,072 / 768) = 171 MLA blocks + 2 state blocks in each KDA group
    # (prefix caching is on for hybrids from 0.28: 'align' keeps two).
    assert layout.blocks_per_request == 171 + 3 * 2
    assert answer.report.num_gpu_blocks == 40 * GiB // (24 * 884_736) == 2022
    # The notes give the aligned block, not the MLA backend's 16 it started from.
    assert not any("MLA block size" in note for note in layout.notes)


def test_kimi_k3_before_vllm_0_27_and_a_flag_older_releases_ignore_are_refused() -> None:
    with pytest.raises(SizingError) as too_old:
        capacity(kimi_k3(), 8, 8192, engine_version="0.26.0", kv_pool_bytes=GiB)
    assert too_old.value.field == "engine_version"
    with pytest.raises(SizingError) as ignored:
        capacity(
            kimi_k3(),
            8,
            8192,
            engine_version="0.29.0",
            kv_pool_bytes=GiB,
            mamba_ssm_cache_dtype="bfloat16",
        )
    assert ignored.value.field == "mamba_ssm_cache_dtype"


def test_kimi_k3_takes_a_bfloat16_recurrent_state_from_vllm_0_30() -> None:
    # kda_state_dtype (0.30.0+): bfloat16 -> recurrent 786,432 / 2 = 393,216 B at TP 8, so a
    # state page is 27,648 + 393,216 = 420,864 B: 128 x ceil(420,864 / 147,456) = 384 tokens.
    answer = capacity(
        kimi_k3(),
        8,
        131_072,
        engine_version="0.30.0",
        kv_pool_bytes=40 * GiB,
        mamba_ssm_cache_dtype="bfloat16",
    )
    assert answer.layout.block_size == 384


@pytest.mark.parametrize(
    ("engine", "version"), [(Engine.SGLANG, "0.5.23"), (Engine.TRTLLM, "1.2.0")]
)
def test_other_engines_refuse_kda_by_name(engine: Engine, version: str) -> None:
    with pytest.raises(SizingError) as caught:
        capacity(kimi_k3(), 8, 8192, engine=engine, engine_version=version, kv_pool_bytes=GiB)
    assert caught.value.field == "engine"
    assert "Kimi Delta Attention" in caught.value.reason


# --- MiniMax-M3 ------------------------------------------------------------------------------


def minimax_m3() -> ModelArchitecture:
    return architecture_from_hf_config(load("MiniMaxAI--MiniMax-M3"))


def test_minimax_m3_keeps_an_index_key_on_its_sparse_layers() -> None:
    arch = minimax_m3()
    # sparse_attention_freq: 0 on layers 0-2, 1 on the other 57.
    plain, indexed = FullAttention(4, 128), FullAttention(4, 128, indexer_head_dim=128)
    assert arch.layers == (plain,) * 3 + (indexed,) * 57
    # K and V: 4 heads x 128 x 2 x 2 B = 2,048 B; an index key: 128 bf16 = 256 B.
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 3 * 2048 + 57 * (2048 + 256) == 137_472
    # fp8 KV halves K and V, not the bf16 index key.
    assert kv_bytes_per_token(arch, KvCacheDtype.FP8) == 3 * 1024 + 57 * (1024 + 256)


def test_minimax_m3_on_vllm_0_33_is_one_group_of_128_token_pages() -> None:
    # TP 4: one KV head per rank (4 / 4): 512 B of K and V, + 256 B of index key on a sparse
    # layer (one copy per rank). UniformTypeKVCacheSpecs: the index MLAAttentionSpec groups
    # with FullAttentionSpec, pages summed: 128 x (3 x 512 + 57 x 768) = 5,799,936 B.
    answer = capacity(minimax_m3(), 4, 131_072, engine_version="0.33.0", kv_pool_bytes=40 * GiB)
    assert answer.layout.block_size == 128
    assert answer.layout.bytes_per_block == 128 * (3 * 512 + 57 * 768) == 5_799_936
    assert answer.layout.blocks_per_request == 131_072 // 128
    assert answer.report.num_gpu_blocks == 40 * GiB // 5_799_936 == 7405


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"engine_version": "0.32.0"}, "engine_version"),
        ({"engine_version": "0.33.0", "block_size": 64}, "block_size"),
        ({"engine": Engine.SGLANG, "engine_version": "0.5.23"}, "engine"),
        ({"engine": Engine.TRTLLM, "engine_version": "1.2.0"}, "engine"),
    ],
)
def test_minimax_m3_refusals_name_the_input(options: dict[str, Any], field: str) -> None:
    with pytest.raises(SizingError) as caught:
        capacity(minimax_m3(), 4, 8192, kv_pool_bytes=GiB, **options)
    assert caught.value.field == field


def test_a_minimax_m3_index_value_is_refused_not_ignored() -> None:
    config = load("MiniMaxAI--MiniMax-M3")
    config["sparse_attention_config"]["sparse_disable_index_value"][5] = 0
    with pytest.raises(UnknownLayerKind) as caught:
        architecture_from_hf_config(config)
    assert caught.value.field == "sparse_attention_config.sparse_disable_index_value[5]"


# --- MiniMax-M1 (lightning attention) -----------------------------------------------------------


def minimax_m1() -> ModelArchitecture:
    return architecture_from_hf_config(load("MiniMaxAI--MiniMax-M1"), name="MiniMax-M1")


def test_minimax_m1_reads_softmax_and_lightning_layers_from_attn_type_list() -> None:
    # github:MiniMax-AI/MiniMax-M1 config.json: 80 layers, attn_type_list 1 on every 8th layer
    # (7, 15, ..., 79: 10 softmax layers), 0 elsewhere (70 lightning layers); 64 heads, 8 KV
    # heads, head_dim 128; no torch_dtype (16 bits under --dtype auto).
    arch = minimax_m1()
    softmax = [i for i, layer in enumerate(arch.layers) if isinstance(layer, FullAttention)]
    assert softmax == list(range(7, 80, 8))
    assert arch.layers[7] == FullAttention(num_kv_heads=8, head_dim=128)
    # vLLM 0.20.0 get_mamba_state_shape_from_config: linear_attention_state_shape(
    # num_heads=num_attention_heads 64, tp, head_dim 128).
    assert arch.layers[0] == LightningAttention.of(64, 128)
    assert sum(isinstance(layer, LightningAttention) for layer in arch.layers) == 70
    assert arch.dtype == "bfloat16"


def test_minimax_m1_bytes_per_token_and_per_sequence_by_hand() -> None:
    arch = minimax_m1()
    # vLLM 0.20.0 models/minimax_text_01.py: softmax layers keep K and V,
    # 10 x 2 x 8 x 128 x 2 B = 40,960 B per token; each lightning layer a state of
    # (64 / TP, 128, 128) in the model dtype (linear_attention_state_dtype, mamba_cache_dtype
    # auto): 64 x 128 x 128 x 2 = 2,097,152 B, x 70 = 146,800,640 B per sequence at TP 1.
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 10 * 2 * 8 * 128 * 2 == 40_960
    state = 70 * 64 * 128 * 128 * 2
    assert state == 146_800_640
    # One sequence of max_position_embeddings 10,240,000 tokens: 40,960 x 10,240,000
    # + 146,800,640 = 419,430,400,000 + 146,800,640 = 419,577,200,640 B.
    assert kv_bytes_per_sequence(arch, KvCacheDtype.AUTO, 10_240_000) == 419_577_200_640
    # TP 8: 1 KV head per rank (512 B per softmax layer per token) and 8 heads of state
    # (262,144 B per lightning layer): 8192 x 5,120 + 70 x 262,144 = 41,943,040 + 18,350,080.
    assert kv_bytes_per_sequence(arch, KvCacheDtype.AUTO, 8192, 8) == 60_293_120
    # An fp8 KV cache halves the softmax layers only: the state stays in mamba_cache_dtype
    # (auto: the model dtype), and mamba_ssm_cache_dtype never reaches it.
    assert kv_bytes_per_sequence(arch, KvCacheDtype("fp8"), 8192) == 8192 * 20_480 + state
    fp32_flag = kv_bytes_per_sequence(arch, KvCacheDtype.AUTO, 8192, 1, FloatDtype.FLOAT32)
    assert fp32_flag == 8192 * 40_960 + state


@pytest.mark.parametrize(
    ("version", "tokens"),
    [
        # 0.20.0 reports "GPU KV cache size" per group for hybrids: 16,384 // 8 groups x 512.
        ("0.20.0", 16_384 // 8 * 512),
        # 0.23.0 reports max concurrency x max_model_len: int(16,384 / 263 x 131,072).
        ("0.23.0", 8_165_337),
    ],
)
def test_minimax_m1_on_vllm_with_tp8_by_hand(version: str, tokens: int) -> None:
    # H200, TP 8, 40 GiB pool given. Per rank: a softmax layer keeps 2 x 1 KV head x 128 x 2 B
    # = 512 B per token; a lightning state page (MambaSpec) is 8 x 128 x 128 x 2 B = 262,144 B.
    # HybridAttentionMambaModelConfig (block alignment 16): 16 x ceil(262,144 / (16 x 512)) =
    # 16 x 32 = 512 tokens, an attention page of 512 x 512 = 262,144 B: the state page, unpadded.
    answer = capacity(minimax_m1(), 8, 131_072, engine_version=version, kv_pool_bytes=40 * GiB)
    layout = answer.layout
    assert layout.block_size == 512
    assert {group.page_bytes for group in layout.groups} == {262_144}
    # 10 softmax and 70 lightning layers: groups of 10 (70 > 1.5 x 10): 1 attention group and
    # 7 lightning groups, no padding; a block is 10 pages = 2,621,440 B.
    assert sorted((g.kind, g.layers) for g in layout.groups) == [
        ("full_attention", 10),
        *[("lightning_attention", 10)] * 7,
    ]
    assert layout.bytes_per_block == 10 * 262_144 == 2_621_440
    # A request: ceil(131,072 / 512) = 256 attention blocks + 1 state block in each lightning
    # group (prefix caching is off for hybrids before 0.28: mamba_cache_mode 'none').
    assert layout.blocks_per_request == 256 + 7 == 263
    # 40 GiB / 2,621,440 B = 42,949,672,960 / 2,621,440 = 16,384 blocks; 16,384 / 263 = 62.30.
    assert answer.report.num_gpu_blocks == 16_384
    assert answer.report.max_concurrency == 16_384 / 263
    assert answer.report.kv_cache_tokens == tokens


@pytest.mark.parametrize("version", ["0.24.0", "0.33.0"])
def test_minimax_m1_from_vllm_0_24_is_refused_by_name(version: str) -> None:
    # 0.24.0 models/registry.py: _PREVIOUSLY_SUPPORTED_MODELS "MiniMaxText01ForCausalLM" and
    # "MiniMaxM1ForCausalLM": "0.23.0"; models/minimax_text_01.py is gone from the wheel.
    with pytest.raises(SizingError) as caught:
        capacity(minimax_m1(), 8, 8192, engine_version=version, kv_pool_bytes=GiB)
    assert caught.value.field == "engine_version"
    assert f"vLLM {version} no longer serves MiniMaxText01ForCausalLM" in caught.value.reason


def test_minimax_m1_is_refused_by_name_on_sglang() -> None:
    # No MiniMaxText01ForCausalLM / MiniMaxM1ForCausalLM in SGLang 0.5.9's or 0.5.23's
    # srt/models (minimax_m2, minimax_m3 only).
    with pytest.raises(SizingError) as caught:
        capacity(
            minimax_m1(), 8, 8192, engine=Engine.SGLANG, engine_version="0.5.23", kv_pool_bytes=GiB
        )
    assert caught.value.field == "engine"
    assert "SGLang does not serve it" in caught.value.reason


def test_minimax_layer_types_spelling_reads_the_same_layers() -> None:
    # vLLM MiniMaxText01Model: without attn_type_list, layer_types "linear_attention" is 0 and
    # "full_attention" 1 (the HF format).
    config = load("MiniMaxAI--MiniMax-M1")
    kinds = config.pop("attn_type_list")
    config["layer_types"] = ["full_attention" if k else "linear_attention" for k in kinds]
    assert architecture_from_hf_config(config).layers == minimax_m1().layers
    config["layer_types"][3] = "sliding_attention"
    with pytest.raises(UnknownLayerKind) as caught:
        architecture_from_hf_config(config)
    assert caught.value.field == "layer_types[3]"


def test_minimax_m1_fp8_kv_and_prefix_caching_on_vllm_0_20_by_hand() -> None:
    # --kv-cache-dtype fp8 halves the softmax token (2 x 1 head x 128 x 1 B = 256 B per layer
    # per rank) but not the lightning state (mamba_cache_dtype auto: bf16, 262,144 B), so
    # the alignment doubles: 16 x ceil(262,144 / (16 x 256)) = 16 x 64 = 1,024 tokens, page
    # 262,144 B. Blocks per request: ceil(131,072 / 1,024) = 128 + 7 = 135; 16,384 / 135.
    fp8 = capacity(
        minimax_m1(),
        8,
        131_072,
        engine_version="0.20.0",
        kv_pool_bytes=40 * GiB,
        kv_cache_dtype="fp8",
    )
    assert fp8.layout.block_size == 1024
    assert {group.page_bytes for group in fp8.layout.groups} == {262_144}
    assert fp8.layout.blocks_per_request == 128 + 7
    assert fp8.report.max_concurrency == 16_384 / 135
    # --enable-prefix-caching on 0.20.0: MambaModelConfig sets mamba_cache_mode 'align', two
    # state pages per request in each lightning group: 256 + 7 x 2 = 270; 16,384 / 270.
    cached = capacity(
        minimax_m1(),
        8,
        131_072,
        engine_version="0.20.0",
        kv_pool_bytes=40 * GiB,
        enable_prefix_caching=True,
    )
    assert cached.layout.blocks_per_request == 256 + 7 * 2
    assert cached.report.max_concurrency == 16_384 / 270
    # --mamba-ssm-cache-dtype float32 does not reach the lightning state
    # (linear_attention_state_dtype reads mamba_cache_dtype only): the same 263 blocks.
    ssm = capacity(
        minimax_m1(),
        8,
        131_072,
        engine_version="0.20.0",
        kv_pool_bytes=40 * GiB,
        mamba_ssm_cache_dtype="float32",
    )
    assert ssm.layout.blocks_per_request == 263
    assert {group.page_bytes for group in ssm.layout.groups} == {262_144}
