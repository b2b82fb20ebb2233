"""The speed ladder's rungs and their measurement: each rung is the one before with one more optimisation.

    from hpml_lab.studies.speed import study
    rungs = study.plan(cfg, settings, device)       # [Rung(name, label, change, cfg, skipped), ...]
    result = study.measure(rungs, settings, device)  # a Ladder: one row per rung, the samples, the meta

The rungs, cumulative (each keeps everything the rungs before it turned on):

1. pil: the lab's baseline, the per-sample PIL pipeline in a DataLoader with cfg.num_workers persistent
workers;
2. tensor: the whole uint8 dataset resident on the device, augmented batched there (data/gpu_loader.py);
3. channels_last: weights and batches in NHWC memory format;
4. bf16: bfloat16 autocast of forward and loss (fp16 with a GradScaler on a CUDA GPU without bf16);
5. compile: torch.compile (inductor) of the whole step (step.Step), built in the warm-up, not in a timed
repeat;
6. cuda_graphs: the same compiled step in mode reduce-overhead, replayed as CUDA graphs (a GPU's only);
7. big_batch: the batch times `batch_factor`, the learning rate scaled by the same factor (Goyal et al. 2017);
8. bigger_batch: the batch times twice `batch_factor` (1024 from the lab's 128), the learning rate with it.

Then the outside reference, not a rung of the ladder: reference.py beside this file, the plainest script that
trains the same network on the same device in plain torch, at the last rung's batch, precision and compile
mode, run in its own process (run_reference), so a reader sees how far the project's fastest rung is from what
the framework gives.

A rung that cannot run here (CUDA graphs on a CPU), or that this profile leaves out (torch.compile, whose
build c8 times), is kept as a row that says why; the rung after it builds on the last rung that ran.

Every rung has its own model, optimizer and loader (bench_measure's trainer, step.Step's step), all built
before any is timed, so a compiled rung compiles once, in the warm-up. Then `warmup` untimed rounds and
`repeats` timed rounds; in each round every rung runs `steps` steps back to back, the order rotated each round
(A B C, then B C A, ...), so neighbouring rungs take turns and a change of the machine's load hits them alike.
Each timed run is synchronized at its start and timed with profiling.DeviceTimer (CUDA events on a GPU,
perf_counter on a CPU). Before a worker-fed rung's timed run, the batches its workers prefetched while other
rungs ran are taken untimed, so the run starts with the loader's queue empty instead of a head start of ready
batches. After the rounds, each rung takes one untimed step at the shape of its epoch's partial last batch,
where its loader gives one (its first meeting: cuDNN's kernel search on a GPU), then trains `epoch_repeats`
whole epochs of its loader (the rungs again taking turns), each timed whole by a wall clock synchronized at
both ends: the epoch time a user's loop takes, loading included, not a sum of steps.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from ... import flops
from ...config import RunConfig
from ...fastpath import check_precision, compile_available
from ...profiling import DeviceTimer, WallClock, summarize, synchronize
from ...sanity import MIN_SAMPLES, load_now, machine_load
from ..bench_measure import Trainer

RUNGS = ("pil", "tensor", "channels_last", "bf16", "compile", "cuda_graphs", "big_batch", "bigger_batch")
REFERENCE = "reference"  # the outside reference's row, after the rungs
# steps per timed run when settings.steps is 0: a CPU step of ResNet-18 takes seconds, a GPU one milliseconds
STEPS = {"cpu": 2, "cuda": 40}
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
    "epochs_timed",
    "epoch_s",
    "epoch_iqr_s",
    "epoch_images",
    "epoch_mfu",
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
    run, for the verdicts), `meta` (device, settings, load before and after, warm-up note, how samples were
    taken)."""

    table: pd.DataFrame
    samples: dict[str, list[float]]
    meta: dict[str, Any] = field(default_factory=dict)
    epochs: dict[str, list[float]] = field(default_factory=dict)  # rung -> seconds of each whole timed epoch

    def measured(self) -> pd.DataFrame:
        return self.table[self.table["status"] == "measured"]


def warmup_note(rungs: list[Rung], device: torch.device) -> str:
    """What the untimed warm-up rounds hold that the timed ones do not, named only where this ladder has it:
    the workers' start where a rung that ran has DataLoader workers, cuDNN's autotuning on a GPU, the
    torch.compile build (and the CUDA graphs' recording) where a compiled rung ran; the allocator's growth
    always."""
    ran = [r.cfg for r in rungs if not r.skipped]
    held = []
    if any(c.loader == "pil" and c.num_workers > 0 for c in ran):
        held.append("the DataLoader workers' start")
    if device.type == "cuda":
        held.append("cuDNN's autotuning")
    if any(c.compile for c in ran):
        graphs = any(c.compile and c.compile_mode == "reduce-overhead" for c in ran)
        held.append("the torch.compile build" + (" and the CUDA graphs' recording" if graphs else ""))
    held.append("the allocator's growth")
    listed = ", ".join(held[:-1]) + " and " + held[-1] if len(held) > 1 else held[0]
    return f"The untimed warm-up rounds are left out of every number: they hold {listed}."


def low_precision(device: torch.device) -> str:
    """bf16 where the device has it; fp16 on a CUDA GPU without bf16 (a V100), which then needs a
    GradScaler."""
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return "fp16"
    return "bf16"


def plan(cfg: RunConfig, settings, device: torch.device) -> list[Rung]:
    """The rungs for cfg (the baseline's model, data, batch, workers, lr) on `device`, each with its
    RunConfig."""
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
        f"PIL loader with {workers}",
        "the lab's baseline: the per-sample PIL pipeline with its workers",
        base,
    )
    add(
        "tensor",
        "tensor-resident loader",
        "a dataset resident on the device, augmented in batches",
        last.replace(loader="tensor"),
    )
    add("channels_last", "+ channels_last", "the NHWC memory format", last.replace(channels_last=True))
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
    off = (
        "not run at this profile (compile_rung is off here; the torch.compile report times the compiled step "
        "and its build)"
    )
    why = off if settings.compile_rung == "off" else compile_available(compiled.compile_backend, device.type)
    add(
        "compile",
        "+ torch.compile",
        f"torch.compile ({compiled.compile_backend}) of the whole step",
        compiled,
        why,
    )
    graphs = last.replace(compile=True, compile_mode="reduce-overhead")
    if device.type != "cuda":
        why = "CUDA graphs need a CUDA GPU: not run on a CPU"
    elif settings.compile_rung == "off":
        why = off
    else:
        why = compile_available(graphs.compile_backend, device.type)
    add(
        "cuda_graphs",
        "+ CUDA graphs",
        "the compiled step replayed as CUDA graphs (torch.compile's reduce-overhead mode)",
        graphs,
        why,
    )
    k = settings.batch_factor
    base_batch, base_lr = last.batch_size, last.lr
    big = last.replace(batch_size=base_batch * k, lr=base_lr * k)
    add(
        "big_batch",
        f"+ batch {big.batch_size}",
        "a larger batch with the learning rate scaled with it (linear scaling)",
        big,
        _too_big(big),
    )
    bigger = last.replace(batch_size=base_batch * 2 * k, lr=base_lr * 2 * k)
    add(
        "bigger_batch",
        f"+ batch {bigger.batch_size}",
        "twice that batch, the learning rate scaled with it",
        bigger,
        _too_big(bigger),
    )
    return rungs


def reference_args(cfg: RunConfig, device: torch.device, settings) -> tuple[list[str], str]:
    """(the reference script's arguments for cfg, the last rung that ran; '' or why it cannot run): the same
    network (its widths and blocks), data, batch, learning rate, precision and compile mode (CUDA graphs on a
    GPU where the ladder compiles; plain inductor on a CPU where it compiles there; else eager)."""
    from ... import models

    if settings.reference == "off":
        return [], "not run at this profile (reference is off here)"
    if cfg.dataset != "cifar10":
        return [], "the reference script trains on CIFAR-10 only"
    cls, args = models.arguments(cfg.model)
    if cls != "ResNet" or args.get("block") != "basic" or cfg.norm != "bn" or cfg.stem != "cifar":
        return [], "the reference script has the CIFAR ResNet with basic blocks and BatchNorm only"
    if cfg.precision not in ("fp32", "bf16"):
        return [], "the reference script runs in bf16 or fp32 only"
    if settings.compile_rung == "off":
        mode = "eager"
    else:
        mode = "reduce-overhead" if device.type == "cuda" else "default"
        why = compile_available("inductor", device.type)
        if why:
            return [], why
    n_train = cfg.subset or 0
    return [
        "--data",
        str(cfg.data_path()),
        "--device",
        device.type,
        "--batch",
        str(cfg.batch_size),
        "--epochs",
        str(1 + settings.epoch_repeats),
        "--lr",
        repr(cfg.lr),
        "--subset",
        str(n_train),
        "--mode",
        mode,
        "--precision",
        "bf16" if cfg.precision == "bf16" else "fp32",
        "--widths",
        ",".join(str(w) for w in args["widths"]),
        "--blocks",
        ",".join(str(b) for b in args["num_blocks"]),
    ], ""


def run_reference(args: list[str], timeout: float = 900.0) -> dict[str, Any]:
    """Run reference.py in its own process (python as this one); its JSON line. A failure raises RuntimeError
    with the script's last line of error output."""
    import json
    from pathlib import Path

    script = Path(__file__).with_name("reference.py")
    r = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=timeout)
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        last = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        raise RuntimeError(f"the reference script failed: {last[:300]}")
    return json.loads(lines[-1])


def _precision_refused(cfg: RunConfig, device: torch.device) -> str:
    try:
        check_precision(cfg, device)
    except ValueError as e:
        return str(e)
    return ""


def _too_big(cfg: RunConfig) -> str:
    """Why a batch this large cannot run: more images than the (subset) dataset holds, so no full batch
    exists. (The dataset is read only when the subset does not already settle it.)"""
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
    trainer: Callable[[RunConfig, torch.device], Any] = Trainer,
) -> Ladder:
    """Time every rung that runs (see the module docstring); one row per rung, skipped ones included."""
    steps = settings.steps or STEPS.get(device.type, STEPS["cuda"])
    active = [r for r in rungs if not r.skipped]
    # the peak each rung is held to, measured (where this machine keeps none yet) before the ladder loads it:
    # measured after the ladder, one CPU's bf16 peak read 0.873 TFLOP/s in one render and 1.41 in the next
    peaks = [peak_for(r.cfg, device) for r in active]
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
        loads.append(load_now())
        log(f"{'round' if timed else 'warm-up'} {rnd + 1}/{settings.warmup + settings.repeats} done")
    seconds = {name: t.intervals() for name, t in timers.items()}
    # whole epochs, the rungs taking turns: the epoch time a user's loop takes, loading and its last batch
    # included
    epochs: dict[str, list[float]] = {r.name: [] for r in active}
    epoch_images: dict[str, int] = {}
    for tr in trainers.values():  # an epoch's partial last batch met once, untimed, before any whole epoch
        tr.warm_last()
    synchronize(device)
    epoch_loads: list[float | None] = []  # the 1-minute load average after each round of epochs
    clock = WallClock(device)
    for rnd in range(settings.epoch_repeats):
        k = rnd % max(1, len(active))
        for r in active[k:] + active[:k]:
            clock.start()
            epoch_images[r.name] = trainers[r.name].epoch()
            epochs[r.name].append(clock.stop())
        epoch_loads.append(load_now())
        log(f"whole epochs {rnd + 1}/{settings.epoch_repeats} done")
    steps_ran = {name: tr._step.describe() for name, tr in trainers.items() if hasattr(tr, "_step")}
    for tr in trainers.values():
        tr.close()
    trainers.clear()
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
            row.update(
                _epoch_stats(epochs[r.name], epoch_images.get(r.name, 0), per_image, row["peak_tflops"])
            )
        rows.append(row)
    last = next((r for r in reversed(rungs) if not r.skipped), rungs[0])
    ref_row, ref_epochs, ref_meta = _reference(last, settings, device, per_image, log)
    rows.append(ref_row)
    if ref_epochs:
        epochs[REFERENCE] = ref_epochs
    meta = {
        "device": str(device),
        "steps": steps,
        "repeats": settings.repeats,
        "warmup": settings.warmup,
        "warmup_note": warmup_note(rungs, device),
        "sampling": "interleaved",  # every rung in every round, the order rotated each round
        "load_before": load_before,
        "load_after": load_after,
        "load_per_round": loads,
        "flops_per_image": per_image,
        "epoch_repeats": settings.epoch_repeats,
        "load_epochs": epoch_loads,
        "epoch_note": "whole epochs of each rung's loader after the rounds, the rungs taking turns, each "
        "timed by a wall clock synchronized at both ends (an epoch of the PIL loader keeps its last partial "
        "batch; the tensor loader drops it: static shapes)",
        "reference": ref_meta,
        # each measured peak's load when it was measured, by precision: a page whose shares divide by a peak
        # measured busy says each is uncertain (sanity.busy_peak)
        "peak_loads": {pk.precision: pk.machine for pk in peaks if pk.measured and pk.machine},
        # what each rung's step ran (step.Step.describe; dynamo's and inductor's counters are the
        # process's, so a later rung's counts include the earlier rungs')
        "step_ran": steps_ran,
    }
    return Ladder(pd.DataFrame(rows, columns=COLUMNS), samples, meta, epochs)


def _epoch_stats(seconds: list[float], images: int, per_image: int, peak_tflops: float) -> dict[str, Any]:
    """Median and spread of whole epochs' seconds, the images an epoch carried, and MFU over the whole
    epoch."""
    st = summarize(seconds)
    med = st["median"]
    ok = bool(seconds) and med > 0 and peak_tflops and peak_tflops > 0
    return {
        "epochs_timed": len(seconds),
        "epoch_s": med,
        "epoch_iqr_s": st["iqr"] if len(seconds) >= MIN_SAMPLES else float("nan"),
        "epoch_images": images,
        "epoch_mfu": per_image * images / med / (peak_tflops * 1e12) if ok else float("nan"),
    }


def _reference(
    last: Rung, settings, device: torch.device, per_image: int, log
) -> tuple[dict, list[float], dict]:
    """The outside reference's row (the plain script at the last rung's settings), its warm epochs' seconds
    and what ran; a row that says why where it could not run. Its first epoch (the compile) is left out."""
    cfg = last.cfg
    row = {
        **dict.fromkeys(COLUMNS, float("nan")),
        "rung": REFERENCE,
        "label": "plain script (reference)",
        "change": "the plainest script that trains the same network on this device (reference.py)",
        "batch_size": cfg.batch_size,
        "lr": cfg.lr,
        "loader": "resident",
        "num_workers": 0,
        "channels_last": True,
        "precision": cfg.precision,
        "compile": settings.compile_rung == "on",
        "repeats": 0,
        "steps": 0,
        "peak_source": "",
        "peak_precision": "",
    }
    args, why = reference_args(cfg, device, settings)
    if not why:
        if device.type == "cuda":
            torch.cuda.empty_cache()  # the rungs' memory back to the device for the script's process
        log("reference: the plain script in its own process")
        loads = [load_now()]
        try:
            out = run_reference(args)
            loads.append(load_now())
        except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
            why = (
                str(e) if isinstance(e, RuntimeError) else f"the reference script failed: {type(e).__name__}"
            )
    if why:
        return (
            {**row, "status": "not run", "reason": why},
            [],
            {"args": args, "why": why, "rung": last.name},
        )
    warm = out["epochs"][1:]
    seconds = [float(e["seconds"]) for e in warm]
    images = int(warm[0]["images"]) if warm else 0
    row.update(status="measured", reason="", repeats=len(seconds), compile=out["mode"] != "eager")
    rate = [images / s for s in seconds if s > 0]
    steps = max(1, images // cfg.batch_size)
    row.update(_stats(rate, [s / steps for s in seconds]))
    row.update(_hardware(cfg, device, per_image, row["images_per_s"]))
    row.update(_epoch_stats(seconds, images, per_image, row["peak_tflops"]))
    ran = {k: out.get(k) for k in ("batch", "mode", "precision", "lr", "widths", "blocks", "subset")}
    return (
        row,
        seconds,
        {
            "args": args,
            "ran": ran,
            "rung": last.name,  # the rung whose settings the script ran at: the answer compares with it
            "first_epoch_s": out["epochs"][0]["seconds"],
            "loads": loads,
        },
    )


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
    """Median and spread of images/s and of the step time over the timed runs; no spread (quartiles, IQR,
    min and max left empty) from fewer than sanity.MIN_SAMPLES of them: one or two values are no spread, and
    q1 = q3 with an IQR of 0 from one epoch read as a measured steadiness."""
    ips, st = summarize(rate), summarize(step_s)
    spread = min(ips["n"], st["n"]) >= MIN_SAMPLES

    def kept(x: float) -> float:
        return x if spread else math.nan

    return {
        "images_per_s": ips["median"],
        "images_per_s_q1": kept(ips["q1"]),
        "images_per_s_q3": kept(ips["q3"]),
        "step_s": st["median"],
        "step_iqr_s": kept(st["iqr"]),
        "step_min_s": kept(st["min"]),
        "step_max_s": kept(st["max"]),
    }


def peak_for(cfg: RunConfig, device: torch.device) -> flops.Peak:
    """The peak that bounds a rung: its precision's (flops.peak). Where that is measured and below the fp32
    rate (a CPU without bf16 units: its bf16 matrix products crawl, while autocast's convolutions convert and
    compute at about the fp32 rate), the device has no faster units for it, so its fp32 peak bounds the rung
    instead; else an MFU above 100% would read as the hardware's limit broken."""
    store = flops.peaks_path(cfg.results_dir)  # this machine's measured peaks, one per device and precision
    pk = flops.peak(device, flops.precision_of(cfg, device), store)
    if pk.measured and pk.precision in ("bf16", "fp16"):
        fp32 = flops.peak(device, "fp32", store)
        if fp32.tflops > pk.tflops:
            source = (
                f"{fp32.source} (the measured {pk.precision} rate is below it, so fp32 bounds {pk.precision})"
            )
            return flops.Peak(fp32.tflops, "fp32", source, True, fp32.measured_at, fp32.machine)
    return pk


def _hardware(cfg: RunConfig, device: torch.device, per_image: int, images_per_s: float) -> dict[str, Any]:
    """Achieved TFLOP/s, the peak for the rung's precision (data sheet, else measured), MFU and the images/s
    the device would reach at that peak (its ideal). MFU counts the whole step time, data waits included."""
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
