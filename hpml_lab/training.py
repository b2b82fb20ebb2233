"""Training: one function used by the notebooks, the CLI and torchrun alike.

    python -m hpml_lab --epochs 2 --batch-size 64 --subset 2048 --save-model model.pt
    python -m hpml_lab --help        # every RunConfig field is a flag

    from hpml_lab import RunConfig, train
    run = train(RunConfig(task="c1", epochs=2))
    run.batches, run.epochs, run.run_dir

Per batch it records loss and top-1 accuracy; per epoch the time spent waiting
on the DataLoader (data_s), the time of copy + forward + backward + step
(train_s, CUDA events on a GPU) and the synchronized wall time of the whole
epoch (total_s). With sync_each_step (the default) the device is synchronized
after every step, so data_s and train_s are disjoint intervals and
data_s + train_s <= total_s; the rest is loop overhead.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import typing
from pathlib import Path
from typing import Any, Mapping, Optional

import pandas as pd
import torch
from torch import nn

from . import distributed, fastpath, flops, models, results
from .config import ConfigError, RunConfig, check_keys, coerce_value
from .data import DatasetError, build_loader, dataset_info, num_classes
from .device import configure as configure_device, is_oom, resolve_device, seed_everything
from .profiling import DeviceTimer, HostTimer, WallClock, synchronize
from .io import atomic_file, atomic_write_csv

BATCH_COLUMNS = ["epoch", "batch", "step", "images", "loss", "acc", "data_s", "train_s"]
EPOCH_COLUMNS = ["epoch", "batches", "images", "loss", "acc", "data_s", "train_s", "total_s", "images_per_s",
                 "tflops", "mfu"]
TIMING_NOTE = (
    "data_s: host time waiting on the DataLoader (includes starting its workers in the first batch); "
    "train_s: host-to-device copy, forward, backward and optimizer step (CUDA events on a GPU, "
    "perf_counter on CPU); total_s: synchronized wall time of the epoch. Every epoch is recorded; "
    "epoch 1 includes warm-up (worker start, cuDNN autotuning, allocator growth): summaries that "
    "exclude it say so."
)




def build_model(cfg: RunConfig, device: torch.device | None = None, compile: bool = True) -> nn.Module:
    """The model cfg names, sized for cfg's dataset (classes, stem, norm, checkpoint segments); with `device`,
    moved there and given the fast path's format and compilation (fastpath.apply_to_model) as cfg asks;
    compile=False checks that compiling can work but leaves it to the caller (train() compiles DDP's wrapper)."""
    extra = {"checkpoint_segments": cfg.checkpoint_segments} if cfg.checkpoint_segments else {}
    model = models.build(cfg.model, num_classes=num_classes(cfg.dataset), norm=cfg.norm, stem=cfg.stem, **extra)
    return model if device is None else fastpath.apply_to_model(cfg, model.to(device), compile=compile)


def build_optimizer(cfg: RunConfig, params) -> torch.optim.Optimizer:
    """The lab's optimizers (cfg.optimizer, lr, momentum, weight_decay); momentum applies to the SGD family only."""
    name, lr, momentum, weight_decay = cfg.optimizer, cfg.lr, cfg.momentum, cfg.weight_decay
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    if name == "sgd_nesterov":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=True)
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=lr, weight_decay=weight_decay)
    if name == "adadelta":
        return torch.optim.Adadelta(params, lr=lr, weight_decay=weight_decay)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    raise ConfigError(f"unknown optimizer {name!r}")


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, criterion: nn.Module, x: torch.Tensor,
               y: torch.Tensor, cfg: RunConfig | None, device: torch.device, phase=None):
    """One training step as train() times it: host-to-device copy (channels-last if asked), forward and
    loss (under bf16 autocast if asked), backward, optimizer step. Returns (logits, loss, labels on device).

    The one step of the package: train(), the benchmarks, profiler traces (tracing.trace_steps), the memory
    timings (memory.make_step) and the Lab 2 questions all call it. `cfg=None` is a plain fp32 step;
    `phase(name)` wraps each part in a context manager (tracing passes torch.profiler.record_function,
    so a trace labels copy / forward / backward / optimizer exactly as train() counts them)."""
    label = phase or (lambda name: contextlib.nullcontext())
    with label("copy"):
        x = fastpath.to_device(x, device, bool(cfg and cfg.channels_last))
        y = y.to(device, non_blocking=True)
    with label("forward"), (fastpath.autocast(cfg, device) if cfg is not None else contextlib.nullcontext()):
        out = model(x)
        loss = criterion(out, y)
    with label("backward"):
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
    with label("optimizer"):
        optimizer.step()
    return out, loss, y


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

            args = subprocess.run(["ps", "-o", "command=", "-p", str(ppid)], capture_output=True, text=True,
                                  timeout=5).stdout.split()
        except (OSError, subprocess.SubprocessError):
            return False
    # the program itself (`papermill ...`, `jupyter-nbconvert ...`, `python -m papermill ...`), not any word of
    # its arguments: a JupyterLab started in a folder named papermill-runs is still interactive
    names = [Path(a).name for a in args[:3]]
    return any(n.startswith(("papermill", "jupyter-nbconvert", "jupyter-execute")) or n in _BATCH_TOOLS
               for n in names)


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in shell.config


def progress_mode(setting: str) -> str:
    """'bar' in JupyterLab (a widget with loss and accuracy) or a terminal; 'log' lines in batch runs: under the
    runner (it sets HPML_PROGRESS=log), under papermill or nbconvert started any other way, and when stderr is
    not a terminal (Slurm logs). 'plot' (asked for, never automatic) needs a Jupyter kernel: elsewhere what
    'auto' gives there (a bar in a terminal, log lines in a batch log), said in one line."""
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


class _LivePlot:
    """progress="plot": per-batch loss and top-1 over the run's steps, one figure redrawn in place above the
    epochs' bars (an IPython display handle, so a saved notebook keeps one image, the last). A redraw reads the
    new batches' values (one device synchronize) and renders a PNG: 0.1 to 0.3 s on a CPU core, more with more
    points. Inside an epoch it waits MIN_INTERVAL_S seconds, or SPACING times the last redraw if longer, so redraws
    take at most about 5% of the epoch; they count in total_s (not in train_s; DataLoader workers keep
    prefetching meanwhile, so data_s can be lower). One more redraw follows each epoch, after its clock stopped.
    Matplotlib is imported before the first epoch. Use "bar" or "log" for runs whose epoch times you report;
    meta.json records the mode that ran and reports flag a live plot."""

    MIN_INTERVAL_S = 2.0
    SPACING = 20  # an interval of at least 20 redraws' time: redraws take at most about 1/21 of an epoch

    def __init__(self, cfg: RunConfig):
        self.cfg = cfg
        self.steps: list[int] = []
        self.loss: list[float] = []
        self.acc: list[float] = []
        self.last = time.perf_counter()  # the first redraw waits an interval: start-up batches are slow anyway
        self.interval = self.MIN_INTERVAL_S
        self.epoch, self.seen = 0, 0
        from IPython.display import Markdown, display
        from matplotlib.figure import Figure  # here, outside the epochs' clocks: about a second cold

        self.figure = Figure
        self.handle = display(Markdown(f"*{cfg.task}: the live loss and accuracy plot appears after "
                                       f"{self.MIN_INTERVAL_S:.0f} s or the first epoch.*"), display_id=True)

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
        fig.suptitle(f"{self.cfg.task}: epoch {self.epoch}/{self.cfg.epochs}, live (per-batch values, unsmoothed)",
                     fontsize=10)
        buf = BytesIO()
        fig.savefig(buf, format="png")
        self.handle.update(Image(data=buf.getvalue(), format="png"))


class _Progress:
    def __init__(self, mode: str, cfg: RunConfig, total: int, epoch: int, plot: _LivePlot | None = None):
        self.mode, self.cfg, self.total, self.epoch, self.plot = mode, cfg, total, epoch, plot
        self.bar = None
        self.t0 = time.perf_counter()
        if mode in ("bar", "plot"):
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=f"{cfg.task} epoch {epoch}/{cfg.epochs}", leave=True)

    def update(self, i: int, losses: list, corrects: list, sizes: list) -> None:
        loss, correct, n = losses[-1], corrects[-1], sizes[-1]
        if self.bar is not None:
            self.bar.update(1)
            if i % self.cfg.log_every == 0 or i == self.total:
                self.bar.set_postfix(loss=f"{loss.item():.3f}", acc=f"{100 * correct.item() / n:.1f}%")
        elif self.mode == "log" and (i % self.cfg.log_every == 0 or i == self.total):
            rate = sum(sizes) / max(time.perf_counter() - self.t0, 1e-9)
            print(f"[{self.cfg.task}] epoch {self.epoch}/{self.cfg.epochs} batch {i}/{self.total} "
                  f"loss {loss.item():.4f} acc {100 * correct.item() / n:.1f}% {rate:.0f} img/s", flush=True)
        if self.plot is not None:
            self.plot.update(self.epoch, losses, corrects, sizes)

    def close(self, losses: list, corrects: list, sizes: list) -> None:
        """After the epoch's clock stopped: the bar's last state and the epoch's final redraw."""
        if self.bar is not None:
            self.bar.close()
        if self.plot is not None and losses:
            self.plot.update(self.epoch, losses, corrects, sizes, force=True)


_now = results.now


def _atomic_save_model(model: nn.Module, path: str | os.PathLike) -> None:
    """CPU copies of the weights, so the file loads on a machine without the GPU it was trained on."""
    state = {k: v.detach().cpu() for k, v in fastpath.unwrap(model).state_dict().items()}
    with atomic_file(path) as tmp:
        torch.save(state, tmp)


def train(cfg: RunConfig, *, model: Optional[nn.Module] = None, loader=None,
          extra_meta: Optional[Mapping[str, Any]] = None, save_model: str | os.PathLike | None = None,
          write: bool = True) -> results.Run:
    """Train cfg.model on cfg.dataset and write results under cfg.run_dir().

    Args:
        cfg: the run's parameters.
        model: a prepared model to use instead of building cfg.model (e.g. compiled).
        loader: an iterable of (images, labels) to use instead of the lab's DataLoader.
        extra_meta: more fields for meta.json (e.g. the sweep a run belongs to).
        save_model: write the final state_dict here (atomically).
        write: False keeps results in memory only.
    """
    device = resolve_device(cfg.device)
    info = dataset_info(cfg)  # fails fast, naming the command that prepares the data
    if save_model:
        check_output_file(save_model, "--save-model")  # before any compute, not after the last epoch
    # Under torchrun (or a Slurm step) join the process group; a single process gets world_size 1.
    dist_env = distributed.setup(device)
    device = torch.device(dist_env.device)
    write = write and dist_env.is_main  # only rank 0 writes results
    cfg = distributed.run_config(cfg, dist_env.world_size)  # ddp<N>-<id>: never a 1-process run's folder
    flops_record = _flops_record(cfg, device)  # before seeding: counting must not shift the run's random streams
    seed_everything(cfg.seed)
    configure_device(device)  # cuDNN autotuning on CUDA (the warm-up epoch absorbs it)
    late = dist_env.distributed  # under DDP, compile the wrapper: torch.compile(DDP(model)), as DDP's docs ask
    model = (build_model(cfg, device, compile=not late) if model is None
             else fastpath.apply_to_model(cfg, model.to(device), compile=not late))
    parallel_note = ""
    if dist_env.distributed:
        model = distributed.wrap_model(model, dist_env)
        if cfg.compile:  # DDPOptimizer then splits the graph at DDP's buckets: all-reduce overlaps the backward
            model = fastpath.compile_model(cfg, model)
    elif cfg.data_parallel:
        model, parallel_note = distributed.wrap_data_parallel(model, device)
    if loader is None:
        loader = build_loader(cfg, device, dist_env)  # PIL DataLoader (sharded under DDP) or tensor-resident
    optimizer = build_optimizer(cfg, model.parameters())
    criterion = nn.CrossEntropyLoss()

    run_dir = cfg.run_dir()
    meta: dict[str, Any] = results.new_meta(
        cfg, device, dataset=info, parameters=models.count_parameters(model), timing_note=TIMING_NOTE, **{
        "distributed": {**dist_env.as_dict(), "global_batch": cfg.batch_size * dist_env.world_size,
                        "data_parallel": parallel_note}, **(extra_meta or {})})
    folder = results.RunFolder(run_dir) if write else contextlib.nullcontext()
    try:
        with results.sigterm_interrupts(), folder as rf:
            if write:
                rf.write_meta(meta)
            meta["flops"] = flops_record
            started = time.perf_counter()
            batch_rows, epoch_rows = _epochs(cfg, model, loader, optimizer, criterion, device, dist_env,
                                             rf.path if write else None, meta)
            meta.update(status="complete", finished_at=_now(), duration_s=time.perf_counter() - started,
                        epochs_done=cfg.epochs)
            if save_model and dist_env.is_main:
                meta["saved_model"] = _save_model(model, save_model, rf.path if write else None, run_dir)
            if write:
                rf.complete(meta)
    except KeyboardInterrupt as e:  # where the run's files are and what they say, for the line the CLI prints
        if write:
            e.run_outcome = (folder.where, folder.status)
        raise
    return results.Run(run_dir, meta, model, {"batches": pd.DataFrame(batch_rows, columns=BATCH_COLUMNS),
                                              "epochs": pd.DataFrame(epoch_rows, columns=EPOCH_COLUMNS)})


def _flops_record(cfg: RunConfig, device: torch.device) -> dict[str, Any]:
    """FLOPs per image of a training step, the precision and the device's peak for it (hpml_lab.flops)."""
    pk = flops.peak(device, flops.precision_of(cfg, device))
    return {"per_image": flops.flops_per_image(cfg), "precision": pk.precision, "peak_tflops": pk.tflops,
            "peak_source": pk.source, "convention": "multiply-add = 2 FLOPs; convolutions and matrix products, "
                                                    "forward + backward"}


def check_output_file(path: str | os.PathLike, what: str) -> None:
    """A file this run will write must be writable before the run starts: one line naming what is wrong."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{what} {p} is a folder; give a file name such as {p / 'model.pt'}")
    if p.exists() and not p.is_file():  # /dev/null, a FIFO: the atomic save would replace it, or fail after training
        raise ConfigError(f"{what} {p} exists and is not a regular file; give a file name such as model.pt")
    parent = p.parent if str(p.parent) else Path(".")
    existing = next((q for q in [parent, *parent.parents] if q.exists()), Path("/"))
    if not existing.is_dir():
        raise ConfigError(f"{what} {p}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{what} {p}: no permission to write in {existing}")


def _save_model(model: nn.Module, target, attempt: Path | None, run_dir: Path) -> str:
    """Save the weights; if the target cannot be written now, keep them in the run folder and say where."""
    try:
        _atomic_save_model(model, target)
        return str(target)
    except OSError as e:
        if attempt is None:
            raise
        _atomic_save_model(model, attempt / "model.pt")
        kept = run_dir / "model.pt"
        print(f"warning: could not write {target} ({e.strerror or e}); the weights are kept in {kept}",
              file=sys.stderr, flush=True)
        return str(kept)


def _epochs(cfg, model, loader, optimizer, criterion, device, dist_env, folder: Path | None,
            meta) -> tuple[list, list]:
    """The training loop; writes batches.csv, epochs.csv and meta.json into `folder` after every epoch."""
    mode = progress_mode(cfg.progress) if dist_env.is_main else "none"
    meta["progress"] = mode  # what ran: a live plot's redraws count in total_s (sanity flags it)
    plot = _LivePlot(cfg) if mode == "plot" else None
    batch_rows: list[dict[str, Any]] = []
    epoch_rows: list[dict[str, Any]] = []
    step = 0
    model.train()
    for epoch in range(1, cfg.epochs + 1):
        sampler = getattr(loader, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        n_batches = len(loader) if cfg.max_batches == 0 else min(cfg.max_batches, len(loader))
        wait, work, wall = HostTimer(), DeviceTimer(device), WallClock(device)
        losses, corrects, sizes = [], [], []
        bar = _Progress(mode, cfg, n_batches, epoch, plot)
        wall.start()
        it = None
        for i in range(1, n_batches + 1):
            wait.start()
            if it is None:
                it = iter(loader)  # worker start-up counts as data loading
            try:
                x, y = next(it)
            except StopIteration:
                wait.values.append(0.0)
                break
            if cfg.sync_each_step:  # a device-resident loader only queues its work: count it as data
                synchronize(device)
            wait.stop()
            work.start()
            out, loss, y = train_step(model, optimizer, criterion, x, y, cfg, device)
            work.stop()
            if cfg.sync_each_step:
                synchronize(device)
            correct = (out.detach().argmax(1) == y).sum()
            losses.append(loss.detach())
            corrects.append(correct)
            sizes.append(y.shape[0])
            bar.update(i, losses, corrects, sizes)
        del it
        total = wall.stop()
        bar.close(losses, corrects, sizes)
        step_times = work.intervals()
        loss_v = torch.stack(losses).float().cpu().tolist()
        corr_v = torch.stack(corrects).cpu().tolist()
        if dist_env.distributed:  # one all-reduce per epoch: global per-batch loss/accuracy, slowest rank's times
            loss_v, corr_v, sizes, total, step_times = _reduce_epoch(loss_v, corr_v, sizes, total, step_times, wait)
        for b, (lv, cv, n, d, t) in enumerate(zip(loss_v, corr_v, sizes, wait.values, step_times), 1):
            step += 1
            batch_rows.append({"epoch": epoch, "batch": b, "step": step, "images": n, "loss": lv,
                               "acc": cv / n, "data_s": d, "train_s": t})
        images = sum(sizes)
        epoch_rows.append({
            "epoch": epoch, "batches": len(sizes), "images": images,
            "loss": sum(l * n for l, n in zip(loss_v, sizes)) / images,
            "acc": sum(corr_v) / images, "data_s": wait.total(), "train_s": sum(step_times),
            "total_s": total, "images_per_s": images / total,
            # achieved TFLOP/s of the step compute per device (images split over the ranks), and its share of peak
            "tflops": flops.tflops(meta["flops"]["per_image"] * images / dist_env.world_size, sum(step_times)),
            "mfu": flops.mfu(meta["flops"]["per_image"] * images / dist_env.world_size, sum(step_times),
                             meta["flops"]["peak_tflops"]),
        })
        if mode == "log":
            e = epoch_rows[-1]
            print(f"[{cfg.task}] epoch {epoch} done: loss {e['loss']:.4f} acc {100 * e['acc']:.1f}% "
                  f"data {e['data_s']:.2f}s train {e['train_s']:.2f}s total {e['total_s']:.2f}s", flush=True)
        if folder is not None:  # after every epoch, so an interrupted run keeps what it finished
            with results.signals_held():  # the three files agree on epochs_done, whenever SIGTERM comes
                atomic_write_csv(folder / "batches.csv", batch_rows, BATCH_COLUMNS)
                atomic_write_csv(folder / "epochs.csv", epoch_rows, EPOCH_COLUMNS)
                results.write_meta(folder, {**meta, "epochs_done": epoch})
    return batch_rows, epoch_rows


def _reduce_epoch(loss_v, corr_v, sizes, total, step_times, wait):
    """Per-batch loss (image-weighted mean) and correct counts summed over ranks; the times are those of
    the slowest rank (largest total), taken whole from that one rank: ranks wait for each other inside
    backward, so mixing per-batch maxima from different ranks would count the same wait twice."""
    import torch.distributed as dist

    n = torch.tensor(sizes, dtype=torch.float64)
    sums = distributed.all_reduce_sum(torch.stack([torch.tensor(loss_v, dtype=torch.float64) * n,
                                                   torch.tensor(corr_v, dtype=torch.float64), n]))
    k = len(sizes)
    rows = torch.zeros(dist.get_world_size(), 1 + 2 * k, dtype=torch.float64)
    rows[dist.get_rank()] = torch.tensor([total] + list(step_times) + list(wait.values[:k]), dtype=torch.float64)
    rows = distributed.all_reduce_sum(rows)  # every rank's row, on every rank
    times = rows[int(rows[:, 0].argmax())].tolist()
    wait.values[:k] = times[1 + k:]
    sizes = [int(round(x)) for x in sums[2].tolist()]
    return ((sums[0] / sums[2]).tolist(), [int(round(x)) for x in sums[1].tolist()], sizes, times[0], times[1:1 + k])


# ------------------------------------------------------------------ CLI
def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per RunConfig field, as --batch-size and --batch_size; values parsed by RunConfig."""
    hints = typing.get_type_hints(RunConfig)
    defaults = RunConfig()
    for name in RunConfig.field_names():
        kind = hints[name].__name__
        parser.add_argument(f"--{name.replace('_', '-')}", *([f"--{name}"] if "_" in name else []),
                            dest=name, metavar=kind.upper(), default=argparse.SUPPRESS,
                            help=f"{kind}, default {getattr(defaults, name)!r}")


def config_from_args(ns: argparse.Namespace, extra: Mapping[str, Any] | None = None) -> RunConfig:
    params = {k: v for k, v in vars(ns).items() if k in RunConfig.field_names()}
    params.update(extra or {})
    check_keys(params)
    return RunConfig.from_dict(params, coerce=True)


def _complete_already(cfg: RunConfig) -> bool:
    """The run folder this process (or, under torchrun, its world) would fill holds a complete run of the
    same settings and data. Under DDP rank 0, which writes the results, decides for every rank (the others
    may not see its folder, or see it mid-write), so no rank trains while the rest have left."""
    from .sweeps import same_run

    env = distributed.read_env()
    run_dir = distributed.run_config(cfg, env.world_size).run_dir()
    done = results.is_complete(run_dir) and same_run(cfg, run_dir)
    if env.distributed:
        distributed.setup(resolve_device(cfg.device))
        mine = torch.tensor([1.0 if done and env.is_main else 0.0])
        done = bool(distributed.all_reduce_sum(mine).item() > 0)  # rank 0's answer, on every rank
        if done:
            distributed.cleanup()
    if done and env.is_main:
        print(f"complete already: {run_dir} (--if-missing: not run again)", flush=True)
    return done


def main(argv: list[str] | None = None) -> int:
    """`python -m hpml_lab`: one run from flags; under torchrun each rank runs this."""
    return distributed.leave(_main(argv))


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hpml_lab", description="Train one run; see RunConfig.")
    add_config_flags(parser)
    parser.add_argument("--save-model", metavar="PATH", help="write the final weights (state_dict) here")
    parser.add_argument("--if-missing", metavar="BOOL", default="false",
                        help="true: do nothing when this run's folder already holds a complete run of the same "
                             "settings and data (a resubmitted job goes straight on)")
    args, unknown = parser.parse_known_args(argv)
    try:
        if unknown:
            bad = unknown[0].lstrip("-").replace("-", "_").split("=")[0]
            check_keys({bad: None})
            raise ConfigError(f"could not parse {' '.join(unknown)!r}; flags take a value: --name VALUE")
        cfg = config_from_args(args)
        if args.save_model is not None and not args.save_model.strip():
            raise ConfigError("--save-model needs a file path, got ''; leave the flag out to save nothing")
        if coerce_value("--if-missing", args.if_missing, bool) and _complete_already(cfg):
            return 0
        run = train(cfg, save_model=args.save_model)
    except (ConfigError, DatasetError) as e:
        distributed.cleanup(barrier=False)
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # an unwritable or full results folder, a path under a file: one line naming the path
        distributed.cleanup(barrier=False)
        where = f": {e.filename}" if e.filename else ""
        print(f"error: {e.strerror or e}{where}", file=sys.stderr)
        return 2
    except (RuntimeError, MemoryError) as e:
        if not is_oom(e):
            distributed.cleanup(barrier=False)
            raise
        distributed.cleanup(barrier=False)
        print(f"error: out of memory at batch_size {vars(args).get('batch_size', RunConfig().batch_size)}: use a smaller batch_size "
              f"({str(e).strip().splitlines()[0][:160]})", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (results.Interrupted): the run is marked interrupted
        distributed.cleanup(barrier=False)
        where, status = getattr(e, "run_outcome", (None, None))
        said = ("the finished epochs are kept, status 'interrupted'" if status == "interrupted" else
                f"{where} has status {status!r}" + (" (the signal came as it landed)" if status == "complete" else "")
                if where else "no results were written by this process")
        print(f"interrupted ({e or 'Ctrl-C'}): {said}", file=sys.stderr)
        return 143 if isinstance(e, results.Interrupted) else 130
    except BaseException:
        distributed.cleanup(barrier=False)
        raise
    distributed.cleanup()
    if not distributed.read_env().is_main:
        return 0
    last = run.epochs.iloc[-1]
    print(f"done: {run.run_dir} (epoch {int(last.epoch)}: loss {last.loss:.4f}, acc {100 * last.acc:.1f}%)")
    return 0


