"""The multimodal encoder's part of vLLM's profiled peak (issue 21 item 4).

vLLM 0.19.0 `GPUModelRunner.profile_run` (vllm/v1/worker/gpu_model_runner.py; 0.10.2 has the
same steps) runs the encoder before the language model's dummy forward pass, unless
`skip_mm_profiling`: `_get_mm_dummy_batch` puts `mm_max_items_per_batch` copies of one dummy
item of the largest size on the GPU (pixel values cast to the model dtype by
`InputProcessingContext._postprocess_output`), `embed_multimodal` runs the tower over them, and
the outputs go into `encoder_cache`. Both the batch (`batched_dummy_mm_inputs`, a local still
named) and the cache live until after `_dummy_sampler_run`, so they add to the language model's
peak. Model Runner V2 (the default for dense models from 0.25, for every model from 0.30:
`runner_profile`) profiled no encoder before 0.30, and from 0.30 keeps the outputs but not the
batch. The number of items is vllm/multimodal/encoder_budget.py
`MultiModalBudget._get_max_items`, with the budget of v1/core/encoder_cache_manager.py
`compute_mm_encoder_budget`.

What kvplan does not model: the tower's own forward peak exactly (attention workspaces, a
dense mask where a backend builds one). `tower_forward_bytes` is a floor of it (the widest MLP
step); it decides the peak only where it exceeds the language model's side.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

from ..errors import SizingError
from ..model.architecture import EncoderGeometry, ModelArchitecture
from ..units import GiB
from . import calibration as cal

# vllm/config/multimodal.py MultiModalConfig.get_limit_per_prompt: a modality not named in
# --limit-mm-per-prompt may have 999 items.
DEFAULT_LIMIT: int = 999
MODALITIES: frozenset[str] = frozenset({"image", "video", "audio"})


def parse_limit_mm_per_prompt(text: str, field: str = "limit_mm_per_prompt") -> dict[str, int]:
    """vLLM's --limit-mm-per-prompt JSON: {"image": 2, "video": 0}, or {"image": {"count": 2}}
    (the 0.11+ form with dummy sizes, whose width/height kvplan refuses: it sizes the model's
    largest item)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SizingError(field, f'must be JSON such as {{"image": 2}}: {exc}') from None
    if not isinstance(data, dict):
        raise SizingError(field, 'must be a JSON object such as {"image": 2, "video": 0}')
    limits: dict[str, int] = {}
    for modality, given in data.items():
        value = given
        if modality not in MODALITIES:
            raise SizingError(field, f"unknown modality {modality!r} (image, video, audio)")
        if isinstance(given, dict):
            extra = sorted(set(given) - {"count"})
            if extra:
                raise SizingError(
                    f"{field}.{modality}",
                    f"{', '.join(extra)}: kvplan sizes the model's largest item, not a given size",
                )
            value = given.get("count")
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100_000:
            raise SizingError(f"{field}.{modality}", "must be an item count from 0 to 100000")
        limits[modality] = value
    return limits


def canonical_limit_mm_per_prompt(text: str) -> str:
    """The limits as one JSON text (sorted keys, counts only), so equal flags share answers."""
    return json.dumps(parse_limit_mm_per_prompt(text), sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class EncoderProfile:
    """What the encoder's profile leaves on the GPU through the language model's dummy run."""

    items: int
    tokens_per_item: int
    encoder_budget: int
    pixel_bytes: int  # the dummy batch's pixel values, while profile_run still names them
    output_bytes: int  # encoder_cache: items x tokens x the text width x the dtype
    tower_forward_bytes: int  # a floor of the tower's own peak (pixel values included)
    source: str

    @property
    def kept_bytes(self) -> int:
        return self.pixel_bytes + self.output_bytes

    @property
    def note(self) -> str:
        pixels = f" and {self.pixel_bytes} B of pixel values" if self.pixel_bytes else ""
        return (
            f"encoder profile: {self.items} image items x {self.tokens_per_item} tokens "
            f"(budget {self.encoder_budget} tokens; {self.source}) keep "
            f"{self.output_bytes} B of outputs{pixels} "
            f"({self.kept_bytes / GiB:.3f} GiB) through the forward pass and the sampler"
        )


def encoder_items(
    tokens_per_item: int,
    *,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    max_model_len: int,
    limit: int,
) -> tuple[int, int]:
    """(encoder budget, items per batch): compute_mm_encoder_budget and _get_max_items.

    The budget is min(compute budget, cache size), each max(max_num_batched_tokens, the tokens
    of one item) (SchedulerConfig sets max_num_encoder_input_tokens and encoder_cache_size to
    max_num_batched_tokens); items = max(1, min(budget // tokens, max_num_seqs x items per
    prompt)), items per prompt = max(1, min(limit, max_model_len // tokens)). Chunked prefill
    is on in V1, so max_num_seqs is not cut by the batch.
    """
    budget = max(max_num_batched_tokens, tokens_per_item)
    per_prompt = max(1, min(limit, max_model_len // tokens_per_item))
    return budget, max(1, min(budget // tokens_per_item, max_num_seqs * per_prompt))


def runner_profile(
    arch: ModelArchitecture, version: cal.Version, pipeline_parallel_size: int = 1
) -> tuple[bool, bool]:
    """(profiles the encoder, keeps the dummy batch) on the stage whose budget kvplan sizes
    (the last), for the model runner this release runs the model with
    (calibration.VLLM_MRV2_DEFAULT_DENSE, VLLM_MRV2_ENCODER_PROFILE)."""
    if version >= cal.VLLM_MRV2_ENCODER_PROFILE:
        # Model Runner V2: the outputs only, and only on the first pipeline stage
        # (`profile_run`: `self.supports_mm_inputs and self.is_first_pp_rank`)
        return pipeline_parallel_size == 1, False
    if version >= cal.VLLM_MRV2_DEFAULT_DENSE and arch.moe is None:
        return False, False  # Model Runner V2 before it profiled the encoder
    return True, True  # the V1 runner's profile_run


@lru_cache(maxsize=4096)
def encoder_profile(
    arch: ModelArchitecture,
    *,
    version: cal.Version,
    pipeline_parallel_size: int = 1,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    max_model_len: int,
    limit_mm_per_prompt: str | None,
    skip_mm_profiling: bool,
) -> EncoderProfile | None:
    """The encoder's profile for a VLM whose tower kvplan reads; None when vLLM skips it
    (skip_mm_profiling, the modality's limit at 0, a runner that does not profile it) or the
    tower has no rules."""
    geometry: EncoderGeometry | None = arch.encoder
    profiles, keeps_batch = runner_profile(arch, version, pipeline_parallel_size)
    if geometry is None or skip_mm_profiling or not profiles:
        return None
    limits = {} if limit_mm_per_prompt is None else parse_limit_mm_per_prompt(limit_mm_per_prompt)
    limit = limits.get(geometry.modality, DEFAULT_LIMIT)
    if limit == 0:
        return None  # no tower modality left: compute_mm_encoder_budget returns 0, no profile
    budget, items = encoder_items(
        geometry.tokens,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        max_model_len=max_model_len,
        limit=limit,
    )
    element = arch.dtype.element_bytes
    pixels = items * geometry.pixel_elements * element if keeps_batch else 0
    # one ViT block's MLP at its widest: residual and normed input (2 h), fc1's output and its
    # activation (2 I), fc2's output (h), over every patch of the batch
    widest = 3 * geometry.hidden_size + 2 * geometry.intermediate_size
    return EncoderProfile(
        items=items,
        tokens_per_item=geometry.tokens,
        encoder_budget=budget,
        pixel_bytes=pixels,
        output_bytes=items * geometry.tokens * geometry.output_width * element,
        tower_forward_bytes=items * (geometry.pixel_elements + geometry.patches * widest) * element,
        source=geometry.source,
    )


def encoder_flags(limit_mm_per_prompt: str | None, skip_mm_profiling: bool) -> list[str]:
    """vLLM's flags to paste for the encoder's profile, as the engine spells them."""
    flags = (
        [] if limit_mm_per_prompt is None else [f"--limit-mm-per-prompt '{limit_mm_per_prompt}'"]
    )
    if skip_mm_profiling:
        flags.append("--skip-mm-profiling")
    return flags


def check_encoder_release(skip_mm_profiling: bool, version: cal.Version, label: str) -> None:
    """--skip-mm-profiling is refused by a release that does not have it."""
    if skip_mm_profiling and version < cal.VLLM_SKIP_MM_PROFILING:
        raise SizingError(
            "skip_mm_profiling",
            f"vLLM {label} has no --skip-mm-profiling (vLLM PR #22950, first in 0.10.1)",
        )
