"""Distributed data parallel: one helper reads the launcher's environment, the rest is small.

Launch with torchrun only (never mp.spawn); train() picks the environment up by itself:

    torchrun --standalone --nproc-per-node=2 -m hpml_lab --epochs 2 --batch-size 64
    torchrun --nproc-per-node=2 --rdzv-backend=c10d --rdzv-endpoint=localhost:0 -m hpml_lab ...
    srun torchrun --nnodes=$SLURM_NNODES --nproc-per-node=4 --rdzv-backend=c10d \
        --rdzv-endpoint=$HEAD:29500 -m hpml_lab ...      # what `hpml-lab slurm` writes

    from hpml_lab import distributed
    env = distributed.setup(torch.device("cpu"))   # DistEnv(rank, world_size, local_rank, device, ...)
    distributed.all_reduce_sum(tensor); distributed.cleanup()

The environment: torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
MASTER_ADDR and MASTER_PORT; it wins when present. Without it, a Slurm job step
with one task per process (srun --ntasks=N python -m hpml_lab) gives
SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE (srun's step variables: the batch
step itself, where a notebook runs, has SLURM_PROCID and SLURM_NTASKS but is never a rank); MASTER_ADDR and
MASTER_PORT must then be exported by the batch script. Backend: gloo on CPU,
NCCL on CUDA, with an explicit timeout (HPML_DIST_TIMEOUT_S, default 300 s; NCCL's
own default is 10 minutes, too long to notice a dead rank in a short lab run).
"""

from __future__ import annotations

import datetime as _dt
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

DEFAULT_TIMEOUT_S = 300
_joined = False  # this process has joined a process group (setup() set it); leave() reads it


@dataclass(frozen=True)
class DistEnv:
    """Where this process stands: rank among world_size, its local rank on the node, its device."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    launcher: str = "none"  # "torchrun", "slurm" or "none"
    device: str = "cpu"
    backend: str = ""

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "distributed": self.distributed}


def _int(environ: Mapping[str, str], name: str, default: int) -> int:
    value = environ.get(name, "")
    try:
        return int(value.split("(")[0]) if value else default  # SLURM_NTASKS_PER_NODE may read "4(x2)"
    except ValueError:
        return default


def read_env(environ: Mapping[str, str] | None = None) -> DistEnv:
    """Rank, world size and local rank from torchrun's variables, else Slurm's, else a single process."""
    e = os.environ if environ is None else environ
    if "RANK" in e and "WORLD_SIZE" in e:
        world = _int(e, "WORLD_SIZE", 1)
        return DistEnv(
            rank=_int(e, "RANK", 0),
            world_size=world,
            local_rank=_int(e, "LOCAL_RANK", 0),
            local_world_size=_int(e, "LOCAL_WORLD_SIZE", world),
            launcher="torchrun",
        )
    # Only a task that srun started for a step joins: srun sets SLURM_STEP_NUM_TASKS, the batch step does not,
    # although it has SLURM_PROCID=0 and SLURM_NTASKS=N (a notebook run there would wait for N-1 ranks
    # forever).
    if "SLURM_PROCID" in e and _int(e, "SLURM_STEP_NUM_TASKS", 1) > 1:
        world = _int(e, "SLURM_STEP_NUM_TASKS", 1)
        return DistEnv(
            rank=_int(e, "SLURM_PROCID", 0),
            world_size=world,
            local_rank=_int(e, "SLURM_LOCALID", 0),
            local_world_size=_int(e, "SLURM_STEP_TASKS_PER_NODE", world),
            launcher="slurm",
        )
    return DistEnv()


def backend_for(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


def timeout_seconds(environ: Mapping[str, str] | None = None) -> int:
    """HPML_DIST_TIMEOUT_S, a whole number of seconds above 0 (default 300); anything else is one clear
    error."""
    e = os.environ if environ is None else environ
    raw = e.get("HPML_DIST_TIMEOUT_S", "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        from .config import ConfigError

        raise ConfigError(f"HPML_DIST_TIMEOUT_S must be a whole number of seconds above 0, got {raw!r}")
    return value


def setup(device: torch.device, timeout_s: int | None = None) -> DistEnv:
    """Read the environment, join the process group when world_size > 1, and return the DistEnv.

    On CUDA each process takes the GPU of its local rank. Single-process runs
    return at once with nothing initialised, so notebooks pay nothing.
    """
    env = read_env()
    if not env.distributed:
        return DistEnv(device=str(device))
    if device.type == "cuda":
        if env.local_rank >= torch.cuda.device_count():  # never two ranks on one GPU: NCCL would refuse later
            from .config import ConfigError

            raise ConfigError(
                f"rank {env.rank} has local rank {env.local_rank} but this node has "
                f"{torch.cuda.device_count()} GPU(s): start at most one process per GPU"
            )
        device = torch.device("cuda", env.local_rank)
        torch.cuda.set_device(device)
    backend = backend_for(device)
    if not dist.is_initialized():
        if env.launcher == "slurm" and not ("MASTER_ADDR" in os.environ and "MASTER_PORT" in os.environ):
            from .config import ConfigError

            raise ConfigError(
                "Slurm launch without torchrun needs MASTER_ADDR and MASTER_PORT exported "
                "(the scripts `hpml-lab slurm` writes use torchrun, which sets them)"
            )
        dist.init_process_group(
            backend=backend,
            rank=env.rank,
            world_size=env.world_size,
            timeout=_dt.timedelta(seconds=timeout_s or timeout_seconds()),
        )
    global _joined
    _joined = True
    return DistEnv(
        env.rank, env.world_size, env.local_rank, env.local_world_size, env.launcher, str(device), backend
    )


def active() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def cleanup(barrier: bool = True) -> None:
    """Leave the group; after success a barrier first, so no rank tears its connections down while
    another still uses them (gloo aborts the process otherwise). After a failure no barrier: the
    other ranks may never reach it, and torchrun stops them once this rank exits."""
    if dist.is_available() and dist.is_initialized():
        try:
            if barrier:
                dist.barrier()
        finally:
            dist.destroy_process_group()


def leave(code: int) -> int:
    """The exit status for a command-line entry point, ending the process itself if it joined a group.

    Building DDP in torch 2.11 leaves references to the process group behind (we counted ten more on the group
    object after the wrapper was deleted), so destroy_process_group does not free it and gloo's worker threads
    live on into interpreter finalization. A two-rank CPU run once failed in CI with one rank aborting
    ("terminate called without an active exception", SIGABRT), which is how a process ends when a C++ thread
    needs the GIL while the interpreter finalizes; torchrun then reports the whole job failed. So a rank that
    joined a group, and has left it (cleanup), flushes its output and exits with os._exit, skipping
    finalization; every result file is already written atomically by then. A process that never joined a group
    gets `code` back unchanged.
    """
    if not _joined:
        return code
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def barrier() -> None:
    if active():
        dist.barrier()


def wrap_model(model: nn.Module, env: DistEnv) -> nn.Module:
    """DistributedDataParallel around the model when the group is active; the model itself otherwise."""
    if not env.distributed:
        return model
    from torch.nn.parallel import DistributedDataParallel as DDP

    device = torch.device(env.device)
    return DDP(model, device_ids=[device.index] if device.type == "cuda" else None)


def wrap_data_parallel(model: nn.Module, device: torch.device) -> tuple[nn.Module, str]:
    """nn.DataParallel over every visible GPU, for the reference projects' DP-vs-DDP comparison.

    Returns (model, note). With fewer than two GPUs DataParallel only adds
    overhead, so it is skipped and the note says why.
    """
    n = torch.cuda.device_count() if device.type == "cuda" else 0
    if n < 2:
        return model, (
            f"DataParallel skipped: it needs 2 or more GPUs and this run has "
            f"{n if device.type == 'cuda' else 'none (CPU)'}"
        )
    return nn.DataParallel(model), f"DataParallel over {n} GPUs"


def _reduce(t: torch.Tensor, op) -> torch.Tensor:
    if not active():
        return t
    # gloo reduces CPU tensors; NCCL needs them on the process's GPU.
    on = (
        torch.device("cuda", torch.cuda.current_device())
        if dist.get_backend() == "nccl"
        else torch.device("cpu")
    )
    buf = t.detach().to(on, dtype=torch.float64 if t.is_floating_point() else t.dtype).clone()
    dist.all_reduce(buf, op=op)
    return buf.to(t.device)


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum over ranks (a copy; the input is untouched). Identity in a single process."""
    return _reduce(t, dist.ReduceOp.SUM if dist.is_available() else None)


def all_reduce_max(t: torch.Tensor) -> torch.Tensor:
    return _reduce(t, dist.ReduceOp.MAX if dist.is_available() else None)


def run_config(cfg, world_size: int):
    """cfg with the run folder of a `world_size`-process DDP run: ddp<N>-<id>, never the folder of a
    single-process run of the same settings (an explicit run_id is kept)."""
    if world_size <= 1 or cfg.run_id:
        return cfg
    return cfg.replace(run_id=f"ddp{world_size}-{cfg.resolved_run_id()}")


def sampler_kwargs(dataset, shuffle: bool, seed: int, env: DistEnv) -> dict[str, Any]:
    """DataLoader overrides for DDP: a DistributedSampler (rank r gets items r, r+n, ... when not
    shuffled) and shuffle off in the loader itself. Empty for a single process."""
    if not env.distributed:
        return {}
    from torch.utils.data.distributed import DistributedSampler

    sampler = DistributedSampler(
        dataset, num_replicas=env.world_size, rank=env.rank, shuffle=shuffle, seed=seed, drop_last=False
    )
    return {"sampler": sampler, "shuffle": False}
