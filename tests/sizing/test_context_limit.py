"""The longest max_model_len an engine starts with, derived from published config.json files.

Every config is a file in tests/fixtures/hf_configs as published (tests/fixtures/hf_configs/
SOURCES.md). Each limit is worked by hand from vLLM's `_get_and_verify_max_len`
(vllm/config/model.py; docs/engines/vllm.md#max-model-len): the smallest length key, times the
rope scaling factor unless the rope type is su / longrope / llama3 (yarn: its
original_max_position_embeddings times the factor), Gemma 3 left unscaled, 2048 with no key.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.sizing.engines.common import Engine, EngineOptions
from service.sizing.errors import SizingError
from service.sizing.model.context_limit import check_max_model_len
from service.sizing.model.hf_config import architecture_from_hf_config

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"


@pytest.mark.parametrize(
    ("config", "limit"),
    [
        # max_position_embeddings 131072; rope_type llama3 is not multiplied
        ("meta-llama--Meta-Llama-3.1-8B.json", 131_072),
        # rope_scaling linear, factor 8: 131,072 x 8
        ("Irfanuruchi--Llama-3.1-8B-Computer-Networks-LLM.json", 1_048_576),
        # "type": "yarn" (vLLM patch_rope_scaling reads it as rope_type): 4,096 x 40
        ("deepseek-ai--DeepSeek-V3.json", 163_840),
        # rope_type yarn, factor 32, original 4,096: 4,096 x 32
        ("openai--gpt-oss-20b.json", 131_072),
        # gemma3_text with linear factor 8: Gemma 3's length is already scaled
        ("google--medgemma-27b-it.json", 131_072),
        # max_position_embeddings 32768 and seq_length 8192: the smallest key
        ("stvlynn--Qwen-7B-Chat-Cantonese.json", 8_192),
        # no length key at all: vLLM assumes 2048
        ("tiiuae--falcon-180B-chat.json", 2_048),
        # llama3 rope (factor 16) is not multiplied: max_position_embeddings 10,485,760
        ("meta-llama--Llama-4-Scout-17B-16E-Instruct.json", 10_485_760),
    ],
)
def test_the_derived_limit_of_published_configs(config: str, limit: int) -> None:
    arch = architecture_from_hf_config(json.loads((FIXTURES / config).read_text()))
    assert arch.max_model_len_limit == limit


def test_longer_is_refused_by_vllm_and_sglang_and_allowed_with_the_override() -> None:
    config = json.loads((FIXTURES / "meta-llama--Meta-Llama-3.1-8B.json").read_text())
    arch = architecture_from_hf_config(config)
    assert check_max_model_len(arch, 131_072, EngineOptions()) is None
    with pytest.raises(SizingError, match="VLLM_ALLOW_LONG_MAX_MODEL_LEN=1") as vllm:
        check_max_model_len(arch, 131_073, EngineOptions())
    assert vllm.value.field == "max_model_len"
    sglang = EngineOptions(engine=Engine.SGLANG)
    with pytest.raises(SizingError, match="SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"):
        check_max_model_len(arch, 300_000, sglang)
    allowed = EngineOptions(allow_long_max_model_len=True)
    warning = check_max_model_len(arch, 300_000, allowed)
    assert warning is not None
    assert "allow_long_max_model_len=true" in warning
    # TensorRT-LLM's own check is not modelled: a warning, not a refusal
    trtllm = check_max_model_len(arch, 300_000, EngineOptions(engine=Engine.TRTLLM))
    assert trtllm is not None
    assert "not modelled" in trtllm


@pytest.mark.parametrize(
    ("config", "limit"),
    [
        # SGLang get_context_length (python/sglang/srt/utils/hf_transformers_utils.py): the
        # first of max_sequence_length, seq_length, max_seq_len, model_max_length,
        # max_position_embeddings, times rope_scaling's factor unless the scaling has
        # original_max_position_embeddings or is llama3.
        ("meta-llama--Meta-Llama-3.1-8B.json", 131_072),  # llama3: not multiplied
        ("deepseek-ai--DeepSeek-V3.json", 163_840),  # yarn names its original: 163,840 as is
        ("stvlynn--Qwen-7B-Chat-Cantonese.json", 8_192),  # seq_length comes first
        # Gemma 3 is not exempt in SGLang: linear factor 8 x 131,072
        ("google--medgemma-27b-it.json", 1_048_576),
    ],
)
def test_sglang_derives_its_own_context_length(config: str, limit: int) -> None:
    arch = architecture_from_hf_config(json.loads((FIXTURES / config).read_text()))
    assert arch.sglang_context_len == limit
    sglang = EngineOptions(engine=Engine.SGLANG)
    assert check_max_model_len(arch, limit, sglang) is None
    with pytest.raises(SizingError, match=f"above the {limit} tokens SGLang derives"):
        check_max_model_len(arch, limit + 1, sglang)


def test_the_catalog_limits_are_what_vllm_derives_from_the_published_configs() -> None:
    # Every catalog model whose config.json is a fixture: its max_position_embeddings (the
    # catalog's limit) is the length vLLM derives from that config.
    catalog = json.loads(
        (FIXTURES.parent.parent.parent / "service" / "catalog" / "data" / "models.json").read_text()
    )
    checked = []
    for entry in catalog:
        path = FIXTURES / f"{str(entry.get('hf_id')).replace('/', '--')}.json"
        if entry.get("hf_id") and path.is_file():
            arch = architecture_from_hf_config(json.loads(path.read_text()))
            assert entry["architecture"]["max_position_embeddings"] == arch.max_model_len_limit
            checked.append(entry["slug"])
    assert "deepseek-v3" in checked  # yarn: 4,096 x 40 = 163,840
    assert "gpt-oss-20b" in checked  # yarn: 4,096 x 32 = 131,072
    assert len(checked) >= 10
