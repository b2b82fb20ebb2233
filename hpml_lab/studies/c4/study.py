"""C4's study: training with 1 worker and with the count C3 chose (read from C3's results, else C3's sweep run
now), each difference of data loading and compute per step; and a torch.profiler trace of a few steps.

    hpml-lab run c4 --profile smoke          # notebooks/c4_profiling.ipynb calls run()
    from hpml_lab import RunConfig
    from hpml_lab.studies.c4 import study
    out = study.run(RunConfig(task="c4"))     # C4Result: epochs, a summary per count, the count, the trace
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from ... import results
from ...config import RunConfig
from ...data import build_loader
from ...device import resolve_device, seed_everything
from ...profiling import summarize
from ...results import drop_warmup
from ...step import build_model, build_optimizer
from ...sweeps import run_sweep, tables
from ...training import train
from ...verdict import MIN_SAMPLES
from ..c3 import study as c3_study


# ------------------------------------------------------------------ C4: data vs compute
def best_workers_from_c3(cfg: RunConfig, c3_task: str = "c3") -> tuple[int, str] | None:
    """(best count, summary run folder) from the newest complete C3 summary with this batch size and
    dataset."""
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


def run(cfg: RunConfig, best: int | None = None, trace_steps: int = 3, log=print) -> C4Result:
    """Train with 1 worker and with C3's best count (read from results/c3, else measured now)
    and a torch.profiler trace of a few steps. Returns epochs, summary, best, source, trace."""
    from ...tracing import record_trace

    source, c3_rows = "given", None
    if best is None:
        found = best_workers_from_c3(cfg)
        if found:
            best, source, c3_rows = (
                found[0],
                f"read from C3's results ({found[1]})",
                c3_study.rows_of(found[1]),
            )
        else:
            # C3's own verdict needs MIN_SAMPLES timed epochs a count: C4's 2 epochs would leave every count
            # undecided
            c3_cfg = cfg.replace(task="c3", run_id="", epochs=max(cfg.epochs, MIN_SAMPLES))
            sweep = c3_study.run(c3_cfg, log=log)
            best, source, c3_rows = (
                sweep.best_workers,
                f"measured now with C3's sweep ({sweep.summary_dir})",
                sweep.rows,
            )
    against = best if best != 1 else runner_up(c3_rows, best)
    counts = sorted({1, against if against is not None else 1})
    items = run_sweep([cfg.replace(num_workers=n, run_id="") for n in counts], train, log=log)
    epochs = tables(items, "epochs", with_config=("num_workers",))
    summary = phase_summary(drop_warmup(epochs), "num_workers")
    # trace: a fresh model, the best count's loader
    device = resolve_device(cfg.device)
    seed_everything(cfg.seed)
    model = build_model(cfg, device)  # as timed: channels-last, compile, checkpointing as cfg asks
    opt = build_optimizer(cfg, model.parameters())
    tdir = cfg.run_dir().parent / f"trace-{cfg.replace(num_workers=best).config_hash()}"
    tr = record_trace(
        tdir,
        cfg.replace(num_workers=best),
        device,
        model,
        build_loader(cfg.replace(num_workers=best), device),
        opt,
        trace_steps,
        cfg,
    )
    return C4Result(epochs, summary, best, source, tr, items, c3_rows, against)


def phase_summary(steady_epochs: pd.DataFrame, by: str) -> pd.DataFrame:
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


def runner_up(rows: pd.DataFrame | None, best: int) -> int | None:
    """The count with C3's lowest median epoch other than `best` (None without C3's rows): when C3's best is 1
    worker, C4 compares 1 worker with it, so that the task still compares two counts."""
    if rows is None or rows.empty:
        return None
    medians = rows[rows["num_workers"] != best].groupby("num_workers")["seconds"].median()
    return int(medians.idxmin()) if len(medians) else None
