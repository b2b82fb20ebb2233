"""Shared shapes of the fault tests that need a real process: the hpml-lab command in a subprocess with its own
output folder (and temporary folder, where its kernel's sockets go), a run of C1 at the tiny profile, a wait with
a deadline, and the kernels a run started."""

import os
import subprocess
import sys
import time


def start(args, out, stdout=subprocess.PIPE, **env) -> subprocess.Popen:
    """`python -m hpml_lab.report.cli ARGS` writing under `out` (HPML_OUTPUT_DIR and TMPDIR), stderr piped."""
    out.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "hpml_lab.report.cli", *args],
        env={**os.environ, "HPML_OUTPUT_DIR": str(out), "TMPDIR": str(out), **env},
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
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
