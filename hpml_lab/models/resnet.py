"""ResNet for CIFAR-sized inputs, defined layer by layer (no torchvision.models).

The lab's ResNet-18: a 3x3 stem to 64 channels, four stages of two BasicBlocks
at 64/128/256/512 (stride 2 from the second stage on), 1x1 projection
shortcuts where the shape changes, global average pool, linear classifier.
With 10 classes and BatchNorm it has 11,173,962 trainable parameters.
ResNet-34 and ResNet-50 (Bottleneck) and other widths are configurations of the
same class; see hpml_lab.models for the registry.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .recompute import checkpoint_blocks


def norm_layer(kind: str, channels: int) -> nn.Module:
    if kind == "bn":
        return nn.BatchNorm2d(channels)
    if kind == "none":
        return nn.Identity()
    raise ValueError(f"norm must be 'bn' or 'none', got {kind!r}")


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1, norm: str = "bn"):
        super().__init__()
        use_bias = norm == "none"  # without a norm layer the conv needs its own bias
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=use_bias)
        self.bn1 = norm_layer(norm, planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=use_bias)
        self.bn2 = norm_layer(norm, planes)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut = _shortcut(in_planes, planes * self.expansion, stride, norm)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_planes: int, planes: int, stride: int = 1, norm: str = "bn"):
        super().__init__()
        use_bias = norm == "none"
        out_planes = planes * self.expansion
        self.conv1 = nn.Conv2d(in_planes, planes, 1, bias=use_bias)
        self.bn1 = norm_layer(norm, planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=use_bias)
        self.bn2 = norm_layer(norm, planes)
        self.conv3 = nn.Conv2d(planes, out_planes, 1, bias=use_bias)
        self.bn3 = norm_layer(norm, out_planes)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut = _shortcut(in_planes, out_planes, stride, norm)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + self.shortcut(x))


def _shortcut(in_planes: int, out_planes: int, stride: int, norm: str) -> nn.Module:
    if stride == 1 and in_planes == out_planes:
        return nn.Identity()
    return nn.Sequential(
        nn.Conv2d(in_planes, out_planes, 1, stride, bias=norm == "none"),
        norm_layer(norm, out_planes),
    )


BLOCKS = {"basic": BasicBlock, "bottleneck": Bottleneck}


class ResNet(nn.Module):
    """A CIFAR-style ResNet.

    Args:
        block: "basic" or "bottleneck".
        num_blocks: blocks per stage, e.g. (2, 2, 2, 2) for ResNet-18.
        widths: channels per stage; the stem has widths[0] channels.
        num_classes: classifier outputs.
        norm: "bn" or "none".
        stem: "cifar" (3x3, stride 1) or "imagenet" (7x7 stride 2 + 3x3 max-pool, for 64x64 and up).
        checkpoint_segments: 0 (off), or k: the residual blocks run as k gradient-checkpointed
            segments (non-reentrant; see hpml_lab.models.recompute) while training.
    """

    STEMS = ("cifar", "imagenet")

    def __init__(
        self,
        block: str = "basic",
        num_blocks: Sequence[int] = (2, 2, 2, 2),
        widths: Sequence[int] = (64, 128, 256, 512),
        num_classes: int = 10,
        norm: str = "bn",
        stem: str = "cifar",
        checkpoint_segments: int = 0,
    ):
        super().__init__()
        if checkpoint_segments < 0:
            raise ValueError(f"checkpoint_segments must be 0 (off) or more, got {checkpoint_segments}")
        self.checkpoint_segments = checkpoint_segments
        if len(num_blocks) != len(widths):
            raise ValueError("num_blocks and widths need one entry per stage")
        block_cls = BLOCKS[block]
        self.in_planes = widths[0]
        use_bias = norm == "none"
        if stem == "cifar":
            self.stem = nn.Sequential(
                nn.Conv2d(3, widths[0], 3, 1, 1, bias=use_bias),
                norm_layer(norm, widths[0]),
                nn.ReLU(inplace=True),
            )
        elif stem == "imagenet":
            self.stem = nn.Sequential(
                nn.Conv2d(3, widths[0], 7, 2, 3, bias=use_bias),
                norm_layer(norm, widths[0]),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(3, 2, 1),
            )
        else:
            raise ValueError(f"stem must be 'cifar' or 'imagenet', got {stem!r}")
        stages = []
        for i, (n, width) in enumerate(zip(num_blocks, widths)):
            stride = 1 if i == 0 else 2
            layers = []
            for s in [stride] + [1] * (n - 1):
                layers.append(block_cls(self.in_planes, width, s, norm))
                self.in_planes = width * block_cls.expansion
            stages.append(nn.Sequential(*layers))
        self.layers = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.linear = nn.Linear(self.in_planes, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.checkpoint_segments and torch.is_grad_enabled():
            blocks = [b for stage in self.layers for b in stage]
            out = checkpoint_blocks(blocks, self.checkpoint_segments, self.stem(x))
        else:
            out = self.layers(self.stem(x))
        return self.linear(torch.flatten(self.pool(out), 1))
