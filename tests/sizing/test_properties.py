"""Properties the sizing arithmetic must keep for every model, not only the worked examples.

Sources for the rules checked here:
  seed    = ../shared/design/seed-examples.md ("linear with context and with concurrency";
            "FP8 KV halves it"; sliding windows cap it)
  design  = ../shared/design/engine-memory.md (TP replication and MLA §1.4, the log lines §1.5)
  docs/engines/vllm.md#log-lines  how each vLLM release prints tokens and concurrency
(../shared/ is the shared reference folder next to the repository.)
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from service.sizing.capacity import Gpu, Parallelism, Workload, compute_capacity
from service.sizing.engines.common import Engine, EngineOptions
from service.sizing.engines.kv import kv_bytes_per_sequence, kv_bytes_per_token, sequence_breakdown
from service.sizing.engines.vllm import parse_vllm_version, vllm_layout, vllm_release, vllm_report
from service.sizing.errors import SizingError
from service.sizing.model.architecture import (
    ChunkedLocalAttention,
    FullAttention,
    GatedDeltaNet,
    Layer,
    Mamba1,
    Mamba2,
    ModelArchitecture,
    MultiHeadLatentAttention,
    SlidingWindowAttention,
)
from service.sizing.model.dtypes import FloatDtype, KvCacheDtype
from service.sizing.planning.planner import PlanRequest, plan
from service.sizing.units import GiB, cdiv
from tests.sizing.models import LLAMA_31_8B as LLAMA_LIKE

FAST = settings(max_examples=40, deadline=None)
SLOW = settings(max_examples=15, deadline=None)

kv_heads = st.sampled_from([1, 2, 4, 8, 16, 32])
head_dims = st.sampled_from([64, 80, 96, 128, 192, 256])
layer_counts = st.integers(min_value=1, max_value=96)
contexts = st.integers(min_value=1, max_value=1 << 21)
attention_dtypes = st.sampled_from(
    [KvCacheDtype(name) for name in ("auto", "bfloat16", "float16", "float32", "fp8", "fp8_e5m2")]
)
VLLM_VERSIONS = ["0.6.4", "0.8.5", "0.9.2", "0.11.0", "0.20.0", "0.21.0", "0.28.0", "0.33.0"]


def model(layers: tuple[Layer, ...], dtype: str = "bfloat16") -> ModelArchitecture:
    return ModelArchitecture(layers=layers, num_attention_heads=64, dtype=dtype, weight_bytes=GiB)


full_layers = st.builds(
    FullAttention,
    num_kv_heads=kv_heads,
    head_dim=head_dims,
    v_head_dim=st.none() | head_dims,
)
mla_layers = st.builds(
    MultiHeadLatentAttention,
    kv_lora_rank=st.sampled_from([256, 512, 1024]),
    qk_rope_head_dim=st.sampled_from([32, 64, 128]),
)
state_layers = st.one_of(
    st.builds(
        GatedDeltaNet,
        num_key_heads=st.sampled_from([8, 16]),
        num_value_heads=st.sampled_from([16, 32, 48]),
        key_head_dim=st.just(128),
        value_head_dim=st.just(128),
        conv_kernel=st.just(4),
    ),
    st.builds(
        Mamba2,
        num_heads=st.sampled_from([64, 128, 256]),
        head_dim=st.just(64),
        state_size=st.sampled_from([64, 128, 256]),
        n_groups=st.sampled_from([1, 8]),
        conv_kernel=st.just(4),
    ),
    st.builds(
        Mamba1,
        intermediate_size=st.sampled_from([4096, 8192]),
        state_size=st.just(16),
        conv_kernel=st.just(4),
    ),
)


# --- per-sequence bytes against context -----------------------------------------------------


@FAST
@given(layer=full_layers, count=layer_counts, dtype=attention_dtypes, n=contexts)
def test_full_attention_sequence_bytes_are_linear_in_context(
    layer: FullAttention, count: int, dtype: str, n: int
) -> None:
    arch = model((layer,) * count)
    # seed: "it grows linearly with context"
    assert kv_bytes_per_sequence(arch, dtype, n) == n * kv_bytes_per_token(arch, dtype)


@FAST
@given(layer=mla_layers, count=layer_counts, dtype=attention_dtypes, n=contexts)
def test_mla_sequence_bytes_are_linear_in_context(
    layer: MultiHeadLatentAttention, count: int, dtype: str, n: int
) -> None:
    arch = model((layer,) * count)
    per_token = kv_bytes_per_token(arch, dtype)
    assert kv_bytes_per_sequence(arch, dtype, n) == n * per_token
    # design §1.3: (kv_lora_rank + qk_rope_head_dim) x bytes, no factor 2
    element = {"auto": 2, "bfloat16": 2, "float16": 2, "float32": 4}.get(dtype, 1)
    assert per_token == count * (layer.kv_lora_rank + layer.qk_rope_head_dim) * element


@FAST
@given(
    heads=kv_heads,
    dim=head_dims,
    window=st.integers(min_value=1, max_value=32_768),
    sliding=layer_counts,
    full=st.integers(min_value=0, max_value=32),
    n=contexts,
)
def test_sliding_layers_stop_growing_at_the_window(
    heads: int, dim: int, window: int, sliding: int, full: int, n: int
) -> None:
    sw = SlidingWindowAttention(num_kv_heads=heads, head_dim=dim, sliding_window=window)
    only_sliding = model((sw,) * sliding)
    per_layer = 2 * heads * dim * 2  # K and V, bf16
    # design §1.3: a sliding layer keeps at most `sliding_window` tokens
    assert kv_bytes_per_sequence(only_sliding, KvCacheDtype.AUTO, n) == sliding * per_layer * min(
        n, window
    )
    if n >= window:
        assert kv_bytes_per_sequence(only_sliding, KvCacheDtype.AUTO, n) == kv_bytes_per_sequence(
            only_sliding, KvCacheDtype.AUTO, window
        )
    # with full layers beside them, only the full layers keep growing
    mixed = model((sw,) * sliding + (FullAttention(heads, dim),) * full)
    assert kv_bytes_per_sequence(mixed, KvCacheDtype.AUTO, n) == (
        sliding * per_layer * min(n, window) + full * per_layer * n
    )


@FAST
@given(
    heads=kv_heads,
    dim=head_dims,
    chunk=st.integers(min_value=1, max_value=16_384),
    count=layer_counts,
    n=contexts,
    more=st.integers(min_value=0, max_value=1 << 20),
)
def test_chunked_layers_are_flat_past_the_chunk(
    heads: int, dim: int, chunk: int, count: int, n: int, more: int
) -> None:
    layer = ChunkedLocalAttention(num_kv_heads=heads, head_dim=dim, attention_chunk_size=chunk)
    arch = model((layer,) * count)
    at_chunk = kv_bytes_per_sequence(arch, KvCacheDtype.AUTO, chunk)
    # design §1.3: a chunked-local layer keeps at most `attention_chunk_size` tokens
    assert kv_bytes_per_sequence(arch, KvCacheDtype.AUTO, chunk + more) == at_chunk
    if n <= chunk:
        assert kv_bytes_per_sequence(arch, KvCacheDtype.AUTO, n) == n * kv_bytes_per_token(
            arch, KvCacheDtype.AUTO
        )


# --- per-request blocks against concurrency ---------------------------------------------------


@FAST
@given(
    layer=full_layers,
    count=layer_counts,
    m=st.integers(min_value=1, max_value=262_144),
    k=st.integers(min_value=1, max_value=500),
    version=st.sampled_from(["0.9.2", "0.11.0", "0.21.0", "0.33.0"]),
)
def test_vllm_blocks_needed_are_linear_in_concurrency(
    layer: FullAttention, count: int, m: int, k: int, version: str
) -> None:
    behaviour = vllm_release(parse_vllm_version(version))
    lay = vllm_layout(
        model((layer,) * count),
        release=behaviour,
        kv_element_bytes=2,
        conv_element_bytes=2,
        ssm_element_bytes=2,
        tensor_parallel_size=1,
        pipeline_parallel_size=1,
        max_model_len=m,
        block_size=16,
        block_size_given=False,
        max_num_batched_tokens=8192,
        prefix_caching=True,
        hybrid_manager=True,
    )
    # seed: "linearly with concurrency": k sequences need k x blocks_per_request blocks, plus
    # the null block (design §1.5 / docs/engines/vllm.md#null-block-and-the-fit-check)
    assert vllm_report(k * lay.blocks_per_request + 1, lay, m, behaviour).max_num_seqs == k
    assert vllm_report(k * lay.blocks_per_request, lay, m, behaviour).max_num_seqs == k - 1


@FAST
@given(
    layer=full_layers,
    count=st.integers(min_value=1, max_value=48),
    m=st.integers(min_value=1, max_value=131_072),
    k=st.integers(min_value=1, max_value=300),
    engine=st.sampled_from([Engine.SGLANG, Engine.TRTLLM]),
)
def test_sglang_and_trtllm_sequences_are_linear_in_the_pool(
    layer: FullAttention, count: int, m: int, k: int, engine: Engine
) -> None:
    if engine is Engine.TRTLLM and layer.v_head_dim not in (None, layer.head_dim):
        # TensorRT-LLM's cache keeps one head size for K and V: such a layer is refused
        # (engines/trtllm.py check_trtllm_head_sizes), not sized.
        layer = FullAttention(layer.num_kv_heads, layer.head_dim)
    arch = model((layer,) * count)
    cell = kv_bytes_per_token(arch, KvCacheDtype.AUTO)
    gpu = Gpu(80 * GiB, "NVIDIA H100 80GB HBM3")
    if engine is Engine.SGLANG:
        # page 1: a request holds m tokens; one byte short of k requests holds k - 1
        edges = ((k * m * cell, k), (k * m * cell - 1, k - 1))
    else:
        # TRT-LLM: max_tokens = pool // cell, blocks = ceil(max_tokens / 32), a request holds
        # cdiv(m, 32) blocks; one token into the k-th request's last block already buys the
        # block, one token less does not
        last = (k * cdiv(m, 32) - 1) * 32
        edges = (((last + 1) * cell, k), ((last + 1) * cell - 1, k - 1))
    for pool, seqs in edges:
        options = EngineOptions(engine=engine, kv_pool_bytes=pool)
        assert compute_capacity(arch, gpu, Workload(m), engine=options).max_num_seqs == seqs


# --- fp8 -------------------------------------------------------------------------------------


@FAST
@given(
    layers=st.lists(st.one_of(full_layers, mla_layers), min_size=1, max_size=12),
    repeat=st.integers(min_value=1, max_value=8),
    n=contexts,
)
def test_fp8_halves_attention_and_mla_bytes_exactly(
    layers: list[FullAttention | MultiHeadLatentAttention], repeat: int, n: int
) -> None:
    arch = model(tuple(layers) * repeat)
    # seed: "fewer bytes per element (FP8 KV halves it)": 1 B instead of bf16's 2 B
    assert kv_bytes_per_token(arch, KvCacheDtype.BFLOAT16) == 2 * kv_bytes_per_token(
        arch, KvCacheDtype.FP8
    )
    assert kv_bytes_per_sequence(arch, KvCacheDtype.AUTO, n) == 2 * kv_bytes_per_sequence(
        arch, KvCacheDtype.FP8, n
    )


@FAST
@given(
    attention=full_layers,
    state=state_layers,
    period=st.integers(min_value=1, max_value=7),
    repeat=st.integers(min_value=1, max_value=12),
    n=contexts,
    ssm_dtype=st.sampled_from([None, FloatDtype.FLOAT32]),
)
def test_fp8_leaves_recurrent_state_alone_so_hybrids_shrink_by_less_than_half(
    attention: FullAttention,
    state: GatedDeltaNet | Mamba2 | Mamba1,
    period: int,
    repeat: int,
    n: int,
    ssm_dtype: FloatDtype | None,
) -> None:
    arch = model(((state,) * period + (attention,)) * repeat)
    bf16 = sequence_breakdown(arch, KvCacheDtype.BFLOAT16, n, ssm_cache_dtype=ssm_dtype)
    fp8 = sequence_breakdown(arch, KvCacheDtype.FP8, n, ssm_cache_dtype=ssm_dtype)
    by_kind_bf16 = {line.kind: line.bytes_per_sequence for line in bf16}
    by_kind_fp8 = {line.kind: line.bytes_per_sequence for line in fp8}
    # design §1.3 / vllm#55196: --kv-cache-dtype fp8 does not touch Mamba/GDN state
    assert by_kind_fp8[state.kind.value] == by_kind_bf16[state.kind.value] > 0
    assert by_kind_bf16["full_attention"] == 2 * by_kind_fp8["full_attention"]
    total_bf16 = kv_bytes_per_sequence(arch, KvCacheDtype.BFLOAT16, n, ssm_cache_dtype=ssm_dtype)
    total_fp8 = kv_bytes_per_sequence(arch, KvCacheDtype.FP8, n, ssm_cache_dtype=ssm_dtype)
    # only the attention half goes: the hybrid keeps more than half its bytes
    assert total_bf16 - total_fp8 == by_kind_fp8["full_attention"]
    assert 2 * total_fp8 > total_bf16


# --- tensor parallel -------------------------------------------------------------------------


@FAST
@given(
    heads=kv_heads,
    dim=head_dims,
    count=layer_counts,
    dtype=attention_dtypes,
    extra=st.sampled_from([1, 2, 4, 8]),
    shift=st.integers(min_value=0, max_value=5),
)
def test_tp_beyond_the_kv_heads_replicates_one_head_per_gpu(
    heads: int, dim: int, count: int, dtype: str, extra: int, shift: int
) -> None:
    arch = model((FullAttention(heads, dim),) * count)
    at_h = kv_bytes_per_token(arch, dtype, tensor_parallel_size=heads)
    # design §1.4: Hkv per GPU = max(1, Hkv // tp); tp >= Hkv leaves 1 head per GPU
    assert kv_bytes_per_token(arch, dtype, tensor_parallel_size=heads * extra) == at_h
    assert at_h == count * 1 * 2 * dim * {"float32": 4}.get(dtype, 1 if "fp8" in dtype else 2)
    # tp <= Hkv dividing Hkv: each GPU holds Hkv / tp heads, bytes scale as 1 / tp
    tp = 1 << min(shift, heads.bit_length() - 1)
    assert heads % tp == 0
    assert tp * kv_bytes_per_token(arch, dtype, tensor_parallel_size=tp) == kv_bytes_per_token(
        arch, dtype
    )


@FAST
@given(
    layer=mla_layers,
    count=layer_counts,
    dtype=attention_dtypes,
    tp=st.sampled_from([1, 2, 4, 8, 16, 32]),
)
def test_mla_bytes_per_gpu_do_not_depend_on_tp(
    layer: MultiHeadLatentAttention, count: int, dtype: str, tp: int
) -> None:
    arch = model((layer,) * count)
    # design §1.4 / seed 16: the latent is not split by TP, the same on every rank
    assert kv_bytes_per_token(arch, dtype, tensor_parallel_size=tp) == kv_bytes_per_token(
        arch, dtype
    )


# --- more memory never lowers capacity ----------------------------------------------------------

# Llama-3.1-8B (tests/sizing/models.py) as LLAMA_LIKE.

memories = st.integers(min_value=8 * GiB, max_value=200 * GiB)


def pinned(engine: Engine, version: str) -> EngineOptions:
    """Engine options with every memory-dependent default fixed (see the two tests below)."""
    if engine is Engine.VLLM:
        return EngineOptions(
            engine=engine, engine_version=version, max_num_batched_tokens=4096, max_num_seqs=256
        )
    if engine is Engine.SGLANG:
        return EngineOptions(engine=engine, engine_version=version, mem_fraction_static=0.85)
    return EngineOptions(engine=engine, engine_version=version)


@SLOW
@given(
    a=memories,
    b=memories,
    engine=st.sampled_from(list(Engine)),
    version=st.sampled_from(["0.6.4", "0.9.2", "0.11.0", "0.33.0"]),
    m=st.sampled_from([2048, 8192, 32_768, 131_072]),
    tp=st.sampled_from([1, 2]),
)
def test_more_gpu_memory_never_lowers_blocks_or_sequences(
    a: int, b: int, engine: Engine, version: str, m: int, tp: int
) -> None:
    low, high = sorted((a, b))
    options = pinned(engine, version)
    parallel = Parallelism(tensor_parallel_size=tp)
    small = compute_capacity(LLAMA_LIKE, Gpu(low, "GPU"), Workload(m), parallel, options)
    large = compute_capacity(LLAMA_LIKE, Gpu(high, "GPU"), Workload(m), parallel, options)
    assert large.num_gpu_blocks >= small.num_gpu_blocks
    assert large.max_num_seqs >= small.max_num_seqs


@SLOW
@given(
    a=st.integers(min_value=70 * GiB, max_value=159 * GiB),
    b=st.integers(min_value=70 * GiB, max_value=159 * GiB),
    engine=st.sampled_from(list(Engine)),
    version=st.sampled_from(["0.9.2", "0.11.0", "0.33.0"]),
    m=st.sampled_from([2048, 32_768]),
)
def test_more_gpu_memory_within_one_default_tier_never_lowers_capacity(
    a: int, b: int, engine: Engine, version: str, m: int
) -> None:
    # Engine defaults (vLLM batch sizes, SGLang mem_fraction_static) are constant between
    # 70 GiB and 160 GiB for a non-A100 GPU (docs/engines/vllm.md#batch-defaults,
    # docs/engines/sglang.md#default-mem-fraction-static), so defaults are left alone here.
    low, high = sorted((a, b))
    options = EngineOptions(engine=engine, engine_version=version)
    small = compute_capacity(LLAMA_LIKE, Gpu(low, "GPU"), Workload(m), engine=options)
    large = compute_capacity(LLAMA_LIKE, Gpu(high, "GPU"), Workload(m), engine=options)
    assert large.num_gpu_blocks >= small.num_gpu_blocks
    assert large.max_num_seqs >= small.max_num_seqs


def test_crossing_vllms_70_gib_batch_tier_costs_pool_as_vllm_does() -> None:
    # Why the property above pins the batch flags (docs/engines/vllm.md#batch-defaults): from
    # 0.8.5 a GPU with >= 70 GiB gets 8192 batched tokens / 1024 sequences instead of
    # 2048 / 256, and design §1.6: "raising either raises peak_activation and lowers the KV
    # pool". So just past 70 GiB the pool is smaller than just below it.
    options = EngineOptions(engine_version="0.9.2")
    below = compute_capacity(LLAMA_LIKE, Gpu(70 * GiB - 1, "GPU"), Workload(8192), engine=options)
    above = compute_capacity(LLAMA_LIKE, Gpu(70 * GiB, "GPU"), Workload(8192), engine=options)
    assert below.engine_settings["max_num_batched_tokens"] == 2048
    assert above.engine_settings["max_num_batched_tokens"] == 8192
    assert above.budget.activation_bytes > below.budget.activation_bytes
    assert above.num_gpu_blocks < below.num_gpu_blocks


def test_crossing_sglangs_60_gib_tier_lowers_the_default_static_fraction() -> None:
    # docs/engines/sglang.md#default-mem-fraction-static (0.5.3/0.5.10): below 60 GB
    # reserved = 512 + 1.5 x 4096 + 2 x 32 + 1/8 x 1024
    # = 6,848 MiB; above, 512 + 1.5 x 8192 + 2 x 256 + 128 = 13,440 MiB (>= the 10,240 floor).
    options = EngineOptions(engine=Engine.SGLANG)
    below = compute_capacity(LLAMA_LIKE, Gpu(60 * GiB - 1, "GPU"), Workload(8192), engine=options)
    above = compute_capacity(LLAMA_LIKE, Gpu(60 * GiB, "GPU"), Workload(8192), engine=options)
    # (61,440 - 6,848) / 61,440 = 0.8885 -> 0.889; (61,440 - 13,440) / 61,440 = 0.78125 -> 0.781
    assert below.engine_settings["mem_fraction_static"] == 0.889
    assert above.engine_settings["mem_fraction_static"] == 0.781
    assert above.kv_cache_tokens < below.kv_cache_tokens


# --- the planner ------------------------------------------------------------------------------

gpu_offers = st.lists(
    st.builds(
        Gpu,
        memory_bytes=st.sampled_from([24 * GiB, 48 * GiB, 80 * GiB, 141 * GiB]),
        name=st.sampled_from(["NVIDIA L4", "NVIDIA L40S", "NVIDIA H100 80GB HBM3", "NVIDIA H200"]),
        slug=st.just(""),
        price_usd_per_hour=st.sampled_from([0.5, 1.0, 1.7, 2.5, 4.0]),
        max_gpus_per_node=st.sampled_from([1, 2, 4, 8]),
    ),
    min_size=1,
    max_size=3,
)


def independent_cheapest(
    arch: ModelArchitecture, gpus: list[Gpu], request: PlanRequest
) -> float | None:
    """The cheapest deployment, found without the planner: every GPU x TP, whole replicas;
    where no single node of a GPU serves, its largest TP on 2 ... 4 nodes (one PP stage each)."""
    costs: list[float] = []
    for gpu in gpus:
        tps = [
            tp for tp in range(1, gpu.max_gpus_per_node + 1) if arch.num_attention_heads % tp == 0
        ]
        single = [_layout_cost(arch, gpu, request, tp, 1) for tp in tps]
        costs += [cost for cost in single if cost is not None]
        if tps and all(cost is None for cost in single):
            for pp in range(2, min(4, arch.num_layers) + 1):
                cost = _layout_cost(arch, gpu, request, tps[-1], pp)
                costs += [] if cost is None else [cost]
    return min(costs, default=None)


def _layout_cost(
    arch: ModelArchitecture, gpu: Gpu, request: PlanRequest, tp: int, pp: int
) -> float | None:
    try:
        cap = compute_capacity(
            arch, gpu, Workload(request.max_model_len), Parallelism(tp, pp), request.engine
        )
    except SizingError:
        return None
    cap_seqs = cap.engine_settings.get("max_num_seqs")
    seqs = cap.max_num_seqs
    if isinstance(cap_seqs, int):
        seqs = min(seqs, cap_seqs)
    if not cap.fits or seqs < 1:
        return None
    replicas = cdiv(request.peak_concurrency, seqs)
    if replicas > request.max_replicas:
        return None
    assert gpu.price_usd_per_hour is not None
    return round(replicas * tp * pp * gpu.price_usd_per_hour, 4)


@SLOW
@given(
    gpus=gpu_offers,
    heads=st.sampled_from([1, 2, 4, 8]),
    layers=st.integers(min_value=8, max_value=80),
    m=st.sampled_from([4096, 32_768, 131_072]),
    peak=st.integers(min_value=1, max_value=2000),
    version=st.sampled_from(["0.9.2", "0.28.0", "0.33.0"]),
    engine=st.sampled_from([Engine.VLLM, Engine.SGLANG, Engine.TRTLLM]),
)
def test_planner_recommends_enough_replicas_at_the_lowest_cost(
    gpus: list[Gpu], heads: int, layers: int, m: int, peak: int, version: str, engine: Engine
) -> None:
    arch = ModelArchitecture(
        layers=(FullAttention(heads, 128),) * layers,
        num_attention_heads=32,
        hidden_size=4096,
        intermediate_size=14_336,
        vocab_size=128_256,
        num_parameters=layers * 220_000_000,
    )
    request = PlanRequest(
        max_model_len=m,
        peak_concurrency=peak,
        engine=EngineOptions(engine=engine, engine_version=version),
        max_alternatives=1000,
        # the independent search fills whole replicas: no headroom kept (the default keeps 10%)
        headroom_fraction=0.0,
    )
    result = plan(arch, gpus, request)
    cheapest = independent_cheapest(arch, gpus, request)
    if result.recommendation is None:
        assert cheapest is None
        return
    best = result.recommendation
    # every replica holds `sequences_per_replica`; together they hold the peak
    assert best.replicas * best.sequences_per_replica >= peak
    # cheapest of everything the planner found feasible, and of everything that is feasible
    for other in result.alternatives:
        assert best.cost_per_hour_usd is not None
        assert other.cost_per_hour_usd is not None
        assert best.cost_per_hour_usd <= other.cost_per_hour_usd
    assert best.cost_per_hour_usd == cheapest


def test_planner_never_recommends_replicas_that_hold_no_sequence() -> None:
    # 32 layers x 1 KV head x 128: one block = 32 x 16 x 2 x 128 x 2 B = 262,144 B; M = 8,192
    # needs cdiv(8,192, 16) = 512 blocks. A pool of exactly 512 blocks passes the <= v0.28 start-up
    # check (design §1.5), but block 0 is the null block
    # (docs/engines/vllm.md#null-block-and-the-fit-check): 511 usable, 0 sequences.
    arch = ModelArchitecture(
        layers=(FullAttention(1, 128),) * 32, num_attention_heads=1, weight_bytes=GiB
    )
    request = PlanRequest(
        max_model_len=8192,
        peak_concurrency=4,
        engine=EngineOptions(engine_version="0.28.0", kv_pool_bytes=512 * 262_144),
    )
    result = plan(arch, [Gpu(80 * GiB, "NVIDIA H100 80GB HBM3", price_usd_per_hour=2.0)], request)
    best = result.recommendation
    assert best is None or best.replicas * best.sequences_per_replica >= 4


# --- the two log lines agree with each other ----------------------------------------------------


@FAST
@given(
    layers=st.lists(
        st.one_of(
            full_layers,
            st.builds(
                SlidingWindowAttention,
                num_kv_heads=st.just(8),
                head_dim=st.just(128),
                sliding_window=st.sampled_from([128, 1024, 4096]),
            ),
        ),
        min_size=1,
        max_size=6,
    ),
    m=st.integers(min_value=1, max_value=262_144),
    blocks=st.integers(min_value=0, max_value=2_000_000),
    version=st.sampled_from(VLLM_VERSIONS),
)
def test_vllm_reported_tokens_and_concurrency_agree(
    layers: list[FullAttention | SlidingWindowAttention], m: int, blocks: int, version: str
) -> None:
    behaviour = vllm_release(parse_vllm_version(version))
    arch = model(tuple(layers))
    try:
        lay = vllm_layout(
            arch,
            release=behaviour,
            kv_element_bytes=2,
            conv_element_bytes=2,
            ssm_element_bytes=2,
            tensor_parallel_size=1,
            pipeline_parallel_size=1,
            max_model_len=m,
            block_size=16,
            block_size_given=False,
            max_num_batched_tokens=8192,
            prefix_caching=True,
            hybrid_manager=behaviour.hybrid_allocator and behaviour.v1_engine,
        )
    except SizingError:
        return  # page sizes vLLM cannot unify (raised, not sized)
    report = vllm_report(blocks, lay, m, behaviour)
    if behaviour.version >= (0, 21, 0):
        # docs/engines/vllm.md#log-lines: from v0.21 tokens = int(max_concurrency x M)
        assert report.kv_cache_tokens == int(report.max_concurrency * m)
    elif len(lay.groups) == 1:
        # <= v0.20 uniform (and V0): tokens = num_blocks x block_size
        assert report.kv_cache_tokens == blocks * lay.block_size
    if behaviour.v1_engine and behaviour.version >= (0, 9, 2):
        # concurrency = num_blocks / blocks per request (design §1.5)
        assert report.max_concurrency == blocks / lay.blocks_per_request
