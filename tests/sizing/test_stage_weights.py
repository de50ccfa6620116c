"""Each pipeline stage's weights, as vLLM places them (issue 20; model/stage_weights.py).

vLLM vllm/model_executor/models/llama.py `LlamaModel.__init__` (embed_tokens on the first rank,
and on the last too with tie_word_embeddings and pp > 1; make_layers), `LlamaForCausalLM.__init__`
(norm and lm_head on the last rank); vllm/distributed/utils.py `get_pp_indices`; release 0.33.0.

Configs: tests/fixtures/hf_configs (SOURCES.md). Llama-3.1-70B (meta-llama/Meta-Llama-3.1-70B):
hidden 8,192, intermediate 28,672, 64 heads, 8 KV heads, head_dim 128, vocab 128,256, 80
layers, untied, bf16. Llama-3.2-3B (PANDASANG1231/llama_3.2-3B-huggingface-shard0, Meta's
config verbatim): hidden 3,072, intermediate 8,192, 24 heads, 8 KV heads, vocab 128,256, 28
layers, tie_word_embeddings true, bf16.
"""

from __future__ import annotations

import json
from pathlib import Path

from service.sizing.capacity import (
    EngineOptions,
    Gpu,
    Parallelism,
    Workload,
    compute_capacity,
)
from service.sizing.engines.parallel import pipeline_stage_sizes
from service.sizing.model.architecture import ModelArchitecture
from service.sizing.model.hf_config import architecture_from_hf_config
from service.sizing.model.schedule import architecture_from_dict
from service.sizing.model.stage_weights import dense_decoder_split, stage_weight_bytes
from service.sizing.units import GiB

FIXTURES = Path(__file__).parents[1] / "fixtures" / "hf_configs"
CATALOG = Path(__file__).parents[2] / "service" / "catalog" / "data" / "models.json"
H100 = Gpu(80 * GiB, "NVIDIA H100 80GB HBM3")
V033 = EngineOptions(engine_version="0.33.0")


def _config(name: str) -> ModelArchitecture:
    return architecture_from_hf_config(json.loads((FIXTURES / f"{name}.json").read_text()))


LLAMA_70B = "meta-llama--Meta-Llama-3.1-70B"
LLAMA_32_3B = "PANDASANG1231--llama_3.2-3B-huggingface-shard0"

# Llama-3.1-70B, bf16 (2 B a parameter):
#   embed_tokens = lm_head = 128,256 x 8,192 = 1,050,673,152 parameters = 2,101,346,304 B
#   final norm 8,192 x 2 B = 16,384 B
#   one layer: q 8,192^2 + k, v 1,024 x 8,192 each + o 8,192^2 = 150,994,944
#              + gate, up, down 3 x 28,672 x 8,192 = 704,643,072 + 2 norms 16,384
#              = 855,654,400 parameters = 1,711,308,800 B
EMBED_70B = 128_256 * 8_192 * 2
LAYER_70B = (2 * 8_192 * 8_192 + 2 * 1_024 * 8_192 + 3 * 28_672 * 8_192 + 2 * 8_192) * 2


def test_the_70b_split_is_read_from_its_config() -> None:
    split = _config(LLAMA_70B).weight_split
    assert split is not None
    assert not split.tied
    assert EMBED_70B == 2_101_346_304
    assert LAYER_70B == 1_711_308_800
    assert split.embedding == (1_050_673_152, EMBED_70B)
    assert split.head == (1_050_673_152 + 8_192, EMBED_70B + 16_384)
    assert split.layers == ((855_654_400, LAYER_70B),) * 80


def test_70b_at_tp8_pp2_holds_the_embedding_on_stage_0_and_the_head_on_stage_1() -> None:
    cap = compute_capacity(
        _config(LLAMA_70B),
        H100,
        Workload(32_768),
        Parallelism(tensor_parallel_size=8, pipeline_parallel_size=2),
        V033,
    )
    # 80 layers over 2 stages: 40 + 40 (get_pp_indices).
    # stage 0: 40 x 1,711,308,800 + 2,101,346,304 = 70,553,698,304 B; / TP 8 = 8,819,212,288
    # stage 1: 40 x 1,711,308,800 + 2,101,346,304 + 16,384 = 70,553,714,688; / 8 = 8,819,214,336
    assert cap.facts.stage_weights_bytes_per_gpu == (8_819_212_288, 8_819_214_336)
    assert cap.weights_bytes_per_gpu == 8_819_214_336  # the heaviest stage's GPU
    # (even shares were 141,107,412,992 / 16 = 8,819,213,312 on both)
    assert not any("split evenly" in w for w in cap.warnings)


def test_an_uneven_split_gives_each_stage_its_own_pool() -> None:
    # 80 layers over PP 3: 80 // 3 = 26, remainder 2 to the stages before the last:
    # [27, 27, 26] (get_pp_indices: partitions[-2], partitions[-3] += 1).
    assert pipeline_stage_sizes(80, 3) == [27, 27, 26]
    cap = compute_capacity(
        _config(LLAMA_70B),
        H100,
        Workload(32_768),
        Parallelism(tensor_parallel_size=8, pipeline_parallel_size=3),
        V033,
    )
    # stage 0: 27 x 1,711,308,800 + 2,101,346,304 = 48,306,683,904 B; / 8 = 6,038,335,488
    # stage 1: 27 x 1,711,308,800                 = 46,205,337,600 B; / 8 = 5,775,667,200
    # stage 2: 26 x 1,711,308,800 + 2,101,362,688 = 46,595,391,488 B; / 8 = 5,824,423,936
    assert cap.facts.stage_weights_bytes_per_gpu == (6_038_335_488, 5_775_667_200, 5_824_423_936)
    # One block on a stage: its layers x 16 tokens x 2 (K, V) x 1 KV head on a TP-8 rank x
    # 128 x 2 B = layers x 8,192 B. Stage 0 holds the most weights and the most layers: it binds,
    # and the budget answered is its own.
    page = 16 * 2 * 1 * 128 * 2
    stage0, stage1, stage2 = cap.per_stage_blocks
    assert cap.num_gpu_blocks == stage0 == cap.kv_pool_bytes // (27 * page)
    # Stage 1 has the same layers and 262,668,288 B less weights (6,038,335,488 - 5,775,667,200)
    # on each GPU: its pool is that much larger.
    assert stage1 == (cap.kv_pool_bytes + 6_038_335_488 - 5_775_667_200) // (27 * page)
    assert stage2 == (cap.kv_pool_bytes + 6_038_335_488 - 5_824_423_936) // (26 * page)


def test_a_tied_model_holds_its_embedding_on_the_first_and_the_last_stage() -> None:
    arch = _config(LLAMA_32_3B)
    assert arch.weight_split is not None
    assert arch.weight_split.tied
    cap = compute_capacity(
        arch, H100, Workload(32_768), Parallelism(pipeline_parallel_size=2), V033
    )
    # embed_tokens 128,256 x 3,072 = 394,002,432 parameters = 788,004,864 B (no lm_head tensor)
    # one layer: q 3,072^2 + k, v 1,024 x 3,072 each + o 3,072^2 = 25,165,824
    #            + 3 x 8,192 x 3,072 = 75,497,472 + 2 norms 6,144 = 100,669,440 = 201,338,880 B
    # 28 layers: 14 + 14.
    # stage 0: 14 x 201,338,880 + 788,004,864 = 3,606,749,184
    # stage 1: 14 x 201,338,880 + 6,144 (norm) + 788,004,864 (lm_head tied to its own
    #          embed_tokens) = 3,606,755,328
    assert cap.facts.stage_weights_bytes_per_gpu == (3_606_749_184, 3_606_755_328)
    # The two stages hold one embedding more than the model: 7,213,504,512 - 6,425,499,648
    assert sum(cap.facts.stage_weights_bytes_per_gpu) - arch.weight_bytes == 788_004_864  # type: ignore[operator]


def _catalog(slug: str) -> ModelArchitecture:
    catalog = {m["slug"]: m for m in json.loads(CATALOG.read_text())}
    return architecture_from_dict(catalog[slug]["architecture"])


def test_llama_405b_from_the_catalog_at_tp8_pp2() -> None:
    # Llama-3.1-405B as the catalog stores it (no config.json): hidden 16,384, intermediate
    # 53,248, 128 heads of 128, 8 KV heads, vocab 128,256, 126 layers, bf16, num_parameters
    # 405,853,388,800 (tests/planning/test_plan_multinode.py).
    arch = _catalog("llama-3.1-405b")
    embedding = 128_256 * 16_384  # 2,101,346,304 parameters
    # one layer: q, o 2 x 16,384^2 + k, v 2 x 1,024 x 16,384 + 3 x 53,248 x 16,384 + 2 norms
    layer = 2 * 16_384**2 + 2 * 1_024 * 16_384 + 3 * 53_248 * 16_384 + 2 * 16_384
    assert layer == 3_187_703_808
    # 126 layers + embedding + lm_head + final norm is the count exactly: an untied decoder.
    assert 126 * layer + 2 * embedding + 16_384 == arch.num_parameters == 405_853_388_800
    split = dense_decoder_split(arch)
    assert split is not None
    assert not split.tied
    assert split.embedding[0] == embedding
    assert split.head[0] == embedding + 16_384
    # bf16 total 811,706,777,600 B; 126 layers: 63 + 63.
    # stage 0: 63 x 6,375,407,616 + 4,202,692,608 (embeddings, 4.2 GB) = 405,853,372,416 B
    # stage 1: 63 x 6,375,407,616 + 4,202,692,608 (lm_head) + 32,768 (norm) = 405,853,405,184 B
    assert stage_weight_bytes(arch, 811_706_777_600, (63, 63)) == (
        405_853_372_416,
        405_853_405_184,
    )
    cap = compute_capacity(
        arch,
        H100,
        Workload(131_072),
        Parallelism(tensor_parallel_size=8, pipeline_parallel_size=2),
        V033,
    )
    # / TP 8: 50,731,671,552 and 50,731,675,648 (even shares were 811,706,777,600 / 16 =
    # 50,731,673,600: the last stage 2,048 B more, the first 2,048 B less)
    assert cap.facts.stage_weights_bytes_per_gpu == (50_731_671_552, 50_731_675_648)
    assert cap.weights_bytes_per_gpu == 50_731_675_648
    assert not any("split evenly" in w for w in cap.warnings)


def test_a_catalog_model_that_is_not_a_plain_decoder_keeps_even_shares_and_says_so() -> None:
    # Qwen2.5-7B in the catalog: 28 layers of hidden 3,584, 28 heads of 128, 4 KV heads,
    # intermediate 18,944, vocab 152,064, num_parameters 7,615,616,512. Its q, k and v have
    # biases (3,584 + 512 + 512 = 4,608 a layer, 129,024 in all), so the count is no plain
    # decoder's and the stages are not placed.
    arch = _catalog("qwen2.5-7b")
    assert dense_decoder_split(arch) is None
    cap = compute_capacity(arch, H100, Workload(8_192), Parallelism(pipeline_parallel_size=2), V033)
    # 7,615,616,512 x 2 B / 2 stages = 7,615,616,512 B on each GPU
    assert cap.facts.stage_weights_bytes_per_gpu == (7_615_616_512, 7_615_616_512)
    assert any("split evenly over the 2 pipeline stages" in w for w in cap.warnings)


def test_one_stage_keeps_the_whole_model() -> None:
    cap = compute_capacity(
        _config(LLAMA_70B), H100, Workload(8_192), Parallelism(tensor_parallel_size=4), V033
    )
    # 141,107,412,992 / 4 = 35,276,853,248
    assert cap.facts.stage_weights_bytes_per_gpu == ()
    assert cap.weights_bytes_per_gpu == 35_276_853_248


def test_61_layers_over_four_stages_follow_get_pp_indices() -> None:
    # 61 // 4 = 15, remainder 1 to partitions[-2]: [15, 15, 16, 15] (vllm/distributed/utils.py
    # get_pp_indices: "for i in range(2, remaining_layers + 2): partitions[-i] += 1").
    assert pipeline_stage_sizes(61, 4) == [15, 15, 16, 15]
