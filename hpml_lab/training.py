"""Training: one function used by the notebooks, the CLI and torchrun alike.

    python -m hpml_lab --epochs 2 --batch-size 64 --subset 2048 --save-model model.pt
    python -m hpml_lab --help        # every RunConfig field is a flag

    from hpml_lab import RunConfig, train
    run = train(RunConfig(task="c1", epochs=2))
    run.batches, run.epochs, run.run_dir

Per batch it records loss and top-1 accuracy; per epoch the time spent waiting
on the DataLoader (data_s), the time of copy + forward + backward + step
(train_s, CUDA events on a GPU) and the synchronized wall time of the whole
epoch (total_s). On a GPU the step's events are recorded on the stream as the
step is queued and read once, at the epoch's end: nothing waits for the device
between steps, so the host prepares the next batch while the GPU still works on
this one, as in real training, and total_s is the epoch a user's loop takes.
train_s is then the GPU's time per step and data_s the host's wait for the
loader: they may overlap. sync_each_step=True (off by default) synchronizes
after every step, which makes them disjoint (data_s + train_s <= total_s) at the
price of that overlap. On the CPU work is synchronous and both ways agree.

The fast path (loader="tensor") keeps the host out of the step: Step (hpml_lab.step) runs it (compiled whole
under compile=true, CUDA graphs with compile_mode reduce-overhead or max-autotune), its loss and correct count
stay on the device and are read at the log interval and the epoch's end, and the device's time is taken with
events only every log_every steps (per-batch train_s is then its interval's mean), so a step pays no event
pair of its own.

Read top to bottom: train() sets up and writes the run, _epochs is the loop, and _reduce_epoch combines the
ranks' numbers under DDP; below them, the FLOPs record and the saved model. The loop's step, the one step
other callers share and how the model and optimizer are built are hpml_lab.step (Step, train_step,
build_model and build_optimizer import from here too); the progress display is hpml_lab.progress; the
command line is hpml_lab.__main__.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from . import distributed, fastpath, flops, models, progress, results, sanity
from .config import ConfigError, RunConfig
from .data import build_loader, classes_of, dataset_info
from .device import configure as configure_device
from .device import resolve_device, seed_everything
from .io import atomic_file, atomic_write_csv, plain_target, signals_deferred
from .profiling import (
    MEMORY_COLUMNS,
    MEMORY_NOTE,
    EpochMemory,
    HostTimer,
    StepClock,
    WallClock,
    synchronize,
)
from .step import Step, build_model, build_optimizer, train_step  # noqa: F401 (train_step: re-exported)

BATCH_COLUMNS = ["epoch", "batch", "step", "images", "loss", "acc", "data_s", "train_s"]
EPOCH_COLUMNS = [
    "epoch",
    "batches",
    "images",
    "loss",
    "acc",
    "data_s",
    "train_s",
    "total_s",
    "images_per_s",
    "tflops",
    "mfu",
    *MEMORY_COLUMNS,
]
TIMING_NOTE = (
    "data_s: host time waiting on the DataLoader (includes starting its workers in the first batch); "
    "train_s: host-to-device copy, forward, backward and optimizer step (CUDA events on a GPU, "
    "perf_counter on CPU; on a GPU read at the epoch's end, so steps overlap the loader as in real training, "
    "unless sync_each_step); total_s: synchronized wall time of the epoch. Every epoch is recorded; "
    "epoch 1 includes warm-up (worker start, cuDNN autotuning, allocator growth): summaries that "
    "exclude it say so."
)
# the fast path's timing (meta.json's timing "interval"): what its columns mean instead
INTERVAL_NOTE = (
    "timing=interval (the fast path, tensor loader): events only every log_every steps and at the epoch's "
    "ends, nothing per step; train_s is the device's time over each interval, the tensor loader's batch "
    "preparation included (it runs on the device in the same stream), and a batch's train_s is its "
    "interval's mean; data_s is the host's time queuing each batch. Each epoch's last partial batch is "
    "dropped (static shapes): meta.json's loader_dropped says how many images an epoch leaves out."
)


def train(
    cfg: RunConfig,
    *,
    model: nn.Module | None = None,
    loader=None,
    extra_meta: Mapping[str, Any] | None = None,
    save_model: str | os.PathLike | None = None,
    write: bool = True,
) -> results.Run:
    """Train cfg.model on cfg.dataset and write results under cfg.run_dir().

    Args:
        cfg: the run's parameters.
        model: a model to train instead of building cfg.model; like a built one it is moved to the device and
            given cfg's channels-last format and compilation (so pass it uncompiled).
        loader: an iterable of (images, labels) to use instead of the lab's DataLoader.
        extra_meta: more fields for meta.json (e.g. the sweep a run belongs to).
        save_model: write the final state_dict here (atomically).
        write: False keeps results in memory only.
    """
    device = resolve_device(cfg.device)
    info = dataset_info(cfg)  # fails fast, naming the command that prepares the data
    fastpath.check_precision(cfg, device)  # fp16 where torch cannot run it: one line, before any compute
    if save_model:
        check_output_file(save_model, "--save-model")  # before any compute, not after the last epoch
    # Under torchrun (or a Slurm step) join the process group; a single process gets world_size 1.
    dist_env = distributed.setup(device)
    device = torch.device(dist_env.device)
    write = write and dist_env.is_main  # only rank 0 writes results
    cfg = distributed.run_config(cfg, dist_env.world_size)  # ddp<N>-<id>: never a 1-process run's folder
    flops_record = _flops_record(
        cfg, device
    )  # before seeding: counting must not shift the run's random streams
    seed_everything(cfg.seed)
    configure_device(device)  # cuDNN autotuning on CUDA (the warm-up epoch absorbs it)
    late = (
        dist_env.distributed
    )  # under DDP, compile the wrapper: torch.compile(DDP(model)), as DDP's docs ask
    model = (
        build_model(cfg, device, compile=not late)
        if model is None
        else fastpath.apply_to_model(cfg, model.to(device), compile=not late)
    )
    parallel_note = ""
    if dist_env.distributed:
        model = distributed.wrap_model(model, dist_env)
        if (
            cfg.compile
        ):  # DDPOptimizer then splits the graph at DDP's buckets: all-reduce overlaps the backward
            model = fastpath.compile_model(cfg, model)
    elif cfg.data_parallel:
        model, parallel_note = distributed.wrap_data_parallel(model, device)
    if loader is None:
        loader = build_loader(cfg, device, dist_env)  # PIL DataLoader (sharded under DDP) or tensor-resident
    optimizer = build_optimizer(cfg, model.parameters())
    criterion = nn.CrossEntropyLoss()
    step = Step(
        model,
        optimizer,
        criterion,
        cfg,
        device,
        compile=cfg.compile and not late,
        wrapper_compiled=cfg.compile and late,
    )
    # the fast path times the device every log_every steps; the lab's baseline (and sync_each_step) every step
    timing = "step" if cfg.loader != "tensor" or cfg.sync_each_step else "interval"

    run_dir = cfg.run_dir()
    meta: dict[str, Any] = results.new_meta(
        cfg,
        device,
        dataset=info,
        parameters=models.count_parameters(model),
        timing_note=TIMING_NOTE if timing == "step" else INTERVAL_NOTE,
        timing=timing,
        loader_dropped=getattr(loader, "dropped", 0),
        step=step.describe(),
        precision=cfg.precision,
        memory_note=MEMORY_NOTE,
        **{
            "distributed": {
                **dist_env.as_dict(),
                "global_batch": cfg.batch_size * dist_env.world_size,
                "data_parallel": parallel_note,
            },
            **(extra_meta or {}),
        },
    )
    folder = results.RunFolder(run_dir) if write else contextlib.nullcontext()
    try:
        with results.sigterm_interrupts(), folder as rf:
            if write:
                rf.write_meta(meta)
            meta["flops"] = flops_record
            started = time.perf_counter()
            with fastpath.matmul_precision(cfg, device):
                batch_rows, epoch_rows = _epochs(
                    cfg,
                    step,
                    loader,
                    device,
                    dist_env,
                    rf.path if write else None,
                    meta,
                )
            meta["step"] = step.describe()  # with what dynamo counted while the run compiled
            meta.update(
                status="complete",
                finished_at=results.now(),
                duration_s=time.perf_counter() - started,
                epochs_done=cfg.epochs,
            )
            if save_model and dist_env.is_main:
                meta["saved_model"] = _save_model(model, save_model, rf.path if write else None, run_dir)
            if write:
                rf.complete(meta)
    except KeyboardInterrupt as e:  # where the run's files are and what they say, for the line the CLI prints
        if write:
            e.run_outcome = (folder.where, folder.status)
        raise
    return results.Run(
        run_dir,
        meta,
        model,
        {
            "batches": pd.DataFrame(batch_rows, columns=BATCH_COLUMNS),
            "epochs": pd.DataFrame(epoch_rows, columns=EPOCH_COLUMNS),
        },
    )


def _epochs(cfg, step, loader, device, dist_env, folder: Path | None, meta) -> tuple[list, list]:
    """The training loop; writes batches.csv, epochs.csv and meta.json into `folder` after every epoch."""
    mode = progress.progress_mode(cfg.progress) if dist_env.is_main else "none"
    meta["progress"] = mode  # what ran: a live plot's redraws count in total_s (sanity flags it)
    plot = progress.LivePlot(cfg) if mode == "plot" else None
    memory = EpochMemory(device)
    if not memory.rss_per_epoch:
        meta["memory_note"] = MEMORY_NOTE + " Here peak_rss_mb is the process's high-water mark (ru_maxrss)."
    batch_rows: list[dict[str, Any]] = []
    epoch_rows: list[dict[str, Any]] = []
    done = 0  # steps of the epochs before this one
    per_step = meta.get("timing", "step") == "step"
    classes = classes_of(cfg)
    step.model.train()
    for epoch in range(1, cfg.epochs + 1):
        sampler = getattr(loader, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        n_batches = len(loader) if cfg.max_batches == 0 else min(cfg.max_batches, len(loader))
        wait, wall = HostTimer(), WallClock(device)
        work = StepClock(device, every=0 if per_step else cfg.log_every)
        losses, corrects, sizes = [], [], []
        bar = progress.Progress(mode, cfg, n_batches, epoch, plot)
        memory.start()
        wall.start()
        work.begin()
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
            work.step_start()
            loss, correct = step(x, y)  # device tensors: nothing read on the host here
            work.step_stop()
            if cfg.sync_each_step:
                synchronize(device)
            losses.append(loss)
            corrects.append(correct)
            sizes.append(y.shape[0])
            bar.update(i, losses, corrects, sizes)
        del it
        work.end()
        total = wall.stop()
        bar.close(losses, corrects, sizes)
        step_times = work.step_times()
        loss_v = torch.stack(losses).float().cpu().tolist()
        corr_v = torch.stack(corrects).cpu().tolist()
        if (
            dist_env.distributed
        ):  # one all-reduce per epoch: global per-batch loss/accuracy, slowest rank's times
            loss_v, corr_v, sizes, total, step_times = _reduce_epoch(
                loss_v, corr_v, sizes, total, step_times, wait
            )
        for b, (lv, cv, n, d, t) in enumerate(zip(loss_v, corr_v, sizes, wait.values, step_times), 1):
            batch_rows.append(
                {
                    "epoch": epoch,
                    "batch": b,
                    "step": done + b,
                    "images": n,
                    "loss": lv,
                    "acc": cv / n,
                    "data_s": d,
                    "train_s": t,
                }
            )
        images = sum(sizes)
        epoch_rows.append(
            {
                "epoch": epoch,
                "batches": len(sizes),
                "images": images,
                "loss": sum(l * n for l, n in zip(loss_v, sizes)) / images,
                "acc": sum(corr_v) / images,
                "data_s": wait.total(),
                "train_s": sum(step_times),
                "total_s": total,
                "images_per_s": images / total,
                # achieved TFLOP/s of the step compute per device (images split over the ranks), and its share
                # of peak
                "tflops": flops.tflops(
                    meta["flops"]["per_image"] * images / dist_env.world_size, sum(step_times)
                ),
                "mfu": flops.mfu(
                    meta["flops"]["per_image"] * images / dist_env.world_size,
                    sum(step_times),
                    meta["flops"]["peak_tflops"],
                ),
                **memory.read(),  # this rank's (rank 0's) peaks
            }
        )
        if mode == "log":
            e = epoch_rows[-1]
            print(
                f"[{cfg.task}] epoch {epoch} done: loss {e['loss']:.4f} acc {100 * e['acc']:.1f}% "
                f"data {e['data_s']:.2f}s train {e['train_s']:.2f}s total {e['total_s']:.2f}s",
                flush=True,
            )
        bad = next((b for b, lv in enumerate(loss_v, 1) if not math.isfinite(lv)), 0)
        if (
            bad and "diverged" not in meta
        ):  # NaN or inf: recorded once, where it began (the flag says diverged)
            # the run goes on to its last epoch: its times stay comparable, and every task's tables keep the
            # epochs they expect (an early stop left C2 one epoch to call "the one after the first")
            meta["diverged"] = {"epoch": epoch, "batch": bad, "step": done + bad}
            if dist_env.is_main:
                print(
                    f"[{cfg.task}] the loss became {loss_v[bad - 1]} at epoch {epoch}, batch {bad}: training "
                    f"diverged (lr {cfg.lr}, weight_decay {cfg.weight_decay}); its losses are not results",
                    file=sys.stderr,
                    flush=True,
                )
        _check_learning(cfg, epoch_rows, classes, meta, dist_env.is_main)
        done += len(loss_v)
        if folder is not None:  # after every epoch, so an interrupted run keeps what it finished
            with signals_deferred():  # the three files agree on epochs_done, whenever SIGTERM comes
                atomic_write_csv(folder / "batches.csv", batch_rows, BATCH_COLUMNS)
                atomic_write_csv(folder / "epochs.csv", epoch_rows, EPOCH_COLUMNS)
                results.write_meta(folder, {**meta, "epochs_done": epoch})
    return batch_rows, epoch_rows


def _check_learning(cfg, epoch_rows: list[dict], classes: int, meta: dict, say: bool) -> None:
    """Whether the run did not learn (sanity.did_not_learn), decided over its latest epoch from the second on:
    meta.json's did_not_learn holds that decision after every epoch (an interrupted run's record describes the
    epochs it finished, as a diverged run's does), and at the run's last epoch it is the run's. The line the
    run prints is that last decision, said once at its end; an earlier epoch at chance prints only a note that
    the end confirms or withdraws (sanity.chance_note), so that the log never states a conclusion that the
    record, the page's flag and the index's line then contradict."""
    losses, top1 = [e["loss"] for e in epoch_rows], [e["acc"] for e in epoch_rows]
    flag = None if "diverged" in meta else sanity.did_not_learn(losses, top1, classes)
    if flag is None:  # a NaN loss is its own record and flag
        meta.pop("did_not_learn", None)
    else:
        e = epoch_rows[-1]
        meta["did_not_learn"] = {
            "epoch": e["epoch"],
            "loss": e["loss"],
            "acc": e["acc"],
            "classes": classes,
            "chance_loss": sanity.chance_loss(classes),
            "message": flag.message,
        }
    if not say:
        return
    epoch = int(epoch_rows[-1]["epoch"])
    if epoch < cfg.epochs:  # mid-run: a note the first time, never the decision
        note = None if "diverged" in meta else sanity.chance_note(losses, top1, classes, cfg.epochs)
        if note is not None and _noted(losses, top1, classes, meta) == 0:
            _said(cfg, f"note: {note.plain()}")
        return
    noted = _noted(losses, top1, classes, meta)
    if flag is not None:
        _said(cfg, f"did not learn: {flag.message} (lr {cfg.lr}, batch {cfg.batch_size})")
    elif noted and "diverged" in meta:
        at = meta["diverged"]["epoch"]
        _said(
            cfg,
            f"the note after epoch {noted} is withdrawn: the run diverged at epoch {at} (meta.json's "
            "diverged), which is its record instead",
        )
    elif noted:
        _said(cfg, sanity.chance_left(losses, top1, classes, noted).plain())


def _noted(losses: list, top1: list, classes: int, meta: dict) -> int:
    """The epoch whose note (sanity.chance_note) this run printed before its latest epoch, or 0: the epochs
    before a divergence alone (after it the run says no note)."""
    upto = meta["diverged"]["epoch"] if "diverged" in meta else len(losses)
    return sanity.chance_noted(losses[:upto], top1[:upto], classes)


def _said(cfg, text: str) -> None:
    print(f"[{cfg.task}] {text}", file=sys.stderr, flush=True)


def _reduce_epoch(loss_v, corr_v, sizes, total, step_times, wait):
    """Per-batch loss (image-weighted mean) and correct counts summed over ranks; the times are those of
    the slowest rank (largest total), taken whole from that one rank: ranks wait for each other inside
    backward, so mixing per-batch maxima from different ranks would count the same wait twice."""
    import torch.distributed as dist

    n = torch.tensor(sizes, dtype=torch.float64)
    sums = distributed.all_reduce_sum(
        torch.stack(
            [torch.tensor(loss_v, dtype=torch.float64) * n, torch.tensor(corr_v, dtype=torch.float64), n]
        )
    )
    k = len(sizes)
    rows = torch.zeros(dist.get_world_size(), 1 + 2 * k, dtype=torch.float64)
    rows[dist.get_rank()] = torch.tensor(
        [total] + list(step_times) + list(wait.values[:k]), dtype=torch.float64
    )
    rows = distributed.all_reduce_sum(rows)  # every rank's row, on every rank
    times = rows[int(rows[:, 0].argmax())].tolist()
    wait.values[:k] = times[1 + k :]
    sizes = [int(round(x)) for x in sums[2].tolist()]
    return (
        (sums[0] / sums[2]).tolist(),
        [int(round(x)) for x in sums[1].tolist()],
        sizes,
        times[0],
        times[1 : 1 + k],
    )


def _flops_record(cfg: RunConfig, device: torch.device) -> dict[str, Any]:
    """FLOPs per image of a training step, the precision and the device's peak for it (hpml_lab.flops)."""
    # fp32 asked: TF32 where cuDNN uses it; a measured peak is this machine's one, kept beside the results
    pk = flops.peak(device, flops.precision_of(cfg, device), flops.peaks_path(cfg.results_dir))
    return {
        "per_image": flops.flops_per_image(cfg),
        "precision": pk.precision,
        "peak_tflops": pk.tflops,
        "peak_source": pk.source,
        **({"peak_measured_at": pk.measured_at, "machine": pk.machine} if pk.measured else {}),
        "convention": "multiply-add = 2 FLOPs; convolutions and matrix products, forward + backward",
    }


def check_output_file(path: str | os.PathLike, what: str) -> None:
    """A file this run will write must be writable before the run starts: one line naming what is wrong."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{what} {p} is a folder; give a file name such as {p / 'model.pt'}")
    # /dev/stdout and other links into /dev or /proc: an atomic save would replace the link (io.plain_target)
    try:
        plain_target(p)
    except OSError as e:
        raise ConfigError(f"{what} {p} {e.strerror}") from None
    if (
        p.exists() and not p.is_file()
    ):  # /dev/null, a FIFO: the atomic save would replace it, or fail after training
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
        print(
            f"warning: could not write {target} ({e.strerror or e}); the weights are kept in {kept}",
            file=sys.stderr,
            flush=True,
        )
        return str(kept)


def _atomic_save_model(model: nn.Module, path: str | os.PathLike) -> None:
    """CPU copies of the weights, so the file loads on a machine without the GPU it was trained on."""
    state = {k: v.detach().cpu() for k, v in fastpath.unwrap(model).state_dict().items()}
    with atomic_file(path, follow_links=True) as tmp:  # a file the user named: a link of theirs is followed
        torch.save(state, tmp)
