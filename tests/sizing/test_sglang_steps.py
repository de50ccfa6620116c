"""Each step of SGLang's hybrid pools on its own, against SGLang's rules worked by hand.

Sources (sgl-project/sglang, released wheels 0.4.9 ... 0.5.23, cited next to each number):
  server_args   = python/sglang/srt/server_args.py (defaults, model-specific adjustments)
  mamba_utils   = python/sglang/srt/configs/mamba_utils.py (state shapes and dtypes)
  configurator  = python/sglang/srt/mem_cache/kv_cache_configurator.py `handle_max_mamba_cache`,
                  `_calculate_mamba_ratio` (model_runner.py and its mixin before 0.5.16)
  pools         = python/sglang/srt/model_executor/pool_configurator.py
                  `HybridSWAPoolConfigurator` (0.5.11+), `validate_swa_pool_size`
The release each rule arrived in is in service/sizing/engines/calibration.py; the end-to-end
numbers of the same models are in test_sglang_hybrid.py.
"""

from __future__ import annotations

import pytest

from service.sizing.engines import calibration as cal
from service.sizing.engines.common import EngineOptions
from service.sizing.engines.parallel import pipeline_stages
from service.sizing.engines.sglang import (
    MambaSplit,
    SwaSplit,
    _swa_pool_by_name,
    _swa_problem,
    _tightest_stage_split,
    _without_swa_pool,
    check_mamba_support,
    mamba_batch,
    mamba_radix_cache,
    mamba_ssm_dtype,
    mamba_state,
    mamba_tokens,
    sglang_release,
)
from service.sizing.errors import SizingError
from service.sizing.model.architecture import (
    ChunkedLocalAttention,
    FullAttention,
    GatedDeltaNet,
    Mamba1,
    Mamba2,
    ModelArchitecture,
    SlidingWindowAttention,
)
from service.sizing.units import GiB

# Qwen3.5 / Qwen3-Next geometry (as in test_sglang_hybrid.py): 16 key heads, 32 value heads,
# 128 x 128, conv kernel 4; every 4th layer full attention with 2 KV heads of 256.
GDN = GatedDeltaNet(
    num_key_heads=16, num_value_heads=32, key_head_dim=128, value_head_dim=128, conv_kernel=4
)
QWEN35 = ModelArchitecture(
    layers=(GDN, GDN, GDN, FullAttention(2, 256)) * 10, num_attention_heads=16
)
MAMBA2 = Mamba2(num_heads=128, head_dim=64, state_size=128, n_groups=8, conv_kernel=4)
SLIDING = SlidingWindowAttention(num_kv_heads=8, head_dim=64, sliding_window=128)
FULL = FullAttention(num_kv_heads=8, head_dim=64)  # 8 x (64 + 64) x 2 B = 2,048 B per token


# --- support checks -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("layers", "version", "arrived"),
    [
        ((GDN, FULL), "0.5.1", "0.5.2"),  # Qwen3-Next: HybridLinearKVPool, MambaPool
        ((MAMBA2, FULL), "0.5.2", "0.5.3"),  # Falcon-H1
        ((MAMBA2,), "0.5.19", "0.5.20"),  # attention-free models/mamba2.py
    ],
)
def test_recurrent_models_are_refused_before_their_release(
    layers: tuple[GatedDeltaNet | Mamba2 | FullAttention, ...], version: str, arrived: str
) -> None:
    state = [g for g in layers if not isinstance(g, FullAttention)]
    attention = [g for g in layers if isinstance(g, FullAttention)]
    with pytest.raises(SizingError, match=arrived) as refused:
        check_mamba_support(sglang_release(version), state, attention)
    assert refused.value.field == "engine_version"
    check_mamba_support(sglang_release(arrived), state, attention)  # the release that runs it


def test_mamba_1_beside_attention_is_refused_in_every_release() -> None:
    # SGLang's models/ (0.5.23) run Mamba-1 only attention-free (mamba.py, falcon_mamba.py)
    mamba1 = Mamba1(intermediate_size=8192, state_size=16, conv_kernel=4)
    with pytest.raises(SizingError, match="Jamba") as refused:
        check_mamba_support(sglang_release("0.5.23"), [mamba1], [FULL])
    assert refused.value.field == "engine"


# --- radix cache ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("layer", "version", "asked", "radix", "turned_off"),
    [
        # server_args: the radix cache is forced off for GDN models before 0.5.4 ...
        (GDN, "0.5.3", None, False, False),
        (GDN, "0.5.4", None, True, False),
        # ... and for Mamba-2 models before 0.5.7, even when asked for (a note says so)
        (MAMBA2, "0.5.6", True, False, True),
        (MAMBA2, "0.5.7", True, True, False),
        # --disable-radix-cache (enable_prefix_caching False) wins in every release
        (GDN, "0.5.23", False, False, False),
    ],
)
def test_radix_cache_by_model_kind_and_release(
    layer: GatedDeltaNet | Mamba2, version: str, asked: bool | None, radix: bool, turned_off: bool
) -> None:
    on, notes = mamba_radix_cache(sglang_release(version), [layer], asked)
    assert on is radix
    assert notes == (
        (f"SGLang {version} turns the radix cache off for this model",) if turned_off else ()
    )


# --- SSM dtype ------------------------------------------------------------------------------


def test_ssm_dtype_is_float32_unless_given_or_read_from_the_config_from_0_5_10() -> None:
    from_config = ModelArchitecture(
        layers=QWEN35.layers, num_attention_heads=16, state_dtype="bf16"
    )
    # server_args ServerArgs.mamba_ssm_dtype defaults to float32 (cal.SGLANG_MAMBA_SSM_DTYPE)
    assert mamba_ssm_dtype(sglang_release("0.5.23"), QWEN35, None) == cal.SGLANG_MAMBA_SSM_DTYPE
    # mamba_utils mamba2_state_dtype reads the config's mamba_ssm_dtype from 0.5.10
    assert mamba_ssm_dtype(sglang_release("0.5.9"), from_config, None) == "float32"
    assert mamba_ssm_dtype(sglang_release("0.5.10"), from_config, None) == "bfloat16"
    # --mamba-ssm-dtype wins over both
    assert mamba_ssm_dtype(sglang_release("0.5.10"), from_config, "float16") == "float16"


# --- state per request ----------------------------------------------------------------------


def test_one_request_state_over_30_gdn_layers() -> None:
    state = mamba_state(
        sglang_release("0.5.23"),
        stages=[QWEN35],
        state_layers=[GDN] * 30,
        tensor_parallel_size=1,
        ssm_element_bytes=4,
    )
    # mamba_utils Mamba2StateShape (GDN: heads = value heads, groups = key heads):
    # conv 3 x (32 x 128 + 2 x 16 x 128) = 24,576 x 2 B (bf16) = 49,152 B per layer;
    # ssm 32 x 128 x 128 = 524,288 x 4 B (float32) = 2,097,152 B per layer; x 30 layers
    assert state.conv_bytes == 30 * 49_152 == 1_474_560
    assert state.ssm_bytes == 30 * 2_097_152 == 62_914_560
    assert state.per_request == 64_389_120


@pytest.mark.parametrize(
    ("version", "per_request"), [("0.5.16", 64_389_120), ("0.5.17", 32_194_560)]
)
def test_pipeline_stages_charge_the_largest_stage_share_from_0_5_17(
    version: str, per_request: int
) -> None:
    # configurator _handle_max_mamba_cache (0.5.17+): two stages of 20 layers hold 15 GDN
    # layers each, so a slot costs 15 / 30 of the model's 64,389,120 B = 32,194,560 B
    state = mamba_state(
        sglang_release(version),
        stages=pipeline_stages(QWEN35, 2),
        state_layers=[GDN] * 30,
        tensor_parallel_size=1,
        ssm_element_bytes=4,
    )
    assert state.per_request == per_request


# --- token count and the request pool ------------------------------------------------------


def test_tokens_are_what_the_state_leaves_over_the_attention_bytes() -> None:
    # (40 GiB - 315 x 64,389,120 B) = 22,667,100,160 B // (10 layers x 2 x 512 x 2 B = 20,480)
    assert mamba_tokens(22_667_100_160, [20_480], True, 8192) == 1_106_792
    # pipeline stages: the stage with the most attention bytes per token sets the count
    assert mamba_tokens(22_667_100_160, [10_240, 20_480, 0], True, 8192) == 1_106_792
    # pools DefaultPoolConfigurator (0.5.20+): an attention-free model's pool is one context
    assert mamba_tokens(22_667_100_160, [0], False, 8192) == 8192


@pytest.mark.parametrize(
    ("version", "slots_per_request", "running"),
    [
        # configurator _calculate_mamba_ratio: 3 slots per request with the radix cache; 0.5.14+
        # picks extra_buffer under the overlap schedule: 3 + 2 = 5. 314 // 5 = 62
        ("0.5.23", 5, 62),
        # 314 // 3 = 104
        ("0.5.10", 3, 104),
    ],
)
def test_state_slots_cap_the_running_requests(
    version: str, slots_per_request: int, running: int
) -> None:
    split = MambaSplit(slots=314, state_bytes=0, rest_bytes=0, by_ratio=True)
    batch = mamba_batch(
        sglang_release(version),
        split,
        profiled_tokens=1_106_792,
        radix_cache=True,
        page_size=1,
        max_model_len=8192,
        requested=None,
    )
    assert (batch.tokens, batch.slots_per_request, batch.running) == (
        1_106_792,
        slots_per_request,
        running,
    )
    # the token pool holds 1,106,792 // 8,192 = 135 sequences; the slots allow fewer
    assert batch.sequences == running


def test_tokens_are_rounded_down_to_whole_pages() -> None:
    split = MambaSplit(slots=512, state_bytes=0, rest_bytes=0, by_ratio=False)
    batch = mamba_batch(
        sglang_release("0.5.23"),
        split,
        profiled_tokens=1_106_792,
        radix_cache=False,
        page_size=64,
        max_model_len=8192,
        requested=None,
    )
    # 1,106,792 // 64 = 17,293 pages = 1,106,752 tokens; 17,293 // (8,192 / 64 = 128) = 135
    assert batch.tokens == 1_106_752
    assert batch.sequences == 135


# --- sliding-window pools -------------------------------------------------------------------


def test_pipeline_stages_keep_the_split_with_the_fewest_full_tokens() -> None:
    arch = ModelArchitecture(layers=(SLIDING, FULL, SLIDING, FULL, SLIDING), num_attention_heads=8)
    # vLLM's get_pp_indices split (parallel.py): stages of 3 and 2 layers, (S, F, S) and (F, S)
    stages = pipeline_stages(arch, 2)
    best = _tightest_stage_split(
        sglang_release("0.5.23"),
        stages=stages,
        pool_bytes=10 * GiB,
        kv_element_bytes=2,
        tensor_parallel_size=1,
        page_size=1,
        ratio=0.8,
    )
    # pools HybridSWAPoolConfigurator: full = int(rest // (F n_f + r S n_s)):
    # stage 0: 10,737,418,240 // (2,048 + 0.8 x 4,096 = 5,324.8) = 2,016,492
    # stage 1: 10,737,418,240 // (2,048 + 0.8 x 2,048 = 3,686.4) = 2,912,711; MIN is stage 0
    assert best.split.full_tokens == 2_016_492
    # swa = int(2,016,492 x 0.8) = int(1,613,193.6)
    assert best.split.swa_tokens == 1_613_193
    assert (len(best.full), len(best.windowed)) == (1, 2)


def test_a_swa_pool_no_larger_than_window_plus_page_is_refused_from_0_5_20() -> None:
    split = SwaSplit(profiled_tokens=1000, full_tokens=1000, swa_tokens=129)
    # pools validate_swa_pool_size (0.5.20+): the SWA pool must exceed window 128 + page 1
    refused = _swa_problem(
        sglang_release("0.5.20"), split, window=128, page_size=1, sequences=1, max_model_len=512
    )
    assert refused is not None
    assert refused.startswith("SGLang 0.5.20 refuses to start")
    # before, SGLang starts; one sequence runs
    started = _swa_problem(
        sglang_release("0.5.19"), split, window=128, page_size=1, sequences=1, max_model_len=512
    )
    assert started is None


@pytest.mark.parametrize(
    ("layers", "name", "version", "options", "says"),
    [
        (
            (SLIDING, FULL),
            "gpt-oss-120b",
            "0.5.23",
            {"disable_hybrid_kv_cache_manager": True},
            "--disable-hybrid-swa-memory",
        ),
        ((SLIDING, FULL), "gpt-oss-120b", "0.4.9", {}, "has no SWA pool (0.4.9.post3+)"),
        # server_args: Llama 4's chunked layers join the SWA pool from 0.5.8
        (
            (ChunkedLocalAttention(8, 128, 8192), FULL),
            "llama-4-scout",
            "0.5.7",
            {},
            "chunked-attention layers",
        ),
        # Mistral v0.1: every layer windowed
        ((SLIDING,), "mistral-7b-v0.1", "0.5.23", {}, "every layer is windowed"),
        # server_args _handle_model_specific_adjustments (0.5.1+): Gemma 2/3 turn it off
        ((SLIDING, FULL), "gemma-2-9b", "0.5.1", {}, "out of its SWA pool"),
    ],
)
def test_why_a_windowed_model_gets_no_swa_pool(
    layers: tuple[SlidingWindowAttention | ChunkedLocalAttention | FullAttention, ...],
    name: str,
    version: str,
    options: dict[str, bool],
    says: str,
) -> None:
    arch = ModelArchitecture(layers=layers, num_attention_heads=8, name=name)
    windowed = [g for g in layers if not isinstance(g, FullAttention)]
    release = sglang_release(version)
    by_name = _swa_pool_by_name(name, release)
    reason = _without_swa_pool(arch, release, EngineOptions(**options), windowed, by_name)
    assert reason is not None
    assert says in reason


def test_gpt_oss_gets_the_swa_pool() -> None:
    arch = ModelArchitecture(layers=(SLIDING, FULL), num_attention_heads=8, name="gpt-oss-120b")
    assert (
        _without_swa_pool(arch, sglang_release("0.5.23"), EngineOptions(), [SLIDING], True) is None
    )
