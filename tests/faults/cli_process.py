"""Shared shapes of the fault tests that need a real process: an hpml-lab command (`python -m MODULE`, this
tree first on PYTHONPATH) in a subprocess, with its own output folder (and temporary folder, where its
kernel's sockets go) when given one; a run of C1 at the tiny profile; a wait with a deadline; the kernels a
run started."""

import os
import subprocess
import sys
import time
from pathlib import Path

TREE = str(Path(__file__).resolve().parents[2])


def start(args, out=None, *, module="hpml_lab.report.cli", stdout=subprocess.PIPE, env=None, **popen):
    """`python -m MODULE ARGS` (text, stderr piped); with `out`, writing under it (HPML_OUTPUT_DIR, TMPDIR).
    `env` adds variables; `popen` goes to Popen (e.g. preexec_fn)."""
    path = os.environ.get("PYTHONPATH", "")
    e = {**os.environ, "PYTHONPATH": TREE + (os.pathsep + path if path else "")}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        e.update(HPML_OUTPUT_DIR=str(out), TMPDIR=str(out))
    return subprocess.Popen(
        [sys.executable, "-m", module, *map(str, args)],
        env={**e, **(env or {})},
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def run_c1(cifar_root, out, *params, **kw) -> subprocess.Popen:
    """`hpml-lab run c1 --profile tiny -p data_root=... -p PARAM...` under `out`."""
    extra = [a for p in params for a in ("-p", p)]
    return start(["run", "c1", "--profile", "tiny", "-p", f"data_root={cifar_root}", *extra], out, **kw)


def wait_for(condition, timeout: float = 120, every: float = 0.2):
    """condition()'s first true value within `timeout` seconds, else None."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = condition()
        if got:
            return got
        time.sleep(every)
    return None


def kernels_of(pid: int) -> list:
    """The Jupyter kernels process `pid` started (psutil processes)."""
    import psutil

    found = []
    try:
        children = psutil.Process(pid).children()
    except psutil.Error:
        return []
    for c in children:
        try:
            if c.environ().get("JPY_PARENT_PID") == str(pid):
                found.append(c)
        except psutil.Error:
            continue
    return found
