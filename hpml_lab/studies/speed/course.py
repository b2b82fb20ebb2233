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
TIMEOUT_S = 900.0

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


def why_not(device, folder: Path | None, epochs: int) -> str:
    """Why the course's code cannot run here ('' where it can), in words without digits (the answer box
    states them)."""
    if epochs < 2:
        return (
            "this profile leaves the course's script out (course_epochs below two: no epoch after the first)"
        )
    if getattr(device, "type", str(device)) != "cuda":
        return "the course's script synchronizes CUDA after every step, so it runs on a GPU only"
    if folder is None:
        return (
            f"the course's script was not found (${ENV}, the wheels' folder or the shared reference folder "
            "beside the project: `looked_in` in the record)"
        )
    return ""


def command(folder: Path, data_root: str | Path, epochs: int) -> tuple[list[str], dict[str, str]]:
    """(argv, the environment's additions) that run lab2.py as written for `epochs` epochs on CUDA: through
    run_on_synthetic.py on the synthetic CIFAR-10 (its SYNTHETIC.json beside the batches), else lab2.py with
    its own flags, at its default workers and batch."""
    data_root = Path(data_root).resolve()
    if (data_root / "cifar-10-batches-py" / "SYNTHETIC.json").is_file():
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


def measure(
    data_root: str | Path, device, epochs: int, root: Path | None = None, log=print
) -> dict[str, Any]:
    """Run the course's lab2.py for `epochs` epochs in its own process, or say why not: the record meta.json
    keeps ("status" measured or not run, "why", "epochs" as parse() reads them, its workers and batch, the
    folder and command, and the machine's load before and after)."""
    folder = find(root)
    info: dict[str, Any] = {
        "status": "not run",
        "why": why_not(device, folder, epochs),
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
    log(f"course: lab2.py as written, {epochs} epochs, in its own process")
    before = machine_load()
    try:
        done = subprocess.run(
            argv,
            cwd=folder,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return {**info, "why": f"the course's lab2.py did not finish: {type(e).__name__}"}
    ran = parse(done.stdout)
    info.update(load_before=before, load_after=machine_load(), epochs=ran)
    if done.returncode != 0 or len(ran) < epochs:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return {
            **info,
            "why": f"the course's lab2.py ended with code {done.returncode} after {len(ran)} epochs: {last}",
        }
    return {**info, "status": "measured", "why": ""}
