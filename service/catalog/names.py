"""The names people type for a model or a GPU, resolved to one catalog entry.

One resolver for every door (GET and POST capacity, plans, profiles, pictures, engine logs,
the CLI): `CatalogSnapshot.model` and `CatalogSnapshot.gpu` call `resolve_model` and
`resolve_gpu` here, and `CatalogSnapshot.gpu_memory_match` calls `match_memory`.

- A model is its catalog slug or its Hugging Face id (`meta-llama/Llama-3.1-8B-Instruct`), in
  any case; the id's repository name alone (`Llama-3.1-8B-Instruct`) where one model has it.
- A GPU is its slug (any case), the catalog's name for it, the device name `nvidia-smi`, torch
  and the engines' logs print (`DEVICE_NAMES`: `NVIDIA H100 80GB HBM3`, `NVIDIA A100-SXM4-80GB`,
  `AMD Instinct MI300X`), or a short name (`h100`, `H200`, `mi300x`, `4090`): the slug's first
  part, or its number for a GeForce card, with the vendor's words (NVIDIA, AMD, GeForce,
  Instinct, Tesla) left out. A short name that several catalog GPUs share means the family's
  SXM board of the most memory (`FAMILY_DEFAULTS`, docs/names.md#gpus-by-name): the bare
  name is what the engines' logs print for that board (`NVIDIA H100 80GB HBM3` names no form
  factor; the other boards print `H100 PCIe`, `H100 NVL`, `A100-PCIE-40GB`). Any other shared
  short name is a 404 listing the GPUs it could mean, the closest first.
- A GPU given by its total memory is the catalog GPU one of whose runtime totals (the catalog's
  own, or one a real log printed: `LOGGED_TOTALS_GIB`) is nearest, within
  `MEMORY_TOLERANCE_BYTES` (docs/names.md#gpus-by-their-total).

Unknown names get a 404 whose suggestions are the closest catalog slugs, those of the name's
own family (`h100...`) first.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..sizing import gib_to_bytes

_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
# Words a vendor puts before the part's own name; left out of a short name.
_VENDOR_WORDS = frozenset({"nvidia", "amd", "geforce", "instinct", "tesla", "radeon"})

# The device name nvidia-smi, torch (`torch.cuda.get_device_name`) and the engines' logs print,
# by catalog slug. Read from the shared reference catalog's `runtime_memory_source` quotes
# (../shared/catalog/gpus.json) and the engine logs that print the name
# (service/calibration/engine_logs.json: jgchn/llm-d-planner's v0.19.0 logs print
# "NVIDIA H100 80GB HBM3"; vllm-project/recipes PR #273 runs on "AMD Instinct MI300X").
DEVICE_NAMES: Mapping[str, str] = {
    "NVIDIA H100 80GB HBM3": "h100-sxm-80gb",
    "NVIDIA H100 PCIe": "h100-pcie-80gb",
    "NVIDIA H100 NVL": "h100-nvl-94gb",
    "NVIDIA H200": "h200-141gb",
    "NVIDIA GH200 480GB": "gh200-96gb",
    "NVIDIA A100-SXM4-80GB": "a100-sxm-80gb",
    "NVIDIA A100-SXM4-40GB": "a100-40gb",
    "NVIDIA L40S": "l40s",
    "NVIDIA L4": "l4",
    "NVIDIA A10G": "a10g",
    "NVIDIA B200": "b200",
    "NVIDIA GeForce RTX 3090": "rtx-3090",
    "NVIDIA GeForce RTX 4090": "rtx-4090",
    "NVIDIA RTX 6000 Ada Generation": "rtx-6000-ada",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "rtx-pro-6000-blackwell-server",
    "AMD Instinct MI300X": "mi300x",
    "AMD Instinct MI250X": "mi250x",
}

# A short name several catalog GPUs share, and the board it means: the family's SXM board of
# the most memory, the one the engines' logs print by the bare name (see the module docstring).
FAMILY_DEFAULTS: Mapping[str, str] = {
    "h100": "h100-sxm-80gb",
    "a100": "a100-sxm-80gb",
}

# Runtime totals real logs printed (two-decimal GiB figures) other than the catalog's own, by
# slug; docs/names.md#gpus-by-their-total says where each was seen.
LOGGED_TOTALS_GIB: Mapping[str, tuple[float, ...]] = {
    # 1xH100 HBM3 jobs (prime-rl report); jgchn/llm-d-planner's vLLM 0.19.0 logs; vLLM PR #12126
    "h100-sxm-80gb": (79.18, 79.19, 79.22),
    # an HF Jobs a100-large log (service/catalog/data/gpus.json, memory_source)
    "a100-sxm-80gb": (79.25,),
    "a100-40gb": (39.38, 39.49),
    "a10g": (22.07,),
    # service/catalog/data/gpus.json, memory_source: "44.40/44.42 elsewhere"
    "l40s": (44.40, 44.42),
    # a vLLM log "Free memory on device (139.21/139.81 GiB)"
    "h200-141gb": (139.81,),
}

_LOGGED_TOTALS_BYTES = {
    slug: tuple(gib_to_bytes(gib) for gib in totals) for slug, totals in LOGGED_TOTALS_GIB.items()
}

# How far a total may be from a GPU's known runtime total and still be that GPU. The largest
# gap between a total a labelled real log printed and the catalog's total of the same GPU is
# 0.10 GiB (A100 80GB: 79.25 logged, 79.15 in the catalog; H100 SXM: 79.11 to 79.22 logged,
# 79.21 in the catalog); add the 0.005 GiB a two-decimal figure rounds away: 0.105 GiB.
MEMORY_TOLERANCE_BYTES = gib_to_bytes(0.105)


def normal(name: str) -> str:
    """A name as compared: lower case, letters and digits only."""
    return _NOT_ALNUM.sub("", name.casefold())


def _words(name: str) -> list[str]:
    return [w for w in _NOT_ALNUM.split(name.casefold()) if w]


def short_name(name: str) -> str:
    """The name without the vendor's words: `NVIDIA GeForce RTX 4090` is `rtx4090`."""
    return "".join(w for w in _words(name) if w not in _VENDOR_WORDS)


def family(name: str) -> str:
    """A name's first part after the vendor's words: `h100` of `h100-sxm-80gb` and of
    `NVIDIA H100 PCIe`; the number of an RTX card (`4090` of `rtx-4090`, `6000` of both RTX
    6000 boards)."""
    words = [w for w in _words(name) if w not in _VENDOR_WORDS]
    if words[:1] == ["rtx"]:  # RTX 4090, RTX 6000 Ada, RTX PRO 6000: the number
        words = [w for w in words[1:] if w != "pro"]
    return words[0] if words else ""


# ---- models -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ModelNames:
    """Every name a catalog model answers to, as `normal` compares them, to its slug."""

    exact: Mapping[str, str]
    # The repository part of an HF id, where one model has it; several: the slugs that share it.
    repo_names: Mapping[str, tuple[str, ...]]
    slugs: tuple[str, ...]

    @classmethod
    def of(cls, models: Iterable[tuple[str, str | None]]) -> ModelNames:
        """From (slug, hf_id) pairs."""
        exact: dict[str, str] = {}
        repo_names: dict[str, list[str]] = {}
        slugs = []
        for slug, hf_id in models:
            slugs.append(slug)
            exact.setdefault(slug.casefold(), slug)
            if hf_id:
                exact.setdefault(hf_id.casefold(), slug)
                repo_names.setdefault(hf_id.rsplit("/", 1)[-1].casefold(), []).append(slug)
        return cls(exact, {k: tuple(v) for k, v in repo_names.items()}, tuple(slugs))

    def resolve(self, name: str) -> str | None:
        wanted = name.strip().rstrip("/").casefold()
        found = self.exact.get(wanted)
        if found is not None:
            return found
        shared = self.repo_names.get(wanted, ())
        return shared[0] if len(shared) == 1 else None

    def suggestions(self, name: str, limit: int = 5) -> list[str]:
        wanted = name.strip().casefold()
        keys = sorted(self.exact)
        close = difflib.get_close_matches(wanted, keys, n=limit * 2, cutoff=0.4)
        close += difflib.get_close_matches(
            wanted.rsplit("/", 1)[-1], sorted(self.repo_names), n=limit, cutoff=0.4
        )
        out: list[str] = []
        for key in close:
            for slug in (self.exact[key],) if key in self.exact else self.repo_names[key]:
                if slug not in out:
                    out.append(slug)
        return out[:limit]


# ---- GPUs ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GpuNames:
    """Every name a catalog GPU answers to, to its slug; short names to the GPUs sharing them."""

    exact: Mapping[str, str]
    short: Mapping[str, tuple[str, ...]]
    slugs: tuple[str, ...]

    @classmethod
    def of(cls, gpus: Iterable[tuple[str, str]]) -> GpuNames:
        """From (slug, catalog name) pairs; `DEVICE_NAMES` of slugs the catalog holds join."""
        pairs = list(gpus)
        held = {slug for slug, _ in pairs}
        exact: dict[str, str] = {}
        # slugs first: a slug always means itself
        for slug, _ in pairs:
            exact.setdefault(normal(slug), slug)
        named = [*pairs, *((s, n) for n, s in DEVICE_NAMES.items() if s in held)]
        for slug, name in named:
            exact.setdefault(normal(name), slug)
            exact.setdefault(short_name(name), slug)
        short: dict[str, list[str]] = {}
        for slug, name in pairs:
            for key in {family(slug), family(name)} - {""}:
                members = short.setdefault(key, [])
                if slug not in members:
                    members.append(slug)
        return cls(exact, {k: tuple(v) for k, v in short.items()}, tuple(s for s, _ in pairs))

    def resolve(self, name: str) -> str | tuple[str, ...] | None:
        """The slug `name` means; the slugs it could mean where it is ambiguous; or None."""
        found = self.exact.get(normal(name)) or self.exact.get(short_name(name))
        if found is not None:
            return found
        wanted = short_name(name)
        members = self.short.get(wanted, ())
        if len(members) == 1:
            return members[0]
        default = FAMILY_DEFAULTS.get(wanted)
        if default is not None and default in members:
            return default
        if members:  # ambiguous: the GPUs it could mean, the closest first
            return tuple(s for s in self.suggestions(name, len(self.slugs)) if s in members)
        # the start of one slug only (`h100-sxm` of h100-sxm-80gb)
        starting = [s for s in self.slugs if wanted and normal(s).startswith(wanted)]
        return starting[0] if len(starting) == 1 else None

    def suggestions(self, name: str, limit: int = 5) -> tuple[str, ...]:
        """The closest slugs: those of the name's own family first, its default board first,
        then by how alike the names read."""
        wanted, own = short_name(name), family(name)
        default = FAMILY_DEFAULTS.get(own)

        def rank(slug: str) -> tuple[bool, bool, float]:
            alike = difflib.SequenceMatcher(None, wanted, normal(slug)).ratio()
            return (family(slug) == own, slug == default, alike)

        ranked = sorted(self.slugs, key=rank, reverse=True)
        kept = [s for s in ranked if family(s) == own or rank(s)[2] >= 0.4]
        return tuple(kept[:limit])


# ---- GPUs by their memory -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemoryMatch:
    """The catalog GPU a total is, how far from which of its known totals, and the others that
    were within the tolerance too (nearest first)."""

    slug: str
    known_total_bytes: int  # the runtime total it was nearest (the catalog's, or a log's)
    catalog_total_bytes: int
    others: tuple[str, ...]

    def off_bytes(self, memory_bytes: int) -> int:
        """How far the total is from the catalog's total (negative: under it)."""
        return memory_bytes - self.catalog_total_bytes


def match_memory(memory_bytes: int, catalog_totals: Mapping[str, int]) -> MemoryMatch | None:
    """The catalog GPU whose known runtime total is nearest `memory_bytes`, within
    MEMORY_TOLERANCE_BYTES; ties go to the smaller distance from the catalog's own total, then
    the slug."""
    best: dict[str, tuple[int, int, int]] = {}  # slug: (distance, distance to catalog, total)
    for slug, catalog_total in catalog_totals.items():
        totals = (catalog_total, *_LOGGED_TOTALS_BYTES.get(slug, ()))
        for total in totals:
            distance = abs(total - memory_bytes)
            if distance <= MEMORY_TOLERANCE_BYTES:
                candidate = (distance, abs(catalog_total - memory_bytes), total)
                if slug not in best or candidate < best[slug]:
                    best[slug] = candidate
    if not best:
        return None
    order = sorted(best, key=lambda slug: (best[slug][:2], slug))
    first = order[0]
    return MemoryMatch(first, best[first][2], catalog_totals[first], tuple(order[1:]))
