"""Lab 5 scaling study: measured compute time, measured all-reduce bandwidth, DDP runs, and the
scaling model that predicts the rows this machine cannot run.

    from hpml_lab import scaling
    ar = scaling.measure_allreduce([grad_bytes], nproc=2)      # torchrun + gloo (NCCL on GPUs)
    ddp = scaling.run_ddp(cfg, nproc=2)                         # torchrun -m hpml_lab, read back
    scaling.predict_epoch(t_step, n=4, per_gpu_batch=512, n_images=50_000, grad_bytes=..., busbw=...)

    # the all-reduce worker torchrun starts (one JSON written by rank 0):
    torchrun --nproc-per-node=2 -m hpml_lab.studies.scaling allreduce --bytes 44695848 --out ar.json

The model (Q3): an epoch at n workers and per-worker batch b takes
    steps x (t_compute(b) + t_allreduce(n, G)),  steps = ceil(N / (n b)),
    t_allreduce(n, G) = 2 (n - 1) / n x G / busbw   (ring all-reduce of G gradient bytes),
with t_compute(b) the measured 1-worker step time (copy, forward, backward, update)
and busbw the measured bus bandwidth; algbw = G / t and busbw = algbw x 2 (n - 1) / n.
It ignores overlap of communication with backward (DDP buckets do overlap), so it
is an upper bound on time when the bandwidth is right.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterable, Optional

import pandas as pd
import torch

from .. import distributed, results
from ..config import RunConfig, project_root
from ..device import free_cuda_memory, is_oom  # is_oom: also for the lab5 notebook
from ..profiling import repeat_timed, summarize
from ..io import atomic_write_json

# Seed 004 (HPML Lab 5 on 4 V100s): epoch seconds it reported.
SEED_EPOCHS = [
    {"gpus": 1, "per_gpu_batch": 512, "epoch_s": 18.07},
    {"gpus": 2, "per_gpu_batch": 512, "epoch_s": 10.20},
    {"gpus": 4, "per_gpu_batch": 8192, "epoch_s": 5.02},
]
RESNET18_GRAD_BYTES = 11_173_962 * 4  # fp32 gradients of the lab's ResNet-18


def bus_bandwidth(algbw: float, n: int) -> float:
    """Ring all-reduce bus bandwidth: every byte crosses 2 (n - 1) / n links."""
    return algbw * 2 * (n - 1) / n


def allreduce_time(grad_bytes: float, n: int, busbw: float, latency_s: float = 0.0) -> float:
    if n <= 1:
        return 0.0
    return latency_s + 2 * (n - 1) / n * grad_bytes / busbw


def predict_epoch(t_step: float, n: int, per_gpu_batch: int, n_images: int, grad_bytes: float, busbw: float,
                  latency_s: float = 0.0) -> dict[str, float]:
    """Epoch time at n workers from the 1-worker step time and the all-reduce model."""
    steps = math.ceil(n_images / (n * per_gpu_batch))
    comm = allreduce_time(grad_bytes, n, busbw, latency_s)
    return {"steps": steps, "compute_s": steps * t_step, "comm_s": steps * comm, "epoch_s": steps * (t_step + comm)}


# ------------------------------------------------------------------ all-reduce measurement
def _allreduce_worker(sizes: list[int], repeats: int, warmup: int, out: str) -> None:
    env = distributed.setup(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    device = torch.device(env.device)
    rows = []
    try:
        for nbytes in sizes:
            buf = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=device)
            times = repeat_timed(lambda b=buf: torch.distributed.all_reduce(b), device, repeats, warmup)
            # the collective ends when the slowest rank does
            times = distributed.all_reduce_max(torch.tensor(times, dtype=torch.float64)).tolist()
            s = summarize(times)
            algbw = buf.numel() * 4 / s["median"]
            rows.append({"world_size": env.world_size, "backend": env.backend, "bytes": buf.numel() * 4,
                         "time_s": s["median"], "iqr_s": s["iqr"], "n": s["n"], "warmup": warmup,
                         "algbw_GBps": algbw / 1e9, "busbw_GBps": bus_bandwidth(algbw, env.world_size) / 1e9})
            del buf
        if env.is_main:
            atomic_write_json(out, rows)
    finally:
        distributed.cleanup()


def _torchrun(nproc: int, module_args: list[str], timeout: float) -> subprocess.CompletedProcess:
    root = str(project_root())
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("HPML_RANK_THREADS", "1"),
           "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", ""), "HPML_PROGRESS": "none"}
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", "--rdzv-backend=c10d",
           "--rdzv-endpoint=localhost:0", "-m", *module_args]
    r = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-15:]
        raise RuntimeError(f"torchrun {' '.join(module_args[:2])} failed (exit {r.returncode}):\n" + "\n".join(tail))
    return r


def measure_allreduce(sizes: Iterable[int], nproc: int = 2, repeats: int = 10, warmup: int = 3,
                      timeout: float = 300) -> pd.DataFrame:
    """All-reduce times over `nproc` local processes (gloo on CPU, NCCL on GPUs), launched by torchrun."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "allreduce.json"
        _torchrun(nproc, ["hpml_lab.studies.scaling", "allreduce", "--bytes", *map(str, sizes), "--repeats", str(repeats),
                          "--warmup", str(warmup), "--out", str(out)], timeout)
        return pd.DataFrame(json.loads(out.read_text()))


# ------------------------------------------------------------------ training runs
def run_ddp(cfg: RunConfig, nproc: int, timeout: float = 600) -> results.RunRecord:
    """Train cfg under torchrun with nproc processes (batch_size is per process); the rank-0 record."""
    cfg = distributed.run_config(cfg, nproc)  # the folder train() picks under torchrun
    flags = []
    for k, v in cfg.replace(progress="none").to_dict().items():
        flags += [f"--{k.replace('_', '-')}", str(v).lower() if isinstance(v, bool) else str(v)]
    _torchrun(nproc, ["hpml_lab", *flags], timeout)
    return results.read_run(cfg.run_dir())


def compute_sweep(cfg: RunConfig, batch_sizes: Iterable[int], n_images: int = 50_000) -> pd.DataFrame:
    """Q1: one worker, each per-worker batch size, 2 epochs; the 2nd epoch's step time (copy, forward,
    backward, update; data loading excluded) and its extrapolation to a whole epoch of n_images.
    Out of memory is a row with status "OOM", not a crash."""
    from ..training import train

    rows = []
    for b in batch_sizes:
        try:
            run = train(cfg.replace(batch_size=b, run_id=f"q1-b{b}-{cfg.config_hash()}"))
            ep = run.epochs.iloc[-1]
            per_step = ep.train_s / ep.batches
            rows.append({"per_gpu_batch": b, "status": "ok", "batches_timed": int(ep.batches),
                         "step_s": per_step, "data_s_per_step": ep.data_s / ep.batches,
                         "epoch_s_excl_io": per_step * math.ceil(n_images / b),
                         "epoch_s_incl_io": ep.total_s / ep.batches * math.ceil(n_images / b),
                         "images_per_s": b / per_step})
            del run
        except (RuntimeError, MemoryError) as e:
            if not is_oom(e) and not isinstance(e, MemoryError):
                raise
            e = None  # the exception holds the frames and their tensors
            free_cuda_memory()
            rows.append({"per_gpu_batch": b, "status": "OOM"})
    return pd.DataFrame(rows)


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hpml_lab.studies.scaling")
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("allreduce", help="time all-reduce of the given sizes (run under torchrun)")
    a.add_argument("--bytes", type=int, nargs="+", required=True)
    a.add_argument("--repeats", type=int, default=10)
    a.add_argument("--warmup", type=int, default=3)
    a.add_argument("--out", required=True)
    args = p.parse_args(argv)
    _allreduce_worker(args.bytes, args.repeats, args.warmup, args.out)
    return distributed.leave(0)


if __name__ == "__main__":
    sys.exit(main())
