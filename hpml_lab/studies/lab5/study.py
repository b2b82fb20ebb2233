"""Lab 5 scaling study: measured compute time, measured all-reduce bandwidth, DDP runs, and the
scaling model that predicts the rows this machine cannot run.

    from hpml_lab.studies.lab5 import study as scaling
    scaling.predict_epoch(t_step, n=4, per_gpu_batch=512, n_images=50_000, grad_bytes=..., busbw=...)

The torchrun launches and what each rank runs (the all-reduce timing, the DDP runs) are ranks.py.

The model (Q3): an epoch at n workers and per-worker batch b takes
    steps x (t_compute(b) + t_allreduce(n, G)),  steps = ceil(N / (n b)),
    t_allreduce(n, G) = 2 (n - 1) / n x G / busbw   (ring all-reduce of G gradient bytes),
with t_compute(b) the measured 1-worker step time (copy, forward, backward, update)
and busbw the measured bus bandwidth; algbw = G / t and busbw = algbw x 2 (n - 1) / n.
It ignores overlap of communication with backward (DDP buckets do overlap), so it
is an upper bound on time when the bandwidth is right.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd
import torch

from ... import results
from ...config import RunConfig
from ...profiling import summarize
from . import N_IMAGES, Settings  # noqa: F401 (study.Settings: the notebook's name for the TASK's parameters)
from .ranks import buffer_bytes, measure_allreduce, run_ddp_many

# Reference (HPML Lab 5 as run on 4 V100s): epoch seconds it reported.
REFERENCE_EPOCHS = [
    {"gpus": 1, "per_gpu_batch": 512, "epoch_s": 18.07},
    {"gpus": 2, "per_gpu_batch": 512, "epoch_s": 10.20},
    {"gpus": 4, "per_gpu_batch": 8192, "epoch_s": 5.02},
]
RESNET18_GRAD_BYTES = 11_173_962 * 4  # fp32 gradients of the lab's ResNet-18


def allreduce_time(grad_bytes: float, n: int, busbw: float, latency_s: float = 0.0) -> float:
    if n <= 1:
        return 0.0
    return latency_s + 2 * (n - 1) / n * grad_bytes / busbw


def predict_epoch(
    t_step: float,
    n: int,
    per_gpu_batch: int,
    n_images: int,
    grad_bytes: float,
    busbw: float,
    latency_s: float = 0.0,
) -> dict[str, float]:
    """Epoch time at n workers from the 1-worker step time and the all-reduce model."""
    steps = math.ceil(n_images / (n * per_gpu_batch))
    comm = allreduce_time(grad_bytes, n, busbw, latency_s)
    return {
        "steps": steps,
        "compute_s": steps * t_step,
        "comm_s": steps * comm,
        "epoch_s": steps * (t_step + comm),
    }


def load_per_core(meta: dict) -> float:
    """The machine's load average per usable core when a run started (its meta), NaN when not recorded."""
    m = (meta or {}).get("machine") or {}
    return m["load1"] / max(1, m.get("cores") or 1) if m.get("load1") is not None else float("nan")


def compute_sweep(cfg: RunConfig, batch_sizes: Iterable[int], n_images: int = 50_000) -> pd.DataFrame:
    """Q1: one worker, each per-worker batch size, 2 epochs; the 2nd epoch's full-batch step time (copy,
    forward, backward, update; data loading excluded) and its extrapolation to a whole epoch of n_images. A
    resumable sweep (hpml_lab.sweeps): out of memory is a row with status "OOM", not a crash."""
    from ...sweeps import run_sweep
    from ...training import train

    items = run_sweep(
        [cfg.replace(batch_size=b, run_id=f"q1-b{b}-{cfg.config_hash()}") for b in batch_sizes],
        train,
        on_error="raise",
        log=None,
    )
    rows = []
    for it in items:
        b = it.cfg.batch_size
        if not it.complete:
            rows.append({"per_gpu_batch": b, "status": "OOM"})
            continue
        rec = results.read_run(it.run_dir)
        ep = rec.table("epochs").iloc[-1]
        bt = rec.table("batches")
        last = bt[bt.epoch == bt.epoch.max()]
        full = last[
            last.images == b
        ]  # full-batch steps only: the epoch's partial last batch is not a step of b
        full = full if len(full) else last
        per_step, data_step = float(full.train_s.mean()), float(full.data_s.mean())
        overhead = ep.total_s / float(
            last.train_s.sum() + last.data_s.sum()
        )  # the loop's own share, as measured
        rows.append(
            {
                "per_gpu_batch": b,
                "status": "ok",
                "run_folder": it.run_dir.name,  # where its record is: results/<task>/<this>/
                "reused": it.status == "skipped",  # made by an earlier run of the study (a resumed sweep)
                "batches_timed": len(full),
                "step_s": per_step,
                "data_s_per_step": data_step,
                "epoch_s_excl_io": per_step * math.ceil(n_images / b),
                "epoch_s_incl_io": (per_step + data_step) * overhead * math.ceil(n_images / b),
                "images_per_s": summarize([b / t for t in full.train_s])["median"],  # as Q1 states it
                "step_times_s": ";".join(f"{x:.6f}" for x in full.train_s),
                "load_per_core": load_per_core(
                    rec.meta
                ),  # the sizes run one after the other: a verdict needs it
            }
        )
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ the Lab 5 study Peak unidirectional
# bandwidth per GPU of the link an all-reduce between GPUs of one node uses (GB/s), from the vendors' data
# sheets: NVLink 4 (H100/H200 SXM) 900 GB/s total = 450 each way; A100 NVLink 3 600 = 300; V100 NVLink 2 300 =
# 150; PCIe 4.0 x16 about 32, PCIe 5.0 x16 about 64 each way.
LINK_PEAK_GBPS = {
    "H100 SXM": 450.0,
    "H100 80GB HBM3": 450.0,
    "H200": 450.0,
    "A100-SXM4": 300.0,
    "V100-SXM2": 150.0,
    "V100-SXM3": 150.0,
    "H100 PCIe": 64.0,
    "A100-PCIE": 32.0,
    "L4": 32.0,
    "T4": 16.0,
}


def fit_allreduce(ar: pd.DataFrame) -> dict:
    """Least-squares fit of time = latency + 2(n-1)/n x bytes / busbw over the measured message sizes, used
    (method "fit") only where the line holds: a positive bandwidth, a latency from zero up to the shortest
    whole all-reduce measured (a latency is part of every call), and every size within its own spread of the
    line (its interquartile range, `iqr_s`). Otherwise (method "largest message (no usable fit)") the model
    takes the largest message's own bus bandwidth, its latency included (latency 0: that message's measured
    time is the model's all-reduce of it), and the line is kept as `line` with why it was refused: `misses`
    (each size it misses: bytes, measured time, the line's time, spread) and `latency_over` (the bytes and
    time of the shortest whole call, where the line's latency is longer)."""
    import numpy as np

    n = int(ar.world_size.iloc[0])
    x = 2 * (n - 1) / n * ar.bytes.to_numpy(float)
    t = ar.time_s.to_numpy(float)
    spread = (
        np.nan_to_num(ar.iqr_s.to_numpy(float), nan=0.0) if "iqr_s" in ar else np.zeros_like(t)
    )  # no spread recorded: the line must meet the point itself
    A = np.vstack([np.ones_like(x), x]).T
    (lat, inv_bw), *_ = np.linalg.lstsq(A, t, rcond=None)
    line_t = lat + inv_bw * x
    # a rounding error's worth of tolerance, so that exact points are on their line
    off = np.abs(line_t - t) > spread + 1e-9 * np.abs(t)
    misses = [
        {"bytes": float(b), "time_s": float(m), "line_s": float(f), "spread_s": float(q)}
        for b, m, f, q, o in zip(ar.bytes, t, line_t, spread, off)
        if o
    ]
    shortest = float(t.min())
    if inv_bw > 0 and 0 <= lat <= shortest and not misses:
        # each size against the line, for the page to say where the line passes far from a median it holds
        points = [
            {"bytes": float(b), "time_s": float(m), "line_s": float(f), "spread_s": float(q)}
            for b, m, f, q in zip(ar.bytes, t, line_t, spread)
        ]
        return {
            "latency_s": float(lat),
            "busbw_Bps": float(1 / inv_bw),
            "world_size": n,
            "method": "fit",
            "points": points,
        }
    # No line holds (noise larger than the size effect, or times that do not grow linearly): the largest
    # message's own bus bandwidth, and the refused line with what it got wrong, for the page to say.
    big = ar.loc[ar.bytes.idxmax()]
    return {
        "latency_s": 0.0,
        "busbw_Bps": float(big.busbw_GBps) * 1e9,
        "world_size": n,
        "method": "largest message (no usable fit)",
        "line": {"latency_s": float(lat), "busbw_Bps": float(1 / inv_bw) if inv_bw > 0 else float("nan")},
        "misses": misses,
        # the shortest whole call (its size and time) where the line's latency is longer than it
        "latency_over": (float(ar.bytes.iloc[int(t.argmin())]), shortest) if lat > shortest else None,
        "largest_bytes": float(big.bytes),
    }


def link_peak(gpu_name: str | None) -> float | None:
    """The link's peak bandwidth (GB/s, one way) for a GPU model name, or None when unknown or on CPU."""
    from ...flops import by_gpu_name

    return by_gpu_name(LINK_PEAK_GBPS, gpu_name)


@dataclass
class Lab5Result:
    sizes: list[int]
    workers_here: int
    on_gpu: bool
    grad_bytes: int
    q1: pd.DataFrame
    allreduce: pd.DataFrame
    fit: dict[str, float]
    table: pd.DataFrame  # one row per (workers, per-worker batch): measured or predicted
    strong: pd.DataFrame  # fixed global batch
    weak: pd.DataFrame  # fixed per-worker batch: step time with n workers vs 1
    reference: pd.DataFrame
    reference_fit: dict[str, float]
    runs: list = field(default_factory=list)  # every DDP record of this execution
    meta: dict = field(default_factory=dict)  # provenance of the newest run of the study
    allreduce_run: results.Run | None = None  # the all-reduce's own record, which `allreduce` is read from
    # the machine's load before each run of this execution (Q1's, the DDP runs, the all-reduce), each with
    # its run folder ('run'): the busy flag reads the busiest
    machines: list = field(default_factory=list)
    # each run of this execution (Q1's, the DDP runs, the all-reduce): run_provenance's folder, workers,
    # commit, start, load and whether an earlier run of the study made it, so that the page says where the
    # runs it compares come from different commits or renders
    provenance: list = field(default_factory=list)


def run_provenance(run: results.Run, workers: int, reused: bool = False) -> dict:
    """Where one run's numbers come from: its folder, its workers (0 for the all-reduce's own record), the
    commit and uncommitted changes it was made at, its start, the machine's load per core then, and whether
    an earlier run of the study made it (reused)."""
    env = run.meta.get("environment") or {}
    return {
        "run": run.path.name,
        "workers": int(workers),
        "commit": str(env.get("commit") or "unknown"),
        "dirty": bool(env.get("dirty")),
        "started_at": str(run.meta.get("started_at") or ""),
        "load_per_core": load_per_core(run.meta),
        "reused": bool(reused),
    }


def allreduce_note(res: Lab5Result, gpu_name: str | None):
    """What the measured all-reduce stands for (a Finding): the GPUs' interconnect (NCCL, with the link's
    data-sheet peak when known) or gloo between CPU processes on one host, which says nothing about a GPU
    link."""
    from ...answers import Number
    from ...findings import say

    backend = res.allreduce.backend.iloc[0]
    peak = link_peak(gpu_name) if backend == "nccl" else None
    if backend == "nccl":
        return (
            say(
                "Link peak for this GPU: {peak} (data sheet).",
                peak=Number("link peak", peak, "GB/s", "reference", source=f"data sheet of {gpu_name}"),
            )
            if peak
            else say("No data-sheet link peak is known for this GPU, so no utilisation is given.")
        )
    if res.on_gpu:
        return say(
            "Only {n} GPU here: the all-reduce ran with gloo between CPU processes on this host (loopback), "
            "not over the GPUs' link, and the predicted multi-GPU rows below inherit that bandwidth.",
            n=Number("GPUs here", res.workers_here, "", "measured", n=1),
        )
    return say("No link peak applies: the processes share one host (loopback), so no utilisation is given.")


def scaling_tables(table: pd.DataFrame, n_images: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Strong and weak scaling from the speedup table's epochs (each with its data loading, Q2's definition):
    strong, a fixed global batch B (1 worker at B against n workers at B/n, where both ran or were predicted);
    weak, a fixed per-worker batch b (one step of 1 worker against one step of n workers, each epoch / its
    steps)."""
    idx = table.set_index(["workers", "per_gpu_batch"])
    one_worker = sorted(int(b) for b in table[table.workers == 1].per_gpu_batch)
    strong = pd.DataFrame(
        [
            {
                "global batch": B,
                "workers": n,
                "1-worker epoch (s)": idx.loc[(1, B), "epoch_s"],
                "n-worker epoch (s)": idx.loc[(n, B // n), "epoch_s"],
                "speedup": idx.loc[(1, B), "epoch_s"] / idx.loc[(n, B // n), "epoch_s"],
                "source": idx.loc[(n, B // n), "source"],
            }
            for n in (2, 4)
            for B in one_worker
            if B % n == 0 and (1, B) in idx.index and (n, B // n) in idx.index
        ]
    )
    weak = pd.DataFrame(
        [
            {
                "per-worker batch": b,
                "workers": n,
                "1-worker step (s)": idx.loc[(1, b), "epoch_s"] / math.ceil(n_images / b),
                "n-worker step (s)": idx.loc[(n, b), "epoch_s"] / math.ceil(n_images / (n * b)),
                "source": idx.loc[(n, b), "source"],
            }
            for n in (2, 4)
            for b in one_worker
            if (n, b) in idx.index
        ]
    )
    if len(weak):
        weak["efficiency"] = weak["1-worker step (s)"] / weak["n-worker step (s)"]
    return strong, weak


def lab5(cfg: RunConfig, settings: Settings, log=print) -> Lab5Result:
    """Q1 (compute sweep), the all-reduce measurement and fit, DDP runs where workers exist and the model's
    prediction where they do not, strong and weak scaling, and the model checked against the reference."""
    from ... import models
    from ...sanity import usable_cores

    sizes = [s for s in settings.lab_sizes if s < cfg.batch_size] + [cfg.batch_size]
    if (
        len(sizes) == 1 and cfg.batch_size >= 2
    ):  # small runs: also half of it, so a fixed global batch compares
        sizes = [cfg.batch_size // 2, cfg.batch_size]
    on_gpu = torch.cuda.is_available() and cfg.device != "cpu"
    workers_here = torch.cuda.device_count() if on_gpu else min(2, usable_cores())
    if not on_gpu:
        torch.set_num_threads(1)  # one worker = one process with one core, as each DDP rank gets
    grad_bytes = models.count_parameters(models.build(cfg.model, num_classes=10, norm=cfg.norm)) * 4
    cfg2 = cfg.replace(epochs=max(2, cfg.epochs))
    q1 = compute_sweep(cfg2, sizes, n_images=settings.n_images)
    ok = q1[q1.status == "ok"].set_index("per_gpu_batch")
    # NCCL across the GPUs when there are 2 or more; else gloo between 2 CPU processes, labelled by its
    # backend
    ar_dev = "cuda" if on_gpu and workers_here >= 2 else "cpu"
    ar_n = min(workers_here, 4) if ar_dev == "cuda" else 2
    # in whole float32 elements, as the ranks send them: the record's sizes are the bytes its rows hold
    sizes_b = [buffer_bytes(grad_bytes // k) for k in (100, 10, 1)]
    ar_spec = {"sizes": sizes_b, "repeats": 10, "warmup": 3}
    # the DDP runs: one torchrun launch per worker count, every batch size in it, the all-reduce measured in
    # the launch of its own worker count when that trains on its device (one launch on a CPU, not one per run)
    train_dev = "cuda" if on_gpu else "cpu"
    ddp, ar, ar_meta = {}, None, None
    for n in (n for n in (2, 4) if n <= workers_here):
        fold = n == ar_n and ar_dev == train_dev and ar is None
        if fold:  # when and at what load: the all-reduce is the first thing this launch measures
            ar_meta = allreduce_meta(cfg, {**ar_spec, "device": ar_dev, "nproc": ar_n}, launch=n)
        ddp[n], got = run_ddp_many(
            [cfg2.replace(batch_size=int(b)) for b in ok.index],
            nproc=n,
            allreduce={**ar_spec, "device": ar_dev} if fold else None,
        )
        ar = got if fold else ar
    if ar is None:
        ar_meta = allreduce_meta(cfg, {**ar_spec, "device": ar_dev, "nproc": ar_n}, launch=0)
        ar = measure_allreduce(
            ar_spec["sizes"], nproc=ar_n, repeats=ar_spec["repeats"], warmup=ar_spec["warmup"], device=ar_dev
        )
    # kept in the study's results folder like every other measurement, and read back from there
    ar_run = write_allreduce(cfg, ar, ar_meta)
    ar = ar_run.table("allreduce")
    fit = fit_allreduce(ar)
    rows, runs = [], []
    for i, (b, q) in enumerate(ok.iterrows()):
        rows.append(
            {
                "workers": 1,
                "per_gpu_batch": b,
                "measured_s": q.epoch_s_incl_io,
                "predicted_s": None,
                "compute_s": q.step_s * math.ceil(settings.n_images / b),
                "comm_s": 0.0,
                "run_folder": q.get("run_folder"),
            }
        )
        for n in (2, 4):
            p = predict_epoch(
                q.step_s + q.data_s_per_step,
                n,
                int(b),
                settings.n_images,
                grad_bytes,
                fit["busbw_Bps"],
                fit["latency_s"],
            )
            row = {
                "workers": n,
                "per_gpu_batch": b,
                "measured_s": None,
                "predicted_s": p["epoch_s"],
                "compute_s": q.step_s * p["steps"],
                "comm_s": p["comm_s"],
            }
            if n <= workers_here:
                rec = ddp[n][i]
                runs.append(rec)
                row["run_index"] = len(runs) - 1  # into res.runs (the verdicts' samples); not shown
                row["run_folder"] = rec.path.name  # what the page shows: where its record is
                ep = rec.table("epochs").iloc[-1]
                row["measured_s"] = ep.total_s / ep.batches * p["steps"]
                row["load_per_core"] = load_per_core(rec.meta)
            rows.append(row)
    table = pd.DataFrame(rows)
    table["epoch_s"] = table.measured_s.fillna(table.predicted_s)
    table["source"] = ["measured" if m == m and m is not None else "predicted" for m in table.measured_s]
    one = table[table.workers == 1].set_index("per_gpu_batch").epoch_s
    table["speedup"] = [one[b] / t for b, t in zip(table.per_gpu_batch, table.epoch_s)]
    strong, weak = scaling_tables(table, settings.n_images)
    ref, ref_fit = reference_check(settings.n_images)
    made = q1[q1.status == "ok"] if "run_folder" in q1 else q1.iloc[:0]
    q1_runs = [
        (results.read_run(cfg.run_dir().parent / f), bool(r)) for f, r in zip(made.run_folder, made.reused)
    ]
    for rec in runs:  # made by the torchrun ranks this study launched: runs of this report too
        results.note_run(rec.meta)
    machines = [
        {**r.meta["machine"], "run": r.path.name}
        for r in [*(r for r, _ in q1_runs), *runs, ar_run]
        if r.meta.get("machine")
    ]
    provenance = (
        [run_provenance(r, 1, reused) for r, reused in q1_runs]
        + [run_provenance(r, int((r.meta.get("distributed") or {}).get("world_size") or 0)) for r in runs]
        + [run_provenance(ar_run, 0)]
    )
    # the newest training run (the all-reduce's own record holds no training)
    newest = [r for r in results.load_runs(cfg.task, cfg.results_dir) if "allreduce" not in r.meta]
    return Lab5Result(
        sizes,
        workers_here,
        on_gpu,
        grad_bytes,
        q1,
        ar,
        fit,
        table,
        strong,
        weak,
        ref,
        ref_fit,
        runs,
        runs[-1].meta if runs else (newest[0].meta if newest else {}),
        ar_run,
        machines,
        provenance,
    )


def allreduce_folder(cfg: RunConfig, nproc: int) -> str:
    """The all-reduce record's run folder name: its processes and the study's configuration."""
    return f"allreduce{nproc}-{cfg.config_hash()}"


def allreduce_meta(cfg: RunConfig, spec: dict, launch: int) -> dict:
    """The all-reduce's provenance, taken just before its torchrun launch starts (its start time and the
    machine's load then, as every run's meta.json holds them) with its settings: sizes, timed calls, warm-up
    calls, processes, device, and the launch it is measured in (`launch` workers' DDP runs, or 0: one of its
    own)."""
    return results.new_meta(
        cfg.replace(run_id=allreduce_folder(cfg, spec["nproc"])),
        spec["device"],
        allreduce={
            "sizes_bytes": list(spec["sizes"]),
            "repeats": spec["repeats"],
            "warmup": spec["warmup"],
            "nproc": spec["nproc"],
            "device": spec["device"],
            # the DDP launch it was measured first in (its workers), or 0: a torchrun launch of its own
            "launch_workers": int(launch),
        },
    )


def write_allreduce(cfg: RunConfig, ar: pd.DataFrame, meta: dict) -> results.Run:
    """The all-reduce table as allreduce.csv beside its meta.json (complete, with the backend that ran and
    when it finished) in results/<task>/<allreduce_folder>/; the record read back."""
    from ...io import atomic_write_csv, atomic_write_json

    folder = cfg.replace(run_id=meta["run_id"]).run_dir()
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_csv(folder / "allreduce.csv", ar.to_dict("records"), list(ar.columns))
    backend = str(ar["backend"].iloc[0]) if len(ar) else ""
    done = {**meta, "status": "complete", "finished_at": results.now()}
    atomic_write_json(folder / "meta.json", {**done, "allreduce": {**meta["allreduce"], "backend": backend}})
    return results.read_run(folder)


def reference_check(n_images: int = N_IMAGES) -> tuple[pd.DataFrame, dict[str, float]]:
    """The model fitted to the reference's 1- and 2-GPU epochs, predicting its 4-GPU row (the unfitted
    one)."""
    G = RESNET18_GRAD_BYTES
    t_step_512 = 18.07 / math.ceil(n_images / 512)
    t_comm2 = 10.20 / math.ceil(n_images / (2 * 512)) - t_step_512
    busbw = G * 2 * (2 - 1) / 2 / t_comm2 if t_comm2 > 0 else float("nan")
    rows = []
    for r in REFERENCE_EPOCHS:
        p = predict_epoch(
            t_step_512 * r["per_gpu_batch"] / 512, r["gpus"], r["per_gpu_batch"], n_images, G, busbw
        )
        rows.append(
            {
                "gpus": r["gpus"],
                "per-GPU batch": r["per_gpu_batch"],
                "reference epoch (s)": r["epoch_s"],
                "model (s)": p["epoch_s"],
                "compute (s)": p["compute_s"],
                "all-reduce (s)": p["comm_s"],
                "used to fit": r["gpus"] < 4,
                "error (%)": 100 * (p["epoch_s"] - r["epoch_s"]) / r["epoch_s"],
            }
        )
    return pd.DataFrame(rows), {"t_step_512_s": t_step_512, "t_comm2_s": t_comm2, "busbw_Bps": busbw}
