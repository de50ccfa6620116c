"""The plain-data form of an architecture (catalog rows, request bodies) and back."""

from __future__ import annotations

import pytest

from service.sizing import architecture_from_dict
from service.sizing.engines.kv import kv_bytes_per_token
from service.sizing.errors import SizingError, UnknownLayerKind
from service.sizing.model.architecture import LayerKind, MultiHeadLatentAttention, NoCache
from service.sizing.model.dtypes import KvCacheDtype
from service.sizing.model.schedule import architecture_to_dict

INDEXED = MultiHeadLatentAttention(512, 64, indexer_head_dim=128)
SHARED = MultiHeadLatentAttention(512, 64)


def two_mla_geometries() -> dict[str, object]:
    # GLM-5.2 style: layers with their own sparse-attention indexer and layers that share one.
    return {
        "num_attention_heads": 64,
        "layer_specs": {
            "mla": {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "indexer_head_dim": 128},
            "mla_shared": {"kind": "mla", "kv_lora_rank": 512, "qk_rope_head_dim": 64},
        },
        "layer_schedule": [
            {"pattern": ["mla", "mla_shared", "mla_shared", "mla_shared"], "repeat": 2}
        ],
    }


def test_two_geometries_of_one_kind_are_named_specs() -> None:
    arch = architecture_from_dict(two_mla_geometries())
    assert arch.layers == (INDEXED, SHARED, SHARED, SHARED) * 2
    assert {layer.kind for layer in arch.layers} == {LayerKind.MLA}
    # 2 layers x (576 x 2 B + 132 B indexer) + 6 layers x 1,152 B = 2,568 + 6,912 = 9,480
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 2 * 1284 + 6 * 1152 == 9480


def test_the_dict_form_round_trips_every_geometry() -> None:
    # One spec per kind would silently store the shared layers with an indexer.
    arch = architecture_from_dict(two_mla_geometries())
    data = architecture_to_dict(arch)
    assert data["layer_specs"] == {
        "mla": {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "indexer_head_dim": 128},
        "mla_2": {"kind": "mla", "kv_lora_rank": 512, "qk_rope_head_dim": 64},
    }
    assert data["layer_schedule"] == [{"pattern": ["mla", "mla_2", "mla_2", "mla_2"], "repeat": 2}]
    assert architecture_from_dict(data).layers == arch.layers


def test_no_cache_layers_round_trip_without_a_spec() -> None:
    data = {
        "num_attention_heads": 8,
        "layer_specs": {"full_attention": {"num_kv_heads": 8, "head_dim": 64}},
        "layer_schedule": ["full_attention", "no_cache", "full_attention"],
    }
    arch = architecture_from_dict(data)
    assert isinstance(arch.layers[1], NoCache)
    assert architecture_from_dict(architecture_to_dict(arch)).layers == arch.layers


def test_a_spec_no_layer_uses_is_refused_by_name() -> None:
    # A typo in the schedule would otherwise leave a geometry silently out of the sizing.
    data = two_mla_geometries()
    data["layer_schedule"] = [{"pattern": ["mla"], "repeat": 8}]
    with pytest.raises(SizingError) as caught:
        architecture_from_dict(data)
    assert caught.value.field == "layer_specs.mla_shared"


def test_a_named_spec_of_an_unknown_kind_is_refused() -> None:
    data = two_mla_geometries()
    data["layer_specs"]["mla_shared"]["kind"] = "retention"  # type: ignore[index]
    with pytest.raises(UnknownLayerKind) as caught:
        architecture_from_dict(data)
    assert caught.value.field == "layer_specs.mla_shared.kind"


def test_a_scheduled_kind_without_geometry_names_the_missing_spec() -> None:
    data = {
        "num_attention_heads": 8,
        "layer_specs": {"full_attention": {"num_kv_heads": 8, "head_dim": 64}},
        "layer_schedule": ["full_attention", "sliding_attention"],
    }
    with pytest.raises(SizingError) as caught:
        architecture_from_dict(data)
    assert caught.value.field == "layer_specs.sliding_attention"
    assert "layer_schedule[1]" in caught.value.reason
