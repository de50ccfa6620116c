"""The tensors of a checkpoint, by class: what `param_count` and `towers` write out and
`weight_format` prices.

Each tensor carries its module name as the checkpoint spells it (so a quantization `ignore`
list can be matched against it), its class (what the parameter breakdown sums by), its role
(only `linear` weights are ever quantized) and whether the engine loads it for serving.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from math import prod


class TensorClass(StrEnum):
    EMBEDDING = "embedding"
    LM_HEAD = "lm_head"
    ATTENTION = "attention"
    MLP = "mlp"
    ROUTED_EXPERTS = "routed_experts"
    SHARED_EXPERTS = "shared_experts"
    ROUTER = "router"
    NORM = "norm"
    LINEAR_ATTENTION = "linear_attention"
    MAMBA = "mamba"
    # depthwise conv kernels and the per-head state parameters (A_log, D, dt_bias)
    CONV_STATE = "conv_state"
    MTP = "mtp"
    VISION = "vision"
    PROJECTOR = "projector"


class TensorRole(StrEnum):
    """What a tensor is, for quantization: only `linear` weights are ever quantized."""

    LINEAR = "linear"  # an nn.Linear weight, shape (out_features, in_features)
    EMBEDDING = "embedding"  # a lookup table (vocabulary, hidden)
    VECTOR = "vector"  # norms, biases, conv kernels, state parameters, position tables


@dataclass(frozen=True, slots=True)
class Tensor:
    """`count` identical tensors (the experts of one layer) named `name` + `.weight`/`.bias`."""

    name: str
    tensor_class: TensorClass
    role: TensorRole
    shape: tuple[int, ...]
    count: int = 1
    served: bool = True
    # For a multi-token-prediction tensor, the class it has in an ordinary layer (so a
    # quantization rule written for attention or experts reaches it too).
    inner: TensorClass | None = None
    # Stored in float32 whatever the model's dtype (MiniMax-M1's routers: its
    # model.safetensors.index.json total_size counts them at 4 B).
    float32: bool = False

    @property
    def numel(self) -> int:
        return prod(self.shape)

    @property
    def parameters(self) -> int:
        return self.numel * self.count


@dataclass(frozen=True, slots=True)
class ParameterCount:
    """Every tensor of the checkpoint, and the parameters per class."""

    tensors: tuple[Tensor, ...]
    by_class: tuple[tuple[TensorClass, int], ...]
    total: int
    served_total: int

    def of(self, tensor_class: TensorClass) -> int:
        return sum(n for c, n in self.by_class if c == tensor_class)


def summarize(tensors: Sequence[Tensor]) -> ParameterCount:
    classes: dict[TensorClass, int] = {}
    for t in tensors:
        classes[t.tensor_class] = classes.get(t.tensor_class, 0) + t.parameters
    return ParameterCount(
        tensors=tuple(tensors),
        by_class=tuple(classes.items()),
        total=sum(t.parameters for t in tensors),
        served_total=sum(t.parameters for t in tensors if t.served),
    )


class TensorList:
    """Collects tensors; `served` is switched off while an MTP layer is written."""

    def __init__(self) -> None:
        self.items: list[Tensor] = []
        self.served = True

    def linear(
        self,
        name: str,
        cls: TensorClass,
        out: int,
        inp: int,
        *,
        bias: bool = False,
        count: int = 1,
        float32: bool = False,
    ) -> None:
        self.items.append(
            Tensor(
                f"{name}.weight",
                cls,
                TensorRole.LINEAR,
                (out, inp),
                count,
                self.served,
                float32=float32,
            )
        )
        if bias:
            self.vector(f"{name}.bias", cls, (out,), count)

    def vector(self, name: str, cls: TensorClass, shape: tuple[int, ...], count: int = 1) -> None:
        self.items.append(Tensor(name, cls, TensorRole.VECTOR, shape, count, self.served))

    def norm(self, name: str, cls: TensorClass, dim: int, bias: bool = False) -> None:
        self.vector(f"{name}.weight", cls, (dim,))
        if bias:
            self.vector(f"{name}.bias", cls, (dim,))

    def embedding(self, name: str, cls: TensorClass, rows: int, dim: int) -> None:
        self.table(f"{name}.weight", cls, rows, dim)

    def table(self, name: str, cls: TensorClass, rows: int, dim: int) -> None:
        self.items.append(Tensor(name, cls, TensorRole.EMBEDDING, (rows, dim), 1, self.served))


__all__ = ["ParameterCount", "Tensor", "TensorClass", "TensorList", "TensorRole", "summarize"]
