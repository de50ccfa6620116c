"""One deployment's engine, stepped as SGLang's scheduler steps it.

Read in SGLang v0.5.23 (the wheel on PyPI; the same rules in v0.5.5), `python/sglang/srt/`
(the table of rules and files: docs/engines/sglang.md#scheduler):

1. Prefill first (managers/scheduler.py `Scheduler.get_next_batch_to_run`): each iteration
   first tries to build a prefill batch (`get_new_batch_prefill`); when it has one, that batch
   runs as its own forward pass and the running requests do not decode in it (a mixed step is
   only `--enable-mixed-chunk`, off by default, not simulated). Only when no prefill batch is
   built do the running requests decode, one token each (`update_running_batch`).
2. A prefill batch (`_get_new_batch_prefill_raw`, managers/schedule_policy.py `PrefillAdder`):
   nothing when `batch_is_full` is set or nobody waits, unless a chunked request is
   unfinished; `batch_is_full` is set when the running requests reach max_running_requests
   and stays set until a running request leaves (`filter_batch`, a retraction) or none runs.
   The unfinished chunked request goes first (`add_chunked_req`: min(chunk budget, the
   remaining total) tokens). Then the waiting queue in order (`schedule_policy` fcfs, the
   default: no sorting), each request (`add_one_req`) after its prefix match:
   its new tokens + min(max_new_tokens - output so far, 4096) + page_size must be below
   `rem_total_tokens` = (free + evictable tokens) - the reservations, or the pass stops
   (NO_TOKEN: `batch_is_full` set while anything is admitted or running); a request longer
   than what is left of `chunked_prefill_size` is cut to it (floored to pages) and becomes the
   chunked request. Each admission reserves its new tokens, one page and
   min(max_new_tokens, 4096) (`_update_prefill_budget`, mem_cache/prefill_budget.py
   `PrefillBudget.reserve`; none for a cut chunk), and takes its tokens from `max_prefill_tokens`
   (16384) and the chunk budget; the pass stops when either is spent (`budget_state`).
   The reservations start at the running requests' sum of
   min(max_new_tokens - output so far, 4096) x new_token_ratio
   (`_get_running_request_total_token_offset`).
3. new_token_ratio (scheduler_components/new_token_ratio_tracker.py `NewTokenRatioTracker`,
   environ.py defaults): init = min(0.7 x schedule_conservativeness, 1), min = init x 0.14,
   decay = (init - min) / 600 per decode step without retraction; back to init when the
   engine is idle (`Scheduler.on_idle`).
4. Retraction (managers/schedule_batch.py `ScheduleBatch.check_decode_mem`, `retract_decode`):
   before a decode step, when free + evictable tokens are fewer than the tokens the step needs,
   requests are retracted, fewest output tokens first (ties: the longest prompt first), at
   least one and until the step fits, always keeping one; their KV is freed and they go to the
   end of the waiting queue (`Scheduler._add_request_to_queue`) to prefill prompt and output
   again; new_token_ratio becomes min(1, (output tokens of those kept + 20 x their number) /
   (their max_new_tokens + 1)).
5. Radix cache (mem_cache/radix_cache.py): a prefix match reuses cached tokens, at most the
   prompt less one (schedule_batch.py `Req._compute_max_prefix_len`); the matched prefix is
   locked (not evictable) while the request runs.

What the simulator does differently, said here. The pool is counted in blocks of `block_size`
tokens (SGLang's page when page_size > 1; 16 tokens at the default page_size 1: a request
holds its tokens rounded up to 16, under 16 tokens more than SGLang's per-token allocation),
and prefix hits are whole such blocks. Requests ask for max_new_tokens equal to their output
length without ignore_eos (with ignore_eos SGLang reserves whole outputs, ratio 1). Tokens are
taken from the pool as each request is admitted (SGLang allocates after the pass; its check
counts the same tokens as reserved). A request SGLang would abort (alone, it cannot decode) is
put back in the queue; the overlap scheduler's one-step lag is not modelled.

Cost: as engine.py's, linear in requests and steps; SGLang's steps are counted on a decode
clock (`tick`: decode passes) with prefill passes beside it, so the decode bookkeeping is the
vLLM engine's own. The reservations' sum is kept as a running sum of end steps (a request's
remaining output at decode step T is its end step - T), with the few outputs still over 4096
in a heap; a retraction sorts the running requests once.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from .engine import DECODE, Engine, EngineConfig, SglangLimits, StepTimer, _Live
from .errors import SimulationError

# python/sglang/srt/environ.py (v0.5.23) defaults
INIT_NEW_TOKEN_RATIO = 0.7  # SGLANG_INIT_NEW_TOKEN_RATIO
MIN_NEW_TOKEN_RATIO_FACTOR = 0.14  # SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR
NEW_TOKEN_RATIO_DECAY_STEPS = 600  # SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS
RETRACT_DECODE_STEPS = 20  # SGLANG_RETRACT_DECODE_STEPS
# managers/schedule_policy.py CLIP_MAX_NEW_TOKENS (SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION)
CLIP_MAX_NEW_TOKENS = 4096
# The simulator's block at SGLang's default page_size 1 (module docstring).
BLOCK_TOKENS = 16

CONTINUE, NO_TOKEN, OTHER = 0, 1, 2  # schedule_policy.py AddReqResult


def sglang_block_size(page_size: int) -> int:
    """The simulator's block: SGLang's page, or BLOCK_TOKENS at page_size 1."""
    return page_size if page_size > 1 else BLOCK_TOKENS


@dataclass(frozen=True, slots=True)
class TokenRatio:
    """new_token_ratio's constants (module docstring, 3)."""

    init: float
    min: float
    decay: float

    @classmethod
    def of(cls, schedule_conservativeness: float) -> TokenRatio:
        init = min(INIT_NEW_TOKEN_RATIO * schedule_conservativeness, 1.0)
        low = min(init * MIN_NEW_TOKEN_RATIO_FACTOR, 1.0)
        return cls(init, low, (init - low) / NEW_TOKEN_RATIO_DECAY_STEPS)


class _Budget:
    """One prefill pass's budgets (PrefillAdder): the reservations beyond what is taken from
    the pool, the input and chunk tokens left."""

    __slots__ = ("current_offset", "page", "rem_chunk", "rem_input", "total_offset")

    def __init__(self, running_offset: float, limits: SglangLimits) -> None:
        self.total_offset = running_offset
        self.current_offset = 0
        self.rem_input = limits.max_prefill_tokens
        self.rem_chunk = limits.chunked_prefill_size
        self.page = limits.page_size

    def paged(self, tokens: int) -> int:
        return -(-tokens // self.page) * self.page

    def reserve(self, extend: int, max_new: int) -> None:
        """`PrefillBudget.reserve` and the compute budgets (`_update_prefill_budget`); the
        extend's own tokens are taken from the pool by the caller."""
        self.total_offset += self.page + max_new
        self.current_offset += self.page
        self.rem_input -= self.paged(extend)
        self.rem_chunk -= self.paged(extend)

    def state(self, free_tokens: int) -> int:
        """`PrefillAdder.budget_state`."""
        if free_tokens - self.total_offset <= 0 or free_tokens - self.current_offset <= 0:
            return NO_TOKEN
        if self.rem_input <= 0 or self.rem_chunk <= 0:
            return OTHER
        return CONTINUE


class SglangEngine(Engine):
    """SGLang's scheduler over the pool and clock of engine.py (module docstring)."""

    def __init__(self, config: EngineConfig, step_ms: StepTimer, *, max_samples: int = 400) -> None:
        if config.sglang is None:
            raise SimulationError("engine", "SGLang's scheduler needs SGLang's limits")
        super().__init__(config, step_ms, max_samples=max_samples)
        self.limits = config.sglang
        self.ratio = TokenRatio.of(self.limits.schedule_conservativeness)
        self.ratio_base = self.ratio.init
        self.ratio_tick = 0  # the decode step ratio_base was set at
        self.full = False  # running_batch.batch_is_full
        self.chunked: _Live | None = None
        self.prefill_steps = 0
        self.short: dict[_Live, int] = {}  # decodes' end steps, remaining output <= 4096
        self.short_end_sum = 0
        self.long: dict[_Live, int] = {}  # remaining output over 4096: counted as 4096
        self.long_heap: list[tuple[int, int, int, _Live]] = []  # (step it drops to 4096, ...)

    # --- bookkeeping beside engine.py's ------------------------------------------------------

    def _steps_run(self) -> int:
        return self.tick + self.prefill_steps

    def _fits(self, input_tokens: int, output_tokens: int) -> bool:
        """Alone in the pool, admitted (`add_one_req`: new tokens + min(output left, 4096) + a
        page below the pool's tokens), then or after a retraction (its prompt and output so
        far to prefill again, the rest of its output to come): prompt + output + a page."""
        total = input_tokens + output_tokens + self.limits.page_size
        pool_tokens = self.config.num_gpu_blocks * self.config.block_size
        return super()._fits(input_tokens, output_tokens) and total < pool_tokens

    def _on_idle(self) -> None:
        self.ratio_base, self.ratio_tick = self.ratio.init, self.tick

    def _new_token_ratio(self) -> float:
        decayed = self.ratio_base - self.ratio.decay * (self.tick - self.ratio_tick)
        return max(decayed, self.ratio.min)

    def _start_decode(self, live: _Live, step: int) -> None:
        super()._start_decode(live, step)
        end = step + live.output - live.generated
        if end - step > CLIP_MAX_NEW_TOKENS:
            self.long[live] = end
            self._push(self.long_heap, end - CLIP_MAX_NEW_TOKENS, live)
        else:
            self.short[live] = end
            self.short_end_sum += end

    def _forget(self, live: _Live) -> None:
        end = self.short.pop(live, None)
        if end is not None:
            self.short_end_sum -= end
        self.long.pop(live, None)

    def _finish(self, live: _Live) -> None:
        self._forget(live)
        super()._finish(live)
        self.full = False  # a request left the running batch

    def _preempt(self, live: _Live) -> None:
        self._forget(live)
        super()._preempt(live)

    def _outputs_left(self) -> int:
        """Sum over decodes of min(max_new_tokens - output so far, 4096) at this tick."""
        heap, step = self.long_heap, self.tick
        while heap and heap[0][0] <= step:
            _, _, gen, live = heapq.heappop(heap)
            end = self.long.pop(live, None) if gen == live.gen else None
            if end is not None:
                self.short[live] = end
                self.short_end_sum += end
        return self.short_end_sum - len(self.short) * step + CLIP_MAX_NEW_TOKENS * len(self.long)

    def _free_tokens(self, pinned: int = 0) -> int:
        return (self.pool.free - pinned) * self.config.block_size

    # --- one step ----------------------------------------------------------------------------

    def _step(self) -> int | None:
        """One iteration of the event loop: a prefill pass when one is built, else a decode
        pass; the requests it finished, or None when nothing ran."""
        chunks: list[tuple[_Live, int]] = []
        if self.chunked is not None or (self.waiting and self._may_admit()):
            self._prefill_batch(chunks)
        if chunks:
            self.prefill_steps += 1
            dt = self.step_ms(0, 0, [(live.computed, tokens) for live, tokens in chunks]) / 1e3
            self._record(dt)
            self.now += dt
            return self._after_pass(self.tick, chunks)
        if not self.decodes:
            return None
        step = self.tick + 1
        self._retract_for(step)
        if not self.decodes:
            return None
        dt = self.step_ms(self.decodes, self.context_offset + self.decodes * step, ()) / 1e3
        self._record(dt)
        self.now += dt
        self.tick = step
        return self._end_decodes(step)

    def _may_admit(self) -> bool:
        """`batch_is_full` as `_get_new_batch_prefill_raw` reads and sets it (no chunked
        request unfinished here)."""
        if not self.running:
            self.full = False
        if not self.full and len(self.running) >= self.config.max_num_seqs:
            self.full = True
        return not self.full

    def _prefill_batch(self, chunks: list[tuple[_Live, int]]) -> None:
        """The PrefillAdder's pass: the chunked request, then the queue in order."""
        budget = _Budget(self._new_token_ratio() * self._outputs_left(), self.limits)
        if self.chunked is not None:
            self._continue_chunk(budget, chunks)
        while self.waiting and budget.state(self._free_tokens()) != OTHER:
            if self.full or len(self.running) >= self.config.max_num_seqs:
                self.full = True
                break
            result = self._add_one(self.waiting[0], budget, chunks)
            if result != CONTINUE:
                if result == NO_TOKEN:
                    self.full = bool(chunks) or bool(self.decodes)
                break

    def _continue_chunk(self, budget: _Budget, chunks: list[tuple[_Live, int]]) -> None:
        """`add_chunked_req`: the next chunk of the unfinished chunked request."""
        live = self.chunked
        assert live is not None
        rem_tokens = min(budget.rem_chunk, int(self._free_tokens() - budget.total_offset))
        if rem_tokens <= 0:  # "must make progress to release its KV"
            rem_tokens = budget.rem_chunk
        # The simulator's guard: no more than the free blocks hold (SGLang would evict or fail).
        room = (live.blocks + self.pool.free) * self.config.block_size - live.computed
        tokens = min(live.target - live.computed, rem_tokens, room)
        if tokens <= 0:
            return
        blocks = self._blocks_for(live.computed + tokens) - live.blocks
        self.pool.take(blocks)
        live.blocks += blocks
        chunks.append((live, tokens))
        last = live.computed + tokens >= live.target
        budget.reserve(tokens, min(live.output, CLIP_MAX_NEW_TOKENS) if last else 0)
        if last:
            self.chunked = None

    def _add_one(self, live: _Live, budget: _Budget, chunks: list[tuple[_Live, int]]) -> int:
        """`add_one_req` for the head of the queue: admitted (whole, or cut to the chunk
        budget) or refused; then the budget's state."""
        config, pool = self.config, self.pool
        hit = evictable = 0
        if config.enable_prefix_caching and live.hashes:
            limit = min(len(live.hashes), (live.target - 1) // config.block_size)
            hit, evictable = pool.hits(live.hashes, limit)
        prefix = hit * config.block_size
        extend = live.target - prefix
        max_new = min(max(live.output - live.generated, 0), CLIP_MAX_NEW_TOKENS)
        remaining_total = self._free_tokens(evictable) - budget.total_offset
        if extend + max_new + budget.page >= remaining_total:
            return NO_TOKEN
        if budget.paged(extend) > budget.rem_chunk:  # cut: `_select_prefill_admission`
            page = budget.page
            extend = (prefix + budget.rem_chunk // page * page) // page * page - prefix
            if extend <= 0:
                return OTHER
            max_new = 0
        else:
            max_new = min(live.output, CLIP_MAX_NEW_TOKENS)
        blocks = self._blocks_for(prefix + extend) - hit
        if pool.free - evictable < blocks:  # the blocks' rounding (module docstring)
            return NO_TOKEN
        self._admit_one(live, hit, blocks, extend, chunks)
        if prefix + extend < live.target:
            self.chunked = live
        budget.reserve(extend, max_new)
        return budget.state(self._free_tokens())

    def _admit_one(
        self, live: _Live, hit: int, blocks: int, extend: int, chunks: list[tuple[_Live, int]]
    ) -> None:
        """The head of the queue joins the prefill batch: its prefix locked, its blocks taken."""
        self.waiting.popleft()
        self._start_prefill(live, hit, blocks)
        chunks.append((live, extend))

    def _retract_for(self, step: int) -> None:
        """`update_running_batch`: give the decodes the blocks the step needs, retracting
        (`retract_decode`) while too few are free; a retraction sets new_token_ratio."""
        residue = step % self.config.block_size
        if self.pool.free < self.needing[residue]:
            order = self._retraction_order()
            first = True
            while first or self.pool.free < self.needing[residue]:
                if len(order) == 1:
                    break
                first = False
                self._retract(order.pop())
            if self.pool.free < self.needing[residue]:  # SGLang aborts it; back to the queue
                self._retract(order.pop())
            self.ratio_base, self.ratio_tick = self._ratio_after_retract(order), step
            self.full = False
        self.pool.take(self.needing[residue])
        self.allocated_to = step

    def _retraction_order(self) -> list[_Live]:
        """The decodes, most preferred to keep first: most output tokens, then the shortest
        prompt (`ScheduleBatch._get_decode_retraction_order`); retracted from the end."""
        decodes = [live for live in self.running if live.phase == DECODE]
        done = self.tick
        decodes.sort(key=lambda r: (r.generated + done - r.t0, -r.prompt), reverse=True)
        return decodes

    def _retract(self, live: _Live) -> None:
        self._preempt(live)
        self.waiting.append(live)

    def _ratio_after_retract(self, kept: Sequence[_Live]) -> float:
        """`NewTokenRatioTracker.estimate_new_token_ratio_after_retract`."""
        done = self.tick
        decoded = sum(r.generated + done - r.t0 for r in kept)
        asked = sum(r.output for r in kept)
        return min(1.0, (decoded + RETRACT_DECODE_STEPS * len(kept)) / (asked + 1))
