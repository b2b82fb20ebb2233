"""Slurm batch scripts for a task: the distributed training runs, then the notebook and its HTML.

    hpml-lab slurm lab5 --gpus 4 --time 01:00 --partition gpu -p batch_size=512
    hpml-lab slurm lab5 --gpus 4 --nodes 2 -p epochs=2        # srun + torchrun, c10d on the first node
    sbatch slurm/lab5-1x4.sbatch

The script (i) checks the dataset is there (prepared before launch: several ranks
never download at once), (ii) trains with torchrun: `torchrun --standalone` on one
node; on several, one srun task per node runs torchrun with a c10d rendezvous on
the first host of `scontrol show hostnames`, (iii) runs the task's notebook
through papermill (`hpml-lab run`: log output, no progress bar) and renders the
HTML report at the end. The torchrun step is the task's configuration trained with
DDP over every allocated GPU, filed as results/<task>/ddp<N>-<id>/; the notebook
makes its own measurements and does not read that run (lab5 and tinyimagenet
launch their DDP runs themselves), so for a sweep-only task (c3, dataloading)
the torchrun step costs time and can be deleted from the script. Parameters
(-p) are checked against the task's notebook and RunConfig when the script is
written, not when the job starts.
"""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any, Mapping, Optional

from . import tasks
from ..config import ConfigError, output_path, project_root
from ..io import atomic_write_text

_TIME = re.compile(r"^(\d+-)?\d{1,3}:\d{2}(:\d{2})?$")
_NAME = re.compile(r"^[A-Za-z0-9_.,-]+$")
RDZV_PORT = 29500


def _check(task_id: str, gpus: int, nodes: int, time: str, partition: Optional[str]) -> tasks.Task:
    task = tasks.get(task_id)
    if gpus < 1 or nodes < 1:
        raise ConfigError(f"--gpus and --nodes must be at least 1, got {gpus} and {nodes}")
    if not _TIME.match(time):
        raise ConfigError(f"--time must be HH:MM, HH:MM:SS or D-HH:MM, got {time!r}")
    if partition is not None and not _NAME.match(partition):
        raise ConfigError(f"--partition must be a plain name, got {partition!r}")
    return task


def _flag_value(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def render(task_id: str, gpus: int = 1, nodes: int = 1, time: str = "01:00", partition: Optional[str] = None,
           params: Optional[Mapping[str, str]] = None, profile: str = "full", workdir: Optional[str] = None,
           cpus_per_gpu: int = 4) -> str:
    """The sbatch script's text for TASK on `nodes` nodes with `gpus` GPUs each."""
    from .runner import resolve_parameters

    task = _check(task_id, gpus, nodes, time, partition)
    typed, cfg = resolve_parameters(task, profile, None, dict(params or {}))  # ConfigError before anything
    merged = {**task.profile(profile), **typed}
    train_flags = " ".join(f"--{k.replace('_', '-')} {shlex.quote(_flag_value(v))}" for k, v in merged.items())
    run_params = " ".join(f"-p {shlex.quote(f'{k}={_flag_value(v)}')}" for k, v in (params or {}).items())
    workdir = workdir or str(project_root())
    if time.count(":") == 1 and "-" not in time:
        time = time + ":00"
    world = gpus * nodes
    head = [
        "#!/bin/bash",
        f"#SBATCH --job-name=hpml-{task.id}",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1            # one torchrun per node; it starts one process per GPU",
        f"#SBATCH --gpus-per-node={gpus}",
        f"#SBATCH --cpus-per-task={cpus_per_gpu * gpus}",
        f"#SBATCH --time={time}",
        *([f"#SBATCH --partition={partition}"] if partition else []),
        "#SBATCH --output=slurm-%x-%j.out",
        "",
        f"# Written by `hpml-lab slurm {task.id}`: {task.title}",
        f"# {nodes} node(s) x {gpus} GPU(s) = world size {world}; profile {profile}.",
        "set -euo pipefail",
        f"cd {shlex.quote(workdir)}",
        'PY="${HPML_PYTHON:-.venv/bin/python}"',
        "export HPML_PROGRESS=log                # periodic log lines, no progress bars, in batch logs",
        "export HPML_DIST_TIMEOUT_S=${HPML_DIST_TIMEOUT_S:-600}",
        "export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}",
        "",
        "# 1. The dataset must be prepared before launch (never downloaded by several ranks at once).",
        "\"$PY\" -c " + shlex.quote(
            "from hpml_lab.config import RunConfig; from hpml_lab.data import check_dataset; "
            f"print({json.dumps('dataset:')}, check_dataset(RunConfig(dataset={json.dumps(cfg.dataset)}, "
            f"data_root={json.dumps(cfg.data_root)})))"),
        "",
        f"# 2. Distributed training, results under results/{task.id}/ (written by rank 0 only).",
    ]
    if nodes == 1:
        launch = [
            f"\"$PY\" -m torch.distributed.run --standalone --nproc-per-node={gpus} \\",
            f"    -m hpml_lab --task {task.id} {train_flags}",
        ]
    else:
        launch = [
            'HEAD_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
            f"RDZV_PORT=${{RDZV_PORT:-{RDZV_PORT}}}",
            'echo "rendezvous on $HEAD_NODE:$RDZV_PORT for $SLURM_NNODES nodes"',
            "srun --nodes=\"$SLURM_NNODES\" --ntasks-per-node=1 \\",
            f"    \"$PY\" -m torch.distributed.run --nnodes=\"$SLURM_NNODES\" --nproc-per-node={gpus} \\",
            "    --rdzv-id=\"$SLURM_JOB_ID\" --rdzv-backend=c10d --rdzv-endpoint=\"$HEAD_NODE:$RDZV_PORT\" \\",
            f"    -m hpml_lab --task {task.id} {train_flags}",
        ]
    tail = [
        "",
        "# 3. The notebook through papermill (log output), then its HTML report.",
        f"\"$PY\" -m hpml_lab.report.cli run {task.id} --profile {profile} {run_params}".rstrip(),
        f"echo \"report: reports/{task.id}.html\"",
        "",
    ]
    return "\n".join(head + launch + tail)


def write(task_id: str, out: Optional[str] = None, **kw) -> Path:
    """Render and write the script (atomically); returns its path (default slurm/<task>-<nodes>x<gpus>.sbatch)."""
    text = render(task_id, **kw)
    path = Path(out) if out else output_path("slurm") / f"{task_id}-{kw.get('nodes', 1)}x{kw.get('gpus', 1)}.sbatch"
    atomic_write_text(path, text)
    path.chmod(0o755)
    return path
