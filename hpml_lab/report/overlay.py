"""The script that prepares an Apptainer (or Singularity) overlay for hpml-lab jobs: an ext3 overlay image
holding a Python environment with hpml-lab, its tested pins and the `hpml-lab` Jupyter kernel, the way NYU
Greene's guide prepares one by hand (an overlay, a Python inside it under /ext3, the packages, then jobs that
mount it read-only).

    hpml-lab overlay --container lab.sif --overlay overlay.ext3 [--cuda cu126] [--size 15G]
    bash slurm/overlay.sh        # the script it wrote: once, on a login node (it needs the package index)
    hpml-lab slurm c2 --container lab.sif --overlay overlay.ext3:ro --python /ext3/env/bin/python

What the script does, in order, saying each step:
  0. picks `apptainer`, else `singularity`; checks the image; makes the overlay if it is missing
     (`apptainer overlay create --size MB FILE`; Greene's ready-made empty overlays can be copied there
     instead);
  1. inside the container with the overlay writable: the interpreter: --base-python, else the image's
     `python3` if it is 3.11 or newer, else Miniforge installed under /ext3/miniforge3 (Greene's way);
  2. a virtual environment at --env (default /ext3/env);
  3. torch and torchvision at the pinned versions, from --torch-index (or the PyTorch index for --cuda) where
     the cluster's driver needs another CUDA build than the package index's (`nvidia-smi` says which CUDA it
     supports);
  4. hpml-lab from this checkout with constraints.txt (not editable: the overlay holds everything it needs);
  5. the `hpml-lab` kernel in the environment itself (`ipykernel install --sys-prefix`: inside the overlay,
     where a `--user` kernel under $HOME would name a Python the host does not have);
  6. a check: hpml-lab imports, the kernel is found, torch says its version and CUDA build.
The installs use uv where it is on PATH (faster, the same pins), else pip. An overlay given as a folder
(Apptainer takes folders too) gets no `overlay create`.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from ..config import ConfigError, output_path, project_root
from . import slurm, written

TORCH_INDEX = "https://download.pytorch.org/whl/{cuda}"
_CUDA = re.compile(r"^(cu[0-9]{3}|cpu)$", re.ASCII)
_SIZE = re.compile(r"^([1-9][0-9]{0,6})([MG])$", re.ASCII)
MINIFORGE = "https://github.com/conda-forge/miniforge/releases/latest/download/Miniforge3-Linux-x86_64.sh"

# Run inside the container as `bash -c INSTALL hpml-overlay ENV CHECKOUT TORCH_INDEX BASE_PYTHON`.
INSTALL = r"""
set -euo pipefail
env_dir=$1; checkout=$2; torch_index=$3; base=$4
say() { echo "overlay: $*"; }
old_enough() { "$1" -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }
if [ -z "$base" ]; then
    if command -v python3 >/dev/null 2>&1 && old_enough python3; then
        base=$(command -v python3)
    else
        forge=$(dirname "$env_dir")/miniforge3
        if [ ! -x "$forge/bin/python" ]; then
            say "the image has no Python 3.11 or newer: installing Miniforge into $forge"
            tmp=$(mktemp -d)
            if command -v curl >/dev/null 2>&1; then curl -fsSL -o "$tmp/forge.sh" "$MINIFORGE_URL"
            else wget -q -O "$tmp/forge.sh" "$MINIFORGE_URL"; fi
            bash "$tmp/forge.sh" -b -p "$forge" >/dev/null
            rm -rf "$tmp"
        fi
        base=$forge/bin/python
    fi
fi
old_enough "$base" || {
    echo "overlay: $base is not Python 3.11 or newer (with venv); pass --base-python" >&2
    exit 2
}
say "Python: $base ($("$base" -c 'import sys; print(sys.version.split()[0])'))"
if command -v uv >/dev/null 2>&1; then
    install() { uv pip install --python "$env_dir/bin/python" --quiet "$@"; }
    [ -x "$env_dir/bin/python" ] || "$base" -m venv --without-pip "$env_dir"
else
    install() { "$env_dir/bin/python" -m pip install --quiet --disable-pip-version-check "$@"; }
    [ -x "$env_dir/bin/python" ] || "$base" -m venv "$env_dir"
fi
say "environment: $env_dir"
if [ -n "$torch_index" ]; then
    say "torch and torchvision (the pinned versions) from $torch_index"
    install -c "$checkout/constraints.txt" --index-url "$torch_index" torch torchvision
fi
say "hpml-lab and its pins from $checkout (a few minutes: torch is large)"
install -c "$checkout/constraints.txt" "$checkout"
"$env_dir/bin/python" -m ipykernel install --sys-prefix --name hpml-lab \
    --display-name "Python (hpml-lab)" >/dev/null
spec=$("$env_dir/bin/python" -m jupyter kernelspec list | grep -w hpml-lab) || {
    echo "overlay: the kernel hpml-lab is not found" >&2
    exit 1
}
say "kernel: $spec"
"$env_dir/bin/python" -c 'import hpml_lab, torch
print("overlay: ready: hpml-lab", hpml_lab.__version__, "torch", torch.__version__,
      "CUDA build", torch.version.cuda or "none")'
"""


def check_size(size: str) -> int:
    """--size as a count of MiB for `apptainer overlay create --size` (e.g. 15G, 500M)."""
    m = _SIZE.match(size)
    if not m:
        raise ConfigError(f"--size takes a whole number of M or G (e.g. 15G), got {size[:40]!r}")
    return int(m.group(1)) * (1024 if m.group(2) == "G" else 1)


def torch_index(cuda: str | None, index: str | None) -> str:
    """The index torch and torchvision come from: --torch-index URL, or --cuda's PyTorch index, or '' (the
    package index's build, as constraints.txt pins it)."""
    if cuda is not None and index is not None:
        raise ConfigError("--cuda and --torch-index both name torch's index: give one")
    if cuda is not None:
        if not _CUDA.match(cuda):
            raise ConfigError(
                f"--cuda takes a PyTorch build tag such as cu126, cu128 or cpu, got {cuda[:40]!r}"
            )
        return TORCH_INDEX.format(cuda=cuda)
    if index is not None:
        if not re.match(r"^(https?://[^/\s]+|file:///)\S*$", index, re.ASCII) or not index.isprintable():
            raise ConfigError(
                f"--torch-index takes a package index's URL (https://..., or file:/// for a folder of "
                f"wheels), got {index[:60]!r}"
            )
        return index
    return ""


def _checkout() -> str:
    """The checkout to install: the project's folder, else the one this package was imported from (an editable
    install, or PYTHONPATH, run from another folder)."""
    import hpml_lab

    for folder in (project_root(), Path(hpml_lab.__file__).resolve().parent.parent):
        if (folder / "constraints.txt").is_file() and (folder / "pyproject.toml").is_file():
            return str(folder)
    return str(project_root())


def render(
    container: str,
    overlay: str,
    env: str = "/ext3/env",
    size: str = "15G",
    cuda: str | None = None,
    index: str | None = None,
    base_python: str | None = None,
    binds: list[str] | None = None,
    checkout: str | None = None,
) -> str:
    """The overlay script's text (see the module's docstring); every option checked here, in one line each."""
    size_mb = check_size(size)
    url = torch_index(cuda, index)
    if ":" in overlay:
        raise ConfigError(
            f"--overlay names the file to make or fill (it is mounted writable while the script runs), "
            f"without :ro or :rw, got {overlay!r}"
        )
    if not env.startswith("/") or any(c.isspace() or ord(c) < 32 for c in env) or env.rstrip("/") == "":
        raise ConfigError(
            f"--env is a folder inside the container, absolute and without spaces (e.g. /ext3/env), got "
            f"{env!r}"
        )
    env = env.rstrip("/")
    if base_python is not None:
        slurm.check_python(base_python, container=True)
    args, files = slurm.container_command(container, overlay + ":rw", binds, gpus=0)
    image, overlay_file = files[0], files[1]
    checkout = os.path.abspath(checkout or _checkout())
    if not (Path(checkout) / "constraints.txt").is_file():
        raise ConfigError(
            f"{checkout} has no constraints.txt: run `hpml-lab overlay` from the hpml-lab checkout"
        )
    q = shlex.quote
    lines = [
        "#!/bin/bash",
        "# Written by `hpml-lab overlay`: hpml-lab's Python environment inside an overlay, for jobs in a "
        "container.",
        f"#   image {image}; overlay {overlay_file} (made if missing: {size_mb} MiB, ext3)",
        f"#   environment {env}",
        f"#   torch from {url or 'the package index (constraints.txt: CUDA 13 builds, a recent driver)'}",
        "# Run it once where the package index is reachable (a login node): bash THIS-FILE. Then:",
        f"#   hpml-lab slurm TASK --container {q(image)} --overlay {q(overlay_file)}:ro --python "
        f"{env}/bin/python",
        "set -euo pipefail",
        "if command -v apptainer >/dev/null 2>&1; then CONTAINER_CMD=apptainer",
        "elif command -v singularity >/dev/null 2>&1; then CONTAINER_CMD=singularity",
        'else echo "hpml-lab: neither apptainer nor singularity is on PATH (module load apptainer?)" >&2; '
        "exit 2",
        "fi",
        f"if [ ! -f {q(image)} ]; then echo {q(f'hpml-lab: the image {image} does not exist')} >&2; exit 2; "
        f"fi",
        *(
            [
                f"for f in {' '.join(q(f) for f in files[2:])}; do",
                '    if [ ! -e "$f" ]; then echo "hpml-lab: $f does not exist" >&2; exit 2; fi',
                "done",
            ]
            if files[2:]
            else []
        ),
        f"if [ ! -e {q(overlay_file)} ]; then",
        f'    echo "overlay: making {overlay_file} ({size_mb} MiB, ext3) with $CONTAINER_CMD overlay create"',
        f'    "$CONTAINER_CMD" overlay create --size {size_mb} {q(overlay_file)}',
        "fi",
        f"export MINIFORGE_URL={q(MINIFORGE)}",
        f"INSTALL={q(INSTALL.strip())}",
        f'"$CONTAINER_CMD" {" ".join(q(a) for a in args)} bash -c "$INSTALL" hpml-overlay '
        f"{q(env)} {q(checkout)} {q(url)} {q(base_python or '')}",
        f'echo "overlay: done; jobs: hpml-lab slurm TASK --container {image} --overlay {overlay_file}:ro '
        f'--python {env}/bin/python"',
    ]
    return "\n".join(lines) + "\n"


def write(out: str | None = None, force: bool = False, say=print, **kw) -> Path:
    """Render and write the script (default slurm/overlay.sh); an edited one there is refused (written.py)."""
    text = written.signed(render(**kw))
    path = Path(out) if out else output_path("slurm") / "overlay.sh"
    kept = written.replace(
        path, text, force, "-o NEW.sh writes the new script beside it", follow_links=bool(out)
    )
    if kept:
        say(kept)
    path.chmod(0o755)
    return path
