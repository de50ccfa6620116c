"""A catalog snapshot's models: equal layers shared across entries, each entry as loaded."""

from __future__ import annotations

from service.catalog.seed import offline_snapshot

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
