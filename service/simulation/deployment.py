"""A sized deployment as the simulator takes it: the scheduler's limits and pool from a
capacity answer, and a step's time from kvplan's speed model.

The pool: `kv_cache_tokens // block_size` blocks of `block_size` tokens (vLLM logs
"GPU KV cache size: N tokens"; for one cache group that is num_gpu_blocks x block_size), and
`max_num_seqs`, `max_num_batched_tokens` and `enable_prefix_caching` from the engine settings
the capacity answer carries (the values `vllm serve` runs with, defaults included).

A step's time. The speed model (`service.sizing`) times a decode step of B sequences at one
context (`batch_curve`) and a prefill of one prompt alone (`capacity_speed`'s `prefill_ms`); it
has no mixed pass. vLLM's mixed step is composed from them, said here:

    step(D decodes at mean context c; chunks (o_i computed ahead, n_i tokens))
        = decode(D, c) + sum_i [prefill(o_i + n_i) - prefill(o_i)]

with prefill(0) the one-token pass (the weights read once and the step's overhead) and no
decode(0, c) term when nothing decodes. A chunk's part is what it adds to its prompt's prefill:
its tokens' weights FLOPs and their attention over the o_i tokens before them as well as among
themselves; each prompt's quadratic attention is its own (two prompts in one pass do not
attend to each other). decode and prefill are read from tables the speed model fills once per
simulation: decode at B = 1, 2, 4, ... max_num_seqs and c = 16, 32, ... max_model_len
(bilinear between), prefill at P = 1, 2, 4, ... max_model_len (linear between). Not counted:
the pipeline stages' sends.

A speed calibration (a benchmark's measured TPOT over kvplan's decode step for the same
deployment) is `decode_scale`: the decode table is kvplan's times it, the prefill table kvplan's
own, as a capacity answer scales its decode step and keeps its prefill
(service/planning/calibrated.py `scaled_speed`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..sizing import (
    Capacity,
    Engine,
    Gpu,
    ModelArchitecture,
    NoEstimate,
    SpeedQuestion,
    WeightFormat,
    batch_curve,
    batch_sizes,
    capacity_speed,
    default_chunked_prefill_size,
    with_expert_layout,
)
from .engine import EngineConfig, SglangLimits
from .errors import SimulationError
from .sglang_scheduler import sglang_block_size

SIMULATED_ENGINES = (Engine.VLLM, Engine.SGLANG)
# vLLM's token budget per step has no SGLang flag: SGLang's scheduler chunks a prefill by
# chunked_prefill_size (set by the GPU's memory, sglang_scheduler.py) and caps no step's total.
SGLANG_NO_BATCHED_TOKENS = (
    "vLLM's token budget per step, which SGLang has no flag for (its scheduler chunks prefills "
    "by chunked_prefill_size, set by the GPU's memory): remove it for engine=sglang"
)


def _whole(capacity: Capacity, name: str) -> int:
    value = capacity.engine_settings.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise SimulationError(name, "the capacity answer has no value for it")
    return value


def engine_config(capacity: Capacity, *, enable_prefix_caching: bool | None = None) -> EngineConfig:
    """The scheduler's limits and pool of one replica (one data-parallel rank), for the
    engine's own scheduler (vLLM's, SGLang's); another engine is refused by name.
    `enable_prefix_caching`: the caller's flag, read for SGLang (its radix cache; vLLM's
    settings carry it)."""
    if capacity.engine not in SIMULATED_ENGINES:
        raise SimulationError(
            "engine",
            f"{capacity.engine.value}'s scheduler is not simulated; the simulator steps "
            "vLLM's and SGLang's (engine=vllm or engine=sglang)",
        )
    if not capacity.fits:
        raise SimulationError("model", capacity.reason or "the deployment holds no sequence")
    if capacity.engine is Engine.SGLANG:
        return _sglang_config(capacity, enable_prefix_caching)
    settings = capacity.engine_settings

    def whole(name: str) -> int:
        return _whole(capacity, name)

    block_size = whole("block_size")
    return EngineConfig(
        num_gpu_blocks=capacity.kv_cache_tokens // block_size,
        block_size=block_size,
        max_num_seqs=whole("max_num_seqs"),
        max_num_batched_tokens=whole("max_num_batched_tokens"),
        max_model_len=capacity.max_model_len,
        enable_prefix_caching=settings.get("enable_prefix_caching") is not False,
    )


def _sglang_config(capacity: Capacity, enable_prefix_caching: bool | None) -> EngineConfig:
    """SGLang's token pool (max_total_num_tokens: kvplan's kv_cache_tokens) in the simulator's
    blocks, max_running_requests, and chunked_prefill_size as SGLang defaults it by the GPU's
    memory (sglang_scheduler.py). Its hybrid pools (sliding-window, Mamba) and HiCache's host
    tier have admission rules of their own, refused by name."""
    settings = capacity.engine_settings
    if "full_max_total_num_tokens" in settings or "radix_cache" in settings:
        raise SimulationError(
            "model",
            "SGLang's hybrid pools (sliding-window or recurrent state) are not simulated; "
            "its scheduler is simulated for one full-attention token pool",
        )
    if capacity.kv_tiers is not None:
        raise SimulationError(
            "enable_hierarchical_cache",
            "KV tiers beyond the GPU are not simulated; ask without them",
        )
    page_size = _whole(capacity, "page_size")
    tokens = capacity.kv_cache_tokens
    block_size = sglang_block_size(page_size)
    chunk = default_chunked_prefill_size(capacity.budget.total_bytes)
    return EngineConfig(
        num_gpu_blocks=tokens // block_size,
        block_size=block_size,
        max_num_seqs=_whole(capacity, "max_running_requests"),
        max_num_batched_tokens=chunk,
        max_model_len=capacity.max_model_len,
        enable_prefix_caching=enable_prefix_caching is not False,
        sglang=SglangLimits(
            max_total_num_tokens=tokens, chunked_prefill_size=chunk, page_size=page_size
        ),
    )


def _powers(limit: int, start: int = 1) -> tuple[int, ...]:
    values = []
    value = start
    while value < limit:
        values.append(value)
        value *= 2
    return (*values, limit)


def _interpolate(xs: Sequence[int], ys: Sequence[float], x: float) -> float:
    """Linear between the points, the end segment's line beyond them."""
    if len(xs) == 1:
        return ys[0]
    i = min(max(bisect.bisect_right(xs, x), 1), len(xs) - 1)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


@dataclass(slots=True)
class StepTable:
    """The speed model's decode and prefill times, tabulated (see the module docstring)."""

    batches: tuple[int, ...]
    contexts: tuple[int, ...]
    decode_ms: tuple[tuple[float, ...], ...]  # [context][batch]
    prompts: tuple[int, ...]
    prefill_ms: tuple[float, ...]
    _by_batch: dict[int, tuple[float, ...]] = field(default_factory=dict, repr=False)
    # decode_step's last (batch, x from, x to, x0, y0, y1 - y0, x1 - x0)
    _segment: tuple[int, float, float, int, float, float, int] = field(
        default=(0, 0.0, 0.0, 0, 0.0, 0.0, 1), repr=False
    )

    def at_batch(self, batch: int) -> tuple[float, ...]:
        """Decode ms at `batch` for each tabulated context (interpolated along the batch),
        remembered: the batch changes far less often than the context, every step."""
        column = self._by_batch.get(batch)
        if column is None:
            column = tuple(_interpolate(self.batches, row, batch) for row in self.decode_ms)
            self._by_batch[batch] = column
        return column

    def decode(self, batch: int, context: float) -> float:
        return _interpolate(self.contexts, self.at_batch(batch), min(context, self.contexts[-1]))

    def decode_step(self, decodes: int, decode_context: int) -> float:
        """A step of decodes alone: `self(decodes, decode_context, ())` with the calls inlined
        and the last batch's interpolation segment remembered (the engine's tight loop, where
        the batch holds for many steps and the mean context grows by one a step): the same
        arithmetic, the same floats."""
        xs = self.contexts
        x = decode_context / decodes
        x = min(x, xs[-1])
        batch, low, high, x0, y0, dy, dx = self._segment
        if batch == decodes and low <= x < high:
            return y0 + dy * (x - x0) / dx
        column = self._by_batch.get(decodes)
        if column is None:
            column = self.at_batch(decodes)
        last = len(xs) - 1
        if not last:
            return column[0]
        i = min(max(bisect.bisect_right(xs, x), 1), last)
        x0, y0 = xs[i - 1], column[i - 1]
        dy, dx = column[i] - y0, xs[i] - x0
        low = -math.inf if i == 1 else x0
        high = math.inf if i == last else xs[i]
        self._segment = (decodes, low, high, x0, y0, dy, dx)
        return y0 + dy * (x - x0) / dx

    def prefill(self, tokens: int) -> float:
        return _interpolate(self.prompts, self.prefill_ms, tokens)

    def __call__(
        self, decodes: int, decode_context: int, chunks: Sequence[tuple[int, int]]
    ) -> float:
        fixed = self.prefill_ms[0]
        ms = self.decode_step(decodes, decode_context) if decodes else fixed
        for ahead, tokens in chunks:
            ms += self.prefill(ahead + tokens) - (self.prefill(ahead) if ahead else fixed)
        return ms


def step_table(
    arch: ModelArchitecture,
    gpu: Gpu,
    capacity: Capacity,
    config: EngineConfig,
    *,
    weight_format: WeightFormat | None = None,
    decode_scale: float = 1.0,
    prefill_only: bool = False,
) -> StepTable:
    """Fill the table from the speed model, or refuse when it has no estimate; the decode
    times by `decode_scale` (a speed calibration's step-time scale, 1 without one).

    `prefill_only`: a disaggregated prefill pool's, whose requests end at their first token
    and never decode (simulation/disaggregated.py): its decode entry is the one-token pass."""
    if not (math.isfinite(decode_scale) and decode_scale > 0):
        raise SimulationError("step_time_scale", "a speed calibration's scale must be positive")
    prompts, prefill = _prefill_curve(arch, gpu, capacity, config, weight_format)
    if prefill_only:
        return StepTable((1,), (1,), ((prefill[0],),), prompts, prefill)
    batches = batch_sizes(config.max_num_seqs)
    contexts = (
        _powers(config.max_model_len, 16) if config.max_model_len > 16 else (config.max_model_len,)
    )
    rows = []
    for context in contexts:
        question = SpeedQuestion(
            tensor_parallel_size=capacity.parallel.tensor_parallel_size,
            batch=config.max_num_seqs,
            context_tokens=context,
            prompt_tokens=min(context, config.max_model_len),
            kv_cache_dtype=capacity.kv_cache_dtype,
            weight_format=weight_format,
            pipeline_parallel_size=capacity.parallel.pipeline_parallel_size,
        )
        question = with_expert_layout(question, arch, capacity)
        curve = batch_curve(arch, gpu, question, batches)
        if isinstance(curve, NoEstimate):
            raise SimulationError("gpu", curve.warning)
        rows.append(tuple(point.decode_ms_per_token * decode_scale for point in curve))
    if not all(math.isfinite(v) and v > 0 for row in rows for v in row):
        raise SimulationError("gpu", "the speed model gave a step time that is not positive")
    return StepTable(batches, contexts, tuple(rows), prompts, prefill)


def _prefill_curve(
    arch: ModelArchitecture,
    gpu: Gpu,
    capacity: Capacity,
    config: EngineConfig,
    weight_format: WeightFormat | None,
) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """The prefill of one prompt at P = 1, 2, 4, ... max_model_len tokens."""
    prompts = _powers(config.max_model_len)
    prefill = []
    for prompt in prompts:
        speed = capacity_speed(
            arch, gpu, capacity, weight_format=weight_format, prompt_tokens=prompt
        )
        if isinstance(speed, NoEstimate):
            raise SimulationError("gpu", speed.warning)
        prefill.append(speed.prefill_ms)
    return prompts, tuple(prefill)
