"""A disaggregated deployment under a workload: a prefill pool, the KV transfer, a decode pool.

A request goes first to a prefill instance, which computes its prompt and samples one token
(vLLM's proxy sends it there with max_tokens 1: vllm tests/v1/kv_connector/nixl_integration/
toy_proxy_server.py), then its KV cache travels to a decode instance, which generates the
answer. Two engines are stepped, each as `engine.py` steps vLLM's scheduler:

1. The prefill replica, at request_rate / prefill replicas: every request with one output token,
   timed by the prefill replica's own step table. Request i's delay before the decode pool is
   d_i = (first token - arrival) + transfer_ms_per_token x input_i (queue, prefill, transfer).
2. The decode replica, at request_rate / decode replicas (the same seed, so request i has the
   same lengths in both runs: `draw_requests` draws each request's gap and lengths in turn),
   each request arriving d_i after its own arrival. Its prompt's KV arrives computed (a KV
   connector reports the prompt as externally computed tokens to the scheduler: vllm/
   distributed/kv_transfer/kv_connector/v1/base.py `KVConnectorBase_V1.
   get_num_new_matched_tokens`, which NixlConnector answers for a remote prefill), so a decode
   step is timed as decodes alone (`DecodeOnly`): no prefill chunk is computed there and none
   of the budget is spent on it, but the blocks of the whole prompt are taken from the pool
   when it is admitted, as the decode instance allocates them before the transfer.

The client's figures are request i's: TTFT = d_i + the decode replica's wait and its first step;
TPOT and the end-to-end latency from the decode run, shifted by d_i. The two replicas are
simulated apart (one replica of each pool, each at its share of the rate), as plans for a rate
simulate one replica of a single pool. Not modelled: the prefill instance keeps a prompt's
blocks until the decode instance has read them (the connector's `request_finished` delays
their release): here a prefill replica frees them at the first token.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from .deployment import StepTable
from .engine import Engine, EngineConfig, Finished
from .errors import SimulationError
from .results import Distribution, Summary, distribution, summarise
from .workload import Request, Workload, draw_requests


@dataclass(slots=True)
class DecodeOnly:
    """A decode instance's step: its decodes alone; a prompt whose KV arrived over the link
    adds no computed token (module docstring)."""

    table: StepTable

    def decode_step(self, decodes: int, decode_context: int) -> float:
        return self.table.decode_step(decodes, decode_context)

    def __call__(
        self, decodes: int, decode_context: int, chunks: Sequence[tuple[int, int]]
    ) -> float:
        del chunks  # computed by the prefill pool
        return self.table.decode_step(decodes, decode_context) if decodes else self.table(0, 0, ())


@dataclass(frozen=True, slots=True)
class Pool:
    """One replica of a pool as the simulator takes it."""

    config: EngineConfig
    table: StepTable


@dataclass(frozen=True, slots=True)
class DisaggregatedSummary:
    """The client's figures, and the two parts of the time to first token that each pool's
    replicas shorten: before the decode pool (prefill queue, prefill, transfer) and in it."""

    summary: Summary
    before_decode_ms: Distribution
    decode_wait_ms: Distribution


def decode_config(config: EngineConfig) -> EngineConfig:
    """The decode replica's scheduler: its prompts arrive computed, so none waits on the token
    budget (each step's budget holds a whole prompt besides the decodes)."""
    budget = max(config.max_num_batched_tokens, config.max_model_len + config.max_num_seqs)
    return dataclasses.replace(config, max_num_batched_tokens=budget)


def run_disaggregated(
    prefill: Pool,
    decode: Pool,
    workload: Workload,
    replicas: tuple[int, int],
    transfer_ms_per_token: float,
) -> DisaggregatedSummary:
    """One replica of each pool under the workload, the rate shared over `replicas`
    (prefill, decode); the client's percentiles (module docstring)."""
    if workload.request_rate is None:
        raise SimulationError("workload.request_rate", "a disaggregated run needs a rate")
    rate = workload.request_rate
    at_prefill = dataclasses.replace(workload, request_rate=rate / replicas[0])
    drawn = draw_requests(at_prefill, prefill.config.block_size)
    prompts = [dataclasses.replace(r, output_tokens=1) for r in drawn]
    prefilled = Engine(prefill.config, prefill.table).run(prompts).finished
    by_arrival = {f.arrival_s: f for f in prefilled}
    # the same requests at the decode replica's share (a duration's count is the prefill run's)
    at_decode = dataclasses.replace(
        workload, request_rate=rate / replicas[1], num_requests=len(drawn), duration_s=None
    )
    delays: dict[float, float] = {}  # a decode arrival's delay, by its arrival
    shifted: list[Request] = []
    for first, second in zip(
        drawn, draw_requests(at_decode, decode.config.block_size), strict=True
    ):
        done = by_arrival.get(first.arrival_s)
        if done is None:
            continue  # the prefill replica refused it (longer than its pool or max_model_len)
        delay = (
            done.first_token_s - done.arrival_s + transfer_ms_per_token * first.input_tokens / 1e3
        )
        arrival = second.arrival_s + delay
        delays[arrival] = delay
        shifted.append(dataclasses.replace(second, arrival_s=arrival))
    shifted.sort(key=lambda r: r.arrival_s)
    result = Engine(decode_config(decode.config), DecodeOnly(decode.table)).run(shifted)
    if not result.finished:
        raise SimulationError(
            "workload",
            f"no request fits: each needs at most max_model_len ({decode.config.max_model_len}) "
            "tokens",
        )
    client = tuple(_from_client(f, delays[f.arrival_s]) for f in result.finished)
    waits = [(f.scheduled_s - f.arrival_s) * 1e3 for f in result.finished]
    return DisaggregatedSummary(
        summarise(
            dataclasses.replace(
                result, finished=client, rejected=result.rejected + len(drawn) - len(shifted)
            ),
            decode.config.num_gpu_blocks,
        ),
        distribution([delays[f.arrival_s] * 1e3 for f in result.finished]),
        distribution(waits),
    )


def _from_client(done: Finished, delay_s: float) -> Finished:
    """A decode run's request seen by its client: it arrived `delay_s` earlier."""
    return dataclasses.replace(done, arrival_s=done.arrival_s - delay_s)
