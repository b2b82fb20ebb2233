"""Floating-point work of a training step, the device's peak, achieved TFLOP/s and MFU.

    from hpml_lab import flops
    f = flops.step_flops_per_image("resnet18")        # 3.33e9 for a 32x32 CIFAR image (fwd + bwd)
    peak = flops.peak(torch.device("cuda"), "bf16")   # Peak(tflops=989.5, source="NVIDIA H100 SXM ...")
    flops.precision_of(cfg, device)                   # "fp16" for RunConfig(precision="fp16")
    flops.mfu(f * images, seconds, peak.tflops)       # achieved / peak, a fraction

Convention: a multiply-add is 2 FLOPs, as torch.utils.flop_counter.FlopCounterMode counts (convolutions and
matrix products, forward and backward; elementwise work such as BatchNorm and ReLU is not counted, as in the
usual MFU definition). A training step is counted once per model, input shape and number of classes, on a
batch of one image on the CPU (FLOPs per image do not depend on the batch or device), and cached.

Peaks are dense (not 2:4 sparse) figures from the vendors' data sheets; for a CPU, or a GPU not in the table,
the peak is measured: the best of a few matrix products in the precision used, at the size where one takes 50
ms (at most 2048 on a CPU, 4096 on a GPU), repeated for about 0.5 s, at least 3 times (so an MFU near 1 on a
CPU means "as fast as its own matrix product", not its theoretical peak). A measured peak is measured once per
machine and kept in results/device-peaks.json (PEAKS_FILE), keyed by the device, its name, the threads torch
uses and the precision, with when it was measured and the machine's load then; every later run and task on
that machine reads it, so their shares of peak divide by one number and can be compared (each measured anew,
one machine's CPU "peak" was 0.0666, 0.0252 and 0.0358 TFLOP/s on three pages). Where the machine is busy
when it is measured, or a CPU measurement's products had less than CORES_HAD of their threads' cores
(process CPU time over wall time: another process on them, which the lagging load average may not show), that
one measurement takes the best of several, a few seconds apart (MEASURE_TRIES), since a shared machine only
measures low. Delete the file to measure again.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import torch
from torch import nn

from .profiling import WallClock

# name (whole words of what torch.cuda.get_device_name reports) -> dense TFLOP/s by precision, and the source.
# fp16 and bf16 tensor-core peaks are equal on the data sheets that give both. Volta and Turing (V100, T4, RTX
# 5000) have FP16 tensor cores but no bf16 or TF32 units: no bf16 entry (a bf16 run's peak is measured), and
# their tf32 entry is the fp32 figure (TF32 allowed there runs as fp32).
GPU_PEAKS: dict[str, tuple[dict[str, float], str]] = {
    "H100 PCIe": (
        {"fp32": 51.0, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0},
        "NVIDIA H100 PCIe data sheet (dense)",
    ),
    "H100": (
        {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5},
        "NVIDIA H100 SXM data sheet (dense)",
    ),
    "H200": (
        {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5},
        "NVIDIA H200 SXM data sheet (dense)",
    ),
    "A100": ({"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}, "NVIDIA A100 data sheet (dense)"),
    "V100": ({"fp32": 15.7, "tf32": 15.7, "fp16": 125.0}, "NVIDIA V100 SXM2 data sheet (no TF32 or bf16)"),
    "L4": ({"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0}, "NVIDIA L4 data sheet (dense)"),
    "T4": ({"fp32": 8.1, "tf32": 8.1, "fp16": 65.0}, "NVIDIA T4 data sheet (no TF32 or bf16)"),
    "RTX 5000": (
        {"fp32": 11.2, "tf32": 11.2, "fp16": 89.2},
        "NVIDIA Quadro RTX 5000 data sheet (no TF32 or bf16)",
    ),
}


T = TypeVar("T")

# variants whose figures differ from the entry their name contains (H100 NVL, H200 NVL, RTX 5000 Ada):
# measured
OTHER_VARIANTS = ("NVL", "Ada")


def by_gpu_name(table: Mapping[str, T], gpu_name: str | None) -> T | None:
    """The entry of a table keyed by GPU model for a device name: the first key found in it as whole words (an
    L40S is not an L4), none for a variant the tables do not hold (OTHER_VARIANTS) or no GPU."""
    if not gpu_name or any(re.search(rf"\b{v}\b", gpu_name, re.I) for v in OTHER_VARIANTS):
        return None
    for key, entry in table.items():
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(key)}(?![A-Za-z0-9])", gpu_name, re.I):
            return entry
    return None


def data_sheet(gpu_name: str) -> tuple[dict[str, float], str] | None:
    """The GPU_PEAKS entry for a device name; None for an unknown GPU, whose peak is then measured, not
    borrowed."""
    return by_gpu_name(GPU_PEAKS, gpu_name)


@dataclass(frozen=True)
class Peak:
    tflops: float
    precision: str
    source: str  # a data sheet, or "measured ..." for the stored matrix-product rate (PEAKS_FILE)
    measured: bool
    measured_at: str = ""  # when a measured peak was measured (UTC), once for this machine
    machine: dict | None = None  # the machine's load when it was measured (a busy machine measures it low)


PEAKS_FILE = "device-peaks.json"  # under the results folder: one measured peak per device, kept


def precision_of(cfg, device: torch.device) -> str:
    """The precision a run's convolutions and matrix products used: cfg.precision's bf16 or fp16 (autocast);
    on CUDA tf32 when asked for or where torch allows it (cuDNN convolutions do by default); else fp32 (a CPU
    has no TF32: precision=tf32 runs there as fp32)."""
    if cfg.precision in ("bf16", "fp16"):
        return cfg.precision
    if device.type == "cuda" and (cfg.precision == "tf32" or any(tf32_state().values())):
        return "tf32"
    return "fp32"


def _allows_tf32(new_api, legacy) -> bool:
    """TF32 allowed for a backend: its fp32_precision (torch >= 2.9) when set ("tf32" or "ieee"), else the
    legacy flag. Reading the legacy flag after a user set the new API raises "mix of legacy and new APIs"; it
    then counts as not allowed."""
    p = getattr(new_api, "fp32_precision", None)
    if p in ("tf32", "ieee"):
        return p == "tf32"
    try:
        return bool(legacy())
    except RuntimeError:
        return False


def tf32_state() -> dict[str, bool]:
    """Whether CUDA matrix products and cuDNN convolutions may run in TF32, read through the new API where
    present."""
    cudnn = torch.backends.cudnn
    return {
        "matmul": _allows_tf32(torch.backends.cuda.matmul, lambda: torch.backends.cuda.matmul.allow_tf32),
        "cudnn": _allows_tf32(getattr(cudnn, "conv", None), lambda: cudnn.allow_tf32),
    }


@functools.lru_cache(maxsize=64)
def _count(name: str, num_classes: int, stem: str, norm: str, image_size: int) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    from . import models

    # A RevNet is counted under ordinary autograd: the same forward and backward arithmetic (its
    # reconstruction in backward is extra work, not counted, like checkpointing's second forward), and the
    # reversible Function's backward does not run under the counter's dispatch mode.
    extra = {"memory_saving": False} if models.accepts(name, "memory_saving") else {}
    kwargs = {"stem": stem} if models.accepts(name, "stem") else {}
    with torch.random.fork_rng(devices=[]):  # leave the caller's random stream where it was
        model = models.build(name, num_classes=num_classes, norm=norm, **kwargs, **extra)
        model.train()
        x = torch.randn(1, 3, image_size, image_size)
        y = torch.zeros(1, dtype=torch.long)
        counter = FlopCounterMode(display=False)
        with counter:
            nn.functional.cross_entropy(model(x), y).backward()
    return int(counter.get_total_flops())


def step_flops_per_image(
    name: str, num_classes: int = 10, stem: str = "cifar", norm: str = "bn", image_size: int = 32
) -> int:
    """FLOPs of one training step (forward + backward) per image for a registered model."""
    return _count(name, num_classes, stem, norm, image_size)


def flops_per_image(cfg) -> int:
    """step_flops_per_image for a RunConfig's model, dataset and stem (checkpointing's extra forward not
    counted: MFU counts the useful work of the step, as is usual)."""
    from .data import classes_of

    size = 64 if cfg.dataset == "tinyimagenet" else 32
    return step_flops_per_image(cfg.model, classes_of(cfg), cfg.stem, cfg.norm, size)


def _measured(device_str: str, precision: str, budget_s: float = 0.5, detail: dict | None = None) -> float:
    """The best rate of square matrix products on the device, in TFLOP/s: the best of 3 to 20 repeats, as many
    as fit in `budget_s` (at least 3, so a slow path can pass it a little).

    The size doubles from 256 until one product takes 50 ms (or 4096 on a GPU, 2048 on a CPU), so a slow path
    (bf16 on a CPU without bf16 instructions runs at about 1 GFLOP/s: a 2048 product takes 15 s) is measured
    at a size it finishes quickly, and a fast one at a size large enough to reach its best rate; where one
    product at the largest size is shorter than 50 ms, each repeat times enough back-to-back products to last
    50 ms. `detail`, where given, gets the product's size and how many timed repeats the best came from."""
    device = torch.device(device_str)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    cuda = device.type == "cuda"
    largest = 4096 if cuda else 2048

    clock = WallClock(device)  # synchronized at both ends on a GPU

    def timed(a, b, k: int = 1) -> float:
        """Seconds per product over k back-to-back products (one sync at each end: launch gaps are hidden)."""
        clock.start()
        for _ in range(k):
            a @ b
        return clock.stop() / k

    start = time.perf_counter()
    n = 256
    # "tf32" (a CUDA run with cuDNN's default TF32 convolutions) is measured with TF32 matrix products, "fp32"
    # without; the caller's setting is put back afterwards
    with (
        torch.random.fork_rng(devices=[torch.cuda.current_device()] if cuda else []),
        tf32(precision == "tf32", convolutions=False),
    ):
        while True:
            a = torch.randn(n, n, device=device, dtype=dtype)
            b = torch.randn(n, n, device=device, dtype=dtype)
            timed(a, b)  # the first product at a size pays for its kernel choice and buffers
            t = timed(a, b)
            if t >= 0.05 or n >= largest:
                break
            n *= 2
        # at the largest size one product may still be far under 50 ms (4096 in bf16 takes about 0.17 ms on an
        # H100): time k back-to-back products per repeat so that each repeat lasts about 50 ms
        k = max(1, min(1000, int(0.05 / max(t, 1e-6))))
        cpu0, wall0 = time.process_time(), time.perf_counter()
        best, repeats = (timed(a, b, k) if k > 1 else t), 1
        # the best of several: a shared machine slows some down; at least 3, at most 20, within the budget
        for i in range(19):
            if i >= 2 and time.perf_counter() - start + best * k > budget_s:
                break
            best, repeats = min(best, timed(a, b, k)), repeats + 1
        cpu_s, wall_s = time.process_time() - cpu0, time.perf_counter() - wall0
    if detail is not None:
        detail.update(size=n, repeats=repeats, products_per_repeat=k)
        if not cuda and wall_s > 0:  # the share of its threads' cores the products had (another process
            # on them lowers it, however quiet the load average, which lags by a minute); more threads than
            # usable cores can have no more than those cores (review29: 4 threads on 2 cores read 0.46)
            from .sanity import usable_cores

            cores = max(1, min(torch.get_num_threads(), usable_cores()))
            detail["cores_had"] = round(cpu_s / wall_s / cores, 3)
            detail["threads"], detail["cores"] = torch.get_num_threads(), cores
    return 2 * n**3 / best / 1e12


@contextlib.contextmanager
def tf32(allow: bool, convolutions: bool = True):
    """TF32 on or off inside for CUDA matrix products (and cuDNN convolutions), through fp32_precision where
    torch has it, so that a user's setting of the new API is neither mixed with the legacy flags (torch raises
    on a read of one after a write of the other) nor lost; the previous settings are put back."""
    cudnn = torch.backends.cudnn
    backends = [(torch.backends.cuda.matmul, torch.backends.cuda.matmul)]
    if convolutions:
        backends.append((getattr(cudnn, "conv", None), cudnn))
    saved = []
    for new_api, legacy in backends:
        if hasattr(new_api, "fp32_precision"):
            saved.append((new_api, "fp32_precision", new_api.fp32_precision))
            new_api.fp32_precision = "tf32" if allow else "ieee"
        else:
            saved.append((legacy, "allow_tf32", legacy.allow_tf32))
            legacy.allow_tf32 = allow
    try:
        yield
    finally:
        for obj, name, value in saved:
            setattr(obj, name, value)


def device_name(device: torch.device) -> str:
    """The device as its peak is keyed: the GPU's name, or the CPU's model and the threads torch uses on
    it."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    n = torch.get_num_threads()
    return f"{cpu_model()}, {n} thread{'' if n == 1 else 's'}"


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else what platform says."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def peaks_path(results_dir: str | os.PathLike = "results") -> Path:
    from .config import output_path

    return output_path(results_dir) / PEAKS_FILE


def peak(device: torch.device, precision: str, store: str | os.PathLike | None = None) -> Peak:
    """The device's peak for the precision: the data-sheet figure for a known GPU that has one, else the one
    measured for this device (its type, name and precision) and kept in `store` (default: results/PEAKS_FILE),
    measured now and kept there when it holds none."""
    device = torch.device(device)
    missing = ""
    name = device_name(device)
    if device.type == "cuda":
        entry = data_sheet(name)
        if entry is not None and precision in entry[0]:
            return Peak(entry[0][precision], precision, f"{entry[1]}: {name}", False)
        if entry is not None:  # e.g. bf16 on a V100: no such units, so no data-sheet figure to borrow
            missing = f" ({entry[1]} gives no {precision} figure)"
    path = Path(store) if store is not None else peaks_path()
    held = _stored(path, f"{device.type} | {name} | {precision}", lambda: _measure_now(device, precision))
    return Peak(
        held["tflops"],
        precision,
        f"measured on this machine ({held['measured_at']}{_times(held)}) and kept in {PEAKS_FILE} for every "
        f"task: {precision} matrix products on {device.type} ({name}){missing}",
        True,
        measured_at=held["measured_at"],
        machine=held.get("machine"),
    )


def _times(held: Mapping) -> str:
    """How the kept peak was taken, as its source says it: the timed repeats of its measurement (each the
    products of one size back to back), and of how many measurements it was the best where the machine was
    busy."""
    made = int(held.get("measurements") or 1)
    got = held.get("products") or {}
    repeats = (
        f", the fastest of {got['repeats']} timed repeats of {got['size']}x{got['size']} products"
        if got.get("repeats") and got.get("size")
        else ", the fastest of several timed repeats"  # a peak kept before the record held them
    )
    return repeats + (f", the best of {made} measurements" if made > 1 else "")


def peak_number(fl: Mapping) -> object:
    """A run's peak (meta.json's `flops`) as the Number every page states it by: measured (n = 1) when this
    machine measured it, a reference when a data sheet gives it; its source says which and where it is
    kept."""
    from .answers import Number

    measured = str(fl.get("peak_source", "")).startswith("measured")
    return Number(
        f"this device's {fl['precision']} peak",
        float(fl["peak_tflops"]),
        "TFLOP/s",
        "measured" if measured else "reference",
        n=1 if measured else None,
        source=str(fl.get("peak_source", "")),
    )


MEASURE_TRIES = 5  # measurements one peak takes at most, while the machine stays busy
MEASURE_PAUSE_S = 2.0  # between them: another process's burst may pass
# the share of its threads' cores a CPU measurement must have had (process CPU time over wall time and
# threads) to stand alone: grade24's 2-thread fp32 peak, 0.142 TFLOP/s at a load per core of 0.78, under the
# busy line, was below the same machine's 1-thread peak (0.157): another process had one of its cores
CORES_HAD = 0.9


def _measure_now(device: torch.device, precision: str) -> dict:
    """The peak as kept: measured once per machine, and there the best of up to MEASURE_TRIES measurements
    while the machine is busy (sanity.busy's thresholds) or, on a CPU, while a measurement had less than
    CORES_HAD of its threads' cores, with the load of the one kept. A busy machine only
    measures low: shared cores or oversubscribed threads measured one 2-core machine's 2-thread fp32 peak at
    0.054 TFLOP/s where training then ran at 0.074 (138% of it). Measured again by later runs, the pages of
    one report divided by three different peaks; measured once, every page divides by the same one."""
    from .sanity import machine_load, pressure

    tries = []
    for i in range(MEASURE_TRIES):
        # read before and after: the second's steal window is the measurement itself; neither is a run's
        # reading, so no page's busy check counts it (review24)
        before = machine_load(seen=False)
        detail: dict = {}
        rate = _measured(str(device), precision, detail=detail)
        # the steal over the measurement itself, the load average from before it (review29: the 1-minute
        # average read after the products holds their own threads)
        machine = {**machine_load(seen=False), **{k: before[k] for k in ("load1", "cores") if k in before}}
        tries.append((rate, machine, detail))
        if pressure(machine) <= 1 and detail.get("cores_had", 1.0) >= CORES_HAD:
            break
        if i + 1 < MEASURE_TRIES:
            time.sleep(MEASURE_PAUSE_S)
    tflops, machine, detail = max(tries, key=lambda t: t[0])
    return {
        "tflops": tflops,
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine,
        "measurements": len(tries),
        "products": detail,
    }


def _stored(path: Path, key: str, measure) -> dict:
    """The entry `key` of the peaks file at `path`, measured (measure()) and added under a lock when it is not
    there: two tasks starting together measure once, and each reads the same entry."""
    import fcntl

    from .io import atomic_write_json

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            held = json.loads(path.read_text()) if path.is_file() else {}
        except (OSError, ValueError):
            held = {}  # a damaged file is measured over
        held = held if isinstance(held, dict) else {}
        entry = held.get(key)
        valid = (
            isinstance(entry, dict) and isinstance(entry.get("tflops"), (int, float)) and entry["tflops"] > 0
        )
        if not valid:
            entry = measure()
            atomic_write_json(path, {**held, key: entry})
        return entry


def mfu(flops: float, seconds: float, peak_tflops: float) -> float:
    """Model FLOPs utilisation: achieved FLOP/s over the peak."""
    return flops / seconds / (peak_tflops * 1e12) if seconds > 0 and peak_tflops > 0 else float("nan")


def tflops(flops: float, seconds: float) -> float:
    return flops / seconds / 1e12 if seconds > 0 else float("nan")
