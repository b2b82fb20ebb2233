"""C5's study: the same training on every device present (the CPU, and a CUDA GPU where there is one).

hpml-lab run c5 --profile smoke          # notebooks/c5_devices.ipynb calls run()
from hpml_lab import RunConfig
from hpml_lab.studies.c5 import study
out = study.run(RunConfig(task="c5"))     # C5Result: epochs and a summary per device; `note` without CUDA
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from ... import flops, results
from ...config import RunConfig
from ...profiling import summarize
from ...results import drop_warmup
from ...sweeps import run_sweep, tables
from ...training import train
from ..lab2 import stats_row


@dataclass
class C5Result:
    """C5: epoch times on every device present."""

    epochs: pd.DataFrame
    summary: pd.DataFrame
    devices: list
    note: str  # what could not run here (no CUDA), for the report
    items: list


# ------------------------------------------------------------------ C5: devices
def devices_present() -> list[str]:
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def step_mfu(item, batches: pd.DataFrame, step_s: float) -> float:
    """The training compute of the median step as a share of this device's peak (a fraction): the FLOPs of a
    step of the median batch over the median step time, over the peak the run recorded (meta.json's flops);
    nan without them."""
    fl = results.read_run(item.run_dir).meta.get("flops") or {}
    if not fl.get("per_image") or not fl.get("peak_tflops") or not len(batches):
        return float("nan")
    return flops.mfu(fl["per_image"] * float(batches["images"].median()), step_s, fl["peak_tflops"])


def run(cfg: RunConfig, log=print) -> C5Result:
    """The same training on every device present. Without CUDA there is only a CPU row, and `note` says so."""
    devs = devices_present()
    items = run_sweep([cfg.replace(device=d, run_id="") for d in devs], train, log=log)
    epochs = tables(items, "epochs", with_config=("device",))
    st, st_b = drop_warmup(epochs), drop_warmup(tables(items, "batches", with_config=("device",)))
    rows = []
    for d, item in zip(devs, items):
        g, all_g, b = st[st["device"] == d], epochs[epochs["device"] == d], st_b[st_b["device"] == d]
        step_s = summarize(b["train_s"])["median"]
        rows.append(
            {
                **stats_row(g["total_s"], device=d),
                "warmup_epoch_s": all_g["total_s"].iloc[0],
                # whole epochs (both sides of each share): images over the epochs' wall time, and the data
                # wait's share of it
                "images_per_s": g["images"].sum() / g["total_s"].sum(),
                "data_share": g["data_s"].sum() / g["total_s"].sum(),
                # the median training step of those epochs: the samples the GPU-vs-CPU verdict compares, and
                # its share of this device's peak (hpml_lab.flops) from that same step
                "step_compute_ms": 1000 * step_s,
                "mfu_pct": 100 * step_mfu(item, b, step_s),
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
