"""What ran the numbers: versions, hardware, commit. Recorded next to every result.

from hpml_lab.envinfo import environment
environment()   # {'python': '3.11.7', 'torch': '2.11.0', 'cpu': ..., 'gpu': None, ...}
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from functools import lru_cache
from typing import Any

import torch

from .flops import tf32_state


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@lru_cache(maxsize=1)
def git_commit() -> dict[str, Any]:
    """Commit of the hpml-lab checkout in use and whether it had uncommitted changes."""
    from .config import project_root

    root = project_root()
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = (
            subprocess.run(
                ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
            != ""
        )
    except (OSError, subprocess.SubprocessError):
        sha, dirty = "", False
    return {"commit": sha or "unknown", "dirty": dirty if sha else None}


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def environment(device: torch.device | str | None = None) -> dict[str, Any]:
    import torchvision

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
        "torchvision": torchvision.__version__,
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
