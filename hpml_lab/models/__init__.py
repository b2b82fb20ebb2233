"""Model registry: a model is a name plus the arguments of a shared class.

    from hpml_lab import models
    net = models.build("resnet18", num_classes=10, norm="bn")
    models.available()          # every registered name

A new variant is one `register(...)` line, not a copy of a network. Importing this module imports no torch: a
network's class is imported when it is built.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn

# The network classes, and what a configuration is checked against, known without importing them (and torch):
# a run's settings are refused before any compute, also by the command line's parent process, which imports no
# torch (hpml_lab.protocol). tests/unit/test_models.py checks each entry against its class (STEMS, the
# signature).
CLASSES: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    # class: (module, its STEMS, its keyword arguments)
    "ResNet": (
        "hpml_lab.models.resnet",
        ("cifar", "imagenet"),
        ("block", "num_blocks", "widths", "num_classes", "norm", "stem", "checkpoint_segments"),
    ),
    "RevNet": (
        "hpml_lab.models.revnet",
        ("cifar",),
        ("stages", "widths", "num_classes", "norm", "memory_saving", "stem"),
    ),
}
_REGISTRY: dict[str, tuple[str, dict[str, Any], str]] = {}


def register(name: str, cls: str, doc: str = "", **defaults: Any) -> None:
    """Register `name` as the class `cls` (a key of CLASSES) with these arguments."""
    if name in _REGISTRY:
        raise ValueError(f"model {name!r} is registered twice")
    if cls not in CLASSES:
        raise ValueError(f"model {name!r}: unknown class {cls!r}; known: {', '.join(CLASSES)}")
    _REGISTRY[name] = (cls, defaults, doc)


def available() -> list[str]:
    return sorted(_REGISTRY)


def network_class(cls: str) -> type[nn.Module]:
    """The class CLASSES names `cls`, imported now."""
    return getattr(importlib.import_module(CLASSES[cls][0]), cls)


def build(name: str, num_classes: int = 10, norm: str = "bn", **kwargs: Any) -> nn.Module:
    """Build a registered model; kwargs override the entry's defaults (e.g. stem="imagenet")."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown model {name!r}; valid models: {', '.join(available())}")
    cls, defaults, _ = _REGISTRY[name]
    return network_class(cls)(**{**defaults, "num_classes": num_classes, "norm": norm, **kwargs})


def arguments(name: str) -> tuple[str, dict[str, Any]]:
    """(class, arguments) the registered model `name` is built with (before a caller's overrides)."""
    cls, defaults, _ = _REGISTRY[name]
    return cls, dict(defaults)


def accepts(name: str, argument: str) -> bool:
    """Whether the registered model `name` takes the keyword `argument` (e.g. checkpoint_segments)."""
    return argument in CLASSES[_REGISTRY[name][0]][2]


def stems(name: str) -> tuple[str, ...]:
    """The input stems the registered model `name` supports (its class's STEMS)."""
    return CLASSES[_REGISTRY[name][0]][1]


def count_parameters(model: nn.Module, trainable_only: bool = True) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


STANDARD = (64, 128, 256, 512)
# The resnet-50-performance reference's "adjusted" (narrower) ResNets. Its README says 32-32-64-112, its code
# uses 32-32-64-128, and only the code's widths reproduce its published parameter counts (746,436 /
# 1,393,476 / 1,581,700 at 100 classes), so the code's widths are used. Its RevNets use 32-32-64-112, which
# reproduce its RevNet counts (476,020 ... 2,879,380).
ADJUSTED = (32, 32, 64, 128)
REVNET_WIDTHS = (32, 32, 64, 112)

register(
    "resnet18",
    "ResNet",
    "ResNet-18, the lab's model (11,173,962 parameters)",
    block="basic",
    num_blocks=(2, 2, 2, 2),
    widths=STANDARD,
)
register(
    "resnet34",
    "ResNet",
    "ResNet-34 (BasicBlock 3-4-6-3)",
    block="basic",
    num_blocks=(3, 4, 6, 3),
    widths=STANDARD,
)
register(
    "resnet50",
    "ResNet",
    "ResNet-50 (Bottleneck 3-4-6-3)",
    block="bottleneck",
    num_blocks=(3, 4, 6, 3),
    widths=STANDARD,
)
register(
    "resnet_tiny",
    "ResNet",
    "4-stage ResNet, one narrow block a stage: tests and smoke runs",
    block="basic",
    num_blocks=(1, 1, 1, 1),
    widths=(8, 16, 32, 64),
)

# Memory task: the reference's narrower ResNets, and RevNets with n-n-n stages (depth 12n + 2).
register(
    "resnet18_adjusted",
    "ResNet",
    "ResNet-18 at the reference code's adjusted widths 32-32-64-128",
    block="basic",
    num_blocks=(2, 2, 2, 2),
    widths=ADJUSTED,
)
register(
    "resnet34_adjusted",
    "ResNet",
    "ResNet-34 at the reference code's adjusted widths 32-32-64-128",
    block="basic",
    num_blocks=(3, 4, 6, 3),
    widths=ADJUSTED,
)
register(
    "resnet50_adjusted",
    "ResNet",
    "ResNet-50 (Bottleneck) at the reference code's adjusted widths 32-32-64-128",
    block="bottleneck",
    num_blocks=(3, 4, 6, 3),
    widths=ADJUSTED,
)
register(
    "revnet",
    "RevNet",
    "RevNet, CIFAR design; stages=(n, n, n), memory_saving=True|False",
    stages=(3, 3, 3),
    widths=REVNET_WIDTHS,
)
for _n in (3, 5, 9, 18):
    register(
        f"revnet{12 * _n + 2}",
        "RevNet",
        f"RevNet {_n}-{_n}-{_n} (stem 32, stages 32-64-112)",
        stages=(_n, _n, _n),
        widths=REVNET_WIDTHS,
    )
