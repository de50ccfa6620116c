"""A Hugging Face `config.json` -> a catalog model row (POST /v1/models/import).

The translation itself is `sizing.model.hf_config.architecture_from_hf_config`; this module adds the
catalog's part: the bounds every stored architecture meets, the slug, name and family.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from ..kit.errors import InvalidRequest
from ..sizing import (
    NESTED_LM_KEYS,
    ModelArchitecture,
    SizingError,
    architecture_from_hf_config,
    architecture_to_dict,
    with_hf_quant_config,
)
from .models import ModelRow
from .records import apply_architecture, new_model_row
from .schemas import SLUG_RE, ModelImport
from .validation import check_ints, check_moe, out_of_bounds

log = logging.getLogger("kvplan.catalog")

_NOT_SLUG = re.compile(r"[^a-z0-9._-]+")


def slugify(text: str) -> str | None:
    """`meta-llama/Llama-3.1-8B` -> `llama-3.1-8b`; None when nothing usable is left."""
    slug = _NOT_SLUG.sub("-", text.rsplit("/", 1)[-1].lower()).lstrip("._-")[:100]
    return slug if SLUG_RE.fullmatch(slug) else None


def _config_model_type(config: Mapping[str, Any]) -> str | None:
    lm: Mapping[str, Any] = config
    for key in NESTED_LM_KEYS:
        if isinstance(config.get(key), Mapping):
            lm = config[key]
            break
    model_type = lm.get("model_type") or config.get("model_type")
    if isinstance(model_type, str) and 0 < len(model_type) <= 100 and "\x00" not in model_type:
        return model_type
    return None


def _read_config(body: ModelImport) -> tuple[dict[str, Any], str | None]:
    """config.json with the hf_quant_config.json given beside it, as vLLM reads the pair."""
    if body.hf_quant_config is None:
        return body.hf_config, None
    return with_hf_quant_config(body.hf_config, body.hf_quant_config)


def _architecture(body: ModelImport) -> ModelArchitecture:
    """The config's architecture, within the catalog's bounds; errors name `hf_config.<key>`
    (`hf_quant_config.<key>` for the file beside it)."""
    config, _ = _read_config(body)
    try:
        arch = architecture_from_hf_config(
            config, num_parameters=body.num_parameters, weight_bytes=body.weight_bytes
        )
    except SizingError as exc:
        raise type(exc)(f"hf_config.{exc.field}", exc.reason) from None
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, ArithmeticError) as exc:
        log.warning("hf_config import failed: %r", exc)
        raise InvalidRequest(
            f"hf_config: cannot be interpreted ({type(exc).__name__})", field="hf_config"
        ) from None
    check_ints(architecture_to_dict(arch), "hf_config")
    check_moe(arch, "hf_config")
    return arch


def imported_model(body: ModelImport) -> tuple[ModelRow, bool]:
    """The (unsaved) row, and whether its slug was asked for rather than made up for a dry run."""
    arch = _architecture(body)
    model_type = _config_model_type(body.hf_config)
    slug = body.slug or slugify(body.hf_id or body.name or "")
    chosen = slug is not None
    if slug is None:
        if not body.dry_run:
            raise out_of_bounds("slug", "is required to store the model (or give hf_id or name)")
        slug = slugify(model_type or "") or "imported-model"
    row = new_model_row(slug)
    row.name = body.name or body.hf_id or slug
    row.hf_id, row.family = body.hf_id, body.family or model_type
    row.sources, row.notes = list(body.sources), body.notes
    _, unread = _read_config(body)
    if unread is not None:
        row.notes = f"{row.notes} {unread}" if row.notes else unread
    apply_architecture(row, arch)
    return row, chosen
