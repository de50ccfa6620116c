"""Speculative decoding: the drafter's KV in the shared pool, its weights, its scheduler slots.

Read in vLLM 0.33.0 (its wheel):

* vllm/config/speculative.py `SpeculativeConfig`: `method` (`mtp` and the per-family MTP names
  it renames to `mtp`: `deepseek_mtp`, `glm4_moe_mtp`, ...; `eagle`, `eagle3`, `draft_model`,
  `ngram`, `suffix`), `num_speculative_tokens`, `model` (the draft; `mtp` takes the target's own
  checkpoint, `update_arch_`), `draft_tensor_parallel_size` (1 or the target's TP,
  `_verify_and_get_draft_tp`). An MTP drafter has `n_predict` = config.json
  `num_nextn_predict_layers` layers (`hf_config_override`).
* vllm/v1/spec_decode/llm_base_proposer.py `load_model`: the drafter is built inside the
  target's GPUModelRunner.load_model, so its weights are part of "Model loading took"; its
  attention layers are the layers not in the target (`draft_attn_layer_names`), each with its
  own KV-cache spec, so get_kv_cache_groups groups them with the target's: the pool's pages
  grow by the draft layers' bytes per token. `_maybe_share_embeddings` / `_maybe_share_lm_head`:
  an MTP drafter takes the target's embeddings and head ("Detected MTP model"); an EAGLE head
  keeps its own unless they are missing from its checkpoint or equal to the target's.
* vllm/config/vllm.py `num_lookahead_tokens`: EAGLE, MTP and draft models reserve
  `num_speculative_tokens` KV slots per request past its scheduled tokens (the scheduler's
  `allocate_slots`); `_set_max_num_scheduled_tokens` leaves `max_num_batched_tokens` as given
  and refuses one no larger than the lookahead.
* `ngram` (and `suffix`) draft on the CPU from the prompt: no weights, no KV.

SGLang's separate draft pool (`sglang_drafter`, read in SGLang 0.5.23) is sized too; TensorRT-LLM
is refused by name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from ..errors import SizingError
from ..frozen import frozen
from ..model.architecture import Layer, ModelArchitecture, NoCache
from ..model.weights import weight_bytes_total
from ..units import cdiv
from .common import BudgetLine

FIELD: Final = "speculative_config"

# vllm/config/speculative.py MTPModelTypes: names SpeculativeConfig renames to `mtp`.
MTP_NAMES: Final = frozenset(
    {
        "mtp",
        "deepseek_mtp",
        "mimo_mtp",
        "glm4_moe_mtp",
        "glm4_moe_lite_mtp",
        "ernie_mtp",
        "qwen3_next_mtp",
        "longcat_flash_mtp",
        "pangu_ultra_moe_mtp",
    }
)
DRAFT_MODEL_METHODS: Final = frozenset({"eagle", "eagle3", "draft_model"})
NO_MEMORY_METHODS: Final = frozenset({"ngram", "suffix"})
METHODS: Final = MTP_NAMES | DRAFT_MODEL_METHODS | NO_MEMORY_METHODS

# Keys of vLLM's --speculative-config that change no GPU memory kvplan sizes: accepted, unused.
_NO_MEMORY_KEYS: Final = frozenset(
    {
        "prompt_lookup_max",
        "prompt_lookup_min",
        "disable_by_batch_size",
        "revision",
        "code_revision",
        "rejection_sample_method",
        "draft_sample_method",
        "acceptance_rate_threshold",
    }
)
_KEYS: Final = (
    frozenset({"method", "model", "num_speculative_tokens", "draft_tensor_parallel_size"})
    | _NO_MEMORY_KEYS
)


@frozen
class SpeculativeConfig:
    """vLLM's --speculative-config as kvplan sizes it.

    `method` is vLLM's name (an MTP family name already read as `mtp`); `model` the draft as
    given; `draft` its architecture, resolved by the caller from the catalog or inline (EAGLE,
    EAGLE3 and draft models; None for `mtp`, whose layers are the target's, and `ngram`).
    """

    method: str
    num_speculative_tokens: int
    model: str | None = None
    draft_tensor_parallel_size: int | None = None
    draft: ModelArchitecture | None = None

    @property
    def needs_draft_model(self) -> bool:
        return self.method in DRAFT_MODEL_METHODS

    @property
    def lookahead_tokens(self) -> int:
        """vllm/config/vllm.py num_lookahead_tokens: KV slots a request reserves past its
        tokens (0 for ngram, which writes no KV)."""
        return 0 if self.method in NO_MEMORY_METHODS else self.num_speculative_tokens


def parse_speculative_config(value: Mapping[str, Any]) -> SpeculativeConfig:
    """vLLM's --speculative-config JSON object -> SpeculativeConfig (`draft` left to the caller).

    A key vLLM has that changes memory kvplan does not size (the draft's own `quantization`,
    `max_model_len`, ...) is refused by name; keys that change none are accepted.
    """
    for key in value:
        if key not in _KEYS:
            raise SizingError(
                f"{FIELD}.{key}",
                "kvplan sizes method, model, num_speculative_tokens and "
                "draft_tensor_parallel_size; this key changes the draft in a way it does not "
                "model yet: remove it",
            )
    method = value.get("method")
    model = value.get("model")
    if method is None:
        raise SizingError(
            f"{FIELD}.method",
            f"give the method ({', '.join(sorted(METHODS))}); kvplan does not guess it from "
            "the draft's name",
        )
    if not isinstance(method, str) or method.strip().lower() not in METHODS:
        raise SizingError(
            f"{FIELD}.method", f"{method!r} is not one of {', '.join(sorted(METHODS))}"
        )
    method = method.strip().lower()
    if method in MTP_NAMES:
        method = "mtp"
    tokens = value.get("num_speculative_tokens")
    if not isinstance(tokens, int) or isinstance(tokens, bool) or not 1 <= tokens <= 64:
        raise SizingError(
            f"{FIELD}.num_speculative_tokens", "give a whole number of draft tokens, 1 to 64"
        )
    draft_tp = value.get("draft_tensor_parallel_size")
    if draft_tp is not None and (
        not isinstance(draft_tp, int) or isinstance(draft_tp, bool) or draft_tp < 1
    ):
        raise SizingError(f"{FIELD}.draft_tensor_parallel_size", "must be a positive integer")
    if method in DRAFT_MODEL_METHODS and model is None:
        raise SizingError(f"{FIELD}.model", f"method {method} needs the draft model")
    if model is not None and method not in DRAFT_MODEL_METHODS:
        raise SizingError(
            f"{FIELD}.model",
            f"method {method} takes no draft model"
            + (" (mtp drafts with the target's own MTP layers)" if method == "mtp" else ""),
        )
    return SpeculativeConfig(
        method=method,
        num_speculative_tokens=tokens,
        model=None if model is None else str(model),
        draft_tensor_parallel_size=draft_tp,
    )


@frozen
class Drafter:
    """What a drafter adds to one worker: cache layers in the pool, weights, lookahead slots."""

    config: SpeculativeConfig
    layers: tuple[Layer, ...]  # cache layers the drafter adds to the KV-cache groups
    weights_bytes_per_gpu: int
    note: str

    def budget_line(self) -> BudgetLine:
        return BudgetLine(
            "speculative_draft_weights",
            -self.weights_bytes_per_gpu,
            f"{self.config.method} drafter's weights on this GPU (loaded with the model)",
        )


def vllm_drafter(
    arch: ModelArchitecture, config: SpeculativeConfig, tensor_parallel_size: int
) -> Drafter:
    """The drafter vLLM builds beside `arch` (module docstring), on one of `tensor_parallel_size`
    ranks."""
    draft_tp = config.draft_tensor_parallel_size
    if draft_tp is not None and draft_tp != tensor_parallel_size:
        raise SizingError(
            f"{FIELD}.draft_tensor_parallel_size",
            f"kvplan sizes a drafter sharded as the target (tensor_parallel_size "
            f"{tensor_parallel_size}); {draft_tp} is not modelled yet",
        )
    if config.method in NO_MEMORY_METHODS:
        return Drafter(
            config,
            (),
            0,
            f"speculative decoding ({config.method}, {config.num_speculative_tokens} tokens): "
            "drafts from the prompt on the CPU, no draft weights or KV",
        )
    if config.method == "mtp":
        layers, weights = _mtp_draft(arch)
        what = f"{len(layers)} MTP layer(s) of the model's own checkpoint"
    else:
        draft = config.draft
        if draft is None:
            raise SizingError(f"{FIELD}.model", f"method {config.method} needs the draft model")
        layers = tuple(layer for layer in draft.layers if not isinstance(layer, NoCache))
        weights = weight_bytes_total(draft)
        what = f"draft {config.model}: {len(layers)} cache layer(s)"
    per_gpu = cdiv(weights, tensor_parallel_size)
    return Drafter(
        config,
        layers,
        per_gpu,
        f"speculative decoding ({config.method}, {config.num_speculative_tokens} tokens): "
        f"{what} share the KV pool's pages, {per_gpu:,} B of draft weights per GPU, and "
        f"each request reserves {config.lookahead_tokens} lookahead slots (vLLM "
        "num_lookahead_tokens); the drafter's own profile-run activations are not modelled",
    )


def _mtp_draft(arch: ModelArchitecture) -> tuple[tuple[Layer, ...], int]:
    """An MTP drafter's cache layers (n_predict copies of the model's last decoder layer's
    attention: deepseek_mtp.py DeepSeekMultiTokenPredictorLayer holds a full decoder layer)
    and the bytes it loads."""
    count = arch.num_nextn_predict_layers
    if count < 1 or arch.mtp_weight_bytes is None:
        raise SizingError(
            f"{FIELD}.method",
            "mtp drafts with the model's own multi-token-prediction layers, and this model "
            "declares none: give its config.json ({hf_config: ...}, whose "
            "num_nextn_predict_layers kvplan reads) or num_nextn_predict_layers and "
            "mtp_weight_bytes inline",
        )
    if arch.mtp_layers:
        # DeepSeek-V4 (models/deepseek_v4/nvidia/mtp.py DeepSeekV4MultiTokenPredictorLayer):
        # each MTP layer is a DeepseekV4DecoderLayer of index num_hidden_layers + i, whose
        # caches are those of its own compress ratio (hf_deepseek_v4.draft_layers)
        if len(arch.mtp_layers) != count:
            raise SizingError(
                "mtp_layer_schedule",
                f"lists {len(arch.mtp_layers)} MTP layers, num_nextn_predict_layers is {count}",
            )
        return arch.mtp_layers, arch.mtp_weight_bytes
    last = next(layer for layer in reversed(arch.layers) if not isinstance(layer, NoCache))
    return (last,) * count, arch.mtp_weight_bytes


def with_draft_layers(arch: ModelArchitecture, drafter: Drafter) -> ModelArchitecture:
    """The model as the KV-cache groups see it: the target's layers, then the drafter's."""
    if not drafter.layers:
        return arch
    return replace(arch, layers=arch.layers + drafter.layers)


# SGLang --speculative-algorithm (python/sglang/srt/speculative/spec_info.py
# SpeculativeAlgorithm) as vLLM's method names: NEXTN is the model's own MTP layers.
SGLANG_ALGORITHMS: Final = {
    "eagle": "eagle",
    "eagle3": "eagle3",
    "nextn": "mtp",
    "standalone": "draft_model",
    "ngram": "ngram",
}


def sglang_speculative_config(
    algorithm: str, draft_model_path: str | None, num_draft_tokens: int | None
) -> SpeculativeConfig:
    """SGLang's --speculative-algorithm and --speculative-draft-model-path as the config kvplan
    sizes (the draft resolved by the caller, as for vLLM's `model`)."""
    method = SGLANG_ALGORITHMS.get(algorithm.strip().lower())
    if method is None:
        raise SizingError(
            "speculative_algorithm",
            f"{algorithm!r}: kvplan sizes {', '.join(a.upper() for a in SGLANG_ALGORITHMS)}",
        )
    if method == "mtp" and draft_model_path is not None:
        method = "eagle"  # a NEXTN draft given by path is read as SGLang reads any draft
    if method in DRAFT_MODEL_METHODS and draft_model_path is None:
        raise SizingError(
            "speculative_draft_model_path", f"{algorithm} needs the draft model's path"
        )
    return SpeculativeConfig(
        method=method,
        num_speculative_tokens=num_draft_tokens or 1,
        model=draft_model_path,
    )


def sglang_drafter(arch: ModelArchitecture, config: SpeculativeConfig) -> Drafter:
    """SGLang 0.5.23's draft KV pool: the draft worker's own pool of the target's token count
    (max_total_num_tokens), which the target's profile pays for by growing its cell size by
    int(cell x eagle_draft_num_layers / num_layers): the draft's layers priced at the target's
    per-layer size (python/sglang/srt/model_executor/pool_configurator.py, "EAGLE/STANDALONE:
    assumes the draft shares the target's per-layer KV size"). eagle_draft_num_layers is the
    draft's num_nextn_predict_layers, else its layers (model_runner_components/
    spec_aux_hidden_state.py). The draft's weights load after the pool, out of the memory
    mem_fraction_static leaves: no line of the pool's budget."""
    if config.method in NO_MEMORY_METHODS:
        return Drafter(config, (), 0, "speculative decoding (NGRAM): no draft weights or KV")
    cache_layers = [layer for layer in arch.layers if not isinstance(layer, NoCache)]
    if arch.has_state_layers or len({type(layer) for layer in cache_layers}) > 1:
        raise SizingError(
            "speculative_algorithm",
            "kvplan sizes SGLang's draft pool beside one uniform token pool; this model's "
            "hybrid pools with a draft are not modelled yet",
        )
    if config.method == "mtp":
        count = arch.num_nextn_predict_layers
        if count < 1:
            raise SizingError(
                "speculative_algorithm",
                "NEXTN drafts with the model's own MTP layers, and this model declares none "
                "(num_nextn_predict_layers in its config.json)",
            )
    else:
        draft = config.draft
        if draft is None:
            raise SizingError("speculative_draft_model_path", "the draft model is needed")
        count = draft.num_nextn_predict_layers or sum(
            not isinstance(layer, NoCache) for layer in draft.layers
        )
    return Drafter(
        config,
        (cache_layers[-1],) * count,
        0,
        f"speculative decoding (SGLang {config.method}): the draft pool holds {count} "
        "layer(s) at the target's per-layer size for every token of the target's pool; the "
        "draft's weights load outside mem_fraction_static's pool (from its reserve)",
    )


def refuse_speculative(engine: str, pipeline_parallel_size: int) -> None:
    """Raise where kvplan does not size a drafter: another engine, or pipeline stages."""
    if engine not in ("vllm", "sglang"):
        raise SizingError(
            FIELD,
            f"kvplan sizes vLLM's and SGLang's drafters only; {engine}'s is not modelled yet",
        )
    if pipeline_parallel_size > 1:
        raise SizingError(
            FIELD,
            "kvplan sizes a drafter on one pipeline stage only (pipeline_parallel_size 1)",
        )


_SGLANG_NAMES: Final = {method: algorithm for algorithm, method in SGLANG_ALGORITHMS.items()}


def speculative_flags(config: SpeculativeConfig) -> dict[str, list[str]]:
    """The flags to paste for the drafter kvplan sized: vLLM's --speculative-config and SGLang's
    --speculative-* (the draft as given: a catalog slug where it was one)."""
    vllm: dict[str, object] = {"method": config.method}
    if config.model is not None:
        vllm["model"] = config.model
    vllm["num_speculative_tokens"] = config.num_speculative_tokens
    sglang = [f"--speculative-algorithm {_SGLANG_NAMES[config.method].upper()}"]
    if config.model is not None:
        sglang.append(f"--speculative-draft-model-path {config.model}")
    return {
        "vllm": [f"--speculative-config '{json.dumps(vllm, separators=(',', ':'))}'"],
        "sglang": sglang,
    }
