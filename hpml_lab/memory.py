"""Training memory measured two ways, and what it costs in time (the `memory` task).

    hpml-lab run memory --profile smoke          # the notebook notebooks/memory.ipynb

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

import gc
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import torch
from torch import nn

from . import models, results
from .profiling import interleaved_timed, repeat_timed, summarize, synchronize

MB = 1024 ** 2


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


def activation_bytes(model: nn.Module, batch: int | torch.Tensor, image_size: int = 32,
                     num_classes: int = 10, device: torch.device | str = "cpu") -> float:
    """Bytes saved for backward per sample: model in training mode, random CIFAR-sized input.

    `batch` is a batch size (a random input is made) or an input tensor. Running
    statistics of BatchNorm layers are restored afterwards, so the model is unchanged.
    """
    from .models.recompute import frozen_norm_stats

    x = batch if isinstance(batch, torch.Tensor) else torch.randn(batch, 3, image_size, image_size, device=device)
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
    """Bytes per image of the stem convolution's output (the seed's back-of-envelope:
    112 x 112 x 64 floats = 3 MB for a 224 x 224 input with the ImageNet stem)."""
    first = next(m for m in model.modules() if isinstance(m, nn.Conv2d))
    with torch.no_grad():
        out = first(torch.zeros(1, 3, image_size, image_size, device=first.weight.device))
    return out.numel() * out.element_size()


def state_bytes(model: nn.Module, optimizer: str = "sgd", momentum: float = 0.9) -> dict[str, int]:
    """Parameters, gradients and optimizer state in bytes (SGD momentum: 1 buffer, Adam: 2)."""
    params = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    slots = {"sgd": 1 if momentum else 0, "sgd_nesterov": 1, "adagrad": 1, "adadelta": 2, "adam": 2}[optimizer]
    return {"params": params, "buffers": buffers, "grads": params, "optimizer_state": slots * params,
            "total": 2 * params + buffers + slots * params}


def predicted_max_batch(act_bytes_per_sample: float, fixed_bytes: int, budget_bytes: int,
                        headroom: float = 0.9) -> int:
    """Largest batch whose activations + fixed state fit `headroom` of the budget (a prediction:
    it ignores workspace, temporaries of the backward pass and allocator fragmentation)."""
    free = headroom * budget_bytes - fixed_bytes
    return max(0, int(free // act_bytes_per_sample)) if act_bytes_per_sample > 0 else 0


# ------------------------------------------------------------------ training steps
def make_step(model: nn.Module, batch_size: int, device: torch.device | str, image_size: int = 32,
              num_classes: int = 10, lr: float = 0.01) -> Callable[[], float]:
    """A closure doing one SGD training step on a fixed random batch (already on the device)."""
    device = torch.device(device)
    x = torch.randn(batch_size, 3, image_size, image_size, device=device)
    y = torch.randint(0, num_classes, (batch_size,), device=device)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    model.train()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return step


def time_per_batch(model: nn.Module, batch_size: int, device: torch.device | str = "cpu",
                   repeats: int = 5, warmup: int = 2) -> list[float]:
    """Seconds per training step (forward, backward, SGD step), synchronized, warm-up excluded."""
    step = make_step(model, batch_size, device)
    return repeat_timed(step, device, repeats=repeats, warmup=warmup)


def is_oom(e: BaseException) -> bool:
    """An out-of-memory error: torch's own, or a RuntimeError that says so (older paths, DDP ranks)."""
    return isinstance(e, torch.cuda.OutOfMemoryError) or "out of memory" in str(e).lower()


def free_cuda_memory() -> None:
    """After an OOM (and its exception dropped): collect unreachable tensors, then give the
    allocator's cached blocks back, so the next configuration starts from a clean device."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def cuda_peak_step(model: nn.Module, batch_size: int, device: torch.device | str = "cuda", image_size: int = 32,
                   num_classes: int = 10) -> dict[str, int]:
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
    return {"peak_allocated": torch.cuda.max_memory_allocated(device), "resident_before": resident,
            "peak_reserved": torch.cuda.max_memory_reserved(device)}


def cuda_max_batch(build: Callable[[], nn.Module], batch_sizes: Iterable[int],
                   device: torch.device | str = "cuda", stop_after_oom: bool = True, image_size: int = 32,
                   num_classes: int = 10) -> list[dict[str, Any]]:
    """Try a training step at each batch size (ascending); an OOM is a row, memory is freed and the
    sweep goes on (to the next network: larger batches after an OOM are skipped unless asked)."""
    rows = []
    for b in batch_sizes:
        model = None
        status, peak, error = "ok", float("nan"), ""
        try:
            model = build().to(device)
            peak = cuda_peak_step(model, b, device, image_size, num_classes)["peak_allocated"] / MB
        except torch.cuda.OutOfMemoryError as e:
            status, error = "oom", str(e).splitlines()[0][:200]
        finally:
            del model
            free_cuda_memory()
        rows.append({"batch_size": b, "status": status, "peak_MB": peak, "error": error, "method": "measured"})
        if status == "oom" and stop_after_oom:
            break
    return rows


def cuda_memory_snapshot(model: nn.Module, batch_size: int, path: str | Path,
                         device: torch.device | str = "cuda", steps: int = 2) -> Path:
    """Record allocator history for a few training steps and dump a snapshot for
    https://pytorch.org/memory_viz (CUDA only)."""
    device = torch.device(device)
    if device.type != "cuda":
        raise RuntimeError("a CUDA memory snapshot needs a CUDA device")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    step = make_step(model, batch_size, device)
    torch.cuda.memory._record_memory_history(max_entries=100_000)
    try:
        for _ in range(steps):
            step()
        synchronize(device)
        with results.atomic_file(path) as tmp:
            torch.cuda.memory._dump_snapshot(str(tmp))
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    return path


# ------------------------------------------------------------------ the comparison table
def variants(resnets: Sequence[str], rev_stages: Sequence[int], segments: int) -> list[dict[str, Any]]:
    """The networks the report compares: plain and checkpointed ResNets, RevNets with and without
    memory saving. Each entry: label, family, registry name, build kwargs, baseline label."""
    out = []
    for name in resnets:
        digits = "".join(c for c in name.split("_")[0] if c.isdigit())
        depth = int(digits) if digits else 0
        out.append({"label": name, "family": "ResNet", "name": name, "kwargs": {}, "baseline": name,
                    "depth": depth})
        if segments:
            out.append({"label": f"{name} ckpt{segments}", "family": "ResNet + checkpointing", "name": name,
                        "kwargs": {"checkpoint_segments": segments}, "baseline": name, "depth": depth})
    for n in rev_stages:
        plain = f"revnet {n}-{n}-{n} (no saving)"
        out.append({"label": plain, "family": "RevNet, ordinary autograd", "name": "revnet",
                    "kwargs": {"stages": (n, n, n), "memory_saving": False}, "baseline": plain, "depth": 12 * n + 2})
        out.append({"label": f"revnet {n}-{n}-{n}", "family": "RevNet", "name": "revnet",
                    "kwargs": {"stages": (n, n, n)}, "baseline": plain, "depth": 12 * n + 2})
    return out


def _build(spec: Mapping[str, Any], norm: str) -> nn.Module:
    torch.manual_seed(0)
    return models.build(spec["name"], num_classes=10, norm=norm, **spec["kwargs"])


def measure(specs: Sequence[Mapping[str, Any]], batch_size: int, device: torch.device | str = "cpu",
            repeats: int = 5, warmup: int = 2, act_batch: int = 4, norm: str = "bn",
            log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """One row per network: parameters, activation bytes per sample, time per batch
    (median and spread over `repeats` interleaved rounds after `warmup` untimed ones)
    and, on CUDA, the peak allocated MB of a training step (each network alone on the device)."""
    device = torch.device(device)
    rows = []
    for spec in specs:
        model = _build(spec, norm).to(device)
        act = activation_bytes(model, act_batch, device=device)
        row = {"model": spec["label"], "family": spec["family"], "baseline": spec["baseline"],
               "depth": spec.get("depth", 0), "params": models.count_parameters(model), "act_bytes_per_sample": act,
               "act_MB_per_sample": act / MB, "batch_size": batch_size, "peak_MB": float("nan"),
               "device": str(device)}
        if device.type == "cuda":
            row["peak_MB"] = cuda_peak_step(model, batch_size, device)["peak_allocated"] / MB
        rows.append(row)
        log(f"[memory] {spec['label']}: {act / MB:.3f} MB/sample saved for backward")
        del model
        free_cuda_memory()
    nets = [_build(spec, norm).to(device) for spec in specs]
    times = interleaved_timed([make_step(m, batch_size, device) for m in nets], device, repeats, warmup)
    del nets
    free_cuda_memory()
    for row, t in zip(rows, times):
        s = summarize(t)
        row.update(s_per_batch=s["median"], s_iqr=s["iqr"], s_min=s["min"], s_max=s["max"],
                   repeats=s["n"], warmup=warmup)
        log(f"[memory] {row['model']}: {s['median']:.3f} s/batch (IQR {s['iqr']:.3f})")
    for row in rows:  # compute overhead against the plain network of the same depth
        base = next(r for r in rows if r["model"] == row["baseline"])
        row["time_vs_baseline"] = row["s_per_batch"] / base["s_per_batch"]
        row["act_vs_baseline"] = row["act_bytes_per_sample"] / base["act_bytes_per_sample"]
    return rows


def recompute_bytes(spec: Mapping[str, Any], rows_by_label: Mapping[str, Mapping[str, Any]]) -> float:
    """Per-sample working set of the recomputation in backward, estimated from the plain network:
    a checkpointed segment holds its activations again while it is recomputed (plain / k, segments
    taken as equal), a RevNet unit holds one unit's activations (plain RevNet / number of units)."""
    if spec["label"] == spec["baseline"]:
        return 0.0
    plain = rows_by_label[spec["baseline"]]["act_bytes_per_sample"]
    kwargs = spec["kwargs"]
    if kwargs.get("checkpoint_segments"):
        return plain / kwargs["checkpoint_segments"]
    if "stages" in kwargs:
        return plain / sum(kwargs["stages"])
    return 0.0


def max_batch_rows(specs: Sequence[Mapping[str, Any]], table: Sequence[Mapping[str, Any]],
                   budget_bytes: int, device: torch.device | str = "cpu",
                   cuda_batches: Sequence[int] = (), norm: str = "bn") -> list[dict[str, Any]]:
    """Largest batch within the budget for each network: measured on CUDA (OOM rows kept),
    predicted from activation bytes + parameter/gradient/optimizer state otherwise."""
    device = torch.device(device)
    rows = []
    by_label = {r["model"]: r for r in table}
    for spec in specs:
        model = _build(spec, norm)
        fixed = state_bytes(model)["total"]
        act = by_label[spec["label"]]["act_bytes_per_sample"]
        work = recompute_bytes(spec, by_label)
        pred = predicted_max_batch(act + work, fixed, budget_bytes)
        rows.append({"model": spec["label"], "method": "predicted", "batch_size": pred, "status": "predicted",
                     "peak_MB": float("nan"), "budget_MB": budget_bytes / MB, "error": "",
                     "recompute_MB_per_sample": work / MB})
        if device.type == "cuda":
            build = lambda spec=spec: _build(spec, norm)
            for r in cuda_max_batch(build, cuda_batches, device):
                rows.append({"model": spec["label"], "budget_MB": budget_bytes / MB, **r})
        del model
    return rows


def largest_fitting(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Per model: the largest measured batch without OOM, else the predicted one."""
    out: dict[str, int] = {}
    for r in rows:
        if r["method"] == "measured" and r["status"] == "ok":
            out[r["model"]] = max(out.get(r["model"], 0), r["batch_size"])
    for r in rows:
        if r["method"] == "predicted" and r["model"] not in out:
            out[r["model"]] = r["batch_size"]
    return out


# ------------------------------------------------------------------ figures
def depth_figure(table):
    """Activation MB per sample and seconds per batch against depth, one line per family."""
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.8))
    for family, part in table.groupby("family", sort=False):
        part = part.sort_values("depth")
        a1.plot(part["depth"], part["act_MB_per_sample"], "o-", label=family)
        a2.errorbar(part["depth"], part["s_per_batch"], yerr=[part["s_per_batch"] - part["s_min"],
                    part["s_max"] - part["s_per_batch"]], fmt="o-", capsize=3, label=family)
    a1.set_ylabel("saved for backward (MB per sample)")
    a2.set_ylabel(f"s per batch (median, min-max), batch {int(table['batch_size'].iloc[0])}")
    for ax in (a1, a2):
        ax.set_xlabel("depth (layers)")
        ax.grid(alpha=0.3)
    a1.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def loss_curves(runs, smooth: int = 5):
    """Per-batch training loss of several train() runs on the same steps: {label: batches df}."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.8))
    for label, batches in runs.items():
        line, = ax.plot(batches["step"], batches["loss"], lw=0.8, alpha=0.4)
        ax.plot(batches["step"], batches["loss"].rolling(smooth, min_periods=1).mean(), lw=1.8,
                color=line.get_color(), label=f"{label} (mean of {smooth})")
    ax.set_xlabel("step (batch)")
    ax.set_ylabel("training loss")
    ax.grid(alpha=0.3)
    ax.legend(frameon=False)
    fig.tight_layout()
    return fig


__all__ = ["activation_bytes", "saved_tensor_bytes", "state_bytes", "predicted_max_batch", "make_step",
           "time_per_batch", "cuda_peak_step", "cuda_max_batch", "cuda_memory_snapshot", "variants",
           "measure", "recompute_bytes", "max_batch_rows", "largest_fitting", "depth_figure", "loss_curves", "MB"]
