"""The speed ladder's rungs and their measurement: each rung is the one before with one more optimisation.

    from hpml_lab.studies.speed import study
    rungs = study.plan(cfg, settings, device)       # [Rung(name, label, change, cfg, skipped), ...]
    result = study.measure(rungs, settings, device)  # a Ladder: one row per rung, the samples, the meta

The rungs, cumulative (each keeps everything the rungs before it turned on):

1. pil: the lab's baseline, the per-sample PIL pipeline in a DataLoader with cfg.num_workers persistent workers;
2. tensor: the whole uint8 dataset resident on the device, augmented batched there (data/gpu_loader.py);
3. channels_last: weights and batches in NHWC memory format;
4. bf16: bfloat16 autocast of forward and loss (fp16 with a GradScaler on a CUDA GPU without bf16);
5. compile: torch.compile (inductor), built in the warm-up, not in a timed repeat;
6. big_batch: the batch times `batch_factor`, the learning rate scaled by the same factor (Goyal et al. 2017).

A rung that cannot run here, or that this profile leaves out (torch.compile, whose build c8 times), is kept
as a row that says why; the rung after it builds on the last rung that ran.

Every rung has its own model, optimizer and loader (bench_measure's trainer, training.train_step's step), all built
before any is timed, so a compiled rung compiles once, in the warm-up. Then `warmup` untimed rounds and `repeats`
timed rounds; in each round every rung runs `steps` steps back to back, the order rotated each round (A B C, then
B C A, ...), so neighbouring rungs take turns and a change of the machine's load hits them alike. Each timed run is
synchronized at its start and timed with profiling.DeviceTimer (CUDA events on a GPU, perf_counter on a CPU).
Before a worker-fed rung's timed run, the batches its workers prefetched while other rungs ran are taken untimed,
so the run starts with the loader's queue empty instead of a head start of ready batches.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from ... import flops
from ...config import RunConfig
from ...fastpath import check_precision, compile_available
from ...profiling import DeviceTimer, summarize, synchronize
from ...sanity import machine_load
from ..bench_measure import _Trainer

RUNGS = ("pil", "tensor", "channels_last", "bf16", "compile", "big_batch")
# steps per timed run when settings.steps is 0: a CPU step of ResNet-18 takes seconds, a GPU one milliseconds
STEPS = {"cpu": 2, "cuda": 40}
WARMUP_NOTE = (
    "{warmup} untimed warm-up round(s) per rung are left out of every number (worker start, cuDNN autotuning, "
    "the torch.compile build, allocator growth)"
)
COLUMNS = [
    "rung",
    "label",
    "change",
    "status",
    "reason",
    "batch_size",
    "lr",
    "loader",
    "num_workers",
    "channels_last",
    "precision",
    "compile",
    "repeats",
    "steps",
    "images_per_s",
    "images_per_s_q1",
    "images_per_s_q3",
    "step_s",
    "step_iqr_s",
    "step_min_s",
    "step_max_s",
    "flops_per_image",
    "tflops",
    "peak_tflops",
    "peak_precision",
    "peak_source",
    "mfu",
    "ideal_images_per_s",
]


@dataclass(frozen=True)
class Rung:
    name: str  # one of RUNGS ("bf16" is named "fp16" where fp16 stands in for it)
    label: str  # what a table and the chart call it
    change: str  # what this rung adds to the one before
    cfg: RunConfig
    skipped: str = ""  # why it was not run here ("" when it runs)


@dataclass
class Ladder:
    """What measure() returns: `table` (one row per rung, COLUMNS), `samples` (rung -> images/s of each timed
    run, for the verdicts), `meta` (device, settings, load before and after, warm-up note, how samples were taken)."""

    table: pd.DataFrame
    samples: dict[str, list[float]]
    meta: dict[str, Any] = field(default_factory=dict)

    def measured(self) -> pd.DataFrame:
        return self.table[self.table["status"] == "measured"]


def low_precision(device: torch.device) -> str:
    """bf16 where the device has it; fp16 on a CUDA GPU without bf16 (a V100), which then needs a GradScaler."""
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return "fp16"
    return "bf16"


def plan(cfg: RunConfig, settings, device: torch.device) -> list[Rung]:
    """The rungs for cfg (the baseline's model, data, batch, workers, lr) on `device`, each with its RunConfig."""
    base = cfg.replace(
        loader="pil",
        persistent_workers=cfg.num_workers > 0,
        channels_last=False,
        precision="fp32",
        compile=False,
        progress="none",
        device=device.type,
    )
    rungs: list[Rung] = []
    last = base  # the config of the last rung that runs: the next one builds on it

    def add(name: str, label: str, change: str, cfg_: RunConfig, skipped: str = "") -> None:
        nonlocal last
        rungs.append(Rung(name, label, change, cfg_, skipped))
        if not skipped:
            last = cfg_

    workers = f"{base.num_workers} worker{'' if base.num_workers == 1 else 's'}"
    add(
        "pil",
        f"PIL loader, {workers}",
        "the lab's baseline: the per-sample PIL pipeline with its workers",
        base,
    )
    add(
        "tensor",
        "tensor-resident loader",
        "dataset resident on the device, augmented in batches",
        last.replace(loader="tensor"),
    )
    add("channels_last", "+ channels_last", "NHWC memory format", last.replace(channels_last=True))
    prec = low_precision(device)
    why = _precision_refused(last.replace(precision=prec), device)
    scaler = " with a GradScaler (no bf16 on this GPU)" if prec == "fp16" else ""
    add(
        prec,
        f"+ {prec} autocast",
        f"{prec} autocast of forward and loss{scaler}",
        last.replace(precision=prec),
        why,
    )
    compiled = last.replace(compile=True)
    why = (
        "not run at this profile (compile_rung is off here; the torch.compile report times the compiled step and its build)"
        if settings.compile_rung == "off"
        else compile_available(compiled.compile_backend, device.type)
    )
    add("compile", "+ torch.compile", f"torch.compile ({compiled.compile_backend})", compiled, why)
    k = settings.batch_factor
    big = last.replace(batch_size=last.batch_size * k, lr=last.lr * k)
    add(
        "big_batch",
        f"+ batch {big.batch_size}",
        "a larger batch with the learning rate scaled with it (linear scaling)",
        big,
        _too_big(big),
    )
    return rungs


def _precision_refused(cfg: RunConfig, device: torch.device) -> str:
    try:
        check_precision(cfg, device)
    except ValueError as e:
        return str(e)
    return ""


def _too_big(cfg: RunConfig) -> str:
    """Why a batch this large cannot run: more images than the (subset) dataset holds, so no full batch exists.
    (The dataset is read only when the subset does not already settle it.)"""
    from ...data import cifar_files

    if cfg.subset and cfg.batch_size <= cfg.subset:
        return ""
    n = len(cifar_files.CIFAR10Files(cfg.data_path(), train=True).targets)
    n = min(n, cfg.subset) if cfg.subset else n
    # said without its numbers: the rung's label states the batch, the report's settings the data's size
    return "the batch is larger than the training set, so no full batch exists" if cfg.batch_size > n else ""


def _log(msg: str) -> None:
    print(f"[speed] {msg}", file=sys.stderr, flush=True)


def measure(
    rungs: list[Rung],
    settings,
    device: torch.device,
    log: Callable[[str], None] = _log,
    trainer: Callable[[RunConfig, torch.device], Any] = _Trainer,
) -> Ladder:
    """Time every rung that runs (see the module docstring); one row per rung, skipped ones included."""
    steps = settings.steps or STEPS.get(device.type, STEPS["cuda"])
    active = [r for r in rungs if not r.skipped]
    load_before = machine_load()
    trainers = {r.name: trainer(r.cfg, device) for r in active}  # all built first: compiles happen in warm-up
    images = {r.name: [] for r in active}

    def run(name: str) -> None:
        tr, n = trainers[name], 0
        for _ in range(steps):
            x, y = tr.next_batch()
            tr.step(x, y)
            n += len(y)
        images[name].append(n)

    def drain(name: str) -> None:
        """Take the batches a worker-fed loader prefetched while the other rungs ran (untimed)."""
        loader = getattr(trainers[name], "loader", None)
        ahead = (getattr(loader, "prefetch_factor", None) or 0) * (getattr(loader, "num_workers", 0) or 0)
        for _ in range(ahead):
            trainers[name].next_batch()

    timers = {r.name: DeviceTimer(device) for r in active}
    loads = []
    for rnd in range(settings.warmup + settings.repeats):
        timed = rnd >= settings.warmup
        k = rnd % max(1, len(active))
        for r in active[k:] + active[:k]:  # rotated: no rung always runs first
            drain(r.name)
            synchronize(device)
            if timed:
                timers[r.name].start()
            run(r.name)
            if timed:
                timers[r.name].stop()
            else:
                images[r.name].pop()
        loads.append(os.getloadavg()[0] if hasattr(os, "getloadavg") else None)
        log(f"{'round' if timed else 'warm-up'} {rnd + 1}/{settings.warmup + settings.repeats} done")
    for tr in trainers.values():
        tr.close()
    seconds = {name: t.intervals() for name, t in timers.items()}
    load_after = machine_load()
    per_image = flops.flops_per_image(rungs[0].cfg)
    rows, samples = [], {}
    for r in rungs:
        row = _row(r, steps, settings.repeats)
        if not r.skipped:
            rate = [n / s for n, s in zip(images[r.name], seconds[r.name])]
            step_s = [s / steps for s in seconds[r.name]]
            samples[r.name] = rate
            row.update(_stats(rate, step_s))
            row.update(_hardware(r.cfg, device, per_image, row["images_per_s"]))
        rows.append(row)
    meta = {
        "device": str(device),
        "steps": steps,
        "repeats": settings.repeats,
        "warmup": settings.warmup,
        "warmup_note": WARMUP_NOTE.format(warmup=settings.warmup),
        "sampling": "interleaved",  # every rung in every round, the order rotated each round
        "load_before": load_before,
        "load_after": load_after,
        "load_per_round": loads,
        "flops_per_image": per_image,
    }
    return Ladder(pd.DataFrame(rows, columns=COLUMNS), samples, meta)


def _row(r: Rung, steps: int, repeats: int) -> dict[str, Any]:
    c = r.cfg
    return {
        **dict.fromkeys(COLUMNS, float("nan")),
        "rung": r.name,
        "label": r.label,
        "change": r.change,
        "status": "not run" if r.skipped else "measured",
        "reason": r.skipped,
        "batch_size": c.batch_size,
        "lr": c.lr,
        "loader": c.loader,
        "num_workers": c.num_workers,
        "channels_last": c.channels_last,
        "precision": c.precision,
        "compile": c.compile,
        "repeats": 0 if r.skipped else repeats,
        "steps": 0 if r.skipped else steps,
        "peak_source": "",
        "peak_precision": "",
    }


def _stats(rate: list[float], step_s: list[float]) -> dict[str, float]:
    """Median and spread of images/s and of the step time over the timed runs."""
    ips, st = summarize(rate), summarize(step_s)
    return {
        "images_per_s": ips["median"],
        "images_per_s_q1": ips["q1"],
        "images_per_s_q3": ips["q3"],
        "step_s": st["median"],
        "step_iqr_s": st["iqr"],
        "step_min_s": st["min"],
        "step_max_s": st["max"],
    }


def peak_for(cfg: RunConfig, device: torch.device) -> flops.Peak:
    """The peak that bounds a rung: its precision's (flops.peak). Where that is measured and below the fp32 rate
    (a CPU without bf16 units: its bf16 matrix products crawl, while autocast's convolutions convert and compute
    at about the fp32 rate), the device has no faster units for it, so its fp32 peak bounds the rung instead; else
    an MFU above 100% would read as the hardware's limit broken."""
    store = flops.peaks_path(cfg.results_dir)  # this machine's measured peaks, one per device and precision
    pk = flops.peak(device, flops.precision_of(cfg, device), store)
    if pk.measured and pk.precision in ("bf16", "fp16"):
        fp32 = flops.peak(device, "fp32", store)
        if fp32.tflops > pk.tflops:
            source = (
                f"{fp32.source} (the measured {pk.precision} rate is below it, so fp32 bounds {pk.precision})"
            )
            return flops.Peak(fp32.tflops, "fp32", source, True)
    return pk


def _hardware(cfg: RunConfig, device: torch.device, per_image: int, images_per_s: float) -> dict[str, Any]:
    """Achieved TFLOP/s, the peak for the rung's precision (data sheet, else measured), MFU and the images/s the
    device would reach at that peak (its ideal). MFU counts the whole step time, data waits included."""
    pk = peak_for(cfg, device)
    achieved = per_image * images_per_s
    return {
        "flops_per_image": per_image,
        "tflops": achieved / 1e12,
        "peak_tflops": pk.tflops,
        "peak_precision": pk.precision,
        "peak_source": pk.source,
        "mfu": achieved / (pk.tflops * 1e12) if pk.tflops > 0 else math.nan,
        "ideal_images_per_s": pk.tflops * 1e12 / per_image,
    }
