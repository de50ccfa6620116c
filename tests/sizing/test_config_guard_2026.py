"""The config guard (issue 19 item 2) over the 2026 readers merged beside it.

Each test starts from a published config in tests/fixtures/hf_configs/ (SOURCES.md) and shows
that a key the guard now counts as read or moot really is: read keys are checked (a bad value
is refused naming it), and a moot key stops being moot when what supersedes it is gone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from service.sizing.errors import SizingError, UnknownLayerKind
from service.sizing.model.hf_config import architecture_from_hf_config, unexplained_keys

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize("key", ["mla_use_nope", "mla_use_output_gate", "attn_res_block_size"])
def test_kimi_k3_reads_its_mla_and_residual_keys(key: str) -> None:
    # The kimi_linear reader reads these three (hf_kimi_minimax.kimi_linear_layers): a value of
    # the wrong type is refused naming the key, not passed over.
    config = load("moonshotai--Kimi-K3")
    config["text_config"][key] = "yes"
    with pytest.raises(SizingError) as refused:
        architecture_from_hf_config(config)
    assert refused.value.field == f"text_config.{key}"


def test_glm_5_3_indexer_pattern_without_indexer_types_is_refused_by_name() -> None:
    # GLM-5.3's index_topk_freq (4) and index_skip_topk_offset (3) build indexer_types, which
    # the published config lists in full, so they are moot there. Without that list the
    # reader would put indexer keys on every layer while the pattern says 3 of 4 layers share
    # them: the config is refused naming the first pattern key in the config's order, not sized.
    config = load("zai-org--GLM-5.3")
    del config["indexer_types"]
    with pytest.raises(UnknownLayerKind) as refused:
        architecture_from_hf_config(config)
    assert refused.value.field == "index_skip_topk_offset"


def test_a_deepseek_v4_config_has_every_cache_key_read() -> None:
    # Every key of the published Flash config is explained (read for the cache, or declared
    # irrelevant); kv_source_layer_ids, DeepSeek-V4.1's shared-KV key, is a cache key V4's
    # reader does not read, so a V4 config carrying it is refused naming it.
    config = load("deepseek-ai--DeepSeek-V4-Flash")
    assert unexplained_keys(config) == ()
    config["kv_source_layer_ids"] = [0]
    with pytest.raises(UnknownLayerKind) as refused:
        architecture_from_hf_config(config)
    assert refused.value.field == "kv_source_layer_ids"
