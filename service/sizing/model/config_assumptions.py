"""What kvplan assumed for keys a Hugging Face `config.json` leaves out, said as warnings.

A config that gives `num_attention_heads` but no KV-head count is sized as multi-head attention
(one KV head per attention head, `hf_config._num_kv_heads`), as transformers reads it:
models/llama/configuration_llama.py `LlamaConfig.__init__` ("for backward compatibility",
num_key_value_heads None -> num_attention_heads), and as vLLM does
(vllm/config/model.py `ModelConfig.get_total_num_kv_heads`: with no KV-head attribute, "the
number of KV heads is equal to the number of attention heads"). The answer is right for a
model that really is MHA and 4-8x too large a KV cache for a GQA model whose export lost the
key, so the caller is told.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .config_view import NESTED_LM_KEYS

# Keys that give the KV heads (hf_config._num_kv_heads), or that make the model's KV something
# other than one head per attention head: multi-query (GPTBigCode), MLA's latent (DeepSeek).
_KV_HEAD_KEYS = ("num_key_value_heads", "num_kv_heads", "n_head_kv")
_NOT_MHA_KEYS = ("multi_query", "kv_lora_rank", "new_decoder_architecture")


def _language_model(hf_config: Mapping[str, Any]) -> Mapping[str, Any]:
    for key in NESTED_LM_KEYS:
        nested = hf_config.get(key)
        if isinstance(nested, Mapping):
            return nested
    return hf_config


def config_assumptions(hf_config: Mapping[str, Any]) -> tuple[str, ...]:
    """The warnings for keys the config leaves to its class's default (none when it gives
    them all)."""
    lm = _language_model(hf_config)
    heads = lm.get("num_attention_heads")
    if not isinstance(heads, int) or isinstance(heads, bool):
        return ()
    if any(key in lm for key in (*_KV_HEAD_KEYS, *_NOT_MHA_KEYS)):
        return ()
    return (
        f"the config has no num_key_value_heads: sized as multi-head attention, "
        f"{heads} KV heads (num_attention_heads), as transformers' LlamaConfig and vLLM "
        "assume; give num_key_value_heads if the model uses grouped-query attention",
    )
