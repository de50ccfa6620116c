"""The shipped seed catalog (service/catalog/data/*.json): shape, round-trips and hand arithmetic.

Every number asserted here is worked out by hand in the comment beside it, with where the
inputs come from (the entry's own config facts, or the docs/ section named).
"""

from __future__ import annotations

from collections import Counter
from functools import cache
from typing import Any

import pytest

from service.catalog.seed import load_seed
from service.sizing.engines.kv import (
    kv_bytes_per_token,
    state_bytes_per_sequence,
    state_dtype_bytes,
)
from service.sizing.model.architecture import (
    GatedDeltaNet,
    LayerKind,
    Mamba1,
    Mamba2,
    ModelArchitecture,
)
from service.sizing.model.dtypes import KvCacheDtype
from service.sizing.model.schedule import architecture_from_dict, architecture_to_dict
from service.sizing.model.weights import weight_bytes_total

GIB = 2**30


@cache
def _load(name: str) -> tuple[dict[str, Any], ...]:
    return tuple(load_seed(name))


def models() -> tuple[dict[str, Any], ...]:
    return _load("models.json")


def gpus() -> tuple[dict[str, Any], ...]:
    return _load("gpus.json")


def model(slug: str) -> dict[str, Any]:
    return next(m for m in models() if m["slug"] == slug)


def arch(slug: str) -> ModelArchitecture:
    return architecture_from_dict(model(slug)["architecture"])


def gpu(slug: str) -> dict[str, Any]:
    return next(g for g in gpus() if g["slug"] == slug)


def kind_counts(slug: str) -> Counter[LayerKind]:
    return Counter(layer.kind for layer in arch(slug).layers)


MODEL_SLUGS = [m["slug"] for m in models()]


# --- shape -------------------------------------------------------------------------------------


@pytest.mark.parametrize("load", [models, gpus], ids=["models", "gpus"])
def test_slugs_are_unique_sorted_lowercase_and_every_entry_has_a_source(load: Any) -> None:
    records = load()
    slugs = [r["slug"] for r in records]
    assert len(slugs) == len(set(slugs))
    assert slugs == sorted(slugs)
    for record in records:
        assert record["slug"] == record["slug"].lower()
        assert " " not in record["slug"]
        assert record["name"]
        assert isinstance(record["sources"], list)
        assert record["sources"], record["slug"]
        assert all(isinstance(s, str) and s for s in record["sources"])


def test_the_catalog_sizes() -> None:
    # 63 shared entries - 2 left out (gemma-3-12b-it, granite-4.0-h-small) + 3 added for
    # calibration cases + glm-5.3 and qwen3.8-2.4t-a95b (issue 19, part B) + gemma-4-31b-it
    # (issue 19, part A) + mimo-v2-flash and Nemotron 3 Super and Ultra (issue 19 item 4)
    # + minimax-m3 (issue 19, its parameter count) = 71 models; 25 shared GPUs - 6
    # left out + rtx-3090 = 20, + a10, h20, l40, mi325x, rtx-5090 (issue 20;
    # docs/catalog-sources.md#gpu-prices) = 25, + gb10 and mi355x (issue 20, their torch totals
    # and speed figures found) = 27.
    # + deepseek-v4-flash and deepseek-v4-pro, kimi-k3 and lfm2-350m (issue 19, their
    # parameter counts) = 75 models.
    assert len(models()) == 75
    assert len(gpus()) == 27


def test_models_without_verified_geometry_are_left_out() -> None:
    for slug in ("gemma-3-12b-it", "granite-4.0-h-small"):
        assert slug not in MODEL_SLUGS


def test_calibration_models_are_present() -> None:
    for slug in (
        "llama-3.1-8b-instruct",
        "deepseek-r1-distill-qwen-14b",
        "llama-3.1-70b-instruct-w8a8",
    ):
        assert slug in MODEL_SLUGS


def test_model_entries_carry_identity_fields() -> None:
    for record in models():
        assert set(record) == {
            "slug",
            "name",
            "hf_id",
            "family",
            "architecture",
            "sources",
            "notes",
        }
        assert "/" in record["hf_id"]
        assert record["family"]
        assert record["notes"]


@pytest.mark.parametrize("slug", MODEL_SLUGS)
def test_architecture_loads_and_round_trips(slug: str) -> None:
    data = model(slug)["architecture"]
    loaded = architecture_from_dict(data)
    assert architecture_to_dict(loaded) == data
    # Every field the brief names is present, even when null.
    assert {
        "num_attention_heads",
        "dtype",
        "state_dtype",
        "hidden_size",
        "intermediate_size",
        "vocab_size",
        "num_parameters",
        "weight_bytes",
        "weight_format",
        "max_position_embeddings",
        "moe",
        "layer_specs",
        "layer_schedule",
    } == set(data) - {
        "checkpoint_kv_cache",  # said only by the checkpoints that declare one
        "num_nextn_predict_layers",  # issue 21: said only by models with MTP layers
        "mtp_weight_bytes",
        "mtp_layer_schedule",  # said only where the MTP layers cache otherwise (DeepSeek-V4)
        "attention_shares",  # issue 21: said only by MoE rows whose config.json kvplan read
    }
    # Weights can be priced for every model: a parameter count or a checkpoint size.
    assert weight_bytes_total(loaded) > 0


# --- per-token KV bytes (dtype "auto" = the model's own dtype) -------------------------------

PER_TOKEN = [
    # seed-examples 16: MLA 61 layers x (512 + 64) x 2 B = 70,272
    ("deepseek-v3", 70_272),
    # Kimi K2, same MLA latent: 61 x 576 x 2 = 70,272
    ("kimi-k2-instruct", 70_272),
    # GLM-5 MLA: 78 layers x (512 + 64) x 2 B = 89,856 (the shared catalog's derived figure),
    # plus the DSA indexer key on every layer, 128 fp8 + 128 // 128 x 4 B scale = 132 B:
    # 78 x (1,152 + 132) = 100,152
    ("glm-5", 89_856 + 78 * 132),
    # DeepSeek-V3.2: 61 x (1,152 + 132) = 78,324 (design §1.8's 70,272 plus the indexer)
    ("deepseek-v3.2", 70_272 + 61 * 132),
    # DeepSeek-V2-Lite MLA: 27 x 576 x 2 = 31,104
    ("deepseek-v2-lite", 31_104),
    # seed-examples 15 (bf16 here): 16 full layers x 2 x 4 kv x 256 x 2 B = 65,536
    ("qwen3.5-27b", 65_536),
    # Qwen3-Next: 12 full layers x 2 x 2 kv x 256 x 2 B = 24,576
    ("qwen3-next-80b-a3b-thinking", 24_576),
    # Gemma 3 27B: every attention layer stores K and V per token (the window caps tokens held,
    # not the per-token size): 62 x 2 x 16 x 128 x 2 B = 507,904
    ("gemma-3-27b-it", 507_904),
    # Nemotron-H-56B: 10 '*' layers x 2 x 8 x 128 x 2 B = 40,960
    ("nemotron-h-56b-base-8k", 40_960),
    # Nemotron 3 Nano: 6 '*' layers x 2 x 2 x 128 x 2 B = 6,144
    ("nvidia-nemotron-3-nano-30b-a3b-bf16", 6_144),
    # Jamba v0.1: 4 attention layers x 2 x 8 x 128 x 2 B = 16,384
    ("jamba-v0.1", 16_384),
    # Falcon-7B MQA: 32 x 2 x 1 kv head x 64 x 2 B = 8,192 (not 71 heads: 581,632)
    ("falcon-7b", 8_192),
    # seed-examples 1: Llama 2 7B fp16 MHA: 32 x 2 x 32 x 128 x 2 B = 524,288
    ("llama-2-7b-hf", 524_288),
    # seed-examples 4 geometry: 32 x 2 x 8 x 128 x 2 B = 131,072
    ("llama-3.1-8b-instruct", 131_072),
    # seed-examples 6: Qwen2.5-7B 28 x 2 x 4 x 128 x 2 B = 57,344
    ("qwen2.5-7b", 57_344),
    # DeepSeek-R1-Distill-Qwen-14B (Qwen2.5-14B geometry): 48 x 2 x 8 x 128 x 2 B = 196,608
    ("deepseek-r1-distill-qwen-14b", 196_608),
    # gpt-oss-120b: 36 x 2 x 8 x 64 x 2 B = 73,728
    ("gpt-oss-120b", 73_728),
    # Phi-3-mini: 32 x 2 x 32 x 96 x 2 B = 393,216
    ("phi-3-mini-4k-instruct", 393_216),
    # Llama 4 Scout: 48 x 2 x 8 x 128 x 2 B = 196,608 (36 chunked + 12 full)
    ("llama-4-scout-17b-16e-instruct", 196_608),
    # Qwen3.8-2.4T-A95B: 23 full-attention layers x 2 x 4 x 256 x 2 B = 94,208 (69 GDN layers
    # keep a state)
    ("qwen3.8-2.4t-a95b", 94_208),
    # GLM-5.3: 78 MLA layers x 576 x 2 B + 21 'full' indexer layers x 132 B = 92,628
    ("glm-5.3", 92_628),
    # Gemma 4 26B A4B (its config.json): 25 sliding layers x 2 x 8 x 256 x 2 B = 204,800 plus
    # 5 global layers x 2 x num_global_key_value_heads 2 x global_head_dim 512 x 2 B = 20,480
    ("gemma-4-26b-a4b", 25 * 2 * 8 * 256 * 2 + 5 * 2 * 2 * 512 * 2),
    # Gemma 4 31B IT: 50 sliding layers x 2 x 16 x 256 x 2 B = 819,200 plus 10 global layers
    # x 2 x 4 x 512 x 2 B = 81,920
    ("gemma-4-31b-it", 50 * 2 * 16 * 256 * 2 + 10 * 2 * 4 * 512 * 2),
    # MiMo-V2-Flash (its config.json, vLLM mimo_v2.py MiMoV2Attention: K of head_dim 192, V of
    # v_head_dim 128): 9 full layers x 4 KV heads x (192 + 128) x 2 B = 23,040 plus 39 sliding
    # layers x 8 x 320 x 2 B = 199,680
    ("mimo-v2-flash", 9 * 4 * (192 + 128) * 2 + 39 * 8 * (192 + 128) * 2),
    # MiniMax-M3 (its config.json, vLLM models/minimax_m3): 60 layers x 2 x 4 KV heads x 128 x 2 B
    # = 122,880 plus the index key on the 57 sparse layers, 57 x sparse_index_dim 128 x 2 B
    # = 14,592
    ("minimax-m3", 60 * 2 * 4 * 128 * 2 + 57 * 128 * 2),
    # Nemotron 3 Super: 8 '*' layers x 2 x 2 kv x 128 x 2 B = 8,192
    ("nvidia-nemotron-3-super-120b-a12b-bf16", 8_192),
    # Nemotron 3 Ultra: 12 attention layers x 2 x 2 kv x 128 x 2 B = 12,288
    ("nvidia-nemotron-3-ultra-550b-a55b-bf16", 12_288),
    # Kimi-K3: 24 MLA layers x (512 + 64) x 2 B = 27,648 (69 KDA layers keep a state)
    ("kimi-k3", 24 * 576 * 2),
    # LFM2-350M: 6 attention layers x 2 x 8 KV heads x 64 (1024 / 16) x 2 B = 12,288 (10
    # short-convolution layers keep a state)
    ("lfm2-350m", 6 * 2 * 8 * 64 * 2),
]


@pytest.mark.parametrize(("slug", "expected"), PER_TOKEN, ids=[s for s, _ in PER_TOKEN])
def test_per_token_kv_bytes(slug: str, expected: int) -> None:
    assert kv_bytes_per_token(arch(slug), KvCacheDtype.AUTO) == expected


def test_fp8_kv_halves_mla_per_token_bytes() -> None:
    # seed-examples 16: fp8 MLA = 61 x 576 x 1 B = 35,136
    assert kv_bytes_per_token(arch("deepseek-v3"), KvCacheDtype.FP8) == 35_136


def test_fp8_kv_leaves_the_sparse_indexer_key_alone() -> None:
    # The indexer key is fp8 + an fp32 scale whatever --kv-cache-dtype says (vLLM
    # DeepseekV32IndexerCache is uint8): 61 x (576 x 1 B + 132 B) = 43,188, not half of 78,324.
    assert kv_bytes_per_token(arch("deepseek-v3.2"), KvCacheDtype.FP8) == 61 * (576 + 132) == 43_188


# --- layer schedules ---------------------------------------------------------------------------

LAYER_COUNTS = [
    # 64 layers, full when i % 4 == 3: 16 full + 48 Gated DeltaNet
    ("qwen3.5-27b", {LayerKind.FULL_ATTENTION: 16, LayerKind.LINEAR_ATTENTION: 48}),
    ("qwen3.6-27b-nvfp4", {LayerKind.FULL_ATTENTION: 16, LayerKind.LINEAR_ATTENTION: 48}),
    # 48 layers / 4 = 12 full, 36 linear
    (
        "qwen3-next-80b-a3b-thinking",
        {LayerKind.FULL_ATTENTION: 12, LayerKind.LINEAR_ATTENTION: 36},
    ),
    # 60 layers / 4 = 15 full, 45 linear
    ("qwen3.5-397b-a17b", {LayerKind.FULL_ATTENTION: 15, LayerKind.LINEAR_ATTENTION: 45}),
    # 40 layers / 4 = 10 full, 30 linear
    ("qwen3.5-35b-a3b", {LayerKind.FULL_ATTENTION: 10, LayerKind.LINEAR_ATTENTION: 30}),
    # pattern string: 54 M + 10 * + 54 - = 118 blocks
    (
        "nemotron-h-56b-base-8k",
        {LayerKind.MAMBA2: 54, LayerKind.FULL_ATTENTION: 10, LayerKind.NO_CACHE: 54},
    ),
    # pattern string: 23 M + 6 * + 23 E = 52 blocks
    (
        "nvidia-nemotron-3-nano-30b-a3b-bf16",
        {LayerKind.MAMBA2: 23, LayerKind.FULL_ATTENTION: 6, LayerKind.NO_CACHE: 23},
    ),
    # 32 layers, attention when i % 8 == 4: 4 attention + 28 Mamba-1
    ("jamba-v0.1", {LayerKind.FULL_ATTENTION: 4, LayerKind.MAMBA: 28}),
    # Gemma 3: global when (i + 1) % 6 == 0: 62 layers -> 10 full + 52 sliding
    ("gemma-3-27b-it", {LayerKind.FULL_ATTENTION: 10, LayerKind.SLIDING_ATTENTION: 52}),
    # 34 layers -> 5 full + 29 sliding
    ("gemma-3-4b-it", {LayerKind.FULL_ATTENTION: 5, LayerKind.SLIDING_ATTENTION: 29}),
    # Gemma 2: alternating 1:1
    ("gemma-2-9b", {LayerKind.FULL_ATTENTION: 21, LayerKind.SLIDING_ATTENTION: 21}),
    # gpt-oss-20b: 24 layers alternating
    ("gpt-oss-20b", {LayerKind.FULL_ATTENTION: 12, LayerKind.SLIDING_ATTENTION: 12}),
    # Llama 4: full when i % 4 == 3: 48 layers -> 12 full + 36 chunked
    (
        "llama-4-maverick-17b-128e-instruct",
        {LayerKind.FULL_ATTENTION: 12, LayerKind.CHUNKED_ATTENTION: 36},
    ),
    # Mistral 7B v0.1 and Phi-3-mini-4k: the window applies to every layer
    ("mistral-7b-v0.1", {LayerKind.SLIDING_ATTENTION: 32}),
    ("phi-3-mini-4k-instruct", {LayerKind.SLIDING_ATTENTION: 32}),
    # Phi-3.5 / Phi-4-mini: window 262,144 >= 131,072 positions, so full attention
    ("phi-3.5-mini-instruct", {LayerKind.FULL_ATTENTION: 32}),
    ("phi-4-mini-instruct", {LayerKind.FULL_ATTENTION: 32}),
    # MiMo-V2-Flash hybrid_layer_pattern: 9 zeros (full: 0, 5, 11, ..., 47) and 39 ones (window
    # sliding_window_size 128)
    ("mimo-v2-flash", {LayerKind.FULL_ATTENTION: 9, LayerKind.SLIDING_ATTENTION: 39}),
    # pattern string: 40 M + 8 * + 40 E = 88 blocks
    (
        "nvidia-nemotron-3-super-120b-a12b-bf16",
        {LayerKind.MAMBA2: 40, LayerKind.FULL_ATTENTION: 8, LayerKind.NO_CACHE: 40},
    ),
    # layers_block_type: 48 mamba + 12 attention + 48 moe = 108 blocks
    (
        "nvidia-nemotron-3-ultra-550b-a55b-bf16",
        {LayerKind.MAMBA2: 48, LayerKind.FULL_ATTENTION: 12, LayerKind.NO_CACHE: 48},
    ),
]


@pytest.mark.parametrize(("slug", "expected"), LAYER_COUNTS, ids=[s for s, _ in LAYER_COUNTS])
def test_layer_counts_by_kind(slug: str, expected: dict[LayerKind, int]) -> None:
    assert dict(kind_counts(slug)) == expected


def test_layer_positions_follow_each_models_rule() -> None:
    qwen = arch("qwen3.5-27b").layers
    assert [i for i, layer in enumerate(qwen) if layer.kind is LayerKind.FULL_ATTENTION] == list(
        range(3, 64, 4)
    )
    gemma3 = arch("gemma-3-27b-it").layers
    assert [i for i, layer in enumerate(gemma3) if layer.kind is LayerKind.FULL_ATTENTION] == [
        5,
        11,
        17,
        23,
        29,
        35,
        41,
        47,
        53,
        59,
    ]
    gemma2 = arch("gemma-2-27b").layers
    assert all(
        (layer.kind is LayerKind.SLIDING_ATTENTION) == (i % 2 == 0)
        for i, layer in enumerate(gemma2)
    )
    oss = arch("gpt-oss-120b").layers
    assert oss[0].kind is LayerKind.SLIDING_ATTENTION
    assert oss[1].kind is LayerKind.FULL_ATTENTION
    jamba = arch("jamba-v0.1").layers
    assert [i for i, layer in enumerate(jamba) if layer.kind is LayerKind.FULL_ATTENTION] == [
        4,
        12,
        20,
        28,
    ]
    llama4 = arch("llama-4-scout-17b-16e-instruct").layers
    assert [i for i, layer in enumerate(llama4) if layer.kind is LayerKind.FULL_ATTENTION] == list(
        range(3, 48, 4)
    )


def test_windows_and_chunks() -> None:
    def window(slug: str) -> int:
        spec = model(slug)["architecture"]["layer_specs"]["sliding_attention"]
        return int(spec["sliding_window"])

    assert window("mistral-7b-v0.1") == 4096
    assert window("phi-3-mini-4k-instruct") == 2047
    assert window("gemma-2-27b") == 4096
    assert window("gemma-3-27b-it") == 1024
    assert window("gpt-oss-20b") == 128
    assert window("mimo-v2-flash") == 128  # sliding_window_size, not attention_chunk_size
    chunked = model("llama-4-scout-17b-16e-instruct")["architecture"]["layer_specs"]
    assert chunked["chunked_attention"]["attention_chunk_size"] == 8192


# --- recurrent state ---------------------------------------------------------------------------


def test_state_dtypes() -> None:
    # vLLM >= 0.17 reads mamba_ssm_dtype float32 from Qwen3.5 configs (PR #34489); NemotronH
    # defaults to float32 from v0.20 (PR #39032); Qwen3-Next keeps the model dtype.
    for slug in ("qwen3.5-27b", "qwen3.6-27b-nvfp4", "qwen3.5-122b-a10b", "qwen3.6-35b-a3b"):
        assert arch(slug).state_dtype == "float32"
    for slug in ("nemotron-h-56b-base-8k", "nvidia-nemotron-3-nano-30b-a3b-bf16"):
        assert arch(slug).state_dtype == "float32"
    assert arch("qwen3-next-80b-a3b-thinking").state_dtype is None
    assert arch("jamba-v0.1").state_dtype is None


STATE_BYTES = [
    # docs/engines/vllm.md#recurrent-state (the worked state pages), TP1.
    # Qwen3.5-27B GDN: conv 3 x (2 x 16 x 128 + 48 x 128) = 30,720 x 2 B = 61,440;
    # ssm 48 x 128 x 128 = 786,432 x 4 B (fp32) = 3,145,728 -> 3,207,168
    ("qwen3.5-27b", LayerKind.LINEAR_ATTENTION, 3_207_168),
    # Qwen3-Next GDN, bf16 state: conv 3 x (2 x 16 x 128 + 32 x 128) x 2 B = 49,152;
    # ssm 32 x 128 x 128 x 2 B = 1,048,576 -> 1,097,728
    ("qwen3-next-80b-a3b-thinking", LayerKind.LINEAR_ATTENTION, 1_097_728),
    # Nemotron-H-56B Mamba2: conv 3 x (256 x 64 + 2 x 8 x 256) = 61,440 x 2 B = 122,880;
    # ssm 256 x 64 x 256 = 4,194,304 x 4 B = 16,777,216 -> 16,900,096
    ("nemotron-h-56b-base-8k", LayerKind.MAMBA2, 16_900_096),
    # Jamba Mamba-1, bf16: conv 8192 x 3 x 2 B = 49,152; ssm 8192 x 16 x 2 B = 262,144 -> 311,296
    ("jamba-v0.1", LayerKind.MAMBA, 311_296),
]


@pytest.mark.parametrize(
    ("slug", "kind", "expected"), STATE_BYTES, ids=[s for s, _, _ in STATE_BYTES]
)
def test_state_bytes_per_layer(slug: str, kind: LayerKind, expected: int) -> None:
    a = arch(slug)
    layer = next(layer for layer in a.layers if layer.kind is kind)
    assert isinstance(layer, GatedDeltaNet | Mamba2 | Mamba1)
    conv_b, ssm_b = state_dtype_bytes(a)
    assert state_bytes_per_sequence(layer, conv_b, ssm_b) == expected


# --- weights -----------------------------------------------------------------------------------


def test_checkpoint_sizes_from_safetensors_indexes() -> None:
    # Llama-3.1-8B(-Instruct) index total_size = 8,030,261,248 params x 2 B
    # (docs/catalog-sources.md#checkpoint-sizes)
    assert arch("llama-3.1-8b").weight_bytes == 16_060_522_496 == 8_030_261_248 * 2
    assert arch("llama-3.1-8b-instruct").weight_bytes == 16_060_522_496
    # Qwen2.5-14B family index total = 14,770,033,664 x 2 B
    # (docs/catalog-sources.md#checkpoint-sizes)
    assert arch("deepseek-r1-distill-qwen-14b").weight_bytes == 29_540_067_328
    assert arch("qwen2.5-14b").weight_bytes == 29_540_067_328 == 14_770_033_664 * 2


def test_w8a8_weights_keep_embeddings_and_lm_head_in_bf16() -> None:
    # 70,553,706,496 params x 1 B + 2 x 128,256 x 8,192 (one extra byte each) = 72,655,052,800 B
    a = arch("llama-3.1-70b-instruct-w8a8")
    assert a.weight_format == "int8"
    assert a.weight_bytes == 70_553_706_496 + 2 * 128_256 * 8_192 == 72_655_052_800
    # vLLM PR #12569 logged 67.7229 GiB loaded; the checkpoint is 67.665 GiB, within 0.06 GiB.
    assert 0 < 67.7229 - a.weight_bytes / GIB < 0.06


def test_fp8_checkpoint_weight_bytes() -> None:
    # DeepSeek-V3: 671,026,404,352 + 2 x 129,280 x 7,168 (bf16 embed + lm_head extra byte)
    # + 58 MoE layers x 256 x 7,168 (bf16 router extra byte) = 672,986,192,896
    a = arch("deepseek-v3")
    assert a.weight_format == "fp8"
    assert a.weight_bytes == 671_026_404_352 + 2 * 129_280 * 7_168 + 58 * 256 * 7_168
    assert a.weight_bytes == 672_986_192_896
    # Qwen3-235B-A22B-FP8: 235,093,634,560 + 2 x 151,936 x 4,096 + 94 x 128 x 4,096
    # = 236,387,577,344 B (the FP8 rule of docs/catalog-sources.md#checkpoint-sizes)
    assert arch("qwen3-235b-a22b-fp8").weight_bytes == 236_387_577_344


def test_gpt_oss_weights_are_mxfp4_experts_plus_bf16_rest() -> None:
    # 36 layers x 128 experts x (2880 x 5760 + 2880 x 2880) = 114,661,785,600 expert weights
    # at 17/32 B (4.25 bits) = 60,914,073,600 B; the other
    # 116,829,156,672 - 114,661,785,600 = 2,167,371,072 params x 2 B = 4,334,742,144 B
    a = arch("gpt-oss-120b")
    assert a.num_parameters == 116_829_156_672
    experts = 36 * 128 * (2880 * 5760 + 2880 * 2880)
    assert experts == 114_661_785_600
    assert a.weight_bytes == experts * 17 // 32 + (116_829_156_672 - experts) * 2
    assert a.weight_bytes == 65_248_815_744


def test_derived_parameter_counts_match_published_sizes() -> None:
    # Within 1% of the publishers' totals (text model only where a vision tower exists).
    published = {
        "gpt-oss-120b": 116.8e9,  # OpenAI model card
        "gpt-oss-20b": 20.9e9,
        "gemma-2-9b": 9.24e9,
        "nemotron-h-56b-base-8k": 56e9,
        "nvidia-nemotron-3-nano-30b-a3b-bf16": 31.6e9,
        "qwen3-next-80b-a3b-thinking": 80e9,
        "phi-3-mini-4k-instruct": 3_821_079_552,  # keras-hub preset, exact
        "qwen3.8-2.4t-a95b": 2.4e12,  # the checkpoint's name, 2.4T (2,419,804,697,984)
        "mimo-v2-flash": 309e9,  # XiaomiMiMo/MiMo-V2-Flash README.md, "309B total parameters"
        # MiniMax M3 release: "a total parameter count of 428 billion" (multimodal checkpoint,
        # vision tower included; kvplan counts the text trunk: 426.17B, -0.43 %)
        "minimax-m3": 428e9,
        # research.nvidia.com/labs/nemotron/Nemotron-3-Super: "120B total parameter"
        "nvidia-nemotron-3-super-120b-a12b-bf16": 120e9,
        "nvidia-nemotron-3-ultra-550b-a55b-bf16": 550e9,  # the checkpoint's name
        # aiconfigurator sdk/models/kimi_k3.py "2.8T" (text model 2,779,484,476,000: -0.7 %)
        "kimi-k3": 2.8e12,
        "lfm2-350m": 354_483_968,  # LiquidAI/LFM2-350M model card, exact
    }
    for slug, total in published.items():
        params = arch(slug).num_parameters
        assert params is not None
        assert abs(params - total) / total < 0.01, slug
    assert arch("phi-3-mini-4k-instruct").num_parameters == 3_821_079_552
    assert arch("lfm2-350m").num_parameters == 354_483_968


# --- GPUs --------------------------------------------------------------------------------------


def test_every_gpu_has_memory_and_its_source() -> None:
    for g in gpus():
        assert isinstance(g["memory_bytes"], int)
        assert g["memory_bytes"] > 0, g["slug"]
        assert g["memory_source"], g["slug"]
        assert g["max_gpus_per_node"] >= 1
        # The runtime total never exceeds what nvidia-smi shows.
        if g["nvidia_smi_memory_mib"] is not None:
            assert g["memory_bytes"] <= g["nvidia_smi_memory_mib"] * 2**20, g["slug"]


@pytest.mark.parametrize(
    ("slug", "gib"),
    [
        # docs/catalog-sources.md#gpu-memory-as-torch-reports-it
        ("h100-sxm-80gb", 79.21),  # 8xH100 HBM3 job logs
        ("h200-141gb", 139.80),  # 8xH200 job logs
        ("rtx-3090", 23.58),  # vllm#10517 "total_gpu_memory=23.58GiB"
        ("b200", 178.36),
        ("a100-sxm-80gb", 79.15),
        ("l40s", 44.39),
        ("l4", 22.05),
        ("rtx-4090", 23.55),  # vllm#13061: (13.95 + 0.25 + 0.19 + 8.69) / 0.98
        ("mi325x", 255.98),  # vLLM issue reports "AMD MI325X x 8 (255.98 GiB HBM each)"
        ("mi355x", 287.98),  # HIP OOM lines "GPU 0 has a total capacity of 287.98 GiB"
        ("gb10", 119.70),  # CUDA OOM line on a DGX Spark: "total capacity of 119.70 GiB"
    ],
)
def test_gpu_memory_is_the_torch_gib_figure_in_bytes(slug: str, gib: float) -> None:
    assert gpu(slug)["memory_bytes"] == round(gib * 2**30)


def test_torch_totals_by_hand() -> None:
    # 79.21 x 2^30 = 85,051,089,879.04 -> 85,051,089,879
    assert gpu("h100-sxm-80gb")["memory_bytes"] == 85_051_089_879
    # 139.80 x 2^30 = 150,109,106,995.2 -> 150,109,106,995
    assert gpu("h200-141gb")["memory_bytes"] == 150_109_106_995
    # 23.58 x 2^30 = 25,318,832,209.92 -> 25,318,832,210
    assert gpu("rtx-3090")["memory_bytes"] == 25_318_832_210
    assert gpu("rtx-3090")["nvidia_smi_memory_mib"] == 24_576
    # 287.98 x 2^30 = 309,216,170,475.52 -> 309,216,170,476
    assert gpu("mi355x")["memory_bytes"] == 309_216_170_476
    # 119.70 x 2^30 = 128,526,896,332.8 -> 128,526,896,333; the same log allows 107.73 GiB at the
    # default utilization 0.9 (119.70 x 0.9 = 107.73), so 119.70 is the total vLLM multiplies.
    assert gpu("gb10")["memory_bytes"] == 128_526_896_333


def test_gpus_without_a_runtime_reading_are_left_out() -> None:
    slugs = {g["slug"] for g in gpus()}
    for slug in ("a100-pcie-80gb", "gaudi-3", "tpu-v5e", "tpu-v6e"):
        assert slug not in slugs


def test_nvidia_smi_fallbacks_are_labelled() -> None:
    for slug in (
        "h100-pcie-80gb",
        "h100-nvl-94gb",
        "b300",
        "gb200",
        "rtx-6000-ada",
        "a10",
        "h20",
        "l40",
        "rtx-5090",
    ):
        g = gpu(slug)
        assert g["memory_bytes"] == g["nvidia_smi_memory_mib"] * 2**20
        assert g["memory_source"].startswith("nvidia-smi total")
