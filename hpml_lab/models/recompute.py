"""Trading compute for memory: gradient checkpointing over a block sequence, and the
BatchNorm guard that recomputation needs (used by the ResNet and by the RevNet).

    from hpml_lab import models
    net = models.build("resnet18_adjusted", checkpoint_segments=4)   # 0 = off

Checkpointing is non-reentrant (use_reentrant=False): the reentrant variant gives
no gradients to the layers before the first checkpoint when the network input does
not require grad (the TinyImageNet reference project's silent bug). Every one of the k segments
is checkpointed: only each segment's input is kept for backward, and the segment
is run again during the backward pass.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


@contextlib.contextmanager
def frozen_norm_stats(module: nn.Module) -> Iterator[None]:
    """Run a recomputation without updating BatchNorm running statistics a second time.

    In training mode BatchNorm updates running_mean/var on every forward; a segment
    recomputed for backward would update them twice per step. The buffers are copied
    before and restored after, so the running statistics match an ordinary step.
    """
    norms = [
        m
        for m in module.modules()
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training and m.track_running_stats
    ]
    saved = [(m, m.running_mean.clone(), m.running_var.clone(), m.num_batches_tracked.clone()) for m in norms]
    try:
        yield
    finally:
        with torch.no_grad():
            for m, mean, var, n in saved:
                m.running_mean.copy_(mean)
                m.running_var.copy_(var)
                m.num_batches_tracked.copy_(n)


def split_segments(n: int, segments: int) -> list[tuple[int, int]]:
    """[start, end) index ranges of `segments` contiguous, nearly equal parts of n items."""
    segments = min(segments, n)
    bounds = [round(i * n / segments) for i in range(segments + 1)]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def checkpoint_blocks(blocks: Sequence[nn.Module], segments: int, x: torch.Tensor) -> torch.Tensor:
    """Run blocks in order, each of `segments` segments under non-reentrant checkpointing."""
    for a, b in split_segments(len(blocks), segments):
        part = nn.Sequential(*blocks[a:b])
        x = checkpoint(
            part,
            x,
            use_reentrant=False,
            context_fn=lambda part=part: (contextlib.nullcontext(), frozen_norm_stats(part)),
        )
    return x
