"""One deployment's engine, stepped as vLLM's V1 scheduler steps it.

Read from vLLM vllm/v1/core/sched/scheduler.py `Scheduler.schedule` (release 0.33.0) and
vllm/v1/core/kv_cache_manager.py `KVCacheManager.allocate_slots` / `get_computed_blocks`:

1. Running requests first, with a budget of `max_num_batched_tokens` tokens: each decode
   takes one token and, when its next token starts a block, one block from the pool. When the
   pool has no free block, the scheduler preempts the request at the end of the running list
   (the last admitted: `self.running.pop()` under the FCFS policy), frees its blocks, sets its
   computed tokens to 0 and puts it at the front of the waiting queue (recompute, not swap).
   Running requests still in a chunked prefill then take their next chunk from what is left of
   the budget, preempting the same way.
2. Only when nothing was preempted in this step, waiting requests in arrival order while the
   budget lasts and fewer than `max_num_seqs` run: prefix-cache hits first (whole blocks whose
   hashes are cached, at most (tokens - 1) // block_size of them, so the last token is always
   computed), then a chunk of min(remaining, budget) tokens whose blocks must all be free, or
   the queue stops there (head-of-line, first come first served).
3. After the forward pass, a request whose prompt is all computed samples a token (its first
   is the time to first token); each decode samples one; a request with all its output tokens
   finishes and frees its blocks. A freed block that holds a prompt block's hash stays cached
   (evictable, least recently freed first) until a new allocation needs it.

One simplification, said here: vLLM walks the running list once in admission order, so an
earlier request's prefill chunk can take budget before a later request's decode; here every
decode is scheduled before any chunk (as the brief puts it: "decodes first"), which differs only
when a chunk uses the whole budget.

Cost: linear in requests and steps. Decodes are not visited one by one: a decoding request
makes one token per step, so the steps at which it needs a block (every block_size steps, by
a fixed residue) and the step it finishes are known the step it starts decoding: a step reads
one count of the decodes needing a block, and pops from a heap only the requests that end in
it. The decode batch's context, which the step's time
depends on, is kept as a running sum. Steps of decodes alone (no request waiting or
prefilling, no arrival due, no preemption) run in one tight loop, `_decode_steps`, doing the
same float operations in the same order as the full step: results are unchanged, bit for bit
(tests/simulation/test_engine_speed.py steps the same workloads both ways).
"""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .errors import SimulationError
from .workload import Request

DECODE = 1
PREFILL = 2
WAITING = 0

# The step's time in ms: (decodes, their context tokens summed, the prefill chunks as
# (tokens already computed ahead of the chunk, the chunk's tokens)).
StepTimer = Callable[[int, int, Sequence[tuple[int, int]]], float]


@dataclass(frozen=True, slots=True)
class SglangLimits:
    """What SGLang's scheduler takes beyond the pool and the running cap (read in SGLang
    v0.5.23 `arg_groups/fields/schedule.py` `ServerArgs`; sglang_scheduler.py uses them)."""

    max_total_num_tokens: int  # the token pool (kvplan's SGLang capacity)
    chunked_prefill_size: int  # a prefill batch's chunk budget, tokens
    page_size: int = 1
    max_prefill_tokens: int = 16384  # a prefill batch's input budget, tokens
    schedule_conservativeness: float = 1.0

    def __post_init__(self) -> None:
        for name in ("max_total_num_tokens", "chunked_prefill_size", "page_size"):
            if getattr(self, name) < 1:
                raise SimulationError(name, "must be at least 1")
        if not self.schedule_conservativeness > 0:
            raise SimulationError("schedule_conservativeness", "must be above 0")


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """The scheduler's limits and the KV pool kvplan sized for the deployment. With `sglang`
    set, SGLang's scheduler runs (sglang_scheduler.py) over blocks of `block_size` tokens
    cut from its token pool; `max_num_seqs` is its max_running_requests and
    `max_num_batched_tokens` is not read."""

    num_gpu_blocks: int
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    enable_prefix_caching: bool = True
    sglang: SglangLimits | None = None

    def __post_init__(self) -> None:
        for name in (
            "num_gpu_blocks",
            "block_size",
            "max_num_seqs",
            "max_num_batched_tokens",
            "max_model_len",
        ):
            if getattr(self, name) < 1:
                raise SimulationError(name, "must be at least 1")


@dataclass(frozen=True, slots=True)
class Finished:
    """A request that ended: its times from arrival, in seconds."""

    arrival_s: float
    scheduled_s: float  # first scheduled (its queue time ends)
    first_token_s: float
    finished_s: float
    input_tokens: int
    output_tokens: int
    preempted: int


@dataclass(frozen=True, slots=True)
class Sample:
    """The engine at one moment: for the picture over time."""

    time_s: float
    running: int
    waiting: int
    kv_usage: float


@dataclass(frozen=True, slots=True)
class Run:
    """What one simulation produced, before statistics."""

    finished: tuple[Finished, ...]
    rejected: int  # longer than max_model_len, or than the whole pool
    steps: int
    preemptions: int
    end_s: float
    running_time_integral: float  # sum of running x step time (request-seconds)
    waiting_time_integral: float
    peak_kv_blocks: int
    kv_time_integral: float  # used blocks x seconds
    samples: tuple[Sample, ...]


def _decodes_alone(timer: StepTimer) -> Callable[[int, int], float]:
    """A step of decodes alone, timed by any timer."""

    def decode_step(decodes: int, decode_context: int) -> float:
        return timer(decodes, decode_context, ())

    return decode_step


class _Live:
    """A request inside the engine (mutable: the scheduler's own bookkeeping)."""

    __slots__ = (
        "arrival_s", "blocks", "c0", "computed", "first_token_s", "gen", "generated", "hashes",
        "held", "output", "phase", "preempted", "prompt", "registered", "scheduled_s", "t0",
    )  # fmt: skip

    def __init__(self, request: Request, arrival_s: float) -> None:
        self.arrival_s = arrival_s
        self.prompt = request.input_tokens
        self.output = request.output_tokens
        self.hashes = request.block_hashes or ()
        self.generated = 0
        self.computed = 0
        self.blocks = 0
        self.held: list[int] = []  # cached block hashes this request references
        self.registered = 0  # prompt blocks whose hash is settled (hit, cached or duplicate)
        self.phase = WAITING
        self.gen = 0  # bumped on preemption: heap entries of an older generation are stale
        self.t0 = 0
        self.c0 = 0
        self.first_token_s = -1.0
        self.scheduled_s = -1.0
        self.preempted = 0

    @property
    def target(self) -> int:
        """Tokens to compute before the next sample: the prompt and what was generated."""
        return self.prompt + self.generated


class _Pool:
    """The KV blocks: a count of free ones (including cached blocks no request references,
    evictable in the order they were freed) and the cached blocks' hashes with their
    reference counts (vllm/v1/core/block_pool.py `BlockPool`)."""

    __slots__ = ("cached", "evictable", "free", "total")

    def __init__(self, total: int) -> None:
        self.total = total
        self.free = total
        self.cached: dict[int, int] = {}
        # OrderedDict: popping the oldest is O(1) (a dict's first key after many deletions is not)
        self.evictable: OrderedDict[int, None] = OrderedDict()

    def take(self, count: int) -> None:
        uncached = self.free - len(self.evictable)
        for _ in range(count - uncached):  # evict the least recently freed cached blocks
            h, _ = self.evictable.popitem(last=False)
            del self.cached[h]
        self.free -= count

    def hits(self, hashes: Sequence[int], limit: int) -> tuple[int, int]:
        """Whole leading blocks cached, and how many of them are free (evictable) now."""
        n = evictable = 0
        cached = self.cached
        for h in hashes[:limit]:
            refs = cached.get(h)
            if refs is None:
                break
            n += 1
            evictable += refs == 0
        return n, evictable

    def reference(self, hashes: Sequence[int]) -> None:
        """One more reference to each cached block (a free one leaves the evictable list)."""
        cached = self.cached
        evictable = self.evictable
        taken = 0
        for h in hashes:
            refs = cached[h]
            if refs == 0:
                del evictable[h]
                taken += 1
            cached[h] = refs + 1
        self.free -= taken

    def release(self, blocks: int, held: list[int]) -> None:
        """Free a request's blocks; its cached ones stay cached until evicted."""
        freed = blocks - len(held)
        cached = self.cached
        for h in reversed(held):  # vLLM frees a request's blocks tail first
            refs = cached[h] - 1
            cached[h] = refs
            if refs == 0:
                self.evictable[h] = None
                freed += 1
        self.free += freed


class Engine:
    """The scheduler, the pool and the clock for one run (see the module docstring)."""

    def __init__(self, config: EngineConfig, step_ms: StepTimer, *, max_samples: int = 400) -> None:
        self.config = config
        self.step_ms = step_ms
        self.pool = _Pool(config.num_gpu_blocks)
        self.running: dict[_Live, None] = {}  # admission order; the last is preempted first
        self.prefilling: dict[_Live, None] = {}
        self.waiting: deque[_Live] = deque()
        self.needing = [0] * config.block_size  # decodes needing a block, by step residue
        self.allocated_to = 0  # the last step whose decodes were given their blocks
        self.end_heap: list[tuple[int, int, int, _Live]] = []
        self.seq = 0
        self.decodes = 0
        self.context_offset = (
            0  # sum over decodes of c0 - t0: their context at step s is this + decodes x s
        )
        self.tick = 0
        self.now = 0.0
        self.preemptions = 0
        self.finished: list[Finished] = []
        self.max_samples = max_samples
        self.samples: list[Sample] = []
        self.interval = 0.05  # seconds between samples, doubled as they fill
        self.next_sample = 0.0
        self.running_integral = self.waiting_integral = self.kv_integral = 0.0
        self.peak = 0

    # --- pool moves -----------------------------------------------------------------------

    def _blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.config.block_size)

    def _preempt_last(self) -> _Live:
        live, _ = self.running.popitem()
        self._preempt(live)
        self.waiting.appendleft(live)
        return live

    def _preempt(self, live: _Live) -> None:
        """Take a request out of the running list (its caller puts it back in the queue):
        its blocks freed, its computed tokens 0 (recompute, not swap)."""
        self.running.pop(live, None)
        if live.phase == DECODE:
            # Tokens computed: one a step after t0, up to the last step whose pass ran; its
            # blocks: up to the step its decode was last given room for.
            done = self.tick - live.t0
            live.generated += done
            live.computed = live.c0 + done
            live.blocks = self._blocks_for(live.c0 + self.allocated_to - live.t0)
            self.decodes -= 1
            self.context_offset -= live.c0 - live.t0
            self.needing[(live.t0 - live.c0 + 1) % self.config.block_size] -= 1
        else:
            self.prefilling.pop(live, None)
        self.pool.release(live.blocks, live.held)
        live.blocks = live.computed = live.registered = 0
        live.held = []
        live.phase = WAITING
        live.gen += 1
        live.preempted += 1
        self.preemptions += 1

    def _push(self, heap: list[tuple[int, int, int, _Live]], step: int, live: _Live) -> None:
        self.seq += 1
        heapq.heappush(heap, (step, self.seq, live.gen, live))

    def _start_decode(self, live: _Live, step: int) -> None:
        """A request that sampled a token after its prefill: from `step` on, one token a
        step. Its token of step s is the (c0 + s - t0)-th, which starts a block when
        c0 + s - t0 - 1 is a multiple of block_size: when s = t0 - c0 + 1 (mod block_size).
        So the decodes needing a block at a step are one count, by that residue."""
        live.phase = DECODE
        live.t0 = step
        live.c0 = live.computed
        self.decodes += 1
        self.context_offset += live.c0 - step
        self.needing[(step - live.c0 + 1) % self.config.block_size] += 1
        self._push(self.end_heap, step + live.output - live.generated, live)

    # --- one step -------------------------------------------------------------------------

    def _schedule_decodes(self, step: int) -> bool:
        """Give each decode whose token starts a block that block, preempting from the end of
        the running list while too few are free. True if anything was preempted."""
        residue = step % self.config.block_size
        preempted = False
        while self.pool.free < self.needing[residue]:
            self._preempt_last()  # a preempted needer leaves the count
            preempted = True
        self.pool.take(self.needing[residue])
        self.allocated_to = step
        return preempted

    def _chunk(self, live: _Live, budget: int) -> tuple[int, int]:
        tokens = min(live.target - live.computed, budget)
        return tokens, self._blocks_for(live.computed + tokens) - live.blocks

    def _schedule_prefills(self, budget: int, chunks: list[tuple[_Live, int]]) -> tuple[int, bool]:
        """Running requests' next prefill chunks, in admission order."""
        preempted = False
        for live in list(self.prefilling):
            if budget <= 0:
                break
            if live.phase != PREFILL:  # preempted by an earlier chunk of this step
                continue
            tokens, blocks = self._chunk(live, budget)
            while self.pool.free < blocks and live.phase == PREFILL:
                self._preempt_last()
                preempted = True
            if live.phase != PREFILL:
                break
            self.pool.take(blocks)
            live.blocks += blocks
            chunks.append((live, tokens))
            budget -= tokens
        return budget, preempted

    def _admit(self, budget: int, chunks: list[tuple[_Live, int]]) -> None:
        """Waiting requests, first come first served, while the budget, max_num_seqs and the
        pool allow."""
        config = self.config
        pool = self.pool
        while self.waiting and budget > 0 and len(self.running) < config.max_num_seqs:
            live = self.waiting[0]
            hit = evictable = 0
            if config.enable_prefix_caching and live.hashes:
                limit = min(len(live.hashes), (live.target - 1) // config.block_size)
                # Even if every hashed block hit, would the chunk's blocks be free? A head of
                # the queue that waits for blocks is asked again each step: skip the lookup.
                best = limit * config.block_size
                fewest = self._blocks_for(best + min(live.target - best, budget)) - limit
                if pool.free < fewest:
                    break
                hit, evictable = pool.hits(live.hashes, limit)
            computed = hit * config.block_size
            tokens = min(live.target - computed, budget)
            blocks = self._blocks_for(computed + tokens) - hit
            if pool.free - evictable < blocks:
                break
            self.waiting.popleft()
            self._start_prefill(live, hit, blocks)
            chunks.append((live, tokens))
            budget -= tokens

    def _start_prefill(self, live: _Live, hit: int, blocks: int) -> None:
        """A request leaves the queue for the running set: its `hit` prefix blocks referenced
        (computed already), `blocks` new ones taken for its first chunk; its prefill starts
        (vLLM's and SGLang's schedulers alike)."""
        live.held = list(live.hashes[:hit])
        self.pool.reference(live.held)
        live.registered = hit
        live.computed = hit * self.config.block_size
        self.pool.take(blocks)
        live.blocks = hit + blocks
        live.phase = PREFILL
        if live.scheduled_s < 0:
            live.scheduled_s = self.now
        self.running[live] = None
        self.prefilling[live] = None

    def _register(self, live: _Live) -> None:
        """Cache the hashes of the prompt blocks this chunk filled (a hash already cached by
        another request's block leaves this one a private block)."""
        full = min(len(live.hashes), live.computed // self.config.block_size)
        cached = self.pool.cached
        for j in range(live.registered, full):
            h = live.hashes[j]
            if h not in cached:
                cached[h] = 1
                live.held.append(h)
        live.registered = max(live.registered, full)

    def _finish(self, live: _Live) -> None:
        self.running.pop(live, None)
        self.prefilling.pop(live, None)
        self.pool.release(live.blocks, live.held)
        live.gen += 1
        self.finished.append(
            Finished(live.arrival_s, live.scheduled_s, live.first_token_s, self.now,
                     live.prompt, live.output, live.preempted)
        )  # fmt: skip

    def _after_pass(self, step: int, chunks: list[tuple[_Live, int]]) -> int:
        """Sample, finish and free after the forward pass; the number of requests finished."""
        ended = 0
        for live, tokens in chunks:
            live.computed += tokens
            if live.hashes:
                self._register(live)
            if live.computed < live.target:
                continue
            del self.prefilling[live]
            live.generated += 1
            if live.first_token_s < 0:
                live.first_token_s = self.now
            if live.generated >= live.output:
                self._finish(live)
                ended += 1
            else:
                self._start_decode(live, step)
        return ended + self._end_decodes(step)

    def _end_decodes(self, step: int) -> int:
        """Finish the decodes whose last token was sampled at `step`; how many."""
        ended = 0
        heap = self.end_heap
        while heap and heap[0][0] <= step:
            _, _, gen, live = heapq.heappop(heap)
            if gen != live.gen or live.phase != DECODE:
                continue
            self.decodes -= 1
            self.context_offset -= live.c0 - live.t0
            self.needing[(live.t0 - live.c0 + 1) % self.config.block_size] -= 1
            live.blocks = self._blocks_for(live.c0 + step - live.t0)
            live.generated = live.output
            self._finish(live)
            ended += 1
        return ended

    # --- the run --------------------------------------------------------------------------

    def _fits(self, input_tokens: int, output_tokens: int) -> bool:
        """Within max_model_len and the whole pool (else rejected, never run)."""
        tokens = input_tokens + output_tokens
        config = self.config
        return tokens <= config.max_model_len and self._blocks_for(tokens) <= config.num_gpu_blocks

    def _on_idle(self) -> None:
        """Nothing runs or waits (a subclass's scheduler may reset an estimate)."""

    def _steps_run(self) -> int:
        """Forward passes run: one per tick here (a subclass may run passes that no decode
        takes part in)."""
        return self.tick

    def _record(self, dt: float) -> None:
        """The step's share of the averages, and a sample for the picture when one is due."""
        pool = self.pool
        used = pool.total - pool.free
        self.peak = max(self.peak, used)
        self.running_integral += len(self.running) * dt
        self.waiting_integral += len(self.waiting) * dt
        self.kv_integral += used * dt
        if self.now >= self.next_sample:
            self._sample(used)

    def _sample(self, used: int) -> None:
        """A sample for the picture (at most 2 x max_samples: when full, every other one is
        dropped and the gap doubled)."""
        self.samples.append(
            Sample(self.now, len(self.running), len(self.waiting), used / self.pool.total)
        )
        self.next_sample = self.now + self.interval
        if len(self.samples) >= 2 * self.max_samples:
            self.samples = self.samples[::2]
            self.interval *= 2

    def _decode_steps(self, until_s: float, stop_on_end: bool) -> tuple[int, int]:
        """Steps of decodes alone, in one tight loop: what `_step` and `_record` do when no
        request waits or prefills, while no arrival is due (`until_s`), no decode's block
        would need a preemption and, when `stop_on_end`, until a step finishes a request (a
        closed loop sends the next). The same operations in the same order as the full step
        (the same floats); (steps taken, requests finished in the last one)."""
        pool = self.pool
        needing = self.needing
        block_size = self.config.block_size
        timer = self.step_ms
        decode_step = getattr(timer, "decode_step", None) or _decodes_alone(timer)
        total = pool.total
        peak, running_integral, kv_integral = self.peak, self.running_integral, self.kv_integral
        now, next_sample, step = self.now, self.next_sample, self.tick
        heap = self.end_heap
        end_next = heap[0][0] if heap else 0
        decodes, offset, running = self.decodes, self.context_offset, len(self.running)
        steps = ended = 0
        while now < until_s and decodes:
            need = needing[(step + 1) % block_size]
            if need:
                free = pool.free
                if free < need:
                    break  # a preemption: the full step does it
                if need <= free - len(pool.evictable):
                    pool.free = free - need  # no cached block to evict
                else:
                    pool.take(need)
            step += 1
            steps += 1
            dt = decode_step(decodes, offset + decodes * step) / 1e3
            used = total - pool.free
            peak = max(peak, used)
            running_integral += running * dt
            kv_integral += used * dt
            if now >= next_sample:
                self.now = now
                self._sample(used)
                next_sample = self.next_sample
            now += dt
            if end_next <= step:
                self.now = now  # a request finished in this step ends at it
                ended = self._end_decodes(step)
                end_next = heap[0][0] if heap else 0
                decodes, offset, running = self.decodes, self.context_offset, len(self.running)
                if ended and stop_on_end:
                    break
            else:
                ended = 0
        if steps:
            self.now, self.tick, self.allocated_to = now, step, step
            self.peak, self.running_integral, self.kv_integral = peak, running_integral, kv_integral
        return steps, ended

    def _step(self) -> int | None:
        """One scheduler step and its forward pass; the requests it finished, or None when
        nothing could be scheduled (every candidate preempted: the next step admits)."""
        step = self.tick + 1
        chunks: list[tuple[_Live, int]] = []
        preempted = self._schedule_decodes(step)
        if self.prefilling or self.waiting:  # else a step of decodes alone: nothing to admit
            budget, more = self._schedule_prefills(
                self.config.max_num_batched_tokens - self.decodes, chunks
            )
            if not (preempted or more):
                self._admit(budget, chunks)
        if not self.decodes and not chunks:
            return None
        spans = [(live.computed, tokens) for live, tokens in chunks]
        decode_context = self.context_offset + self.decodes * step
        dt = self.step_ms(self.decodes, decode_context, spans) / 1e3
        self._record(dt)
        self.now += dt
        self.tick = step
        return self._after_pass(step, chunks)

    def run(self, requests: Sequence[Request], *, max_concurrency: int | None = None) -> Run:
        """Every request from arrival to its last token. Closed loop: `max_concurrency`
        clients, each sending the next request (arrivals ignored) when its last one ends."""
        accepted = [r for r in requests if self._fits(r.input_tokens, r.output_tokens)]
        queue = deque(accepted)
        if max_concurrency is not None:
            for _ in range(min(max_concurrency, len(queue))):
                self.waiting.append(_Live(queue.popleft(), 0.0))
        while True:
            if max_concurrency is None:
                while queue and queue[0].arrival_s <= self.now:
                    r = queue.popleft()
                    self.waiting.append(_Live(r, r.arrival_s))
            if not self.running and not self.waiting:
                self._on_idle()
                if not queue:
                    break
                self.now = max(self.now, queue[0].arrival_s)
                continue
            steps = 0
            ended: int | None = 0
            if not self.prefilling and not self.waiting:
                until = queue[0].arrival_s if queue and max_concurrency is None else math.inf
                steps, ended = self._decode_steps(
                    until, max_concurrency is not None and bool(queue)
                )
            if not steps:
                ended = self._step()
            if ended and max_concurrency is not None:
                for _ in range(min(ended, len(queue))):
                    self.waiting.append(_Live(queue.popleft(), self.now))
        return Run(
            tuple(self.finished), len(requests) - len(accepted), self._steps_run(),
            self.preemptions, self.now, self.running_integral, self.waiting_integral, self.peak,
            self.kv_integral, tuple(self.samples),
        )  # fmt: skip
