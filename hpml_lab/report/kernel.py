"""The kernel a task's notebook runs in, as the runner starts it: its connection (Unix sockets in a private
folder), its environment (put back afterwards), and the signals that stop it (passed on, with a grace to
record the run's end).

    with kernel.environment(), kernel.ipc_sockets() as config, kernel.stops_with_us() as stopped:
        papermill.execute_notebook(..., config=config)
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from .. import results
from ..config import project_root
from . import answer_box, guards


@contextlib.contextmanager
def ipc_sockets():
    """Kernel connection settings for one task: the kernel talks to the runner over Unix sockets in a private
    temporary folder, not TCP on localhost, so nothing else on a shared node can connect to it (and ipykernel
    7 does not warn that it runs unencrypted). The folder is per task and removed after it: no socket file is
    left in the working folder, also when a run is killed, and two jobs sharing a folder never collide. The
    kernel keeps no history database (nothing to write, so nothing to fail, on a full disk)."""
    import shutil
    import tempfile

    from traitlets.config import Config

    for stale in Path(tempfile.gettempdir()).glob("hpml-kernel-*-*"):  # left by a run killed with -9
        pid = stale.name.split("-")[2]
        if pid.isdigit() and not guards.alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    with tempfile.TemporaryDirectory(
        prefix=f"hpml-kernel-{os.getpid()}-"
    ) as folder:  # short: a socket path has 107 bytes
        # a kernel stopped while it runs a cell (SIGTERM, Ctrl-C) is killed, not asked to shut down: asked, it
        # closes its sockets under the running cell and prints a ZMQError traceback
        yield Config(
            {
                "KernelManager": {"transport": "ipc", "ip": os.path.join(folder, "k")},
                # no IPython history database: nbclient turns it off only for kernels named python3; ours kept
                # an sqlite file under ~/.ipython whose traceback on a full disk stood beside the project's
                # own line
                "NotebookClient": {
                    "shutdown_kernel": "immediate",
                    "extra_arguments": ["--HistoryManager.enabled=False"],
                },
            }
        )


KERNEL_GRACE_S = 30  # how long a signalled kernel may take to record its run's end before it is killed


def our_kernels() -> list:
    """The kernel processes this process started (jupyter_client gives each a JPY_PARENT_PID of ours and a
    session of its own, so a signal to our pid or our group never reaches them)."""
    import psutil

    found = []
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return []
    for c in children:
        try:
            if c.environ().get("JPY_PARENT_PID") == str(os.getpid()):
                found.append(c)
        except psutil.Error:  # ended meanwhile, or not ours to read
            continue
    return found


@contextlib.contextmanager
def stops_with_us(grace: float = KERNEL_GRACE_S):
    """While a notebook runs: SIGINT, SIGTERM or SIGHUP to this process (its pid alone or its group) is passed
    to the kernel as SIGTERM, so a run inside it ends `interrupted` (train()'s own handler records it) and the
    notebook ends; a kernel outside train(), or still starting, ends quietly. The signal is kept in the list
    yielded, for the caller's outcome and exit status. No kernel yet, a second signal, or `grace` seconds
    without an end: the signal is raised here (KeyboardInterrupt, results.Interrupted for SIGTERM/SIGHUP).
    On the way out every kernel of ours still alive is killed with its process group, before its socket folder
    goes: one left starting printed a 25-line ZMQError when it could not bind its socket."""
    import signal

    got: list[KeyboardInterrupt] = []
    quiet = logging.getLogger("papermill")  # the notebook client logs through papermill's logger
    level = quiet.level

    def stop_now(signum=None, frame=None):
        raise got[0]

    def handler(signum, frame):
        if got:  # a second signal: no more waiting
            raise got[0]
        e = (
            KeyboardInterrupt()
            if signum == signal.SIGINT
            else results.Interrupted(f"signal {signal.Signals(signum).name}")
        )
        e.signum = signum
        got.append(e)
        quiet.setLevel(logging.CRITICAL)  # its "Kernel died before replying" about the kernel stopped here
        kernels = our_kernels()
        if not kernels:
            raise e
        for k in kernels:
            with contextlib.suppress(Exception):
                k.send_signal(signal.SIGTERM)
        signal.signal(signal.SIGALRM, stop_now)
        signal.alarm(max(1, int(grace)))

    caught = [signal.SIGINT, signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    previous = {s: signal.signal(s, handler) for s in caught}
    previous[signal.SIGALRM] = signal.getsignal(signal.SIGALRM)  # set to stop_now only once a signal came
    try:
        yield got
    finally:
        signal.alarm(0)
        for k in our_kernels():
            with contextlib.suppress(OSError):
                os.killpg(k.pid, signal.SIGKILL)  # its own session: the kernel and its loader workers
        for s, h in previous.items():
            signal.signal(s, h)
        quiet.setLevel(level)


@contextlib.contextmanager
def environment():
    """While a task runs, the environment its kernel inherits: log-style progress, answer boxes for the page,
    the project root (and on the path). Put back afterwards: a caller that runs a task from Python (a script,
    a test) keeps its own environment."""
    root = str(project_root())
    path = os.environ.get("PYTHONPATH", "")
    want = {
        "HPML_PROGRESS": "log",
        "HPML_RENDERING": "1",
        answer_box.STAGE_ENV: str(os.getpid()),  # its answer record is staged beside the report in place
        "HPML_LAB_HOME": root,
        "PYTHONPATH": path if root in path.split(os.pathsep) else root + (os.pathsep + path if path else ""),
    }
    saved = {k: os.environ.get(k) for k in want}
    os.environ.update(want)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
