"""Lab 5's torchrun side: the launches (torchrun started as a subprocess, what it wrote read back) and what
every rank they start runs (the all-reduce timing, the DDP training runs), as the program
`python -m hpml_lab.studies.lab5.ranks`. The study that calls them and the scaling model are study.py.

    from hpml_lab.studies.lab5 import ranks
    ar = ranks.measure_allreduce([grad_bytes], nproc=2)      # torchrun + gloo (NCCL on GPUs)
    ddp = ranks.run_ddp(cfg, nproc=2)                         # one run under torchrun, read back
    runs, ar = ranks.run_ddp_many([cfg_a, cfg_b], nproc=2)   # one launch, every rank trains both in turn

    # the all-reduce worker torchrun starts (one JSON written by rank 0):
    torchrun --nproc-per-node=2 -m hpml_lab.studies.lab5.ranks allreduce --bytes 44695848 --out ar.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import torch

from ... import distributed, results
from ...cliargs import OneLineParser
from ...config import ConfigError, RunConfig, project_root
from ...device import free_cuda_memory
from ...io import atomic_write_json
from ...profiling import repeat_timed, summarize


def bus_bandwidth(algbw: float, n: int) -> float:
    """Ring all-reduce bus bandwidth: every byte crosses 2 (n - 1) / n links."""
    return algbw * 2 * (n - 1) / n


# ------------------------------------------------------------------ all-reduce measurement
def buffer_bytes(nbytes: int) -> int:
    """The bytes the all-reduce really sends for a size asked in bytes: whole float32 elements, at least one
    (its meta.json's sizes and its rows' bytes both say these)."""
    return 4 * max(1, int(nbytes) // 4)


def _allreduce_worker(
    sizes: list[int], repeats: int, warmup: int, out: str, device_type: str = "auto", keep_group: bool = False
) -> None:
    if device_type == "auto":
        device_type = "cuda" if torch.cuda.is_available() else "cpu"
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if (
        device_type == "cuda" and world > torch.cuda.device_count()
    ):  # never two ranks on one GPU (NCCL refuses)
        raise SystemExit(
            f"error: {world} ranks but {torch.cuda.device_count()} GPU(s): measure with device=cpu (gloo)"
        )
    env = distributed.setup(torch.device(device_type))
    device = torch.device(env.device)
    rows = []
    ok = False
    try:
        for nbytes in sizes:
            buf = torch.ones(buffer_bytes(nbytes) // 4, dtype=torch.float32, device=device)
            # a barrier before each timed all-reduce: a rank that arrives late would otherwise add its lag to
            # the others' times (nccl-tests starts its clock after a barrier too)
            times = repeat_timed(
                lambda b=buf: torch.distributed.all_reduce(b),
                device,
                repeats,
                warmup,
                before=distributed.barrier,
            )
            # the collective ends when the slowest rank does
            times = distributed.all_reduce_max(torch.tensor(times, dtype=torch.float64)).tolist()
            s = summarize(times)
            algbw = buf.numel() * 4 / s["median"]
            rows.append(
                {
                    "world_size": env.world_size,
                    "backend": env.backend,
                    "bytes": buf.numel() * 4,
                    "time_s": s["median"],
                    "iqr_s": s["iqr"],
                    "n": s["n"],
                    "warmup": warmup,
                    "algbw_GBps": algbw / 1e9,
                    "busbw_GBps": bus_bandwidth(algbw, env.world_size) / 1e9,
                }
            )
            del buf
        if env.is_main:
            atomic_write_json(out, rows)
        ok = True
    finally:
        if not (ok and keep_group):  # training runs of the same launch go on in this group
            distributed.cleanup(barrier=ok)  # no barrier on a failure path: the other ranks may be gone


def _torchrun(nproc: int, module_args: list[str], timeout: float) -> subprocess.CompletedProcess:
    root = str(project_root())
    env = {
        **os.environ,
        "OMP_NUM_THREADS": os.environ.get("HPML_RANK_THREADS", "1"),
        "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "HPML_PROGRESS": "none",
    }
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc-per-node={nproc}",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=localhost:0",
        "-m",
        *module_args,
    ]
    r = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-15:]
        raise RuntimeError(
            f"torchrun {' '.join(module_args[:2])} failed (exit {r.returncode}):\n" + "\n".join(tail)
        )
    return r


def measure_allreduce(
    sizes: Iterable[int],
    nproc: int = 2,
    repeats: int = 10,
    warmup: int = 3,
    timeout: float = 300,
    device: str = "auto",
) -> pd.DataFrame:
    """All-reduce times over `nproc` local processes launched by torchrun: gloo on CPU (device="cpu"), NCCL on
    GPUs (device="cuda", one GPU per rank: more ranks than GPUs is refused); "auto" picks CUDA when
    present."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "allreduce.json"
        _torchrun(
            nproc,
            [
                "hpml_lab.studies.lab5.ranks",
                "allreduce",
                "--bytes",
                *map(str, sizes),
                "--repeats",
                str(repeats),
                "--warmup",
                str(warmup),
                "--out",
                str(out),
                "--device",
                device,
            ],
            timeout,
        )
        return pd.DataFrame(json.loads(out.read_text()))


# ------------------------------------------------------------------ training runs
def run_ddp(cfg: RunConfig, nproc: int, timeout: float = 600) -> results.Run:
    """Train cfg under torchrun with nproc processes (batch_size is per process); the rank-0 record."""
    return run_ddp_many([cfg], nproc, timeout)[0][0]


def run_ddp_many(
    cfgs: list[RunConfig],
    nproc: int,
    timeout: float = 600,
    allreduce: dict | None = None,
) -> tuple[list[results.Run], pd.DataFrame | None]:
    """Train each of cfgs (batch_size per process) in one torchrun launch of nproc processes: every rank
    trains them in turn in one process group, so the launch, the imports and the rendezvous are paid once, not
    once a run. With allreduce (measure_allreduce's sizes, repeats, warmup and device), the all-reduce is
    measured first, in the same group. The rank-0 records in the order of cfgs, and the all-reduce table (or
    None)."""
    cfgs = [distributed.run_config(c.replace(progress="none"), nproc) for c in cfgs]
    if len({c.run_dir() for c in cfgs}) < len(cfgs):  # one would overwrite the other and be read back twice
        raise ConfigError("run_ddp_many: two configurations share a run folder; give them distinct run_id")
    with tempfile.TemporaryDirectory() as d:
        spec, out = Path(d) / "runs.json", Path(d) / "allreduce.json"
        spec.write_text(json.dumps([c.to_dict() for c in cfgs]))
        args = ["hpml_lab.studies.lab5.ranks", "runs", "--configs", str(spec)]
        if allreduce:
            args += [
                "--bytes",
                *map(str, allreduce["sizes"]),
                "--out",
                str(out),
                "--device",
                allreduce["device"],
            ]
            args += ["--repeats", str(allreduce["repeats"]), "--warmup", str(allreduce["warmup"])]
        _torchrun(nproc, args, timeout * max(1, len(cfgs)))
        ar = pd.DataFrame(json.loads(out.read_text())) if allreduce else None
    return [results.read_run(c.run_dir()) for c in cfgs], ar


def _runs_worker(configs: str, allreduce: dict | None) -> None:
    """A rank of run_ddp_many's launch: the all-reduce measurement if asked, then each configuration's run."""
    from ...training import train

    ok = False
    try:
        if allreduce:
            _allreduce_worker(**allreduce, keep_group=True)
        for i, d in enumerate(json.loads(Path(configs).read_text())):
            if i and torch.cuda.is_available():
                free_cuda_memory()  # each batch size starts from a clean device, as in a launch of its own
            train(RunConfig.from_dict(d))
        ok = True
    finally:
        distributed.cleanup(barrier=ok)


def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(prog="python -m hpml_lab.studies.lab5.ranks")
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("allreduce", help="time all-reduce of the given sizes (run under torchrun)")
    a.add_argument("--bytes", type=int, nargs="+", required=True)
    a.add_argument("--repeats", type=int, default=10)
    a.add_argument("--warmup", type=int, default=3)
    a.add_argument("--out", required=True)
    a.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    r = sub.add_parser("runs", help="train each configuration of a JSON list (run under torchrun)")
    r.add_argument("--configs", required=True)
    r.add_argument("--bytes", type=int, nargs="+", help="measure the all-reduce of these sizes first")
    r.add_argument("--repeats", type=int, default=10)
    r.add_argument("--warmup", type=int, default=3)
    r.add_argument("--out")
    r.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    args = p.parse_args(argv)
    if args.cmd == "runs" and args.bytes and not args.out:
        p.error("runs: --bytes needs --out (the all-reduce table's file)")
    if args.cmd == "allreduce":
        _allreduce_worker(args.bytes, args.repeats, args.warmup, args.out, args.device)
    else:
        spec = None
        if args.bytes:
            spec = {"sizes": args.bytes, "repeats": args.repeats, "warmup": args.warmup, "out": args.out}
            spec["device_type"] = args.device
        _runs_worker(args.configs, spec)
    return distributed.leave(0)


if __name__ == "__main__":
    sys.exit(main())
