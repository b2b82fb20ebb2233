"""The `memory` task: RevNet and gradient checkpointing against ResNet, compared network by network.

    hpml-lab run memory --profile smoke          # the notebook notebooks/memory.ipynb

    from hpml_lab.studies.memory import study as memory
    specs = memory.variants(["resnet18_adjusted"], rev_stages=[3], segments=2)
    rows = memory.measure(specs, batch_size=8)   # activation MB/sample, s/batch, CUDA peak MB

The measurements themselves (activation bytes, CUDA peak, largest batch, snapshots) are in
hpml_lab.memory; this module picks the networks, runs them and builds the report's tables.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from ... import models, results
from ...device import configure, free_cuda_memory, resolve_device
from ...io import atomic_write_csv
from ...memory import (
    MB,
    activation_bytes,
    cuda_max_batch,
    cuda_memory_snapshot,
    cuda_peak_step,
    make_step,
    predicted_max_batch,
    state_bytes,
)
from ...profiling import interleaved_timed, summarize
from . import Settings  # noqa: F401 (study.Settings: the notebook's name for the TASK's parameters)


def variants(resnets: Sequence[str], rev_stages: Sequence[int], segments: int) -> list[dict[str, Any]]:
    """The networks the report compares: plain and checkpointed ResNets, RevNets with and without
    memory saving. Each entry: label, family, registry name, build kwargs, baseline label."""
    out = []
    for name in resnets:
        digits = "".join(c for c in name.split("_")[0] if c.isdigit())
        depth = int(digits) if digits else 0
        out.append(
            {"label": name, "family": "ResNet", "name": name, "kwargs": {}, "baseline": name, "depth": depth}
        )
        if segments:
            out.append(
                {
                    "label": f"{name} ckpt{segments}",
                    "family": "ResNet + checkpointing",
                    "name": name,
                    "kwargs": {"checkpoint_segments": segments},
                    "baseline": name,
                    "depth": depth,
                }
            )
    for n in rev_stages:
        # named by depth (revnet38 = 3-3-3), as the registry names them: a label a sentence can state as a
        # word
        plain = f"revnet{12 * n + 2} (no saving)"
        out.append(
            {
                "label": plain,
                "family": "RevNet, ordinary autograd",
                "name": "revnet",
                "kwargs": {"stages": (n, n, n), "memory_saving": False},
                "baseline": plain,
                "depth": 12 * n + 2,
            }
        )
        out.append(
            {
                "label": f"revnet{12 * n + 2}",
                "family": "RevNet",
                "name": "revnet",
                "kwargs": {"stages": (n, n, n)},
                "baseline": plain,
                "depth": 12 * n + 2,
            }
        )
    return out


def _build(spec: Mapping[str, Any], norm: str) -> nn.Module:
    torch.manual_seed(0)
    return models.build(spec["name"], num_classes=10, norm=norm, **spec["kwargs"])


def measure(
    specs: Sequence[Mapping[str, Any]],
    batch_size: int,
    device: torch.device | str = "cpu",
    repeats: int = 6,
    warmup: int = 2,
    act_batch: int = 4,
    norm: str = "bn",
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """One row per network: parameters, activation bytes per sample, time per batch
    (median and spread over `repeats` interleaved rounds after `warmup` untimed ones)
    and, on CUDA, the peak allocated MB of a training step (each network alone on the device)."""
    device = torch.device(device)
    configure(device)  # cuDNN autotuning, as in every timed run: the warm-up absorbs its kernel search
    rows = []
    for spec in specs:
        model = _build(spec, norm).to(device)
        act = activation_bytes(model, act_batch, device=device)
        row = {
            "model": spec["label"],
            "family": spec["family"],
            "baseline": spec["baseline"],
            "depth": spec.get("depth", 0),
            "params": models.count_parameters(model),
            "act_bytes_per_sample": act,
            "act_MB_per_sample": act / MB,
            "batch_size": batch_size,
            "peak_MB": float("nan"),
            "resident_MB": float("nan"),
            "device": str(device),
        }
        if device.type == "cuda":
            peak = cuda_peak_step(model, batch_size, device)
            row["peak_MB"] = peak["peak_allocated"] / MB
            # what the step started from (weights, gradients, optimizer state, the batch): the peak above it
            # is the step's own memory, which the answer sets against the activation bytes predicted
            row["resident_MB"] = peak["resident_before"] / MB
        rows.append(row)
        log(f"[memory] {spec['label']}: {act / MB:.3f} MB/sample saved for backward")
        del model
        if device.type == "cuda":  # the next peak starts from a clean device (no peak is measured on a CPU)
            free_cuda_memory()
    nets = [_build(spec, norm).to(device) for spec in specs]
    times = interleaved_timed([make_step(m, batch_size, device) for m in nets], device, repeats, warmup)
    del nets
    free_cuda_memory()
    for row, t in zip(rows, times):
        s = summarize(t)
        row.update(
            s_per_batch=s["median"],
            s_iqr=s["iqr"],
            s_min=s["min"],
            s_max=s["max"],
            repeats=s["n"],
            warmup=warmup,
            times_s=";".join(f"{x:.6f}" for x in t),
        )
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


def max_batch_rows(
    specs: Sequence[Mapping[str, Any]],
    table: Sequence[Mapping[str, Any]],
    budget_bytes: int,
    device: torch.device | str = "cpu",
    cuda_batches: Sequence[int] = (),
    norm: str = "bn",
) -> list[dict[str, Any]]:
    """Largest batch within the budget for each network: predicted from activation bytes + parameter/
    gradient/optimizer state, and on CUDA measured too, on the sizes of `cuda_batches` that
    memory.grid_search() needs from the prediction (OOM rows kept)."""
    device = torch.device(device)
    configure(device)  # the sweep's peaks are those of the autotuned kernels the timed runs use
    rows = []
    by_label = {r["model"]: r for r in table}
    for spec in specs:
        model = _build(spec, norm)
        fixed = state_bytes(model)["total"]
        act = by_label[spec["label"]]["act_bytes_per_sample"]
        work = recompute_bytes(spec, by_label)
        pred = predicted_max_batch(act + work, fixed, budget_bytes)
        rows.append(
            {
                "model": spec["label"],
                "method": "predicted",
                "batch_size": pred,
                "status": "predicted",
                "peak_MB": float("nan"),
                "budget_MB": budget_bytes / MB,
                "error": "",
                "recompute_MB_per_sample": work / MB,
            }
        )
        if device.type == "cuda":
            build = lambda spec=spec: _build(spec, norm)
            # the search starts at the predicted limit (an upper bound: it leaves out workspace and
            # fragmentation), so it tries two or three sizes near the limit instead of every size below it
            for r in cuda_max_batch(build, cuda_batches, device, start=pred):
                rows.append({"model": spec["label"], "budget_MB": budget_bytes / MB, **r})
        del model
    return rows


def largest_fitting(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Per model: the largest measured batch without OOM (0 where the sweep ran and none fitted), else the
    predicted one."""
    out: dict[str, int] = {}
    for r in rows:
        if r["method"] == "measured":
            out[r["model"]] = max(out.get(r["model"], 0), r["batch_size"] if r["status"] == "ok" else 0)
    for r in rows:
        if r["method"] == "predicted" and r["model"] not in out:
            out[r["model"]] = r["batch_size"]
    return out


# ------------------------------------------------------------------ the study
@dataclass
class MemoryResult:
    table: pd.DataFrame  # one row per network (measure())
    max_batch: list[dict[str, Any]]  # max_batch_rows(): predicted rows, and measured / OOM rows on CUDA
    largest: dict[str, int]  # largest_fitting()
    budget_bytes: int
    cuda: bool
    sweep: list[int]  # batch sizes tried on CUDA (empty elsewhere)
    snapshots: list[Path] = field(default_factory=list)
    runs: dict[str, Any] = field(default_factory=dict)  # convergence runs: model -> results.Run
    run_dir: Path | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def run(cfg, settings: Settings, log: Callable[[str], None] = print) -> MemoryResult:
    """The whole memory task: the comparison table, the largest batch (measured on CUDA, else predicted),
    CUDA memory snapshots, and ResNet against RevNet-38 trained on the same steps. Files under
    results/memory/<run-id>/ (memory.csv, max_batch.csv, meta.json; snapshots on CUDA)."""
    from ...training import train

    device = resolve_device(cfg.device)
    # the two convergence runs at the end, checked now: a setting one of them refuses (a stem RevNet lacks) is
    # one line before the measurements, not an error after them
    train_cfgs = {name: cfg.replace(checkpoint_segments=0, model=name) for name in (cfg.model, "revnet38")}
    if device.type == "cpu":
        torch.set_num_threads(settings.cpu_threads)
    specs = variants(settings.resnets, settings.rev_stages, cfg.checkpoint_segments)
    # the study's own folder, apart from the training runs it makes (the first of which has the same config)
    run_dir = cfg.replace(
        checkpoint_segments=0, run_id=f"study-{cfg.replace(checkpoint_segments=0).config_hash()}"
    ).run_dir()
    meta = results.new_meta(cfg, device, run_id=run_dir.name, settings=dict(vars(settings)))
    with (
        results.sigterm_interrupts(),
        results.RunFolder(run_dir) as rf,
    ):  # a complete run is replaced only on success
        rf.write_meta(meta)
        # each part's seconds, in meta.json: where a GPU check's time went (its plan times the task whole)
        phases: dict[str, float] = {}
        clock = time.perf_counter()

        def lap(name: str) -> None:
            nonlocal clock
            phases[name] = round(time.perf_counter() - clock, 3)
            clock = time.perf_counter()

        rows = measure(
            specs,
            cfg.batch_size,
            device,
            repeats=settings.repeats,
            warmup=settings.warmup,
            log=lambda line: None,
        )
        atomic_write_csv(rf.path / "memory.csv", rows)
        lap("table and timed rounds")
        cuda = device.type == "cuda"
        budget = (
            torch.cuda.get_device_properties(device).total_memory
            if cuda
            else int(settings.budget_gb * 1024**3)
        )
        sweep = [2**k for k in range(6, 16)] if cuda else []
        mb_rows = max_batch_rows(specs, rows, budget, device, cuda_batches=sweep)
        atomic_write_csv(rf.path / "max_batch.csv", mb_rows)
        lap("largest batch")
        snaps = []
        if cuda:
            last_rev = settings.rev_stages[-1]
            for spec in [
                s for s in specs if s["label"] in (settings.resnets[-1], f"revnet{12 * last_rev + 2}")
            ]:
                net = _build(spec, "bn").to(device)
                name = f"snapshot_{spec['label'].replace(' ', '_')}.pickle"
                cuda_memory_snapshot(net, cfg.batch_size, rf.path / name)
                snaps.append(run_dir / name)  # where it lands with the run folder
                del net
                free_cuda_memory()
        lap("snapshots")
        runs = {name: train(c, extra_meta={"memory_run": run_dir.name}) for name, c in train_cfgs.items()}
        lap("convergence runs")
        meta.update(
            finished_at=results.now(),
            repeats=settings.repeats,
            warmup_rounds=settings.warmup,
            batch_size=cfg.batch_size,
            phase_s=phases,
        )
        rf.complete(meta)
        meta["status"] = "complete"
    return MemoryResult(
        pd.DataFrame(rows), mb_rows, largest_fitting(mb_rows), budget, cuda, sweep, snaps, runs, run_dir, meta
    )


REFERENCE_MEMORY = [
    ("resnet18_adjusted", {}, 746_436, 743, 0.3),
    ("resnet34_adjusted", {}, 1_393_476, 1158, 0.4),
    ("resnet50_adjusted", {}, 1_581_700, 3494, 0.57),
    ("revnet", {"stages": (3, 3, 3)}, 476_020, 466, 0.4),
    ("revnet", {"stages": (5, 5, 5)}, 796_468, 468, 0.84),
    ("revnet", {"stages": (9, 9, 9)}, 1_437_364, 470, 0.98),
    ("revnet", {"stages": (18, 18, 18)}, 2_879_380, 476, 1.8),
]


def reference_counts() -> pd.DataFrame:
    """The resnet-50-performance reference's table (ImageNet-100, batch 8, reserved MB) beside this package's
    parameter counts at 100 classes."""
    from ... import models

    out = pd.DataFrame(
        [
            {
                "model": name + (str(12 * kw["stages"][0] + 2) if kw else ""),  # revnet38: as the table above
                "reference params": p,
                "params here, 100 classes": models.count_parameters(
                    models.build(name, num_classes=100, **kw)
                ),
                "reference MB (reserved)": mb,
                "reference s per batch": s,
            }
            for name, kw, p, mb, s in REFERENCE_MEMORY
        ]
    )
    out["same count"] = out["reference params"] == out["params here, 100 classes"]
    return out
