"""The Tiny ImageNet task: where the bottleneck is (0 vs N loader workers), activation memory per image and
the largest batch, and time per batch against epoch time for the baseline, checkpointing, DataParallel and
DDP.

    hpml-lab run tinyimagenet                 # the notebook notebooks/tinyimagenet.ipynb
    from hpml_lab.studies.tinyimagenet import study as tinyimagenet
    res = tinyimagenet.run(cfg)               # TinResult: runs, memory table, timing table

Every run is a train() run whose files are under results/tinyimagenet/; the last epoch of each is the one
reported (epoch 1 is warm-up), its time per batch from the batches after its first (steady).
DataParallel runs only with 2 or more GPUs and DDP only with 2 or more workers
(GPUs, or CPU cores with gloo); otherwise their rows say why they were skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from ... import memory, models, results
from ...data import tinyimagenet as tin
from ...data import train_dataset
from ...sanity import usable_cores
from ...training import train

SEGMENTS = 4  # checkpoint segments of the checkpointing variant
CLASSES = 200
# The reference's table (full epochs on REFERENCE_GPUS; its checkpointing comparison was invalid: see the
# notebook), and the GPUs it ran on: how many, and their model
REFERENCE_GPUS = (2, "RTX 5000")
REFERENCE = [
    {"variant": "baseline", "batch": 512, "s/batch": 0.57, "estimated (s)": 111, "actual (s)": 187},
    {"variant": "checkpointing", "batch": 1500, "s/batch": 2.0, "estimated (s)": 133, "actual (s)": 125},
    {"variant": "DataParallel", "batch": 2500, "s/batch": 3.5, "estimated (s)": 140, "actual (s)": 127},
    {"variant": "DDP", "batch": 1500, "s/batch": None, "estimated (s)": None, "actual (s)": 96},
]


@dataclass
class TinResult:
    n_train: int
    partial_copy: bool
    workers: dict[int, results.Run]  # loader workers -> run
    memory: pd.DataFrame  # baseline / checkpointing: MB per image, largest batch
    static_bytes: int
    budget_bytes: int
    budget_note: str
    first_activation: dict[str, float]  # bytes: 64x64 here, 224x224 for the reference's estimate
    peaks: pd.DataFrame  # measured on CUDA (empty elsewhere)
    timing: pd.DataFrame  # per variant: global batch, s/batch, estimated and actual epoch
    variants: dict[str, results.Run | None] = field(default_factory=dict)
    on_gpu: bool = False


def steady(batches: pd.DataFrame) -> pd.DataFrame:
    """The last epoch's batches after its first, which also waits for the loader to start (its worker
    processes, started again each epoch): the per-batch samples the report's verdicts compare, its worker
    table shows and the timing table's time per batch is the median of. The first batch's wait is stated
    apart (conclusion.bottleneck_answer, and beside each epoch's estimate)."""
    b = batches[batches.epoch == batches.epoch.max()]
    return b.iloc[1:] if len(b) > 1 else b


def timing_row(name: str, r, batch: int, note: str, processes: int = 1) -> dict[str, Any]:
    """A variant's row of the timing table from its run's record: the median time per batch (data wait +
    step) of the last epoch's batches after its first (steady), as the bottleneck answer's medians; the
    estimate, the batches the epoch ran times that median; the actual, the epoch's synchronized total."""
    ep = r.table("epochs").iloc[-1]
    last = steady(r.table("batches"))
    per_batch = float((last.data_s + last.train_s).median())
    return {
        "variant": name,
        "global batch": batch,
        "s/batch": per_batch,
        "estimated epoch (s)": int(ep.batches) * per_batch,
        "actual epoch (s)": float(ep.total_s),
        "processes": processes,
        "note": note,
    }


def _record(run) -> results.Run:
    return results.read_run(run.run_dir)


def run(cfg, log: Callable[[str], None] = print) -> TinResult:
    from ..lab5 import ranks

    on_gpu = torch.cuda.is_available() and cfg.device != "cpu"
    rec = tin.record(cfg.data_path())
    w2 = cfg.num_workers or 2
    workers = {
        w: _record(train(cfg.replace(num_workers=w, run_id=f"workers{w}-{cfg.config_hash()}")))
        for w in (0, w2)
    }

    def build(**kw):
        return models.build(cfg.model, num_classes=CLASSES, norm=cfg.norm, **{"stem": cfg.stem, **kw})

    net = build()
    per_image = memory.activation_bytes(net, 2, image_size=64, num_classes=CLASSES)
    per_image_ck = memory.activation_bytes(
        build(checkpoint_segments=SEGMENTS), 2, image_size=64, num_classes=CLASSES
    )
    static = memory.state_bytes(net, cfg.optimizer, cfg.momentum)["total"]
    budget = torch.cuda.get_device_properties(0).total_memory if on_gpu else 16 * 2**30
    work = per_image / SEGMENTS  # one recomputed segment held again during backward
    mem = pd.DataFrame(
        [
            {
                "variant": "baseline",
                "MB per image": per_image / 1e6,
                "largest batch (predicted)": memory.predicted_max_batch(per_image, static, budget),
            },
            {
                "variant": "checkpointing",
                "MB per image": per_image_ck / 1e6,
                "recompute working set (MB)": work / 1e6,
                "largest batch (predicted)": memory.predicted_max_batch(per_image_ck + work, static, budget),
            },
        ]
    )
    net224 = build(stem="imagenet")
    first = {
        "64": memory.first_activation_bytes(net, 64),
        "224": memory.first_activation_bytes(net224, 224),
        "224_all": memory.activation_bytes(net224, 1, image_size=224, num_classes=CLASSES),
    }
    peaks = []
    if on_gpu:
        for variant, segments in (("baseline", 0), ("checkpointing", SEGMENTS)):
            for r in memory.cuda_max_batch(
                lambda s=segments: build(checkpoint_segments=s),
                [cfg.batch_size // 4, cfg.batch_size],
                image_size=64,
                num_classes=CLASSES,
            ):
                peaks.append(
                    {
                        "variant": variant,
                        "batch": r["batch_size"],
                        "peak GB": r["peak_MB"] * memory.MB / 1e9,
                        "status": r["status"],
                    }
                )
    variants: dict[str, Any] = {"baseline": (workers[w2], cfg.batch_size, f"{w2} workers")}
    procs = {"baseline": 1, "checkpointing": 1}  # training processes per variant (DDP: its ranks)
    variants["checkpointing"] = (
        _record(train(cfg.replace(checkpoint_segments=SEGMENTS))),
        cfg.batch_size,
        f"{SEGMENTS} segments, non-reentrant",
    )
    gpus = torch.cuda.device_count() if on_gpu else 0
    variants["DataParallel"] = (
        (
            _record(train(cfg.replace(data_parallel=True, run_id=f"dp-{cfg.config_hash()}"))),
            cfg.batch_size,
            f"{gpus} GPUs",
        )
        if gpus >= 2
        else (None, None, f"skipped: DataParallel needs 2 or more GPUs, {gpus} here")
    )
    procs["DataParallel"] = 1  # one process driving every GPU
    n_ddp = gpus if on_gpu else min(2, usable_cores())
    if n_ddp >= 2:
        ddp = ranks.run_ddp(cfg, nproc=n_ddp)
        results.note_run(ddp.meta)  # made by the torchrun ranks this study launched: a run of this report too
        procs["DDP"] = n_ddp
        variants["DDP"] = (
            ddp,
            cfg.batch_size * n_ddp,
            f"{n_ddp} processes, batch {cfg.batch_size} each, {ddp.meta['distributed']['backend']}",
        )
    else:
        variants["DDP"] = (None, None, "skipped: needs 2 or more workers")
    rows = [
        timing_row(name, r, batch, note, procs.get(name, 1))
        if r is not None
        else {"variant": name, "note": note}
        for name, (r, batch, note) in variants.items()
    ]
    return TinResult(
        len(train_dataset(cfg)),
        bool(rec["partial"]),
        workers,
        mem,
        static,
        budget,
        "this GPU's memory" if on_gpu else "the memory of the reference's GPU; an estimate, no GPU here",
        first,
        pd.DataFrame(peaks),
        pd.DataFrame(rows),
        {k: v[0] for k, v in variants.items()},
        on_gpu,
    )
