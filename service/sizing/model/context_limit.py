"""The longest max_model_len an engine starts with: the limit it derives from config.json.

vLLM's `_get_and_verify_max_len` (vllm/config/model.py; vllm/config.py before 0.10) reads the
language model's config (docs/engines/vllm.md#max-model-len):

1. the smallest of the length keys present (`max_position_embeddings`, `n_positions`,
   `max_seq_len`, `seq_length`, `model_max_length`, `max_target_positions`,
   `max_sequence_length`, `max_seq_length`, `seq_len`); a `model_max_length` then wins outright
   (Command-R / Cohere);
2. rope scaling (`rope_scaling`, or transformers v5's `rope_parameters`): for any rope type but
   `su`, `longrope` and `llama3`, the length times `factor`, and for `yarn`
   `original_max_position_embeddings` times `factor`; Gemma 3's length is already scaled and
   is left alone;
3. no key at all: 2048.

A longer `--max-model-len` is refused at start-up ("User-specified max_model_len (...) is
greater than the derived max_model_len ...") unless `VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`, when it
only warns. SGLang refuses a longer `--context-length` the same way unless
`SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1` (python/sglang/srt/configs/model_config.py
`ModelConfig.__init__`), against the length its own `get_context_length` derives
(`sglang_context_len`). TensorRT-LLM's `max_seq_len` is not checked here.
"""

from __future__ import annotations

from typing import Any, Final

from ..engines.common import Engine, EngineOptions
from ..errors import SizingError
from .architecture import ModelArchitecture
from .config_view import HFConfig

# vllm/config/model.py `_get_and_verify_max_len` `possible_keys`, in its order.
_LENGTH_KEYS: Final = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
_UNSCALED_ROPE: Final = frozenset({"su", "longrope", "llama3"})
_NO_KEY_DEFAULT: Final = 2048
_ENV: Final = {
    Engine.VLLM: "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
    Engine.SGLANG: "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
}


def long_context_override(engine: Engine) -> str | None:
    """The environment setting with which `engine` starts past the model's limit (None: not
    modelled, TensorRT-LLM)."""
    return _ENV.get(engine)


def derived_max_model_len(cfg: HFConfig) -> int:
    """The max_model_len vLLM derives from a config (the module docstring's three steps)."""
    found = [cfg.get_int(key) for key in _LENGTH_KEYS if cfg.has(key)]
    derived: float = min(found) if found else _NO_KEY_DEFAULT
    if cfg.has("model_max_length"):
        derived = cfg.get_int("model_max_length")
    rope = _rope_parameters(cfg)
    if rope and "gemma3" not in cfg.model_type:
        factor = 1.0
        for where, params in rope:
            kind = params.get("rope_type") or params.get("type") or "default"
            if kind in _UNSCALED_ROPE:
                continue
            if params.get("factor") is not None:
                factor = _number(cfg, f"{where}.factor", params["factor"])
            original = params.get("original_max_position_embeddings")
            if kind == "yarn" and original is not None:
                derived = _number(cfg, f"{where}.original_max_position_embeddings", original)
        derived *= factor
    return int(derived)


# python/sglang/srt/utils/hf_transformers_utils.py `CONTEXT_LENGTH_KEYS`, in its order.
_SGLANG_KEYS: Final = (
    "max_sequence_length",
    "seq_length",
    "max_seq_len",
    "model_max_length",
    "max_position_embeddings",
)


def sglang_context_len(cfg: HFConfig) -> int:
    """The context length SGLang derives (`get_context_length`): the first of its keys found,
    times rope_scaling's `factor` unless the scaling names `original_max_position_embeddings`
    or is llama3; 2048 with no key."""
    factor = 1.0
    rope = cfg.raw("rope_scaling")
    if isinstance(rope, dict) and rope:
        if rope.get("factor") is not None:
            factor = _number(cfg, "rope_scaling.factor", rope["factor"])
        if "original_max_position_embeddings" in rope or rope.get("rope_type") == "llama3":
            factor = 1.0
    for key in _SGLANG_KEYS:
        if cfg.has(key):
            return int(factor * cfg.get_int(key))
    return _NO_KEY_DEFAULT


def max_model_len_limit(arch: ModelArchitecture, engine: Engine) -> int | None:
    """The longest max_model_len `engine` starts with for this model (None: unknown)."""
    if engine is Engine.SGLANG and arch.sglang_context_len is not None:
        return arch.sglang_context_len
    return arch.max_model_len_limit


def _rope_parameters(cfg: HFConfig) -> list[tuple[str, dict[str, Any]]]:
    """(config key, parameters) of each rope scaling the config declares."""
    for key in ("rope_parameters", "rope_scaling"):
        value = cfg.raw(key)
        if not isinstance(value, dict) or not value:
            continue
        if all(isinstance(v, dict) for v in value.values()):
            # transformers v5: one set of parameters per layer type
            return [(f"{key}.{name}", params) for name, params in value.items()]
        return [(key, value)]
    return []


def _number(cfg: HFConfig, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e9:
        raise SizingError(cfg.where(key), f"must be a positive number, got {value!r}")
    return float(value)


def check_max_model_len(
    arch: ModelArchitecture, max_model_len: int, engine: EngineOptions
) -> str | None:
    """Raise where the engine refuses `max_model_len` at start-up; the warning where the caller
    allowed it (allow_long_max_model_len), or None where it is within the model's limit."""
    limit = max_model_len_limit(arch, engine.engine)
    if limit is None or max_model_len <= limit:
        return None
    env = _ENV.get(engine.engine)
    if env is None:
        return (
            f"max_model_len {max_model_len} is beyond the model's limit {limit} "
            "(max_position_embeddings and rope scaling); TensorRT-LLM's own check is not modelled"
        )
    name, rule = (
        ("vLLM", "docs/engines/vllm.md#max-model-len")
        if engine.engine is Engine.VLLM
        else ("SGLang", "docs/engines/sglang.md#context-length")
    )
    said = (
        f"max_model_len {max_model_len} is above the {limit} tokens {name} derives from the "
        f"model's config (its length keys and rope scaling; {rule})"
    )
    if not engine.allow_long_max_model_len:
        raise SizingError(
            "max_model_len",
            f"{said}: {name} refuses it at start-up unless {env}; ask max_model_len <= {limit}, "
            "or allow_long_max_model_len=true to size it as the engine would with that override",
        )
    return (
        f"{said}; sized because allow_long_max_model_len=true ({env}): positions past {limit} "
        "may give NaNs or out-of-bounds errors"
    )
