"""Progress display of a training run: a widget or terminal bar, log lines in batch runs, or a live plot.

train() asks progress_mode(cfg.progress) which display fits where it runs, then drives one Progress per epoch:

    mode = progress_mode("auto")       # 'bar' in JupyterLab or a terminal, 'log' under papermill or Slurm
    bar = Progress(mode, cfg, total=n_batches, epoch=1)
    bar.update(i, losses, corrects, sizes); bar.close(losses, corrects, sizes)
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch

from .config import RunConfig

_BATCH_TOOLS = ("papermill", "nbconvert", "nbclient", "jupyter-execute", "jupyter_execute")


def _kernel_driven_by_batch_tool() -> bool:
    """The kernel's parent process (jupyter_client starts a kernel as its child) is papermill, nbconvert
    --execute or nbclient: nobody watches a widget there, so progress goes to log lines. Read from
    /proc (Linux) or `ps` (macOS); unknown counts as interactive."""
    ppid = os.getppid()
    try:
        args = Path(f"/proc/{ppid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        try:
            import subprocess

            args = subprocess.run(
                ["ps", "-o", "command=", "-p", str(ppid)], capture_output=True, text=True, timeout=5
            ).stdout.split()
        except (OSError, subprocess.SubprocessError):
            return False
    # the program itself (`papermill ...`, `jupyter-nbconvert ...`, `python -m papermill ...`), not any word
    # of its arguments: a JupyterLab started in a folder named papermill-runs is still interactive
    names = [Path(a).name for a in args[:3]]
    return any(
        n.startswith(("papermill", "jupyter-nbconvert", "jupyter-execute")) or n in _BATCH_TOOLS
        for n in names
    )


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in shell.config


def progress_mode(setting: str) -> str:
    """'bar' in JupyterLab (a widget with loss and accuracy) or a terminal; 'log' lines in batch runs: under
    the runner (it sets HPML_PROGRESS=log), under papermill or nbconvert started any other way, and when
    stderr is not a terminal (Slurm logs). 'plot' (asked for, never automatic) needs a Jupyter kernel:
    elsewhere what 'auto' gives there (a bar in a terminal, log lines in a batch log), said in one line."""
    if setting == "plot" and not _in_kernel():
        fallback = "bar" if sys.stderr.isatty() else "log"
        print(f"progress=plot draws in a Jupyter kernel only; progress={fallback} instead", file=sys.stderr)
        return fallback
    if setting != "auto":
        return setting
    env = os.environ.get("HPML_PROGRESS")
    if env in ("bar", "log", "none"):
        return env
    if _in_kernel():
        return "log" if _kernel_driven_by_batch_tool() else "bar"
    return "bar" if sys.stderr.isatty() else "log"


class LivePlot:
    """progress="plot": per-batch loss and top-1 over the run's steps, one figure redrawn in place above the
    epochs' bars (an IPython display handle, so a saved notebook keeps one image, the last). A redraw reads
    the new batches' values (one device synchronize) and renders a PNG: 0.1 to 0.3 s on a CPU core, more with
    more points. Inside an epoch it waits MIN_INTERVAL_S seconds, or SPACING times the last redraw if longer,
    so redraws take at most about 5% of the epoch; they count in total_s (not in train_s; DataLoader workers
    keep prefetching meanwhile, so data_s can be lower). One more redraw follows each epoch, after its clock
    stopped. Matplotlib is imported before the first epoch. Use "bar" or "log" for runs whose epoch times you
    report; meta.json records the mode that ran and reports flag a live plot."""

    MIN_INTERVAL_S = 2.0
    SPACING = 20  # an interval of at least 20 redraws' time: redraws take at most about 1/21 of an epoch

    def __init__(self, cfg: RunConfig):
        self.cfg = cfg
        self.steps: list[int] = []
        self.loss: list[float] = []
        self.acc: list[float] = []
        self.last = (
            time.perf_counter()
        )  # the first redraw waits an interval: start-up batches are slow anyway
        self.interval = self.MIN_INTERVAL_S
        self.epoch, self.seen = 0, 0
        from IPython.display import Markdown, display
        from matplotlib.figure import Figure  # here, outside the epochs' clocks: about a second cold

        self.figure = Figure
        self.handle = display(
            Markdown(
                f"*{cfg.task}: the live loss and accuracy plot appears after "
                f"{self.MIN_INTERVAL_S:.0f} s or the first epoch.*"
            ),
            display_id=True,
        )

    def update(self, epoch: int, losses: list, corrects: list, sizes: list, force: bool = False) -> None:
        if epoch != self.epoch:
            self.epoch, self.seen = epoch, 0
        t0 = time.perf_counter()
        if not force and t0 - self.last < self.interval:
            return
        new = slice(self.seen, len(losses))
        if losses[new]:
            first = (self.steps[-1] if self.steps else 0) + 1
            self.loss += torch.stack(losses[new]).float().cpu().tolist()
            self.acc += [100 * c / n for c, n in zip(torch.stack(corrects[new]).cpu().tolist(), sizes[new])]
            self.steps += range(first, first + len(losses) - self.seen)
            self.seen = len(losses)
        self._draw()
        self.last = time.perf_counter()
        self.interval = max(self.MIN_INTERVAL_S, self.SPACING * (self.last - t0))

    def _draw(self) -> None:
        from io import BytesIO

        from IPython.display import Image

        fig = self.figure(figsize=(8, 2.6), dpi=80)
        # fixed margins: a constrained layout would more than double the cost of a redraw
        fig.subplots_adjust(left=0.08, right=0.98, bottom=0.18, top=0.86, wspace=0.25)
        ax_loss, ax_acc = fig.subplots(1, 2)
        ax_loss.plot(self.steps, self.loss, lw=0.8)
        ax_loss.set(xlabel="step", ylabel="loss (per batch)")
        ax_acc.plot(self.steps, self.acc, lw=0.8, color="tab:orange")
        ax_acc.set(xlabel="step", ylabel="top-1 % (per batch)")
        fig.suptitle(
            f"{self.cfg.task}: epoch {self.epoch}/{self.cfg.epochs}, live (per-batch values, unsmoothed)",
            fontsize=10,
        )
        buf = BytesIO()
        fig.savefig(buf, format="png")
        self.handle.update(Image(data=buf.getvalue(), format="png"))


class Progress:
    """One epoch's display: a tqdm bar (with the live plot under it) or log lines. In log mode a line as the
    epoch starts (batch 0), after its first batch, every cfg.log_every batches, at its last, and whenever
    LOG_S seconds passed without one: whoever reads the log (report/watch.py's heartbeat, a Slurm log) knows
    the epoch and batch within seconds of the start and never waits long for the next, however slow a batch is
    on a busy machine."""

    LOG_S = 10.0

    def __init__(self, mode: str, cfg: RunConfig, total: int, epoch: int, plot: LivePlot | None = None):
        self.mode, self.cfg, self.total, self.epoch, self.plot = mode, cfg, total, epoch, plot
        self.bar = None
        self.t0 = self.said = time.perf_counter()
        if mode in ("bar", "plot"):
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=f"{cfg.task} epoch {epoch}/{cfg.epochs}", leave=True)
        elif mode == "log":
            print(f"[{cfg.task}] epoch {epoch}/{cfg.epochs} batch 0/{total} starting", flush=True)

    def update(self, i: int, losses: list, corrects: list, sizes: list) -> None:
        loss, correct, n = losses[-1], corrects[-1], sizes[-1]
        if self.bar is not None:
            self.bar.update(1)
            if i % self.cfg.log_every == 0 or i == self.total:
                self.bar.set_postfix(loss=f"{loss.item():.3f}", acc=f"{100 * correct.item() / n:.1f}%")
        elif self.mode == "log" and (
            i % self.cfg.log_every == 0
            or i in (1, self.total)
            or time.perf_counter() - self.said >= self.LOG_S
        ):
            self.said = time.perf_counter()
            rate = sum(sizes) / max(self.said - self.t0, 1e-9)
            print(
                f"[{self.cfg.task}] epoch {self.epoch}/{self.cfg.epochs} batch {i}/{self.total} "
                f"loss {loss.item():.4f} acc {100 * correct.item() / n:.1f}% {rate:.0f} img/s",
                flush=True,
            )
        if self.plot is not None:
            self.plot.update(self.epoch, losses, corrects, sizes)

    def close(self, losses: list, corrects: list, sizes: list) -> None:
        """After the epoch's clock stopped: the bar's last state and the epoch's final redraw."""
        if self.bar is not None:
            self.bar.close()
        if self.plot is not None and losses:
            self.plot.update(self.epoch, losses, corrects, sizes, force=True)
