"""The multimodal encoder's profile in vLLM's activation peak (issue 21 item 4), worked by hand.

vLLM 0.19.0 GPUModelRunner.profile_run (vllm/v1/worker/gpu_model_runner.py) runs
`mm_max_items_per_batch` dummy items of the largest size through the tower and keeps the batch
(`batched_dummy_mm_inputs`) and the outputs (`encoder_cache`) through the language model's dummy
run and the sampler; vllm/multimodal/encoder_budget.py MultiModalBudget._get_max_items counts
the items (service/sizing/engines/encoder.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.sizing import SizingError
from service.sizing.engines.common import EngineOptions
from service.sizing.engines.encoder import check_encoder_release, encoder_items, encoder_profile
from service.sizing.model.architecture import ModelArchitecture
from service.sizing.model.hf_config import architecture_from_hf_config
from service.sizing.model.schedule import architecture_from_dict, architecture_to_dict
from service.sizing.units import GiB

CONFIGS = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"


def _arch(name: str) -> ModelArchitecture:
    return architecture_from_hf_config(json.loads((CONFIGS / name).read_text()))


GEMMA = "google--medgemma-27b-it.json"  # gemma-3-27b-it's text and SigLIP shapes


def test_gemma_3_27b_encoder_profile_worked_by_hand() -> None:
    # config.json: mm_tokens_per_image 256; vision_config image_size 896, patch_size 14,
    # hidden_size 1152, intermediate_size 4304; text hidden_size 5376; bfloat16 (2 B).
    # The log (llm-d-planner google-gemma-3-27b-it, vLLM 0.19.0): max_num_batched_tokens 8192,
    # max_model_len 8192; max_num_seqs 1024 (0.19's H100 default).
    # budget = max(8192, 256) = 8192; items per prompt = max(1, min(999, 8192 // 256 = 32))
    # = 32; items = max(1, min(8192 // 256 = 32, 1024 x 32)) = 32.
    profile = encoder_profile(
        _arch(GEMMA),
        version=(0, 19, 0),
        max_num_batched_tokens=8192,
        max_num_seqs=1024,
        max_model_len=8192,
        limit_mm_per_prompt=None,
        skip_mm_profiling=False,
    )
    assert profile is not None
    assert (profile.encoder_budget, profile.items, profile.tokens_per_item) == (8192, 32, 256)
    # outputs: 32 x 256 x 5376 x 2 B = 88,080,384 B
    assert profile.output_bytes == 32 * 256 * 5376 * 2 == 88_080_384
    # pixel values, cast to bf16: 32 x 3 x 896 x 896 x 2 B = 154,140,672 B
    assert profile.pixel_bytes == 32 * 3 * 896 * 896 * 2 == 154_140_672
    # kept: 242,221,056 B = 0.2256 GiB, the -0.224 GiB kvplan's peak missed on this log
    assert profile.kept_bytes == 242_221_056
    assert round(profile.kept_bytes / GiB, 4) == 0.2256
    # the tower's floor: pixels + 32 x 4096 patches x (3 x 1152 + 2 x 4304) x 2 B
    assert profile.tower_forward_bytes == 154_140_672 + 32 * 4096 * 12_064 * 2


def test_limit_mm_per_prompt_and_skip_mm_profiling() -> None:
    arch = _arch(GEMMA)
    common = {"max_num_batched_tokens": 8192, "max_model_len": 8192, "version": (0, 19, 0)}
    # {"image": 1} at max_num_seqs 4: items = max(1, min(32, 4 x 1)) = 4
    one = encoder_profile(
        arch, max_num_seqs=4, limit_mm_per_prompt='{"image": 1}', skip_mm_profiling=False, **common
    )
    assert one is not None
    assert one.items == 4
    # 0 images: no tower modality left, compute_mm_encoder_budget returns 0 and no profile runs
    for limit, skip in (('{"image": 0}', False), (None, True)):
        assert (
            encoder_profile(
                arch, max_num_seqs=4, limit_mm_per_prompt=limit, skip_mm_profiling=skip, **common
            )
            is None
        )
    # one item larger than the batch: the budget grows to one item
    assert encoder_items(
        3025, max_num_batched_tokens=2048, max_num_seqs=256, max_model_len=4096, limit=999
    ) == (3025, 1)


def test_other_towers_geometry() -> None:
    # Llama 4 Scout: 16 tiles + the global one, (336 / 14)^2 = 576 patches each, pixel shuffle
    # 0.5 -> 576 // 4 = 144 embeddings a tile: 17 x 144 = 2,448 tokens an image.
    scout = _arch("meta-llama--Llama-4-Scout-17B-16E-Instruct.json").encoder
    assert scout is not None
    assert (scout.tokens, scout.pixel_elements) == (2448, 17 * 3 * 336**2)
    # Mistral Small 3.1 (Pixtral): 1540 / 14 = 110 patches a side, merged 2 x 2: 55^2 = 3,025.
    pixtral = _arch("mistralai--Mistral-Small-3.1-24B-Instruct-2503.json").encoder
    assert pixtral is not None
    assert (pixtral.tokens, pixtral.patches) == (3025, 110 * 110)
    # LLaVA-1.5: (336 / 14)^2 = 576, the CLS token dropped ('default' strategy)
    llava = _arch("ybelkada--llava-1.5-7b-hf-awq.json").encoder
    assert llava is not None
    assert (llava.tokens, llava.output_width) == (576, 4096)
    # the geometry survives the catalog's record
    arch = _arch(GEMMA)
    assert architecture_from_dict(architecture_to_dict(arch)).encoder == arch.encoder


def test_limit_mm_per_prompt_is_vllms_json_and_refused_by_name() -> None:
    canonical = EngineOptions(limit_mm_per_prompt='{"video": 0, "image": {"count": 2}}')
    assert canonical.limit_mm_per_prompt == '{"image":2,"video":0}'
    for bad in ("image=2", '{"image": -1}', '{"smell": 1}', '{"image": {"width": 512}}'):
        with pytest.raises(SizingError) as caught:
            EngineOptions(limit_mm_per_prompt=bad)
        assert caught.value.field.startswith("limit_mm_per_prompt")


def test_skip_mm_profiling_is_refused_before_the_release_that_has_it() -> None:
    # vLLM PR #22950 added --skip-mm-profiling (merged 2025-08-15): in the 0.10.1.1 wheel,
    # not in 0.10.0
    check_encoder_release(True, (0, 10, 1), "0.10.1")
    check_encoder_release(False, (0, 9, 2), "0.9.2")
    with pytest.raises(SizingError) as caught:
        check_encoder_release(True, (0, 10, 0), "0.10.0")
    assert caught.value.field == "skip_mm_profiling"


def test_the_model_runner_by_release() -> None:
    # 0.19.0 / 0.20.0: the V1 runner keeps outputs and pixel values (0.2256 GiB on Gemma 3);
    # 0.25.1: Model Runner V2 is the default for a dense model and profiles no encoder, while
    # MoE Scout stays on V1; 0.30.0 / 0.33.0: V2 everywhere, the outputs only
    # (32 x 256 x 5376 x 2 B = 88,080,384 B on Gemma 3).
    gemma, scout = _arch(GEMMA), _arch("meta-llama--Llama-4-Scout-17B-16E-Instruct.json")
    common = {"max_num_batched_tokens": 8192, "max_model_len": 8192, "max_num_seqs": 1024}
    flags = {"limit_mm_per_prompt": None, "skip_mm_profiling": False, **common}

    def kept(arch: ModelArchitecture, version: tuple[int, int, int]) -> int | None:
        profile = encoder_profile(arch, version=version, **flags)  # type: ignore[arg-type]
        return None if profile is None else profile.kept_bytes

    assert kept(gemma, (0, 20, 0)) == 242_221_056
    assert kept(gemma, (0, 25, 1)) is None
    # Scout at 0.25.1: 3 images x (2,448 x 5,120 + 17 x 3 x 336^2) x 2 B
    assert kept(scout, (0, 25, 1)) == 3 * (2448 * 5120 + 17 * 3 * 336 * 336) * 2 == 109_748_736
    assert kept(gemma, (0, 33, 0)) == 88_080_384
    assert kept(scout, (0, 30, 0)) == 3 * 2448 * 5120 * 2

    # V2 profiles the encoder on the first pipeline stage only; kvplan sizes the last one
    assert encoder_profile(gemma, version=(0, 33, 0), pipeline_parallel_size=2, **flags) is None  # type: ignore[arg-type]
