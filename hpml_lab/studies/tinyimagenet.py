"""The Tiny ImageNet task: where the bottleneck is (0 vs N loader workers), activation memory per image and the
largest batch, and time per batch against epoch time for the baseline, checkpointing, DataParallel and DDP.

    hpml-lab run tinyimagenet                 # the notebook notebooks/tinyimagenet.ipynb
    from hpml_lab.studies import tinyimagenet
    res = tinyimagenet.run(cfg)               # TinResult: runs, memory table, timing table

Every run is a train() run whose files are under results/tinyimagenet/; the last epoch of each is the one
reported (epoch 1 is warm-up). DataParallel runs only with 2 or more GPUs and DDP only with 2 or more workers
(GPUs, or CPU cores with gloo); otherwise their rows say why they were skipped.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import pandas as pd
import torch

from .. import memory, models, results
from ..data import train_dataset
from ..data import tinyimagenet as tin
from ..envinfo import usable_cores
from ..training import train

from .. import sanity
from ..answers import Answer, Number
from ..profiling import summarize
from ..verdict import compare, sample_record
from ._conclude import dedupe, num

SEGMENTS = 4           # checkpoint segments of the checkpointing variant
CLASSES = 200
# The reference's table (2 RTX 5000, full epochs; its checkpointing comparison was invalid: see the notebook).
REFERENCE = [{"variant": "baseline", "batch": 512, "s/batch": 0.57, "estimated (s)": 111, "actual (s)": 187},
             {"variant": "checkpointing", "batch": 1500, "s/batch": 2.0, "estimated (s)": 133, "actual (s)": 125},
             {"variant": "DataParallel", "batch": 2500, "s/batch": 3.5, "estimated (s)": 140, "actual (s)": 127},
             {"variant": "DDP", "batch": 1500, "s/batch": None, "estimated (s)": None, "actual (s)": 96}]


@dataclass
class TinResult:
    n_train: int
    partial_copy: bool
    workers: dict[int, results.Run]          # loader workers -> run
    memory: pd.DataFrame                            # baseline / checkpointing: MB per image, largest batch
    static_bytes: int
    budget_bytes: int
    budget_note: str
    first_activation: dict[str, float]              # bytes: 64x64 here, 224x224 for the reference's estimate
    peaks: pd.DataFrame                             # measured on CUDA (empty elsewhere)
    timing: pd.DataFrame                            # per variant: global batch, s/batch, estimated and actual epoch
    variants: dict[str, results.Run | None] = field(default_factory=dict)
    on_gpu: bool = False


def _record(run) -> results.Run:
    return results.read_run(run.run_dir)


def run(cfg, log: Callable[[str], None] = print) -> TinResult:
    from . import scaling

    on_gpu = torch.cuda.is_available() and cfg.device != "cpu"
    rec = tin.record(cfg.data_path())
    w2 = cfg.num_workers or 2
    workers = {w: _record(train(cfg.replace(num_workers=w, run_id=f"workers{w}-{cfg.config_hash()}"))) for w in (0, w2)}

    def build(**kw):
        return models.build(cfg.model, num_classes=CLASSES, norm=cfg.norm, **{"stem": cfg.stem, **kw})

    net = build()
    per_image = memory.activation_bytes(net, 2, image_size=64, num_classes=CLASSES)
    per_image_ck = memory.activation_bytes(build(checkpoint_segments=SEGMENTS), 2, image_size=64, num_classes=CLASSES)
    static = memory.state_bytes(net, cfg.optimizer, cfg.momentum)["total"]
    budget = torch.cuda.get_device_properties(0).total_memory if on_gpu else 16 * 2 ** 30
    work = per_image / SEGMENTS  # one recomputed segment held again during backward
    mem = pd.DataFrame([
        {"variant": "baseline", "MB per image": per_image / 1e6,
         "largest batch (predicted)": memory.predicted_max_batch(per_image, static, budget)},
        {"variant": "checkpointing", "MB per image": per_image_ck / 1e6, "recompute working set (MB)": work / 1e6,
         "largest batch (predicted)": memory.predicted_max_batch(per_image_ck + work, static, budget)}])
    net224 = build(stem="imagenet")
    first = {"64": memory.first_activation_bytes(net, 64), "224": memory.first_activation_bytes(net224, 224),
             "224_all": memory.activation_bytes(net224, 1, image_size=224, num_classes=CLASSES)}
    peaks = []
    if on_gpu:
        for variant, segments in (("baseline", 0), ("checkpointing", SEGMENTS)):
            for r in memory.cuda_max_batch(lambda s=segments: build(checkpoint_segments=s),
                                           [cfg.batch_size // 4, cfg.batch_size], image_size=64, num_classes=CLASSES):
                peaks.append({"variant": variant, "batch": r["batch_size"], "peak GB": r["peak_MB"] * memory.MB / 1e9,
                              "status": r["status"]})
    variants: dict[str, Any] = {"baseline": (workers[w2], cfg.batch_size, f"{w2} workers")}
    variants["checkpointing"] = (_record(train(cfg.replace(checkpoint_segments=SEGMENTS))), cfg.batch_size,
                                 f"{SEGMENTS} segments, non-reentrant")
    gpus = torch.cuda.device_count() if on_gpu else 0
    variants["DataParallel"] = ((_record(train(cfg.replace(data_parallel=True, run_id=f"dp-{cfg.config_hash()}"))),
                                 cfg.batch_size, f"{gpus} GPUs") if gpus >= 2 else
                                (None, None, f"skipped: DataParallel needs 2 or more GPUs, {gpus} here"))
    n_ddp = gpus if on_gpu else min(2, usable_cores())
    if n_ddp >= 2:
        ddp = scaling.run_ddp(cfg, nproc=n_ddp)
        variants["DDP"] = (ddp, cfg.batch_size * n_ddp,
                           f"{n_ddp} processes, batch {cfg.batch_size} each, {ddp.meta['distributed']['backend']}")
    else:
        variants["DDP"] = (None, None, "skipped: needs 2 or more workers")
    rows = []
    for name, (r, batch, note) in variants.items():
        if r is None:
            rows.append({"variant": name, "note": note})
            continue
        bt, ep = r.table("batches"), r.table("epochs").iloc[-1]
        last = bt[bt.epoch == bt.epoch.max()]
        per_batch = float((last.data_s + last.train_s).median())
        rows.append({"variant": name, "global batch": batch, "s/batch": per_batch,
                     "estimated epoch (s)": int(ep.batches) * per_batch, "actual epoch (s)": float(ep.total_s),
                     "note": note})
    return TinResult(len(train_dataset(cfg)), bool(rec["partial"]), workers, mem, static, budget,
                     "this GPU's memory" if on_gpu else "the reference's RTX 5000 (16 GiB); an estimate, no GPU here",
                     first, pd.DataFrame(peaks), pd.DataFrame(rows), {k: v[0] for k, v in variants.items()}, on_gpu)


def conclude(cfg, res) -> tuple[list[Answer], list[sanity.Flag], list[str]]:
    """Bottleneck (0 vs N workers), checkpointing's cost in time and gain in batch, estimated vs actual epochs."""
    (w0, r0), (wn, rn) = sorted(res.workers.items())

    def last_epoch(rec):
        b = rec.table("batches")
        return b[b.epoch == b.epoch.max()]

    b0, bn = last_epoch(r0), last_epoch(rn)
    vd = compare(list(bn.data_s), list(b0.data_s), f"{wn} workers", f"{w0} workers", what="data wait per batch")
    vc = compare(list(bn.train_s), list(b0.train_s), f"{wn} workers", f"{w0} workers", what="copy + compute per batch")
    nums = [num(f"{w0} workers: data wait per batch", b0.data_s, "ms", 1000),
            num(f"{wn} workers: data wait per batch", bn.data_s, "ms", 1000),
            num(f"{w0} workers: copy + compute per batch", b0.train_s, "ms", 1000),
            num(f"{wn} workers: copy + compute per batch", bn.train_s, "ms", 1000)]
    # the share from the same medians the table shows, so the sentence and the table agree
    share0 = nums[0].value / (nums[0].value + nums[2].value)
    sharen = nums[1].value / (nums[1].value + nums[3].value)
    moved = vd.outcome == "better" and share0 > 0.5 > sharen
    a1 = Answer("Where is the bottleneck with 0 and with N workers?",
                f"From the per-batch medians, data wait is {share_pct(share0)} of a batch with {w0} workers "
                f"({nums[0].value:.3g} of {nums[0].value + nums[2].value:.3g} ms) and {share_pct(sharen)} with {wn} "
                f"({nums[1].value:.3g} of {nums[1].value + nums[3].value:.3g} ms). "
                + vd.sentence() + (" The bottleneck moves from loading to the copy and compute." if moved else
                                   " The bottleneck did not move from loading to compute in this run."),
                "answered", nums,
                verdict={"data": sample_record(vd, bn.data_s, b0.data_s), "compute": sample_record(vc, bn.train_s, b0.train_s)})
    ck = res.variants.get("checkpointing")
    bc = last_epoch(ck)
    vt = compare(list(bn.train_s), list(bc.train_s), "the baseline", "checkpointing", what="copy + compute per batch")
    m = res.memory.set_index("variant")
    gain = m.loc["checkpointing", "largest batch (predicted)"] / m.loc["baseline", "largest batch (predicted)"]
    slow = summarize(bc.train_s)["median"] / summarize(bn.train_s)["median"]
    a2 = Answer("What does checkpointing cost in time, and what does it buy in batch size?",
                (f"Checkpointing's time per batch cannot be told apart from the baseline's: {vt.sentence()} "
                 if vt.outcome == "tie" else
                 f"{vt.sentence()} (one extra forward predicts about 1.33x.) ") + f"It allows a {gain:.2f}x larger batch (predicted from bytes per image)"
                + (": that is its pay-off." if gain >= 1.1 else ": too little to call a pay-off."),
                "answered", [Number("checkpointing / baseline time per batch", slow, "x", "measured", n=len(bc)),
                             Number("expected from one extra forward", 1.33, "x", "predicted",
                                    source="step = forward + backward of about 2x forward; +1 forward"),
                             Number("largest batch, checkpointing / baseline", gain, "x", "predicted",
                                    source=f"activation bytes per image, budget {res.budget_bytes / 2 ** 30:.0f} GiB")],
                verdict=sample_record(vt, bn.train_s, bc.train_s))
    t = res.timing.dropna(subset=["s/batch"]).set_index("variant")
    est = [Number(f"{n}: estimated / actual epoch", float(t.loc[n, "estimated epoch (s)"] / t.loc[n, "actual epoch (s)"]),
                  "x", "predicted", source="estimate N / B x median time per batch, over one measured epoch")
           for n in t.index]
    skipped = res.timing[res.timing["s/batch"].isna()] if "s/batch" in res.timing else res.timing.iloc[0:0]
    a3 = Answer("Estimated (N / B x time per batch) vs actual epoch time, per variant",
                "; ".join(f"{n}: estimate {t.loc[n, 'estimated epoch (s)']:.2f} s vs actual {t.loc[n, 'actual epoch (s)']:.2f} s"
                          for n in t.index) + ".",
                "partial" if len(skipped) else "answered", est,
                missing="; ".join(f"{r.variant}: {r.note}" for r in skipped.itertuples()))
    flags = [sanity.stand_in(cfg)]
    for rec in list(res.workers.values()) + [ck]:
        flags.append(sanity.diverged(rec.table("batches")["loss"], CLASSES_TIN))
    return [a1, a2, a3], dedupe(flags), []


CLASSES_TIN = 200


def share_pct(x: float) -> str:
    """A share as a percentage with 2 significant digits (4.6%, 0.34%), never rounded to 0%."""
    return f"{100 * x:.2g}%"
