"""Slurm batch scripts for a task: the distributed training runs, then the notebook and its HTML.

    hpml-lab slurm lab5 --gpus 4 --time 01:00 --partition gpu -p batch_size=512
    hpml-lab slurm lab5 --gpus 4 --nodes 2 -p epochs=2        # srun + torchrun, c10d on the first node
    hpml-lab slurm c1 --gpus 0 --ntasks-per-node 2            # CPU nodes: 2 gloo ranks per node, no GPU asked
    sbatch slurm/lab5-1x4.sbatch

The script (i) checks the dataset is there (prepared before launch: several ranks never download at once),
(ii) trains with torchrun: `torchrun --standalone` on one node; on several, one srun task per node runs
torchrun with a c10d rendezvous on the address (NodeAddr) of the first host of `scontrol show hostnames`,
(iii) runs the task's notebook through papermill (`hpml-lab run`: log output, no progress bar) and renders the
HTML report at the end. The torchrun step is the task's configuration trained with DDP over every allocated
GPU (or, with --gpus 0, over --ntasks-per-node gloo processes per node), filed as results/<task>/ddp<N>-<id>/;
the notebook makes its own measurements and does not read that run (lab5 and tinyimagenet launch their DDP
runs themselves), so for a sweep-only task (c3, dataloading) `--no-train` leaves the step out (`--no-report`
the notebook step). The notebook step runs in the batch step as a single process: the batch step has
SLURM_PROCID=0 and SLURM_NTASKS=N but is never a rank (hpml_lab.distributed.read_env).

Time limits: the script asks Slurm for SIGUSR1 some time before the limit
(`--signal=B:USR1@<lead>`; Slurm may send it up to a minute earlier than asked, 20 s seen here). The
shell then sends SIGTERM to every process of the running step: a training run ends
with status "interrupted" (finished epochs kept), the notebook's report says
interrupted, the job stops. Submitted again, the job goes on where it stopped:
the training step skips a run that is already complete (`--if-missing`), the
notebook reuses its complete runs. Parameters (-p) are checked against the task's
notebook and RunConfig when the script is written, not when the job starts.
Run for real in tests/cluster/test_slurm_real.py on a localhost Slurm 22.05 (one and two nodes).

Containers (the course's clusters run Singularity or Apptainer images with an overlay):

    hpml-lab slurm c2 --container lab.sif --overlay overlay.ext3:ro --bind /scratch/data:/data

runs every step inside `apptainer exec --nv` (or `singularity exec --nv`, whichever the node has, apptainer
first; `--nv` only when GPUs are asked for), the multi-node torchrun too (srun starts one container per node,
torchrun starts the ranks inside it). The script checks that the image and overlay exist, and that a container
command is on PATH, before the first step; the job's environment passes into the container (no --cleanenv: the
steps need HPML_*, SLURM_*, OMP_NUM_THREADS). Inside it the interpreter is `--python` (written into the
script, e.g. /ext3/env/bin/python in the overlay), else `python3` from the image's PATH unless HPML_PYTHON
names another. `overlay_script` writes the script that prepares such an overlay (a Python environment with
hpml-lab, its pins and the `hpml-lab` kernel), as NYU Greene's guide does by hand:

    hpml-lab overlay --container lab.sif --overlay overlay.ext3 [--cuda cu126]   # writes slurm/overlay.sh
    bash slurm/overlay.sh

Resources as Slurm users ask for them: `--mem 32G`, `--account X`, `--partition P`, `--gres gpu:v100:2`
(instead of --gpus-per-node), each checked in one line. A script written again replaces only what hpml-lab
wrote: an edited one is refused (written.py), or kept beside the new one with --force.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..config import ConfigError, output_path, project_root
from . import tasks, written

_TIME = re.compile(r"^(\d{1,3}-)?\d{1,3}:[0-5]\d(:[0-5]\d)?$", re.ASCII)  # ASCII digits: what Slurm reads
_NAME = re.compile(r"^[A-Za-z0-9_.,-]+$")
_ACCOUNT = re.compile(r"^[A-Za-z0-9_.-]+$", re.ASCII)
_MEM = re.compile(r"^(0|[1-9][0-9]{0,9})([KMGT]?)$", re.ASCII | re.IGNORECASE)
_GRES_ITEM = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(:[A-Za-z0-9_.-]+)?(:[0-9]{1,4})?$", re.ASCII)
_COMMAND = re.compile(r"^[A-Za-z0-9_.+-]+$", re.ASCII)  # a command looked up on PATH: python3, python3.12
RDZV_PORT = 29500
_OVERLAY_MODES = ("ro", "rw")
SIGNAL_LEAD_S = 180

# Bash run by the script: each step in the background so the shell can act on Slurm's warning signal at once
# (a shell waiting on a foreground child runs its trap only after the child ends).
_STEP_FUNCTIONS = r"""
STEP_PID=""
STOPPING=""
tree() { local c; for c in $(pgrep -P "$1"); do tree "$c"; done; echo "$1"; }
stop_step() {
    STOPPING=1
    echo "hpml-lab: SIGUSR1, the time limit is near: stopping the running step" \
        "(submit the job again to go on)" >&2
    if [ -n "$STEP_PID" ]; then kill -TERM $(tree "$STEP_PID") 2>/dev/null || true; fi
}
trap stop_step USR1
step() {  # run "$@" in the background and wait for it, also across the trap; its exit status is the step's
    if [ -n "$STOPPING" ]; then return 143; fi
    "$@" &
    STEP_PID=$!
    if [ -n "$STOPPING" ]; then stop_step; fi  # the signal came between the start and the line above
    while kill -0 "$STEP_PID" 2>/dev/null; do  # a wait cut short by the signal returns early: wait again
        wait "$STEP_PID" || true
    done
    local rc=0
    wait "$STEP_PID" || rc=$?  # the step's own status (bash keeps it after the process is reaped)
    STEP_PID=""
    return "$rc"
}""".strip("\n")


def _check(
    task_id: str,
    gpus: int,
    nodes: int,
    time: str,
    partition: str | None,
    ntasks_per_node: int | None,
    signal_lead_s: int | None,
    cpus_per_task: int = 1,
) -> tasks.Task:
    task = tasks.get(task_id)
    if not (0 <= gpus <= 64 and 1 <= nodes <= 10_000):
        raise ConfigError(
            f"--gpus must be 0 (CPU nodes) to 64 and --nodes 1 to 10000, got {gpus} and {nodes}"
        )
    if not 1 <= cpus_per_task <= 1024:
        raise ConfigError(f"--cpus-per-task must be 1 to 1024, got {cpus_per_task}")
    if ntasks_per_node is not None:
        if gpus:
            raise ConfigError(
                f"--ntasks-per-node is for CPU jobs (--gpus 0); with GPUs there is one process per "
                f"GPU, got --gpus {gpus} --ntasks-per-node {ntasks_per_node}"
            )
        if not 1 <= ntasks_per_node <= 1024:
            raise ConfigError(f"--ntasks-per-node must be at least 1 (at most 1024), got {ntasks_per_node}")
    if not _TIME.match(time):
        raise ConfigError(
            f"--time must be HH:MM, HH:MM:SS or D-HH:MM in ASCII digits, minutes and seconds below 60, "
            f"got {time[:40]!r}"
        )
    if _seconds(time) < 60:  # 0:00 is no limit to Slurm, and no time to run here
        raise ConfigError(f"--time must be at least 00:01 (one minute), got {time!r}")
    if partition is not None and not _NAME.match(partition):
        raise ConfigError(f"--partition must be a plain name, got {partition!r}")
    if signal_lead_s is None or signal_lead_s < 1 or signal_lead_s >= _seconds(time):
        raise ConfigError(
            f"--signal-lead must be between 1 s and the time limit ({_seconds(time)} s), got {signal_lead_s}"
        )
    return task


def check_mem(mem: str | None) -> str | None:
    """--mem as Slurm reads it: a whole number of megabytes, or with K, M, G or T (0: all of the node's
    memory)."""
    if mem is None:
        return None
    if not _MEM.match(mem):
        raise ConfigError(
            f"--mem takes a size as Slurm reads it: a whole number with K, M, G or T (e.g. 32G; no unit: "
            f"megabytes; 0: all of the node's), got {mem[:40]!r}"
        )
    return mem.upper()


def check_account(account: str | None) -> str | None:
    if account is not None and not _ACCOUNT.match(account):
        raise ConfigError(
            f"--account must be a plain Slurm account name (letters, digits, '_', '-', '.'), got "
            f"{account[:60]!r}"
        )
    return account


def gres_gpus(gres: str) -> int | None:
    """The GPUs per node a --gres asks for (gpu, gpu:2, gpu:v100:2; a gres without gpu: None), or a
    ConfigError naming what Slurm would not read."""
    gpus = None
    for item in gres.split(","):
        if not _GRES_ITEM.match(item):
            raise ConfigError(
                f"--gres takes NAME[:TYPE][:COUNT] items separated by commas, as Slurm does (e.g. gpu:1 or "
                f"gpu:v100:2), got {gres[:60]!r}"
            )
        name, *rest = item.split(":")
        if name == "gpu":
            count = rest[-1] if rest and rest[-1].isdigit() else "1"
            if gpus is not None or int(count) == 0:
                raise ConfigError(f"--gres must name the GPUs once, at least one (e.g. gpu:2), got {gres!r}")
            gpus = int(count)
    return gpus


def check_python(python: str | None, container: bool) -> str | None:
    """--python: the interpreter every step runs. Inside a container a path in the container (absolute, e.g.
    /ext3/env/bin/python) or a command name (python3); outside, a relative path is made absolute from the
    folder the command ran in (the job runs in the project's)."""
    if python is None:
        return None
    if not python.strip() or any(ord(c) < 32 or ord(c) == 127 for c in python):
        raise ConfigError(f"--python needs an interpreter's path or command name, got {python!r}")
    if _COMMAND.match(python):
        return python
    if container:
        if not python.startswith("/"):
            raise ConfigError(
                f"--python with --container is a path inside the container (absolute, e.g. "
                f"/ext3/env/bin/python) or a command name (python3), got {python!r}"
            )
        return python
    return os.path.abspath(os.path.expanduser(python))


def _plain_path(path: str, what: str) -> str:
    """A path the container command can take: not empty, no control characters; absolute (the script cds to
    the work folder, the user meant their own folder)."""
    if not path or not path.strip():
        raise ConfigError(f"{what} needs a file path, got {path!r}")
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise ConfigError(f"{what} must not contain control characters, got {path!r}")
    if "://" in path:
        raise ConfigError(
            f"{what} must be a file on the cluster (pull the image first: apptainer pull lab.sif URI), got "
            f"{path!r}"
        )
    return os.path.abspath(os.path.expanduser(path))


def container_command(
    container: str, overlay: str | None = None, binds: list[str] | None = None, gpus: int = 1
) -> tuple[list[str], list[str]]:
    """What goes after the container command (`apptainer` or `singularity`, chosen on the node) to run a step
    inside the image: ["exec", "--nv", "--overlay", FILE:MODE, "--bind", SPEC, ..., IMAGE]; and the files the
    job checks before its first step (the image, the overlay, each bind source)."""
    image = _plain_path(container, "--container")
    args, files = ["exec", *(["--nv"] if gpus else [])], [image]
    if overlay is not None:
        file, sep, mode = overlay.rpartition(":")
        if not sep or mode not in _OVERLAY_MODES:
            file, mode = overlay, ""
        file = _plain_path(file, "--overlay")
        if ":" in file or "," in file:
            raise ConfigError(f"--overlay: apptainer cannot take a file name with ':' or ',', got {file!r}")
        args += ["--overlay", f"{file}:{mode}" if mode else file]
        files.append(file)
    for spec in binds or []:
        parts = spec.split(":")
        if len(parts) > 3 or not all(parts[:2]) or "," in spec:
            raise ConfigError(
                f"--bind takes SRC[:DST[:ro|rw]] (no ',' and no ':' inside a path), got {spec!r}"
            )
        if len(parts) == 3 and parts[2] not in _OVERLAY_MODES:
            raise ConfigError(f"--bind's options are ro or rw, got {parts[2]!r} in {spec!r}")
        src = _plain_path(parts[0], "--bind")
        if len(parts) > 1 and not parts[1].startswith("/"):
            raise ConfigError(
                f"--bind's destination must be an absolute path inside the container, got {spec!r}"
            )
        args += ["--bind", ":".join([src, *parts[1:]])]
        files.append(src)
    args.append(image)
    return args, files


def _container_lines(args: list[str], files: list[str]) -> list[str]:
    """Bash that picks the container command, checks the files and defines IN, the prefix of every step."""
    checks = [
        f"for f in {' '.join(shlex.quote(f) for f in files)}; do",
        '    if [ ! -e "$f" ]; then',
        '        echo "hpml-lab: $f does not exist on $(hostname): no step was started" >&2; exit 2',
        "    fi",
        "done",
    ]
    return [
        "# 0. The container: apptainer, else singularity (the same flags); its image and overlay must exist.",
        "if command -v apptainer >/dev/null 2>&1; then CONTAINER_CMD=apptainer",
        "elif command -v singularity >/dev/null 2>&1; then CONTAINER_CMD=singularity",
        'else echo "hpml-lab: neither apptainer nor singularity is on PATH on $(hostname) '
        '(module load apptainer?): no step was started" >&2; exit 2',
        "fi",
        *checks,
        f'IN=("$CONTAINER_CMD" {" ".join(shlex.quote(a) for a in args)})',
        'echo "container: ${IN[*]}"',
        "",
    ]


def _gpus_and_gres(gpus: int | None, gres: str | None) -> tuple[int, str | None]:
    """GPUs per node and the --gres line: --gpus alone (default 1), --gres alone (its gpu count), or both when
    they agree."""
    if gres is None:
        return (1 if gpus is None else gpus), None
    named = gres_gpus(gres)
    if named is None:
        raise ConfigError(
            f"--gres {gres} names no GPU; the job asks for its GPUs with --gres (gpu:N or gpu:TYPE:N): "
            "without GPUs leave --gres out and give --gpus 0"
        )
    if gpus is not None and gpus != named:
        raise ConfigError(f"--gres {gres} asks for {named} GPU(s) per node but --gpus says {gpus}")
    return named, gres


def _seconds(time: str) -> int:
    days, _, clock = time.rpartition("-")
    parts = [int(x) for x in clock.split(":")] + ([0] if clock.count(":") == 1 else [])
    return int(days or 0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


def _flag_value(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def render(
    task_id: str,
    gpus: int | None = None,
    nodes: int = 1,
    time: str = "01:00",
    partition: str | None = None,
    params: Mapping[str, str] | None = None,
    profile: str = "full",
    workdir: str | None = None,
    cpus_per_gpu: int = 4,
    ntasks_per_node: int | None = None,
    cpus_per_task: int = 1,
    signal_lead_s: int | None = None,
    train: bool = True,
    train_params: Mapping[str, str] | None = None,
    save_model: str | None = None,
    report: bool = True,
    container: str | None = None,
    overlay: str | None = None,
    binds: list[str] | None = None,
    python: str | None = None,
    mem: str | None = None,
    account: str | None = None,
    gres: str | None = None,
) -> str:
    """The sbatch script's text for TASK on `nodes` nodes with `gpus` GPUs each (default 1, or the count
    `gres` names), or with gpus=0 on CPU nodes with `ntasks_per_node` gloo processes each (`cpus_per_task`
    CPUs per process).

    `params` go to the notebook and the training step; `train_params` (any RunConfig field, e.g. loader=tensor
    or augment=false) to the training step only; `save_model` is where that step writes its final weights.
    `train=False` leaves the training step out, `report=False` the notebook step. `container` (an image file),
    `overlay` (FILE or FILE:ro) and `binds` (SRC[:DST[:ro]]) run every step inside `apptainer exec` or
    `singularity exec` (see the module's docstring). `python` is the interpreter every step runs (written into
    the script); `mem`, `account` and `gres` are Slurm's --mem, --account and --gres (a --gres replaces
    --gpus-per-node).
    """
    from ..config import RunConfig, check_keys
    from .runner import notebook_parameters, notebooks_dir, resolve_parameters

    gpus, gres = _gpus_and_gres(gpus, gres)
    mem, account = check_mem(mem), check_account(account)
    python = check_python(python, container is not None)

    if time.count(":") == 1 and "-" not in time:
        time = time + ":00"
    if signal_lead_s is None and _TIME.match(time):  # 3 minutes, or a quarter of a shorter limit
        signal_lead_s = max(1, min(SIGNAL_LEAD_S, _seconds(time) // 4))
    task = _check(task_id, gpus, nodes, time, partition, ntasks_per_node, signal_lead_s, cpus_per_task)
    if container is None and (overlay is not None or binds):
        raise ConfigError("--overlay and --bind go with --container IMAGE")
    inside = container_command(container, overlay, binds, gpus) if container is not None else None
    run_in = '"${IN[@]}" ' if inside else ""
    if not (train or report):
        raise ConfigError("--no-train and --no-report together leave nothing to run")
    params = dict(params or {})
    train_params = dict(train_params or {})
    for where, given in (("-p", params), ("--train", train_params)):
        if (
            "task" in given
        ):  # the script's steps file under TASK; a second --task would fail only when the job runs
            raise ConfigError(
                f"{where} task=... is not a setting: the task is the command's TASK argument ({task_id})"
            )
    if save_model is not None and not save_model.strip():
        raise ConfigError("--save-model needs a file path, got ''; leave the flag out to save nothing")
    if (
        gpus == 0
    ):  # CPU nodes: the training step and, where the notebook has the parameter, the notebook on CPU
        for where, given in (("-p", params), ("--train", train_params)):
            if given.get("device", "cpu") != "cpu":
                raise ConfigError(f"--gpus 0 asks for CPU nodes, but {where} device={given['device']}")
        train_params["device"] = "cpu"
        if "device" in notebook_parameters(notebooks_dir() / task.notebook):
            params["device"] = "cpu"
    typed, cfg = resolve_parameters(task, profile, None, params)  # ConfigError before anything
    fields = RunConfig.field_names()
    merged = {
        k: v for k, v in {**task.profile(profile), **typed}.items() if k in fields
    }  # not study settings
    merged.update(train_params)
    check_keys(train_params)
    RunConfig.from_dict(
        {**merged, "task": task.id}, coerce=True
    )  # the training step's settings: one line if wrong
    train_flags = " ".join(
        f"--{k.replace('_', '-')} {shlex.quote(_flag_value(v))}" for k, v in merged.items()
    )
    if save_model:
        train_flags += f" --save-model {shlex.quote(save_model)}"
    run_params = " ".join(f"-p {shlex.quote(f'{k}={_flag_value(v)}')}" for k, v in params.items())
    workdir = workdir or str(project_root())
    per_node = gpus if gpus else (ntasks_per_node or 1)
    world = per_node * nodes
    if gpus:
        resources = [
            "#SBATCH --ntasks-per-node=1            # one torchrun per node; it starts one process per GPU",
            f"#SBATCH --gres={gres}" if gres else f"#SBATCH --gpus-per-node={gpus}",
            f"#SBATCH --cpus-per-task={cpus_per_gpu * gpus}",
        ]
    else:
        resources = [
            f"#SBATCH --ntasks-per-node={per_node}            # CPU nodes: torchrun starts this many gloo "
            f"processes",
            f"#SBATCH --cpus-per-task={cpus_per_task}",
        ]
    head = [
        "#!/bin/bash",
        f"#SBATCH --job-name=hpml-{task.id}",
        f"#SBATCH --nodes={nodes}",
        *resources,
        f"#SBATCH --time={time}",
        f"#SBATCH --signal=B:USR1@{signal_lead_s}          # warning before the limit: stop cleanly, resume "
        f"later",
        *([f"#SBATCH --partition={partition}"] if partition else []),
        *([f"#SBATCH --account={account}"] if account else []),
        *([f"#SBATCH --mem={mem}"] if mem else []),
        "#SBATCH --output=slurm-%x-%j.out",
        "",
        f"# Written by `hpml-lab slurm {task.id}`: {task.title}",
        f"# {nodes} node(s) x {per_node} {'GPU(s)' if gpus else 'CPU process(es)'} = world size {world}; "
        f"profile {profile}.",
        "set -euo pipefail",
        f"cd {shlex.quote(workdir)}",
        f"PY={shlex.quote(python)}          # --python: every step's interpreter"
        if python
        else 'PY="${HPML_PYTHON:-python3}"          # inside the container: its python3 unless HPML_PYTHON '
        "says"
        if inside
        else 'PY="${HPML_PYTHON:-.venv/bin/python}"',
        "export HPML_PROGRESS=log                # periodic log lines, no progress bars, in batch logs",
        "export HPML_DIST_TIMEOUT_S=${HPML_DIST_TIMEOUT_S:-600}",
        f"export OMP_NUM_THREADS=${{OMP_NUM_THREADS:-{4 if gpus else cpus_per_task}}}",
        _STEP_FUNCTIONS,
        "",
        *(_container_lines(*inside) if inside else []),
        "# 1. The dataset must be prepared before launch (never downloaded by several ranks at once).",
        run_in
        + '"$PY" -c '
        + shlex.quote(
            "from hpml_lab.config import RunConfig; from hpml_lab.data import check_dataset; "
            f"print({json.dumps('dataset:')}, check_dataset(RunConfig(dataset={json.dumps(cfg.dataset)}, "
            f"data_root={json.dumps(cfg.data_root)})))"
        ),
        "",
    ]
    if not train:
        launch = ["# 2. (no training step: --no-train)"]
    elif nodes == 1:
        launch = [
            f"# 2. Distributed training, results under results/{task.id}/ (written by rank 0 only; skipped "
            f"when",
            "#    that run is already complete, so a resubmitted job goes straight on).",
            f'step {run_in}"$PY" -m torch.distributed.run --standalone --nproc-per-node={per_node} \\',
            f"    -m hpml_lab --task {task.id} {train_flags} --if-missing true",
        ]
    else:
        launch = [
            f"# 2. Distributed training, results under results/{task.id}/ (written by rank 0 only; skipped "
            f"when",
            "#    that run is already complete, so a resubmitted job goes straight on).",
            'HEAD_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
            "HEAD_ADDR=$(scontrol show node \"$HEAD_NODE\" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2 || true)",
            "HEAD_ADDR=${HEAD_ADDR:-$HEAD_NODE}",
            f"RDZV_PORT=${{RDZV_PORT:-{RDZV_PORT}}}",
            'echo "rendezvous on $HEAD_NODE ($HEAD_ADDR:$RDZV_PORT) for $SLURM_NNODES nodes"',
            "# one task per node (the job's SLURM_NTASKS would otherwise set the task count), holding the "
            "node's CPUs",
            f'step srun --nodes="$SLURM_NNODES" --ntasks="$SLURM_NNODES" --ntasks-per-node=1 '
            f"--cpus-per-task={cpus_per_gpu * gpus if gpus else per_node * cpus_per_task} \\",
            f'    {run_in}"$PY" -m torch.distributed.run --nnodes="$SLURM_NNODES" '
            f"--nproc-per-node={per_node} \\",
            '    --rdzv-id="$SLURM_JOB_ID" --rdzv-backend=c10d --rdzv-endpoint="$HEAD_ADDR:$RDZV_PORT" \\',
            f"    -m hpml_lab --task {task.id} {train_flags} --if-missing true",
        ]
    tail = (
        [
            "",
            "# 3. The notebook through papermill (log output), then its HTML report; one process, never a "
            "rank.",
            f'step {run_in}"$PY" -m hpml_lab.report.cli run {task.id} --profile {profile} '
            f"{run_params}".rstrip(),
            f'echo "report: reports/{task.id}.html"',
            "",
        ]
        if report
        else ["", "# 3. (no notebook step: --no-report)", ""]
    )
    return "\n".join(head + launch + tail)


def write(task_id: str, out: str | None = None, force: bool = False, say=print, **kw) -> Path:
    """Render and write the script (atomically); returns its path (default slurm/<task>-<nodes>x<gpus>.sbatch,
    <task>-<nodes>x<N>cpu.sbatch for CPU jobs). A script there that was edited since hpml-lab wrote it is
    refused (ConfigError, nothing written), or with `force` kept as NAME.edited and said through `say`."""
    text = written.signed(render(task_id, **kw))
    gpus, _ = _gpus_and_gres(kw.get("gpus"), kw.get("gres"))
    shape = (
        f"{kw.get('nodes', 1)}x{gpus}"
        if gpus
        else f"{kw.get('nodes', 1)}x{kw.get('ntasks_per_node') or 1}cpu"
    )
    path = Path(out) if out else output_path("slurm") / f"{task_id}-{shape}.sbatch"
    kept = written.replace(
        path,
        text,
        force,
        "-o NEW.sbatch writes the new job beside it",
        follow_links=bool(out),  # -o names the user's own file: a link is theirs
    )
    if kept:
        say(kept)
    path.chmod(0o755)
    return path
