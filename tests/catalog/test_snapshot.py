"""A catalog snapshot's models: equal layers shared across entries, unchanged architectures kept
across loads, each entry as loaded."""

from __future__ import annotations

from dataclasses import replace

from fastapi.testclient import TestClient

from service.catalog.seed import offline_snapshot
from service.catalog.snapshot import shared_layers
from tests.conftest import ADMIN

# Pairs service/catalog/data/models.json gives equal architectures under two slugs (an instruct
# tune beside its base; DeepSeek-R1 beside DeepSeek-V3, MoE included).
SAME_GEOMETRY = (
    ("llama-3.1-8b", "llama-3.1-8b-instruct"),
    ("llama-3.1-70b", "llama-3.3-70b-instruct"),
    ("deepseek-v3", "deepseek-r1"),
)


def test_models_of_one_geometry_share_their_layer_objects_and_keep_their_names() -> None:
    # The sizing core's memos compare such architectures on every lookup: sharing the layers
    # makes that comparison stop at identity instead of walking 32-126 layers.
    models = offline_snapshot().models
    for first, second in SAME_GEOMETRY:
        a, b = models[first].architecture, models[second].architecture
        assert a == b
        assert a.layers is b.layers
        assert a.moe is b.moe
        assert (a.name, b.name) == (first, second)


def test_every_layer_of_the_catalog_is_one_object_per_geometry() -> None:
    layers = [
        layer for entry in offline_snapshot().models.values() for layer in entry.architecture.layers
    ]
    assert len({id(layer) for layer in layers}) == len(set(layers))


def test_a_reload_keeps_the_architecture_object_of_every_unchanged_model() -> None:
    # The sizing core's memos hold the first load's architectures as keys: a second, equal
    # object would be compared with them layer by layer on every lookup, for as long as the
    # replica runs. A reload (two independent loads of the shipped catalog here) keeps them.
    first = offline_snapshot.__wrapped__().models
    second = offline_snapshot.__wrapped__().models
    assert all(first[s].architecture is not second[s].architecture for s in first)
    reloaded = shared_layers(second, previous=first)
    assert all(reloaded[s].architecture is first[s].architecture for s in first)
    assert all(reloaded[s] == second[s] for s in second)  # the entries otherwise as loaded


def test_a_changed_model_gets_its_new_architecture_on_reload() -> None:
    first = offline_snapshot.__wrapped__().models
    slug = "llama-3.1-8b"
    arch = first[slug].architecture
    longer = replace(arch, max_position_embeddings=arch.max_position_embeddings * 2)  # type: ignore[operator]
    changed = {**first, slug: replace(first[slug], architecture=longer)}
    reloaded = shared_layers(changed, previous=first)
    assert reloaded[slug].architecture == longer
    assert reloaded[slug].architecture is not arch
    # its layers are still the catalog's one object per geometry
    assert reloaded[slug].architecture.layers[0] is arch.layers[0]
    assert reloaded["qwen3-8b"].architecture is first["qwen3-8b"].architecture


def test_a_catalog_write_keeps_the_architectures_the_replica_sized_with(
    client: TestClient,
) -> None:
    # Through the API: a GPU's price changes the catalog's version, the replica reloads it, and
    # every model (none changed) is the object it was.
    snapshot = client.app.state.catalog.get()  # type: ignore[attr-defined]
    before, before_gpus = snapshot.models, snapshot.gpus
    response = client.patch(
        "/v1/gpus/h100-sxm-80gb",
        json={"price_usd_per_hour": 2.19},
        headers={**ADMIN, "If-Match": '"1"'},
    )
    assert response.status_code == 200, response.text
    after = client.app.state.catalog.get()  # type: ignore[attr-defined]
    assert after.gpus["h100-sxm-80gb"].gpu.price_usd_per_hour == 2.19
    assert set(after.models) == set(before)
    assert all(after.models[s].architecture is before[s].architecture for s in before)
    # and every GPU but the one written is the object it was, the one written is new
    assert all(after.gpus[s] is before_gpus[s] for s in before_gpus if s != "h100-sxm-80gb")
    assert after.gpus["h100-sxm-80gb"] is not before_gpus["h100-sxm-80gb"]
