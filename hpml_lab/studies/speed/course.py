"""The course's own Lab 2 code (lab2.py of th-blitz/ResNet18-optimizations), run as written on this device in
its own process: the baseline a student starts from, beside the ladder's fastest epoch.

    from hpml_lab.studies.speed import course
    info = course.measure(data_root, device, epochs=4)    # the record meta.json keeps under "course"

The code is not part of this project: it is looked for in $HPML_COURSE_LAB2, in .whl/course-lab2 (where `make
gpu-wheels` copies it, so that it travels to a GPU machine with the wheels) and in ../shared/reference/
course-lab2 beside the checkout. lab2.py calls torch.cuda.synchronize() after every step, so it runs on a CUDA
device only; anywhere else the record says why it did not run. On the synthetic CIFAR-10 it runs through the
folder's run_on_synthetic.py, which gives torchvision the synthetic files' checksums and changes nothing else;
on the real data set, lab2.py itself. Its epochs are the times it prints ("Time taken for Epoch"), each a wall
clock over its whole loop, loading included; the first (workers' start, cuDNN's search) is not compared.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from ...config import project_root
from ...sanity import machine_load

ENV = "HPML_COURSE_LAB2"
WHEEL_COPY = Path(".whl") / "course-lab2"  # relative to the project's root: what `make gpu-wheels` writes
BESIDE = Path("..") / "shared" / "reference" / "course-lab2"
# lab2.py's own defaults (its argparse): the run keeps them, "as written"
WORKERS = 2
BATCH = 128
START_S, EPOCH_S = 60.0, 30.0  # timeout_s(): the script's start, and each epoch's allowance

_EPOCH = re.compile(r"Time taken for Epoch\s*:\s*([0-9.]+)\s*sec")
_PARTS = re.compile(
    r"Load Time for epoch\s*:\s*([0-9.]+)\s*sec with\s+(\d+)\s+workers.*Train Time\s*:\s*([0-9.]+)"
)
_LOSS = re.compile(r"Avg Loss\s*:\s*([0-9.naif]+)\s*\|\s*Avg Accuracy\s*:\s*([0-9.naif]+)\s*%")


def places(root: Path | None = None) -> list[Path]:
    """Where the course's code is looked for, in order: $HPML_COURSE_LAB2, the project's .whl/course-lab2,
    ../shared/reference/course-lab2 beside the project."""
    root = Path(root) if root is not None else project_root()
    env = os.environ.get(ENV)
    return ([Path(env)] if env else []) + [root / WHEEL_COPY, root / BESIDE]


def find(root: Path | None = None) -> Path | None:
    """The first of places() holding lab2.py; None where none does."""
    for folder in places(root):
        if (folder / "lab2.py").is_file():
            return folder.resolve()
    return None


def why_not(
    device, folder: Path | None, epochs: int, ladder=None, data_root: str | Path | None = None
) -> str:
    """Why the course's code cannot run here, or its epochs would not compare with the ladder's ('' where it
    can), in words without digits (the answer box states them). `ladder`: the ladder's RunConfig; the course's
    script trains its ResNet-18 on the whole CIFAR-10 training set, so a ladder of another network, data set
    or a subset has nothing to set beside it. `data_root`: synthetic data needs the folder's
    run_on_synthetic.py."""
    if epochs < 2:
        return (
            "this profile leaves the course's script out (course_epochs below two: no epoch after the first)"
        )
    if getattr(device, "type", str(device)) != "cuda":
        return "the course's script synchronizes CUDA after every step, so it runs on a GPU only"
    if ladder is not None and (ladder.model != "resnet18" or ladder.dataset != "cifar10" or ladder.subset):
        return (
            "the ladder trains another network or other images than the course's script, which trains the "
            "lab's network on the lab's whole training set, so their epochs would not compare"
        )
    if folder is None:
        return (
            f"the course's script was not found (${ENV}, the wheels' folder or the shared reference folder "
            "beside the project: `looked_in` in the record)"
        )
    if data_root is not None and _synthetic(data_root) and not (folder / "run_on_synthetic.py").is_file():
        return (
            "the course's folder has no run_on_synthetic.py, which gives torchvision the synthetic data's "
            "checksums, so its script cannot read the synthetic data"
        )
    return ""


def _synthetic(data_root: str | Path) -> bool:
    return (Path(data_root) / "cifar-10-batches-py" / "SYNTHETIC.json").is_file()


def command(folder: Path, data_root: str | Path, epochs: int) -> tuple[list[str], dict[str, str]]:
    """(argv, the environment's additions) that run lab2.py as written for `epochs` epochs on CUDA: through
    run_on_synthetic.py on the synthetic CIFAR-10 (its SYNTHETIC.json beside the batches), else lab2.py with
    its own flags, at its default workers and batch."""
    data_root = Path(data_root).resolve()
    if _synthetic(data_root):
        env = {"ROOT": str(data_root), "W": str(WORKERS), "E": str(epochs), "B": str(BATCH)}
        return [sys.executable, str(folder / "run_on_synthetic.py")], env
    argv = [
        sys.executable,
        str(folder / "lab2.py"),
        "--device=cuda",
        f"--num-of-workers={WORKERS}",
        f"--epochs={epochs}",
        f"--batch-size={BATCH}",
        f"--dataset-path={data_root}",
        "--download-data=false",
        "--print-epochs=true",
    ]
    return argv, {}


def parse(stdout: str) -> list[dict[str, Any]]:
    """Each epoch lab2.py printed: its seconds (the whole loop), the loading and training seconds it summed,
    the workers it said, and its mean loss and accuracy (%)."""
    epochs: list[dict[str, Any]] = []
    for line in stdout.splitlines():
        if m := _EPOCH.search(line):
            epochs.append({"seconds": float(m.group(1))})
        elif (m := _PARTS.search(line)) and epochs:
            epochs[-1].update(load_s=float(m.group(1)), workers=int(m.group(2)), train_s=float(m.group(3)))
        elif (m := _LOSS.search(line)) and epochs:
            epochs[-1].update(loss=float(m.group(1)), accuracy=float(m.group(2)))
    return epochs


def timeout_s(epochs: int) -> float:
    """How long the course's run may take: its start and about three times an epoch's 9 s on an H100 for each
    epoch, so that a hung run ends well inside the GPU check's command (which would otherwise stop the whole
    speed task)."""
    return START_S + EPOCH_S * epochs


def measure(
    data_root: str | Path, device, epochs: int, ladder=None, root: Path | None = None, log=print
) -> dict[str, Any]:
    """Run the course's lab2.py for `epochs` epochs in its own process, or say why not: the record meta.json
    keeps ("status" measured, not run or failed, "why", "epochs" as parse() reads them, its workers and batch,
    the folder and command, and the machine's load before and after). A run that fails or outlasts
    timeout_s() is killed and said, never raised: the ladder's answers stand without it."""
    folder = find(root)
    info: dict[str, Any] = {
        "status": "not run",
        "why": why_not(device, folder, epochs, ladder, data_root),
        "workers": WORKERS,
        "batch_size": BATCH,
        "epochs_asked": epochs,
        "folder": str(folder or ""),
        "looked_in": [str(f) for f in places(root)],
    }
    if info["why"]:
        return info
    argv, env = command(folder, data_root, epochs)
    info["command"] = " ".join(f"{k}={v}" for k, v in env.items()) + (" " if env else "") + " ".join(argv)
    info["timeout_s"] = timeout_s(epochs)
    log(f"course: lab2.py as written, {epochs} epochs, in its own process")
    before = machine_load()
    proc = subprocess.Popen(
        argv,
        cwd=folder,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",  # a byte its output cannot decode is no reason to lose the ladder's page
    )
    try:
        out, err = proc.communicate(timeout=info["timeout_s"])
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        ran = parse(out)
        return {
            **info,
            "status": "failed",
            "epochs": ran,
            "why": "the course's script did not finish within its time limit (`timeout_s` in the record)",
        }
    except BaseException:  # interrupted (a job's time limit, Ctrl-C): the script ends with the task
        proc.kill()
        proc.wait()
        raise
    ran = parse(out)
    info.update(load_before=before, load_after=machine_load(), epochs=ran)
    if proc.returncode != 0 or len(ran) < epochs:
        last = (err.strip().splitlines() or ["no output"])[-1][:200]
        return {
            **info,
            "status": "failed",
            "why": f"the course's lab2.py ended with code {proc.returncode} after {len(ran)} epochs: {last}",
        }
    return {**info, "status": "measured", "why": ""}
