"""Lab 2 experiments C3 to C8: each writes result rows and meta.json under results/<task>/ and returns tables.

    hpml-lab run c3 --profile smoke          # the notebooks call these functions
    from hpml_lab import RunConfig
    from hpml_lab.studies import lab2
    sweep = lab2.c3_loader_sweep(RunConfig(task="c3"))     # DataLoader time per epoch vs num_workers
    lab2.c4_data_vs_compute(RunConfig(task="c4"))          # 1 worker vs the best count, plus a trace
    lab2.c5_devices(cfg); lab2.c6_optimizers(cfg); lab2.c7_batchnorm(cfg); lab2.c8_compile(cfg)

Every configuration goes through hpml_lab.sweeps.run_sweep, so a notebook run
again after an interruption reuses the configurations already complete (their
meta.json says when and where they ran) and computes only the rest. All timing
goes through hpml_lab.profiling; epoch 1 (warm-up) is kept in the rows and
excluded from the steady-state statistics, which say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from .. import results
from ..config import OPTIMIZERS, RunConfig
from ..data import build_loader, build_train_loader
from ..device import resolve_device, seed_everything
from ..envinfo import usable_cores
from ..fastpath import check_backend, compile_available
from ..io import atomic_write_csv
from ..profiling import WallClock, summarize
from ..results import drop_warmup
from ..sweeps import SweepItem, require_one_complete, run_sweep, tables
from ..training import build_model, build_optimizer, train
from ..verdict import MIN_SAMPLES
from .c3 import MAX_WORKERS
from .c3 import Settings as C3Settings  # noqa: F401 (C3's parameters live beside its TASK; the notebook's name)

LOADER_COLUMNS = ["num_workers", "repeat", "seconds", "batches", "images", "images_per_s"]
LOADER_NOTE = (
    "Total DataLoader time per epoch: a fresh iterator (so worker start-up is included, as in "
    "training) drained of every batch (or max_batches), no model. One untimed warm-up epoch per "
    "worker count (file cache, first imports in the workers) is excluded; then the timed repeats (the report says how many)."
)


def stats_row(values, **labels: Any) -> dict[str, Any]:
    """labels + n, median, IQR, min, max, mean of `values` (seconds)."""
    s = summarize(values)
    return {
        **labels,
        "n": s["n"],
        "median_s": s["median"],
        "iqr_s": s["iqr"] if s["n"] >= 3 else float("nan"),
        "min_s": s["min"],
        "max_s": s["max"],
        "mean_s": s["mean"],
    }


WARMUP_NOTE = (
    "Epoch 1 of every run is warm-up (worker start-up, allocator growth, kernel selection) and is excluded "
    "from the steady-state figures; a run of one epoch has nothing else, so there it is reported as is."
)


# ------------------------------------------------------------------ C3: loader workers
def _loader_cfg(cfg: RunConfig, n: int) -> RunConfig:
    c = cfg.replace(num_workers=n, run_id="")
    return c.replace(run_id=f"loader-w{n}-b{c.batch_size}-{c.config_hash()}")


def time_loader_epochs(cfg: RunConfig) -> list[dict[str, Any]]:
    """One warm-up + cfg.epochs timed passes over the lab's DataLoader with cfg.num_workers workers."""
    loader = build_train_loader(cfg, resolve_device(cfg.device))  # pinned memory on CUDA, as in training
    limit = len(loader) if cfg.max_batches == 0 else min(cfg.max_batches, len(loader))
    clock = WallClock("cpu")
    rows = []
    for rep in range(cfg.epochs + 1):
        batches = images = 0
        clock.start()
        it = iter(loader)
        for x, _y in it:
            batches += 1
            images += x.shape[0]
            if batches >= limit:
                break
        del it  # shuts the workers down: their start and stop belong to the epoch
        seconds = clock.stop()
        if rep > 0:
            rows.append(
                {
                    "num_workers": cfg.num_workers,
                    "repeat": rep,
                    "seconds": seconds,
                    "batches": batches,
                    "images": images,
                    "images_per_s": images / seconds,
                }
            )
    return rows


def _run_loader(cfg: RunConfig) -> None:
    """One loader configuration, with the run lifecycle (results.RunFolder): written into an attempt folder,
    landed only when complete; SIGTERM ends it as interrupted."""
    meta = results.new_meta(cfg, torch.device("cpu"), kind="loader", timing_note=LOADER_NOTE)
    with results.sigterm_interrupts(), results.RunFolder(cfg.run_dir()) as rf:
        rf.write_meta(meta)
        rows = time_loader_epochs(cfg)
        atomic_write_csv(rf.path / "loader.csv", rows, LOADER_COLUMNS)
        rf.complete({**meta, "finished_at": results.now()})


@dataclass
class LoaderSweep:
    summary: pd.DataFrame  # one row per worker count: n, median_s, iqr_s, min_s, max_s, ...
    rows: pd.DataFrame  # every timed epoch
    best_workers: int
    cores: int
    stop_reason: str
    stop: dict  # where the sweep stopped, as a table row (its numbers shown by the table formatter, not in prose)
    items: list[SweepItem] = field(default_factory=list)
    summary_dir: Path | None = None


def worker_counts(limit: int = MAX_WORKERS):
    """0, 1, 2, 4, 8, ... up to limit."""
    n = 0
    while n <= limit:
        yield n
        n = 1 if n == 0 else n * 2


def c3_loader_sweep(
    cfg: RunConfig, max_workers: int = MAX_WORKERS, tolerance: float = 0.03, patience: int = 1, log=print
) -> LoaderSweep:
    """DataLoader time per epoch for 0, 1, 2, 4, 8, ... workers until it stops improving.

    A count "improves" when its median epoch time is more than `tolerance` (3%) below the best so
    far; the sweep stops after `patience` + 1 counts in a row that do not (one slow count on a
    noisy machine does not end it), or at max_workers. Each count is one
    resumable configuration; the summary is written to results/<task>/loader-summary-<hash>/.
    """
    cores = usable_cores()
    items: list[SweepItem] = []
    best_n, best_median, reason = None, float("inf"), f"reached the cap of {max_workers} workers"
    stop = {"stopped": "at the cap", "cap (workers)": max_workers}
    misses: list[int] = []
    for n in worker_counts(max_workers):
        items += run_sweep([_loader_cfg(cfg, n)], _run_loader, log=log)
        median = summarize(results.read_run(items[-1].run_dir).table("loader")["seconds"])["median"]
        if median < best_median * (1 - tolerance):
            best_n, best_median, misses = n, median, []
            continue
        misses.append(n)
        if len(misses) > patience:
            reason = (
                f"{' and '.join(map(str, misses))} workers were not faster than {best_n} by more than "
                f"{tolerance:.0%} (best median {best_median:.3g} s)"
            )
            stop = {
                "stopped": "no improvement",
                "counts that did not improve": ", ".join(map(str, misses)),
                "best count so far": best_n,
                "its median (s)": best_median,
            }
            break
    from .lab2_answers import with_load

    # each count's epochs with the load per core before its run: the counts ran one after the other
    rows = tables(items, "loader")
    loads = {
        r.path.name: with_load(r, "loader")["load_per_core"].iloc[0]
        for r in (results.read_run(it.run_dir) for it in items if it.complete)
    }
    rows["load_per_core"] = rows["run_id"].map(loads)
    summary = pd.DataFrame(
        [
            stats_row(g["seconds"], num_workers=n, images=int(g["images"].iloc[0]))
            for n, g in rows.groupby("num_workers")
        ]
    )
    summary["images_per_s"] = summary["images"] / summary["median_s"]
    summary["best"] = summary["num_workers"] == best_n
    sdir = (
        cfg.run_dir().parent / f"loader-summary-b{cfg.batch_size}-{cfg.replace(num_workers=0).config_hash()}"
    )
    results.write_derived(
        sdir,
        {"summary": summary},
        results.new_meta(
            cfg.replace(num_workers=best_n),
            torch.device("cpu"),
            kind="loader_summary",
            best_workers=best_n,
            cpu_cores=cores,
            stop_reason=reason,
            timing_note=LOADER_NOTE,
            runs=[it.run_dir.name for it in items],
        ),
    )
    return LoaderSweep(summary, rows, best_n, cores, reason, stop, items, sdir)


# ------------------------------------------------------------------ C4: data vs compute
def best_workers_from_c3(cfg: RunConfig, c3_task: str = "c3") -> tuple[int, str] | None:
    """(best count, summary run folder) from the newest complete C3 summary with this batch size and dataset."""
    for run in results.load_runs(c3_task, cfg.results_dir):
        m = run.meta
        if (
            m.get("kind") == "loader_summary"
            and m["config"]["batch_size"] == cfg.batch_size
            and m["config"]["dataset"] == cfg.dataset
        ):
            return int(m["best_workers"]), str(run.path)
    return None


@dataclass
class C4Result:
    """C4: 1 worker against the best count; `summary` per worker count, `trace` of a few steps."""

    epochs: pd.DataFrame
    summary: pd.DataFrame
    best: int
    source: str  # where the best count came from (C3's results, or measured now)
    trace: Any  # tracing.Trace
    items: list  # sweeps.SweepItem per configuration
    c3_rows: pd.DataFrame | None = None  # C3's timed epochs behind `best` (None when given): its verdict
    against: int | None = (
        None  # the count 1 worker is compared with: `best`, or C3's next best when best is 1
    )


@dataclass
class C5Result:
    """C5: epoch times on every device present."""

    epochs: pd.DataFrame
    summary: pd.DataFrame
    devices: list
    note: str  # what could not run here (no CUDA), for the report
    items: list


@dataclass
class TrainingSweep:
    """C6 and C7: one training run per value of a setting (optimizer, norm)."""

    epochs: pd.DataFrame
    batches: pd.DataFrame
    summary: pd.DataFrame
    items: list


@dataclass
class C8Result:
    """C8: eager against torch.compile."""

    epochs: pd.DataFrame
    summary: pd.DataFrame
    speedup: float | None  # per-step compute, eager / compiled; None when only eager ran
    compile_cost_s: float | None
    message: str  # why compile did not run, or ""
    backend: str
    trace: Any
    traced_mode: str  # "compile" or "eager"
    items: list


def c4_data_vs_compute(cfg: RunConfig, best: int | None = None, trace_steps: int = 3, log=print) -> C4Result:
    """Train with 1 worker and with C3's best count (read from results/c3, else measured now)
    and a torch.profiler trace of a few steps. Returns epochs, summary, best, source, trace."""
    from ..tracing import trace_steps as _trace
    from .lab2_answers import c3_rows_of, runner_up

    source, c3_rows = "given", None
    if best is None:
        found = best_workers_from_c3(cfg)
        if found:
            best, source, c3_rows = found[0], f"read from C3's results ({found[1]})", c3_rows_of(found[1])
        else:
            # C3's own verdict needs MIN_SAMPLES timed epochs a count: C4's 2 epochs would leave every count undecided
            c3_cfg = cfg.replace(task="c3", run_id="", epochs=max(cfg.epochs, MIN_SAMPLES))
            sweep = c3_loader_sweep(c3_cfg, log=log)
            best, source, c3_rows = (
                sweep.best_workers,
                f"measured now with C3's sweep ({sweep.summary_dir})",
                sweep.rows,
            )
    against = best if best != 1 else runner_up(c3_rows, best)
    counts = sorted({1, against if against is not None else 1})
    items = run_sweep([cfg.replace(num_workers=n, run_id="") for n in counts], train, log=log)
    epochs = tables(items, "epochs", with_config=("num_workers",))
    summary = _phase_summary(drop_warmup(epochs), "num_workers")
    # trace: a fresh model, the best count's loader
    device = resolve_device(cfg.device)
    seed_everything(cfg.seed)
    model = build_model(cfg, device)  # as timed: channels-last, compile, checkpointing as cfg asks
    opt = build_optimizer(cfg, model.parameters())
    tdir = cfg.run_dir().parent / f"trace-{cfg.replace(num_workers=best).config_hash()}"
    tr = _trace(
        model,
        build_loader(cfg.replace(num_workers=best), device),
        device,
        opt,
        tdir / "trace.json",
        steps=trace_steps,
        cfg=cfg,
    )
    results.write_derived(
        tdir,
        {"top_ops": tr.top_ops},
        results.new_meta(
            cfg.replace(num_workers=best), device, kind="trace", steps=tr.steps, warmup_steps=tr.warmup
        ),
    )
    return C4Result(epochs, summary, best, source, tr, items, c3_rows, against)


def _phase_summary(steady_epochs: pd.DataFrame, by: str) -> pd.DataFrame:
    """Per group: n steady epochs, median data / train / total seconds, IQR of total, data share."""
    rows = []
    for key, g in steady_epochs.groupby(by, sort=False):
        tot = summarize(g["total_s"])
        rows.append(
            {
                by: key,
                "n": tot["n"],
                "data_median_s": g["data_s"].median(),
                "train_median_s": g["train_s"].median(),
                "total_median_s": tot["median"],
                "total_iqr_s": tot["iqr"] if tot["n"] >= 3 else float("nan"),  # n < 3: no spread
                "total_min_s": tot["min"],
                "total_max_s": tot["max"],
                "data_share": g["data_s"].sum() / g["total_s"].sum(),
            }
        )
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ C5: devices
def devices_present() -> list[str]:
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def c5_devices(cfg: RunConfig, log=print) -> C5Result:
    """The same training on every device present. Without CUDA there is only a CPU row, and `note` says so."""
    devs = devices_present()
    items = run_sweep([cfg.replace(device=d, run_id="") for d in devs], train, log=log)
    epochs = tables(items, "epochs", with_config=("device",))
    st, st_b = drop_warmup(epochs), drop_warmup(tables(items, "batches", with_config=("device",)))
    rows = []
    for d in devs:
        g, all_g, b = st[st["device"] == d], epochs[epochs["device"] == d], st_b[st_b["device"] == d]
        rows.append(
            {
                **stats_row(g["total_s"], device=d),
                "warmup_epoch_s": all_g["total_s"].iloc[0],
                "images_per_s": g["images"].sum() / g["total_s"].sum(),
                # the epoch holds data loading too: its share, and the step's own compute apart
                "data_share": g["data_s"].sum() / g["total_s"].sum(),
                "step_compute_ms": 1000 * summarize(b["train_s"])["median"],
                # training compute's share of this device's peak (hpml_lab.flops), median of the steady epochs
                "mfu_pct": 100 * float(g["mfu"].median()) if "mfu" in g and len(g) else float("nan"),
            }
        )
    summary = pd.DataFrame(rows)
    note = (
        ""
        if "cuda" in devs
        else "No CUDA GPU is present on this machine, so only the CPU was measured; there is no GPU row. "
        "Run this task on a GPU machine (device=auto) to add one."
    )
    if len(devs) == 2:  # a loader-bound GPU epoch hides the compute speedup: both ratios, each named
        summary["epoch_speedup_vs_cpu"] = summary["median_s"].iloc[0] / summary["median_s"]
        summary["compute_speedup_vs_cpu"] = summary["step_compute_ms"].iloc[0] / summary["step_compute_ms"]
    return C5Result(epochs, summary, devs, note, items)


# ------------------------------------------------------------------ C6 / C7: training sweeps
def _training_sweep(cfg: RunConfig, field_name: str, values, log=print) -> TrainingSweep:
    items = run_sweep(
        [cfg.replace(**{field_name: v, "run_id": ""}) for v in values], train, on_error="record", log=log
    )
    require_one_complete(items, cfg.task, field_name)  # every run failed: one line each on why
    epochs = tables(items, "epochs", with_config=(field_name,))
    batches = tables(items, "batches", with_config=(field_name,))
    st = drop_warmup(epochs)
    rows = []
    for v in values:
        item = next(i for i in items if getattr(i.cfg, field_name) == v)
        if not item.complete:
            rows.append({field_name: v, "status": item.status, "error": item.error})
            continue
        e, s = epochs[epochs[field_name] == v], st[st[field_name] == v]
        last = e.iloc[-1]
        finite = bool(pd.Series(e["loss"]).notna().all() and (e["loss"].abs() < float("inf")).all())
        rows.append(
            {
                field_name: v,
                "status": "complete" if finite else "diverged (loss not finite)",
                "epochs": len(e),
                "final_loss": last["loss"],
                "final_acc": last["acc"],
                "mean_loss": e["loss"].mean(),
                "mean_acc": e["acc"].mean(),
                **{k: val for k, val in stats_row(s["total_s"]).items()},
            }
        )
    return TrainingSweep(epochs, batches, pd.DataFrame(rows), items)


def c6_optimizers(cfg: RunConfig, optimizers=OPTIMIZERS, log=print) -> TrainingSweep:
    """SGD, SGD+Nesterov, Adagrad, Adadelta, Adam with the same lr / momentum / weight decay (where they apply)."""
    return _training_sweep(cfg, "optimizer", list(optimizers), log=log)


def c7_batchnorm(cfg: RunConfig, log=print) -> TrainingSweep:
    """The same model with BatchNorm ("bn") and without ("none"), default SGD."""
    return _training_sweep(cfg, "norm", ["bn", "none"], log=log)


# ------------------------------------------------------------------ C8: torch.compile
def c8_compile(cfg: RunConfig, trace_steps: int = 3, log=print) -> C8Result:
    """Eager vs torch.compile(model, backend=cfg.compile_backend), same config and seed.

    Epoch 1 of the compiled run includes compilation. Reports the first-epoch time of each,
    the steady-state median, the speedup (per-step compute after warm-up, eager median / compiled median) and the estimated
    compile cost (extra first-epoch time beyond eager's own warm-up). When compile is not
    available or fails, `message` says why and only the eager row is shown.
    """
    from ..tracing import trace_steps as _trace

    backend = cfg.compile_backend
    if hasattr(torch, "compile"):
        check_backend(backend)
    base = cfg.replace(run_id="")
    eager_cfg = base.replace(run_id=f"eager-{base.config_hash()}")
    comp_cfg = base.replace(compile=True, run_id=f"compile-{backend}-{base.config_hash()}")
    why_not = compile_available(backend, cfg.device)
    compiled_model = {}

    def run_compiled(c: RunConfig):  # train() compiles with cfg.compile_backend (hpml_lab.fastpath)
        out = train(c, extra_meta={"mode": "compile", "compile_backend": backend})
        compiled_model["m"] = out.model
        return out

    items = run_sweep([eager_cfg], lambda c: train(c, extra_meta={"mode": "eager"}), log=log)
    message = ""
    if why_not:
        message = f"torch.compile was not run: {why_not}. Only the eager row is shown."
    else:
        items += run_sweep([comp_cfg], run_compiled, on_error="record", log=log)
        if not items[-1].complete:
            message = (
                f"torch.compile (backend {backend}) failed: {items[-1].error}. "
                f"Only the eager row is shown; the error is recorded in {items[-1].run_dir}/meta.json."
            )
    for it in items:
        it_mode = "eager" if it.cfg.run_id.startswith("eager") else f"compile ({backend})"
        it.value = it_mode
    epochs = tables(items, "epochs")
    modes = {it.run_dir.name: it.value for it in items if it.complete}
    if not epochs.empty:
        epochs["mode"] = epochs["run_id"].map(modes)
    st = drop_warmup(epochs)
    rows = []
    for run_id, mode in modes.items():
        e, s = epochs[epochs["run_id"] == run_id], st[st["run_id"] == run_id]
        rows.append(
            {
                **stats_row(s["total_s"], mode=mode),
                "first_epoch_s": e["total_s"].iloc[0],
                "first_minus_steady_s": e["total_s"].iloc[0] - summarize(s["total_s"])["median"],
            }
        )
    summary = pd.DataFrame(rows)
    speedup = compile_cost = None
    if len(summary) == 2:
        eager, comp = summary.iloc[0], summary.iloc[1]
        step = (
            drop_warmup(tables([it for it in items if it.complete], "batches"))
            .groupby("run_id")["train_s"]
            .median()
        )
        ids = list(modes)
        speedup = float(step[ids[0]] / step[ids[1]])  # per-step compute: the data wait is not compile's doing
        compile_cost = comp["first_minus_steady_s"] - eager["first_minus_steady_s"]
    # trace: the compiled model when this call compiled it, else an eager model
    device = resolve_device(cfg.device)
    seed_everything(cfg.seed)
    traced = "m" in compiled_model
    model = compiled_model["m"] if traced else build_model(cfg.replace(compile=False), device)
    opt = build_optimizer(cfg, model.parameters())
    tdir = cfg.run_dir().parent / f"trace-{'compile-' + backend if traced else 'eager'}-{base.config_hash()}"
    tr = _trace(
        model, build_loader(cfg, device), device, opt, tdir / "trace.json", steps=trace_steps, cfg=cfg
    )
    results.write_derived(
        tdir,
        {"top_ops": tr.top_ops},
        results.new_meta(
            cfg,
            device,
            kind="trace",
            traced_mode="compile" if traced else "eager",
            steps=tr.steps,
            warmup_steps=tr.warmup,
        ),
    )
    return C8Result(
        epochs, summary, speedup, compile_cost, message, backend, tr, "compile" if traced else "eager", items
    )
