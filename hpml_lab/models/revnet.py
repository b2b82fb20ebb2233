"""RevNet, the reversible residual network (Gomez et al. 2017, arXiv 1707.04585), CIFAR design.

    from hpml_lab import models
    net = models.build("revnet", stages=(3, 3, 3))            # RevNet-38
    net = models.build("revnet", stages=(18, 18, 18))         # RevNet-218, same activation memory
    net = models.build("revnet38", memory_saving=False)       # ordinary autograd, for comparison

A reversible unit splits its input channels into halves (x1, x2) and computes

    y1 = x1 + F(x2)        y2 = x2 + G(y1)

so the input can be rebuilt from the output: x2 = y2 - G(y1), x1 = y1 - F(x2).
With memory_saving=True the reversible units of a stage run inside one autograd
Function that keeps only the stage's output; its backward pass walks the units
from last to first, reconstructing each unit's input and recomputing F and G once
with autograd to get the gradients. Activation memory therefore does not grow with
the number of units per stage, at the price of about one extra forward pass.

As in the paper, the first unit of each stage is not reversible (it changes the
resolution with a stride-2 average pool and the width with zero channel padding)
and is run with ordinary autograd, which stores its activations. F and G are
pre-activation basic residual functions (BN-ReLU-conv3x3-BN-ReLU-conv3x3, convs
with bias); the first unit of a stage has no leading BN-ReLU.

Widths follow the reference's RevNet filters (32, 32, 64, 112): a 32-channel stem,
then stages of 32, 64 and 112 channels. With 100 classes this reproduces the reference's
parameter counts exactly (476,020 for 3-3-3 up to 2,879,380 for 18-18-18).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .recompute import frozen_norm_stats
from .resnet import norm_layer


def _residual(in_ch: int, out_ch: int, stride: int, norm: str, preact: bool) -> nn.Sequential:
    layers: list[nn.Module] = [norm_layer(norm, in_ch), nn.ReLU()] if preact else []
    layers += [
        nn.Conv2d(in_ch, out_ch, 3, stride, 1),
        norm_layer(norm, out_ch),
        nn.ReLU(),
        nn.Conv2d(out_ch, out_ch, 3, 1, 1),
    ]
    return nn.Sequential(*layers)


class RevUnit(nn.Module):
    """One (possibly down-sampling) reversible unit on `in_ch` -> `out_ch` channels (both even)."""

    def __init__(self, in_ch: int, out_ch: int, stride: int = 1, norm: str = "bn", preact: bool = True):
        super().__init__()
        if in_ch % 2 or out_ch % 2 or (out_ch - in_ch) % 4:
            raise ValueError(f"RevNet widths must split into equal halves, got {in_ch} -> {out_ch}")
        self.stride, self.pad = stride, (out_ch - in_ch) // 4
        self.f = _residual(in_ch // 2, out_ch // 2, stride, norm, preact)
        self.g = _residual(out_ch // 2, out_ch // 2, 1, norm, True)

    @property
    def reversible(self) -> bool:
        return self.stride == 1 and self.pad == 0

    def _shortcut(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride > 1:
            x = F.avg_pool2d(x, 3, self.stride, 1)
        if self.pad:
            x = F.pad(x, (0, 0, 0, 0, self.pad, self.pad))  # zero channels on both sides
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1, x2 = torch.chunk(x, 2, dim=1)
        y1 = self._shortcut(x1) + self.f(x2)
        y2 = self._shortcut(x2) + self.g(y1)
        return torch.cat([y1, y2], dim=1)

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        y1, y2 = torch.chunk(y, 2, dim=1)
        with frozen_norm_stats(self):
            x2 = y2 - self.g(y1)
            x1 = y1 - self.f(x2)
        return torch.cat([x1, x2], dim=1)


class _ReversibleSequence(torch.autograd.Function):
    """Reversible units run without storing activations; backward rebuilds them from the output."""

    @staticmethod
    def forward(ctx, x, units, *params):
        ctx.units = units
        # backward runs outside the caller's autocast region: re-enter it there, or the recomputation runs in
        # fp32 on the bf16/fp16 activations forward made (what torch.amp.custom_fwd/custom_bwd do for one
        # fixed device)
        ctx.device_type = x.device.type
        ctx.autocast = torch.is_autocast_enabled(ctx.device_type)
        ctx.autocast_dtype = torch.get_autocast_dtype(ctx.device_type)
        y = x
        for unit in units:
            y = unit(y)
        ctx.save_for_backward(y)  # the only tensor kept for backward
        return y

    @staticmethod
    def backward(ctx, grad_y):
        (y,) = ctx.saved_tensors
        y1, y2 = (t.detach() for t in torch.chunk(y, 2, dim=1))
        dy1, dy2 = torch.chunk(grad_y, 2, dim=1)
        grads: dict[int, torch.Tensor] = {}
        for unit in reversed(ctx.units):
            g_params = [p for p in unit.g.parameters() if p.requires_grad]
            f_params = [p for p in unit.f.parameters() if p.requires_grad]
            with (
                torch.enable_grad(),
                frozen_norm_stats(unit),
                torch.autocast(ctx.device_type, dtype=ctx.autocast_dtype, enabled=ctx.autocast),
            ):
                # y2 = x2 + G(y1): G evaluated once gives both x2 and the gradients through G.
                z1 = y1.detach().requires_grad_(True)
                gz = unit.g(z1)
                d = torch.autograd.grad(gz, [z1, *g_params], dy2)
                x2 = (y2 - gz).detach().requires_grad_(True)
                dy1 = dy1 + d[0]
                # y1 = x1 + F(x2)
                fx = unit.f(x2)
                e = torch.autograd.grad(fx, [x2, *f_params], dy1)
                x1 = (y1 - fx).detach()
            for p, gp in zip(g_params + f_params, list(d[1:]) + list(e[1:])):
                grads[id(p)] = gp
            dy2 = dy2 + e[0]  # x2 reaches y2 directly and y1 through F
            y1, y2 = x1, x2.detach()
            del gz, fx, z1, d, e
        params = [p for unit in ctx.units for p in unit.parameters()]
        return (torch.cat([dy1, dy2], dim=1), None, *[grads.get(id(p)) for p in params])


class RevNet(nn.Module):
    """A CIFAR RevNet.

    Args:
        stages: units per stage, e.g. (3, 3, 3) for RevNet-38 or (18, 18, 18).
        widths: stem channels, then one entry per stage (even numbers).
        num_classes: classifier outputs.
        norm: "bn" or "none".
        memory_saving: True reconstructs activations in backward (the point of RevNet);
            False runs the same network with ordinary autograd.
        stem: only "cifar" (3x3 conv) is supported.
    """

    STEMS = ("cifar",)

    def __init__(
        self,
        stages: Sequence[int] = (3, 3, 3),
        widths: Sequence[int] = (32, 32, 64, 112),
        num_classes: int = 10,
        norm: str = "bn",
        memory_saving: bool = True,
        stem: str = "cifar",
    ):
        super().__init__()
        if len(widths) != len(stages) + 1:
            raise ValueError("widths needs the stem's channels plus one entry per stage")
        if any(n < 1 for n in stages):
            raise ValueError(f"every stage needs at least one unit, got {tuple(stages)}")
        if stem != "cifar":
            raise ValueError(f"RevNet supports stem='cifar' only, got {stem!r}")
        self.memory_saving = memory_saving
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 1, 1), norm_layer(norm, widths[0]))
        self.downs = nn.ModuleList()
        self.revs = nn.ModuleList()
        for i, n in enumerate(stages):
            stride = 1 if i == 0 else 2
            self.downs.append(RevUnit(widths[i], widths[i + 1], stride, norm, preact=False))
            self.revs.append(
                nn.ModuleList(RevUnit(widths[i + 1], widths[i + 1], 1, norm) for _ in range(n - 1))
            )
        self.linear = nn.Linear(widths[-1], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.stem(x)
        for down, units in zip(self.downs, self.revs):
            out = down(out)  # not reversible: ordinary autograd stores its activations
            if len(units) == 0:
                continue
            if self.memory_saving and torch.is_grad_enabled():
                out = _ReversibleSequence.apply(out, units, *units.parameters())
            else:
                for unit in units:
                    out = unit(out)
        return self.linear(torch.flatten(F.adaptive_avg_pool2d(out, 1), 1))
