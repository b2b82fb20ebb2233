"""Benchmarks that print ratios: the fast path against the lab's baseline, measured in one run.

    hpml-lab bench loader          # PIL per-sample pipeline vs batched tensor augmentation, images/s per core
    hpml-lab bench step            # the lab's baseline (fp32 weights, TF32 convolutions on CUDA, NCHW,
                                   # PIL loader, 2 workers) vs the fast path
    hpml-lab bench overhead        # one training step with and without the kit's timing instrumentation
    hpml-lab bench stall           # share of step time spent waiting for data, baseline vs fast path
    hpml-lab bench profile         # torch.profiler: the fast path's step beside the plain script's
                                   # (speed/reference.py)
    hpml-lab bench all             # the five, one after the other (`make bench`)
    hpml-lab bench step --repeats 7 --model resnet18 --batch-size 128 --device cuda

Each benchmark prints progress on stderr and ONE JSON object as its last stdout line, and saves
the same object (with hardware, versions and commit from envinfo.environment()) atomically as
benchmarks/results/<name>-<host>-<UTC time>.json. Every number is a median over `repeats` timed
repeats after `warmup` untimed ones, with its spread (hpml_lab.profiling.summarize). This module
holds the command: its options (Settings), running one benchmark, saving and printing its record;
the measurements themselves are in bench_measure.py and bench_profile.py.
Not part of `make test`: speeds depend on the machine; tests check the JSON shape only.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch

from ..config import INT_RANGES, PRECISIONS, ConfigError, StudySettings, output_path, resolve_path
from ..data import cifar
from ..device import free_cuda_memory, is_oom, resolve_device
from ..envinfo import environment
from ..io import atomic_write_json
from .bench_measure import bench_loader, bench_overhead, bench_stall, bench_step, log
from .bench_profile import bench_profile

BENCHES: dict[str, Callable[[dict[str, Any], torch.device], dict[str, Any]]] = {
    "loader": bench_loader,
    "step": bench_step,
    "overhead": bench_overhead,
    "stall": bench_stall,
    "profile": bench_profile,
}
NAMES = tuple(BENCHES)


@dataclass(frozen=True)
class Settings(StudySettings):
    """A benchmark run's options, typed and range-checked before any data is read or model built."""

    data_root: str = "data"
    device: str = "auto"
    repeats: int = 5  # timed repeats (median and spread over them)
    warmup: int = 1  # untimed warm-up repeats per variant
    model: str = "resnet18"
    batch_size: int = 128
    num_workers: int = 2  # the baseline DataLoader's workers
    steps: int = 0  # training steps per timed repeat; 0: by device (STEPS)
    pil_batches: int = 8  # bench loader: batches through the PIL pipeline per repeat
    tensor_batches: int = 40  # bench loader: batches through the tensor loader per repeat
    precision: str = "auto"  # the fast path's settings: auto (by device), else one of config.PRECISIONS
    compile: str = "auto"  # auto (by device), on or off
    channels_last: str = "auto"

    # past the highest no benchmark exists: a huge value would crash late (RunConfig's where it has one)
    RANGES = {
        name: (low, INT_RANGES.get(name, (0, 100_000))[1], "")
        for name, low in (
            ("repeats", 1),
            ("warmup", 0),
            ("batch_size", 1),
            ("num_workers", 0),
            ("steps", 0),
            ("pil_batches", 1),
            ("tensor_batches", 1),
        )
    }

    @classmethod
    def out_of_range(cls, name: str, value: float, lo: float, hi: float, why: str) -> str:
        return f"--{name.replace('_', '-')} must be from {lo} to {hi:,}, got {value}"

    def check(self) -> None:
        for name in ("compile", "channels_last"):
            if getattr(self, name) not in ("auto", "on", "off"):
                raise ConfigError(f"{name} must be auto, on or off, got {getattr(self, name)!r}")
        if self.precision not in ("auto", *PRECISIONS):
            raise ConfigError(f"precision must be auto, {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.device not in ("auto", "cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ConfigError(f"--device must be auto, cpu or cuda, got {self.device!r}")

    @classmethod
    def of(cls, **options: Any) -> Settings:
        """From keyword options (None: the default; compile/channels_last also as True/False)."""
        opts = {k: v for k, v in options.items() if v is not None}
        if opts.get("steps") == 0:  # 0 is the default's meaning ("by device"): said, not silently taken
            by_device = "; ".join(
                f"{d}: " + ", ".join(f"{b} {n}" for b, n in v.items()) for d, v in STEPS.items()
            )
            raise ConfigError(
                f"--steps must be at least 1; leave it out for the device's default ({by_device})"
            )
        unknown = set(opts) - set(cls.field_names())
        if unknown:
            raise ConfigError(
                f"unknown benchmark option(s) {', '.join(sorted(unknown))}; "
                f"valid: {', '.join(cls.field_names())}"
            )
        for k in ("compile", "channels_last"):
            if isinstance(opts.get(k), bool):
                opts[k] = "on" if opts[k] else "off"
        return cls(**opts)


# Steps per timed repeat: a CPU step of ResNet-18 at batch 128 takes seconds, a GPU one milliseconds.
STEPS = {
    "cpu": {"step": 1, "overhead": 1, "stall": 2, "profile": 2},
    "cuda": {"step": 50, "overhead": 50, "stall": 50, "profile": 10},
}


def run(name: str, save: bool = True, **options: Any) -> dict[str, Any]:
    """Run one benchmark; return (and save) its result object."""
    if name not in BENCHES:
        raise ConfigError(f"unknown benchmark {name!r}; valid: {', '.join(NAMES)}, all")
    settings = Settings.of(**options)
    opts: dict[str, Any] = asdict(settings)
    for k in ("compile", "channels_last"):  # the tri-state fast_overrides takes: None is by device
        opts[k] = {"auto": None, "on": True, "off": False}[opts[k]]
    opts["precision"] = None if opts["precision"] == "auto" else opts["precision"]
    device = resolve_device(opts["device"])
    opts["data_root"] = str(_data(opts["data_root"]))  # fails fast, naming the command that prepares it
    if opts["steps"] == 0:
        opts["steps"] = STEPS[device.type].get(name, 1)
    if device.type == "cuda" and opts["warmup"] < 3 and name in ("step", "stall"):
        opts["warmup"] = 3  # cuDNN autotuning and torch.compile happen in the first steps
    started = _dt.datetime.now(_dt.UTC)
    log(f"{name} on {device} ({opts['repeats']} repeats after {opts['warmup']} warm-up)")
    t0 = time.perf_counter()
    try:
        body = BENCHES[name](opts, device)
        status = "complete"
    except (
        torch.cuda.OutOfMemoryError,
        MemoryError,
        RuntimeError,
    ) as e:  # out of memory is a result, not a crash
        if not is_oom(e):
            raise
        body, status = (
            {"error": f"out of memory: {(str(e).splitlines() or [type(e).__name__])[0][:300]}"},
            "out_of_memory",
        )
    if status == "out_of_memory":  # outside the handler, so the exception and its tensors are gone
        free_cuda_memory()
    env = environment(device)
    record = {
        "benchmark": name,
        "status": status,
        **body,
        "device": str(device),
        "settings": {k: v for k, v in opts.items() if k != "device"},
        "warmup_note": f"{opts['warmup']} untimed warm-up repeat(s) per variant are excluded",
        "started_at": started.isoformat(timespec="seconds"),
        "seconds": round(time.perf_counter() - t0, 2),
        "environment": env,
    }
    if save:
        host = re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname())[:40] or "host"
        stamp = started.strftime("%Y%m%dT%H%M%SZ")
        path = output_path("benchmarks/results") / f"{name}-{host}-{stamp}.json"
        record["saved_to"] = str(path)
        atomic_write_json(path, record)
    return record


def _data(root: str):
    path = resolve_path(root)
    cifar.check(path)
    return path


def main(names: list[str], **options: Any) -> int:
    """CLI entry: run the named benchmarks; one JSON line each on stdout (the last line is the last one's)."""
    if names == ["all"]:
        names = list(NAMES)
    for n in names:
        if n not in BENCHES:
            raise ConfigError(f"unknown benchmark {n!r}; valid: {', '.join(NAMES)}, all")
    for n in names:
        rec = run(n, **options)
        ratio = rec.get("ratio")
        said = (
            f"ratio {ratio:.3g}" if isinstance(ratio, (int, float)) else rec.get("ratio_note") or "no ratio"
        )
        log(f"{n}: {said} -> {rec.get('saved_to')}")
        print(json.dumps(rec, sort_keys=True, default=str), flush=True)
    return 0
