"""Typed reads of a parsed Hugging Face `config.json`, each failure naming the config key.

`HFConfig` is the language-model part of a config (nested under `text_config`, `llm_config` or
`language_config` in multimodal configs) plus the top level it may be nested in; `ConfigView` is
any other object inside it (a `vision_config`). Every read that fails raises
`SizingError(field, reason)` with the key as the config spells it, prefixed by where it sits
(`text_config.intermediate_size`), so the HTTP layer can answer 422 naming it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from ..errors import SizingError, UnknownLayerKind

# Keys under which multimodal configs nest the language model (transformers `sub_configs`:
# Gemma3Config/Llama4Config/Qwen3_5Config/Gemma4Config use `text_config`; InternVL `llm_config`;
# DeepSeek-VL2 `language_config`).
NESTED_LM_KEYS: Final = ("text_config", "llm_config", "language_config")

# What a composite config's class fills in for a nested language model that leaves keys out:
# transformers builds the sub-config as `CONFIG_MAPPING[model_type](**text_config)`
# (models/llava/configuration_llava.py `LlavaConfig.__init__`), so a missing key reads as that
# class's default. Early LLaVA-1.5 exports (llava-hf/llava-1.5-7b-hf and its quantizations)
# give only the vocabulary and context: every shape is LlamaConfig's
# (models/llama/configuration_llama.py `LlamaConfig.__init__`, the Llama-2-7B geometry;
# num_key_value_heads None means num_attention_heads, which kvplan already assumes).
NESTED_LM_DEFAULTS: Final[Mapping[str, Mapping[str, Any]]] = {
    "llama": {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
    },
}

# Upper bounds of the counts a config may claim. No published model comes near any of them (the
# largest in tests/fixtures/hf_configs and the shipped catalog: 126 layers, 128 heads, 384
# experts, hidden_size 16384, intermediate_size 53248, vocab_size 262208, Llama 4 Scout's
# max_position_embeddings 10485760); a config claiming more is refused (SizingError naming the
# key: a 422) rather than unrolled one layer at a time or carried into the arithmetic.
MAX_LAYERS: Final = 4096
MAX_HEADS: Final = 65_536  # attention, KV, linear-attention, Mamba and indexer heads
MAX_EXPERTS: Final = 65_536
MAX_VOCAB: Final = 1 << 24  # vocabularies and embedding tables (rows)
MAX_POSITIONS: Final = 1 << 30  # context lengths, windows and chunks (tokens)
# Every other integer a config holds (hidden and intermediate sizes, head dimensions, ranks,
# state sizes, kernels, periods, image and patch sizes): widths, and counts smaller than them.
MAX_WIDTH: Final = 1 << 20
# Any real number a config holds (scales, ratios, thetas).
MAX_FLOAT: Final = 1e30

_BOUNDS: Final[Mapping[str, int]] = {
    **dict.fromkeys(
        (
            "num_hidden_layers",
            "n_layer",
            "depth",
            "num_nextn_predict_layers",
            "mtp_num_hidden_layers",
            "num_kv_shared_layers",
            "first_k_dense_replace",
            "max_window_layers",
        ),
        MAX_LAYERS,
    ),
    **dict.fromkeys(
        (
            "num_attention_heads",
            "n_head",
            "n_heads",
            "num_key_value_heads",
            "num_kv_heads",
            "n_head_kv",
            "num_global_key_value_heads",
            "linear_num_key_heads",
            "linear_num_value_heads",
            "mamba_num_heads",
            "mamba_n_heads",
            "index_n_heads",
            "n_groups",
            "mamba_n_groups",
        ),
        MAX_HEADS,
    ),
    **dict.fromkeys(
        (
            "num_experts",
            "num_local_experts",
            "n_routed_experts",
            "n_shared_experts",
            "num_experts_per_tok",
            "num_experts_per_token",
            "experts_per_token",
            "moe_topk",
            "top_k_experts",
        ),
        MAX_EXPERTS,
    ),
    **dict.fromkeys(
        (
            "vocab_size",
            "padded_vocab_size",
            "embedding_size",
            "additional_vocab_size",
            "vocab_size_per_layer_input",
            "num_position_embeddings",
            "position_embedding_size",
        ),
        MAX_VOCAB,
    ),
    **dict.fromkeys(
        ("max_position_embeddings", "sliding_window", "attention_chunk_size"), MAX_POSITIONS
    ),
}


def bound(key: str) -> int:
    """The largest value kvplan reads for config key `key` (`moe_layers[3]` reads as
    `moe_layers`)."""
    return _BOUNDS.get(key.partition("[")[0], MAX_WIDTH)


def _shown(value: Any) -> str:
    """A config value for a message: a huge integer by its size (printing 10^400 would fill the
    answer, and a float would overflow)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        return f"a {len(str(abs(value)))}-digit number"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class RecordedKeys(Mapping[str, Any]):
    """A config object that remembers which keys were looked up (`read`).

    Every lookup (`get`, `[]`, `in`) counts as a read, whatever the answer; iterating does not.
    `config_guard` uses it to refuse a config whose cache-changing keys no reader looked at.
    """

    __slots__ = ("_data", "read")

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return self._data.get(key, default)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.read.add(key)
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    @property
    def unrecorded(self) -> Mapping[str, Any]:
        """The object itself, for looking at keys without counting them as read."""
        return self._data

    def __len__(self) -> int:
        return len(self._data)


class ConfigView:
    """One JSON object of a config, with the dotted path it sits at."""

    def __init__(self, data: Mapping[str, Any], prefix: str = "") -> None:
        self.lm: Mapping[str, Any] = data
        self.prefix = prefix

    def where(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def has(self, key: str) -> bool:
        return self.lm.get(key) is not None

    def raw(self, key: str) -> Any:
        return self.lm.get(key)

    def check_int(self, key: str, value: Any, minimum: int = 1) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SizingError(self.where(key), f"must be an integer, got {_shown(value)}")
        if value < minimum:
            raise SizingError(self.where(key), f"must be >= {minimum}, got {_shown(value)}")
        maximum = bound(key)
        if value > maximum:
            raise SizingError(
                self.where(key), f"{_shown(value)} is more than kvplan reads (at most {maximum})"
            )
        return value

    def get_int(self, key: str, default: int | None = None, minimum: int = 1) -> int:
        value = self.lm.get(key)
        if value is None:
            if default is None:
                raise SizingError(self.where(key), "is required and missing from the config")
            return default
        return self.check_int(key, value, minimum)

    def opt_int(self, key: str, minimum: int = 1) -> int | None:
        value = self.lm.get(key)
        return None if value is None else self.check_int(key, value, minimum)

    def first_int(self, keys: Sequence[str], default: int | None = None) -> int:
        for key in keys:
            if self.has(key):
                return self.get_int(key)
        if default is not None:
            return default
        also = f" (also looked for {', '.join(keys[1:])})" if len(keys) > 1 else ""
        raise SizingError(self.where(keys[0]), f"is required and missing{also}")

    def layer_count(self, key: str, default: int | None = None) -> int:
        """A number of layers (or MTP layers, or ViT blocks), at most MAX_LAYERS."""
        n = self.get_int(key, default=default, minimum=0 if default == 0 else 1)
        if n > MAX_LAYERS:
            raise SizingError(self.where(key), f"{n} layers: kvplan reads at most {MAX_LAYERS}")
        return n

    def _list(self, key: str, what: str) -> list[Any] | None:
        value = self.lm.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise SizingError(self.where(key), f"must be a list{what}")
        if len(value) > MAX_LAYERS:
            raise SizingError(
                self.where(key), f"has {len(value)} entries: kvplan reads at most {MAX_LAYERS}"
            )
        return value

    def get_float(self, key: str, default: float | None = None) -> float:
        value = self.lm.get(key)
        if value is None:
            if default is None:
                raise SizingError(self.where(key), "is required and missing from the config")
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SizingError(self.where(key), f"must be a number, got {_shown(value)}")
        if not abs(value) <= MAX_FLOAT:  # also inf and nan (json reads 1e400 as inf, NaN as nan)
            raise SizingError(self.where(key), f"{_shown(value)} is not a number kvplan reads")
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.lm.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise SizingError(self.where(key), f"must be true or false, got {value!r}")
        return value

    def str_list(self, key: str) -> list[str] | None:
        value = self._list(key, "")
        if value is None:
            return None
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise UnknownLayerKind(
                    self.where(f"{key}[{index}]"), f"must be a layer type name, got {item!r}"
                )
        return list(value)

    def int_list(self, key: str, minimum: int = 0) -> list[int] | None:
        value = self._list(key, " of integers")
        if value is None:
            return None
        return [self.check_int(f"{key}[{i}]", item, minimum) for i, item in enumerate(value)]

    def sub(self, key: str) -> ConfigView | None:
        """The object under `key` (a `vision_config`), or None when absent or null."""
        value = self.lm.get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise SizingError(self.where(key), "must be an object")
        return ConfigView(value, f"{self.where(key)}.")


class HFConfig(ConfigView):
    """The language-model part of a config, plus the top level it may be nested in."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        if not isinstance(config, Mapping):
            raise SizingError("config", "must be a JSON object (the parsed config.json)")
        recorded = RecordedKeys(config)
        super().__init__(recorded)
        self.top: Mapping[str, Any] = recorded
        self.recorded = recorded
        for key in NESTED_LM_KEYS:
            sub = config.get(key)
            if sub is None:
                continue
            if not isinstance(sub, Mapping):
                raise SizingError(key, "must be an object")
            defaults = NESTED_LM_DEFAULTS.get(str(sub.get("model_type")), {})
            self.recorded = RecordedKeys({**defaults, **sub})
            self.lm, self.prefix = self.recorded, f"{key}."
            self.top = config
            break
        model_type = self.lm.get("model_type") or config.get("model_type") or ""
        if not isinstance(model_type, str):
            raise SizingError(self.where("model_type"), "must be a string")
        self.model_type: str = model_type
        top_type = config.get("model_type") or model_type
        self.top_model_type: str = top_type if isinstance(top_type, str) else model_type

    def top_or_lm(self, key: str) -> tuple[str, Any] | None:
        """`(field, value)` from the LM config, else the top level (dtype lives at the top)."""
        if self.lm.get(key) is not None:
            return self.where(key), self.lm[key]
        if self.top.get(key) is not None:
            return key, self.top[key]
        return None

    @property
    def keys_read(self) -> frozenset[str]:
        """The language model's keys looked up so far (present in the config or not)."""
        return frozenset(self.recorded.read)

    def top_view(self) -> ConfigView:
        return ConfigView(self.top)


__all__ = [
    "MAX_EXPERTS",
    "MAX_HEADS",
    "MAX_LAYERS",
    "MAX_POSITIONS",
    "MAX_VOCAB",
    "MAX_WIDTH",
    "NESTED_LM_DEFAULTS",
    "NESTED_LM_KEYS",
    "ConfigView",
    "HFConfig",
    "RecordedKeys",
    "bound",
]
