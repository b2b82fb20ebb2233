"""What several Lab 2 tasks share when they run: a timing summary row, the warm-up note their pages show, and
the training sweep (one training run per value of a setting, such as the optimizer or the normalisation). Each
task's own run is its folder's study.py (hpml_lab/studies/<task_id>/).

    from hpml_lab.studies import lab2
    out = lab2.training_sweep(cfg, "optimizer", ["sgd", "adam"])   # one training run per optimizer
    row = lab2.stats_row(seconds, num_workers=2)                    # n, median, IQR, min, max, mean

Every configuration goes through hpml_lab.sweeps.run_sweep, so a notebook run again after an interruption
reuses the configurations already complete (their meta.json says when and where they ran) and computes only
the rest. All timing goes through hpml_lab.profiling; epoch 1 (warm-up) is kept in the rows and excluded from
the steady-state statistics, which say so."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..config import RunConfig
from ..profiling import summarize
from ..results import drop_warmup
from ..sweeps import require_one_complete, run_sweep, tables
from ..training import train


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


# Words only (no digit): the pages show it as a note outside the record's slots (claims.check_page)
WARMUP_NOTE = (
    "The first epoch of every run is left out of the steady-state figures as warm-up, by rule: it is "
    "where one-time costs (the loader workers' first start, allocator growth, kernel selection) fall when "
    "there are any, so it is left out whether or not this run's first epoch took longer; a run of a single "
    "epoch has nothing else, so there it is reported as is."
)


@dataclass
class TrainingSweep:
    """One training run per value of a setting (optimizer, norm): every epoch, every batch, a row per
    value."""

    epochs: pd.DataFrame
    batches: pd.DataFrame
    summary: pd.DataFrame
    items: list


# ------------------------------------------------ training sweeps: one run per value of a setting
def training_sweep(cfg: RunConfig, field_name: str, values, log=print) -> TrainingSweep:
    """One training run of cfg per value of `field_name`, each recorded even when it fails (a row with its
    status and error); every run failing is one line each on why."""
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
