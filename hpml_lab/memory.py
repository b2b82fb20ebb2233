"""Training memory measured two ways, and what it costs in time (used by the `memory` task,
hpml_lab.studies.memory.study, and by Tiny ImageNet and the benchmarks).

    from hpml_lab import memory, models
    net = models.build("revnet", stages=(18, 18, 18))
    memory.activation_bytes(net, 8)          # bytes saved for backward per sample (any device)
    memory.cuda_peak_step(net, 8, "cuda")    # peak allocated bytes of one training step (CUDA only)

1. Activation bytes: every tensor autograd saves for the backward pass during a
   forward pass plus loss, seen through torch.autograd.graph.saved_tensors_hooks.
   Tensors are counted once per storage (views and chunks of one tensor share it),
   and the model's parameters and buffers are not activations, so they are left out.
   This is device independent; for RevNet with memory_saving it counts what the
   network really keeps (stage outputs and the non-reversible units), and for
   checkpointed networks the segment inputs (checkpoint's own hooks hide the rest).
2. Peak allocated CUDA memory of one training step (forward, backward, optimizer
   step) after torch.cuda.reset_peak_memory_stats: what the step needs on top of
   what was resident before (model, gradients, optimizer state), reported in full.

The largest batch that fits a budget is found on CUDA by trying batch sizes and
catching torch.cuda.OutOfMemoryError (each OOM a row; memory freed before going
on), and predicted elsewhere from activation bytes plus parameter, gradient and
optimizer-state bytes (rows labelled "predicted").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .device import free_cuda_memory
from .io import atomic_file
from .profiling import synchronize

MB = 1024**2


def _storage_key(t: torch.Tensor) -> tuple:
    s = t.untyped_storage()
    return (t.device.type, t.device.index, s.data_ptr(), s.nbytes())


def saved_tensor_bytes(model: nn.Module, x: torch.Tensor, y: torch.Tensor | None = None) -> dict[str, int]:
    """Bytes autograd keeps for backward after model(x) and its cross-entropy loss.

    Returns {"bytes", "tensors" (distinct storages counted), "saved" (save events)}.
    """
    exclude = {_storage_key(t) for t in [*model.parameters(), *model.buffers()]}
    seen: dict[tuple, int] = {}
    events = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal events
        events += 1
        if t.layout == torch.strided and t.numel() > 0:
            key = _storage_key(t)
            if key not in exclude:
                seen[key] = key[3]
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x)
        if y is not None:
            out = nn.functional.cross_entropy(out, y)
    del out
    return {"bytes": sum(seen.values()), "tensors": len(seen), "saved": events}


def activation_bytes(
    model: nn.Module,
    batch: int | torch.Tensor,
    image_size: int = 32,
    num_classes: int = 10,
    device: torch.device | str = "cpu",
) -> float:
    """Bytes saved for backward per sample: model in training mode, random CIFAR-sized input.

    `batch` is a batch size (a random input is made) or an input tensor. Running
    statistics of BatchNorm layers are restored afterwards, so the model is unchanged.
    """
    from .models.recompute import frozen_norm_stats

    x = (
        batch
        if isinstance(batch, torch.Tensor)
        else torch.randn(batch, 3, image_size, image_size, device=device)
    )
    y = torch.randint(0, num_classes, (x.shape[0],), device=x.device)
    was_training = model.training
    model.train()
    try:
        with frozen_norm_stats(model):
            counted = saved_tensor_bytes(model, x, y)
    finally:
        model.train(was_training)
    return counted["bytes"] / x.shape[0]


def first_activation_bytes(model: nn.Module, image_size: int) -> int:
    """Bytes per image of the stem convolution's output (the reference's back-of-envelope:
    112 x 112 x 64 floats = 3 MB for a 224 x 224 input with the ImageNet stem)."""
    first = next(m for m in model.modules() if isinstance(m, nn.Conv2d))
    with torch.no_grad():
        out = first(torch.zeros(1, 3, image_size, image_size, device=first.weight.device))
    return out.numel() * out.element_size()


def state_bytes(model: nn.Module, optimizer: str = "sgd", momentum: float = 0.9) -> dict[str, int]:
    """Parameters, gradients and optimizer state in bytes (SGD momentum: 1 buffer, Adam: 2)."""
    params = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    slots = {"sgd": 1 if momentum else 0, "sgd_nesterov": 1, "adagrad": 1, "adadelta": 2, "adam": 2}[
        optimizer
    ]
    return {
        "params": params,
        "buffers": buffers,
        "grads": params,
        "optimizer_state": slots * params,
        "total": 2 * params + buffers + slots * params,
    }


def predicted_max_batch(
    act_bytes_per_sample: float, fixed_bytes: int, budget_bytes: int, headroom: float = 0.9
) -> int:
    """Largest batch whose activations + fixed state fit `headroom` of the budget (a prediction:
    it ignores workspace, temporaries of the backward pass and allocator fragmentation)."""
    free = headroom * budget_bytes - fixed_bytes
    return max(0, int(free // act_bytes_per_sample)) if act_bytes_per_sample > 0 else 0


# ------------------------------------------------------------------ training steps
def make_step(
    model: nn.Module,
    batch_size: int,
    device: torch.device | str,
    image_size: int = 32,
    num_classes: int = 10,
    lr: float = 0.01,
) -> Callable[[], None]:
    """A closure doing one SGD training step (step.train_step, fp32) on a fixed random batch
    already on the device, so only the step is timed."""
    from .step import train_step

    device = torch.device(device)
    x = torch.randn(batch_size, 3, image_size, image_size, device=device)
    y = torch.randint(0, num_classes, (batch_size,), device=device)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    model.train()

    def step() -> None:
        train_step(model, opt, criterion, x, y, None, device)

    return step


def cuda_peak_step(
    model: nn.Module,
    batch_size: int,
    device: torch.device | str = "cuda",
    image_size: int = 32,
    num_classes: int = 10,
) -> dict[str, int]:
    """Peak allocated bytes of one training step (CUDA only), after a warm-up step.

    The warm-up creates gradients and optimizer state, so the measured step starts
    from the steady state of training; peak statistics are reset right before it.
    """
    device = torch.device(device)
    if device.type != "cuda":
        raise RuntimeError("cuda_peak_step needs a CUDA device")
    step = make_step(model, batch_size, device, image_size=image_size, num_classes=num_classes)
    step()
    synchronize(device)
    resident = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    step()
    synchronize(device)
    return {
        "peak_allocated": torch.cuda.max_memory_allocated(device),
        "resident_before": resident,
        "peak_reserved": torch.cuda.max_memory_reserved(device),
    }


def grid_search(
    sizes: Iterable[int], fits: Callable[[int], dict[str, Any]], start: int = 0
) -> list[dict[str, Any]]:
    """The rows of `fits` (a row with "status": "ok" or "oom" for one batch size) over the sizes it needs to
    find the largest size that fits and the first that does not: from `start`, the largest size at or below it
    first, then up the sizes while each fits, or down while each runs out of memory. Memory grows with the
    batch, so the answer is the one trying every size from the smallest would give; started near the limit,
    it tries two or three sizes where that tries up to all of them. Rows in ascending order of size."""
    grid = sorted(set(sizes))
    if not grid:
        return []
    i = max([k for k, b in enumerate(grid) if b <= start] or [0])
    tried = {grid[i]: fits(grid[i])}
    step = 1 if tried[grid[i]]["status"] == "ok" else -1
    while 0 <= i + step < len(grid):
        i += step
        tried[grid[i]] = fits(grid[i])
        if (tried[grid[i]]["status"] == "ok") != (step == 1):  # the limit lies between this size and the last
            break
    return [tried[b] for b in sorted(tried)]


def cuda_max_batch(
    build: Callable[[], nn.Module],
    batch_sizes: Iterable[int],
    device: torch.device | str = "cuda",
    image_size: int = 32,
    num_classes: int = 10,
    start: int = 0,
) -> list[dict[str, Any]]:
    """A training step at the batch sizes grid_search() needs, from `start` (a predicted limit; 0: from the
    smallest size up): an OOM is a row, memory is freed and the search goes on. Each row says how long its
    size took (model built, a warm-up and a measured step, cuDNN's search for the new shape included)."""

    def attempt(b: int) -> dict[str, Any]:
        model = None
        status, peak, error = "ok", float("nan"), ""
        t0 = time.perf_counter()
        try:
            model = build().to(device)
            peak = cuda_peak_step(model, b, device, image_size, num_classes)["peak_allocated"] / MB
        except torch.cuda.OutOfMemoryError as e:
            status, error = "oom", str(e).splitlines()[0][:200]
        finally:
            del model
            free_cuda_memory()
        return {
            "batch_size": b,
            "status": status,
            "peak_MB": peak,
            "error": error,
            "method": "measured",
            "seconds": time.perf_counter() - t0,
        }

    return grid_search(batch_sizes, attempt, start)


def cuda_memory_snapshot(
    model: nn.Module, batch_size: int, path: str | Path, device: torch.device | str = "cuda", steps: int = 2
) -> Path:
    """Record allocator history for a few training steps and dump a snapshot for
    https://pytorch.org/memory_viz (CUDA only)."""
    device = torch.device(device)
    if device.type != "cuda":
        raise RuntimeError("a CUDA memory snapshot needs a CUDA device")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    step = make_step(model, batch_size, device)
    # Python stacks only: resolving C++ stacks at dump time took minutes in a published H100 measurement
    torch.cuda.memory._record_memory_history(max_entries=100_000, stacks="python")
    try:
        for _ in range(steps):
            step()
        synchronize(device)
        with atomic_file(path) as tmp:
            torch.cuda.memory._dump_snapshot(str(tmp))
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    return path
