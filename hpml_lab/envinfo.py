"""What ran the numbers: versions, hardware, commit. Recorded next to every result.

from hpml_lab.envinfo import environment
environment()   # {'python': '3.11.7', 'torch': '2.11.0', 'cpu': ..., 'gpu': None, ...}
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import socket
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .sanity import usable_cores

if TYPE_CHECKING:
    import torch


def _cpu_model() -> str:
    from .flops import cpu_model  # kept there: a measured peak is keyed by it

    return cpu_model()


def commit_label(commit: str, dirty: bool | None = False) -> str:
    """A commit as pages and the index name it: its first 10 characters, and uncommitted changes if any."""
    return str(commit)[:10] + (" (uncommitted changes)" if dirty else "")


# What a provenance file vouches for: the code that runs (the package, the notebooks, the tests a GPU check
# runs, the package's settings)
TREE_PARTS = ("hpml_lab", "notebooks", "tests", "pyproject.toml")


def tree_digest(root: str | os.PathLike) -> str:
    """sha256 over the paths and contents of the tree's code (TREE_PARTS: its .py and .ipynb files, the tests'
    that the GPU check's CUDA unit runs among them, and pyproject.toml; caches left out): equal where the same
    code was sent, so a provenance file written for one tree is not taken for another's (a GPU machine gets
    the tree without .git)."""
    import hashlib

    root = Path(root)
    files = []
    for part in TREE_PARTS:
        p = root / part
        if p.is_file():
            files.append(p)
        elif p.is_dir():
            files += [
                f
                for f in p.rglob("*")
                if f.suffix in (".py", ".ipynb")
                and f.is_file()
                and "__pycache__" not in f.parts
                # hidden folders (.ipynb_checkpoints) are ignored by git and never reach a GPU machine
                and not any(part.startswith(".") for part in f.relative_to(root).parts)
            ]
    h = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.relative_to(root).as_posix()):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def code_root() -> Path:
    """The tree whose code is running: the folder that holds the imported hpml_lab package (the project's
    home, HPML_LAB_HOME, may be another folder)."""
    return Path(__file__).resolve().parents[1]


def provenance_problem(rec: Any, root: str | os.PathLike | None = None) -> str:
    """Why a provenance record does not vouch for the code at `root` (default: code_root(), the code running),
    in one line; "" where it does."""
    root = code_root() if root is None else root
    if not isinstance(rec, dict) or not rec.get("commit"):
        return "it names no commit"
    if "tree" not in rec:
        return f"it was written for commit {str(rec['commit'])[:10]} by an older kit, which recorded no tree"
    if rec["tree"] != tree_digest(root):
        when = rec.get("written_at", "at an unknown time")
        return (
            f"it was written for commit {str(rec['commit'])[:10]} ({when}), and this tree's code differs "
            "from the code it was written for"
        )
    return ""


@lru_cache(maxsize=1)
def git_commit() -> dict[str, Any]:
    """Commit of the hpml-lab checkout in use and whether it had uncommitted changes (tracked files). Where
    the tree is no git checkout of its own (a copy sent to a GPU machine without .git), or a checkout with
    uncommitted changes (a GPU machine's copy: an older checkout with this tree laid over it, which read
    "<that older commit> (dirty)" on every page of the H200's check of 2026-11-28), the provenance file that
    `make gpu-wheels` wrote beside the carried wheels says it (HPML_PROVENANCE, else .whl/provenance.json),
    where it was written for this tree's code (tree_digest); else the checkout's own, or "unknown"."""
    from .config import project_root

    root = project_root()

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10
        ).stdout.strip()

    try:  # the tree's own checkout only: a copy inside some other repository is not that repository's commit
        top = git("rev-parse", "--show-toplevel")
        sha = git("rev-parse", "HEAD") if top and Path(top).resolve() == root.resolve() else ""
        dirty = sha != "" and git("status", "--porcelain", "--untracked-files=no") != ""
    except (OSError, subprocess.SubprocessError):
        sha, dirty = "", False
    if sha and not dirty:
        return {"commit": sha, "dirty": dirty}
    for path in (os.environ.get("HPML_PROVENANCE"), root / ".whl" / "provenance.json"):
        try:
            rec = json.loads(Path(path).read_text()) if path else None
        except (OSError, ValueError):
            rec = None
        # only a record written for this very code: a stale .whl would name an older commit on every result
        if rec is not None and not provenance_problem(rec):
            return {"commit": str(rec["commit"]), "dirty": rec.get("dirty")}
    return {"commit": sha, "dirty": dirty} if sha else {"commit": "unknown", "dirty": None}


@lru_cache(maxsize=1)
def torchvision_version() -> str | None:
    """torchvision.__version__ (with its build tag, as 0.26.0+cu130; the package metadata says 0.26.0), read
    from its version.py where torchvision is not imported yet: importing it imports torch._dynamo
    (torchvision.ops), 2-3 s of CPU in a process that trains nothing, such as `hpml-lab run`'s parent. None
    where it is missing."""
    import ast
    import importlib.util

    if "torchvision" in sys.modules:
        return sys.modules["torchvision"].__version__
    spec = importlib.util.find_spec("torchvision")  # finds the package without running its __init__
    try:
        tree = ast.parse(Path(spec.origin).with_name("version.py").read_text())
    except (AttributeError, TypeError, OSError, SyntaxError):
        tree = None
    for node in tree.body if tree else []:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__version__"]:
            with contextlib.suppress(ValueError):
                return str(ast.literal_eval(node.value))
    try:  # a layout this reading does not know: ask the package itself
        import torchvision
    except ImportError:
        return None
    return torchvision.__version__


def environment(device: torch.device | str | None = None) -> dict[str, Any]:
    import torch  # here, not at the top: the command line's front imports this module and needs no torch

    from .flops import tf32_state

    cuda = torch.cuda.is_available()
    gpu = None
    if cuda:
        idx = (
            torch.device(device).index if device is not None and torch.device(device).type == "cuda" else None
        )
        idx = idx if idx is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(idx)
        gpu = {
            "name": props.name,
            "count": torch.cuda.device_count(),
            "memory_gib": round(props.total_memory / 2**30, 1),
            "capability": f"{props.major}.{props.minor}",
        }
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": torchvision_version(),
        "cuda": torch.version.cuda if cuda else None,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        # what "fp32" meant: cuDNN convolutions run in TF32 on Ampere and later unless allow_tf32 is off
        "cudnn_benchmark": torch.backends.cudnn.benchmark if cuda else None,
        "tf32": tf32_state() if cuda else None,
        "gpu": gpu,
        "cpu": _cpu_model(),
        "cpu_cores": usable_cores(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        **git_commit(),
    }


def hardware_label(env: dict[str, Any]) -> str:
    """A short one-line name of the machine, for tables and report headers."""
    if env.get("gpu"):
        g = env["gpu"]
        return f"{g['count']}x {g['name']}" if g["count"] > 1 else g["name"]
    return f"CPU: {env['cpu']} ({env['cpu_cores']} cores)"
