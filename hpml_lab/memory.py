"""Activation memory and gradient checkpointing for the TinyImageNet study.

    from hpml_lab import memory
    est = memory.activation_estimate(model, (3, 64, 64))     # bytes per image, with and without checkpointing
    net = memory.Checkpointed(model, segments=4)              # same weights, activations recomputed in backward
    memory.peak_training_memory(model, batch, device)         # CUDA: measured peak (reset first); CPU: None

Checkpointing here uses torch.utils.checkpoint with use_reentrant=False. The
seed's reentrant checkpoint_sequential fed an input that did not require grad,
so the early layers silently got no gradients and its comparison was invalid;
the non-reentrant form has no such trap, and a test checks that every parameter
gets a gradient.

On a GPU the peak is measured (torch.cuda.reset_peak_memory_stats, then
max_memory_allocated: allocated, not reserved, memory). On a CPU there is no
allocator to read, so the per-image activation size is computed from the shapes
of every module's output (forward hooks): an estimate, and labelled as one.
"""
from __future__ import annotations

import gc
from typing import Optional

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint_sequential


class Checkpointed(nn.Module):
    """A ResNet whose stages are recomputed in backward: only segment boundaries are kept."""

    def __init__(self, resnet: nn.Module, segments: int = 4):
        super().__init__()
        self.net, self.segments = resnet, segments

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        net = self.net
        out = net.stem(x)
        blocks = nn.Sequential(*[b for stage in net.layers for b in stage])
        if self.training and torch.is_grad_enabled():
            out = checkpoint_sequential(blocks, min(self.segments, len(blocks)), out, use_reentrant=False)
        else:
            out = blocks(out)
        return net.linear(torch.flatten(net.pool(out), 1))


def _leaf_outputs(model: nn.Module, x: torch.Tensor) -> list[tuple[str, int]]:
    sizes: list[tuple[str, int]] = []
    hooks = [m.register_forward_hook(lambda mod, inp, out, name=name: sizes.append(
        (name, out.numel() * out.element_size()))) for name, m in model.named_modules() if not list(m.children())]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in hooks:
            h.remove()
    return sizes


def activation_estimate(model: nn.Module, input_shape=(3, 64, 64), segments: int = 4) -> dict[str, float]:
    """Bytes per image of the activations a training step keeps for backward (every leaf module's
    output: an upper bound, since in-place ReLUs share storage) and, with checkpointing over
    `segments` segments of residual blocks, the stem, one boundary tensor per segment and the largest
    segment's insides (recomputed one at a time). Also the first activation (the seed's estimate)."""
    model = model.cpu().eval()
    x = torch.zeros(1, *input_shape)
    blocks = [b for stage in model.layers for b in stage]
    block_out: dict[int, int] = {}
    hooks = [b.register_forward_hook(lambda m, i, o, k=k: block_out.__setitem__(k, o.numel() * o.element_size()))
             for k, b in enumerate(blocks)]
    try:
        sizes = _leaf_outputs(model, x)
    finally:
        for h in hooks:
            h.remove()
    names = {m: n for n, m in model.named_modules()}
    per_block = [sum(s for n, s in sizes if n.startswith(names[b] + ".")) for b in blocks]
    stem = sum(s for n, s in sizes if n.startswith("stem."))
    seg = max(1, -(-len(blocks) // segments))
    starts = list(range(0, len(blocks), seg))
    kept = sum(block_out[min(i + seg, len(blocks)) - 1] for i in starts)
    inside = max(sum(per_block[i:i + seg]) for i in starts)
    return {"per_image_bytes": float(sum(s for _, s in sizes)),
            "per_image_checkpointed_bytes": float(stem + kept + inside),
            "first_activation_bytes": float(sizes[0][1] if sizes else 0), "segments": len(starts)}


def static_bytes(model: nn.Module, optimizer: str = "sgd") -> int:
    """Weights + gradients + optimizer state (SGD momentum: one buffer; Adam: two)."""
    p = sum(t.numel() * t.element_size() for t in model.parameters())
    state = {"sgd": 1, "sgd_nesterov": 1, "adam": 2, "adagrad": 1, "adadelta": 2}.get(optimizer, 1)
    return p * (2 + state)


def largest_batch(budget_bytes: float, per_image_bytes: float, static: float) -> int:
    """The largest batch whose activations fit next to the static memory (a power of 2, at least 0)."""
    room = budget_bytes - static
    if room <= 0:
        return 0
    b = int(room // per_image_bytes)
    return 1 << (b.bit_length() - 1) if b >= 1 else 0


def peak_training_memory(model: nn.Module, batch: int, device: torch.device, input_shape=(3, 64, 64),
                         num_classes: int = 200) -> Optional[dict]:
    """CUDA only: the measured peak allocated bytes of one training step at this batch (None on CPU);
    out of memory is returned as {"oom": True}."""
    if device.type != "cuda":
        return None
    model = model.to(device).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    try:
        x = torch.randn(batch, *input_shape, device=device)
        y = torch.randint(0, num_classes, (batch,), device=device)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize(device)
        return {"oom": False, "peak_bytes": torch.cuda.max_memory_allocated(device), "base_bytes": base}
    except torch.cuda.OutOfMemoryError:
        pass
    finally:
        x = y = loss = None  # noqa: F841 - drop references before emptying the cache
        gc.collect()
        torch.cuda.empty_cache()
    return {"oom": True}
