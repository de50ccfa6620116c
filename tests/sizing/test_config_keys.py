"""Never silently wrong (issue 19 item 2): every committed config's keys are read or declared.

Each published config.json in tests/fixtures/hf_configs/ (SOURCES.md) is read as a user's paste
is; a key of its language model that kvplan neither reads (for the cache or the weights) nor
declares irrelevant (service/sizing/model/config_guard.py IRRELEVANT, each with its reason, or
moot in
that config) fails the test: a new fixture with a cache-changing key kvplan does not know
cannot slip in unread.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.sizing.model.config_guard import CACHE_KEYS, IRRELEVANT, is_cache_key
from service.sizing.model.hf_config import unexplained_keys

CONFIGS = Path(__file__).parent.parent / "fixtures" / "hf_configs"
FIXTURES = sorted(path.name for path in CONFIGS.glob("*.json"))


@pytest.mark.parametrize("name", FIXTURES)
def test_every_key_of_a_committed_config_is_read_or_declared_irrelevant(name: str) -> None:
    config = json.loads((CONFIGS / name).read_text())
    assert unexplained_keys(config) == ()


def test_a_declared_irrelevant_key_is_not_also_a_named_cache_key() -> None:
    assert set(IRRELEVANT) & set(CACHE_KEYS) == set()
    assert all(reason for reason in IRRELEVANT.values())


@pytest.mark.parametrize(
    "key", ["num_attention_groups", "layer_group_size", "swa_head_dim", "kv_source_layer_ids"]
)
def test_the_keys_issue_19_names_are_cache_keys(key: str) -> None:
    assert is_cache_key(key)
