"""What the C5 report concludes: epoch time on each device present, and a GPU-vs-CPU verdict only where both
ran.

from hpml_lab.studies.c5 import conclusion
answers, flags = conclusion.conclude(cfg, out)     # out: study.C5Result
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from ... import sanity
from ...answers import Answer, Number
from ...findings import Background, join, say
from ...flops import peak_number
from ...results import drop_warmup
from ...verdict import sample_record
from .._conclude import (
    busy_of,
    compare_configs,
    counted,
    dedupe,
    epoch_word,
    learning_flags,
    loads_by,
    metas_by,
    num,
    readable_share,
    setting,
    share_flags,
    steady_batches,
)
from ..lab2_conclusion import first_epoch_finding, worker_restart

DEVICE_LABELS = {"cpu": "CPU", "cuda": "GPU"}


def summary_columns(summary) -> dict:
    """The headers of C5's summary table: each per-epoch value named as what it is, the median epoch after the
    first or the one epoch after it (review40: "median epoch (s)" beside "n epochs" 1, where the answer says
    "the one epoch after the first"), as C4's table names its epochs."""
    epoch = epoch_word(summary["n"], "the one epoch after the first")
    return {
        "n": "n epochs",
        "median_s": f"{epoch} (s)",
        "iqr_s": "IQR (s)",
        "min_s": "min (s)",
        "max_s": "max (s)",
        "mean_s": "mean (s)",
        "warmup_epoch_s": "epoch 1 (s)",
        "images_per_s": "images/s (whole epochs)",
        "mean_all_epochs_s": "mean incl. epoch 1 (s)",
        "data_share": "data wait, share of the epochs' time",
        "step_compute_ms": "compute per step (ms, median step)",
        "epoch_speedup_vs_cpu": f"epoch speedup vs CPU ({epoch})",
        "compute_speedup_vs_cpu": "compute speedup vs CPU (median step)",
        "mfu_pct": "median step's compute, % of device peak",
    }


def table_note(summary) -> str:
    """What the summary table's columns measure, in words, said only of the columns it has: whole epochs after
    the first (both sides of the data wait's share whole epochs), and the median training step of those
    epochs (compute per step; with a GPU its speedup, the samples the GPU-vs-CPU verdict compares)."""
    gpu = "compute_speedup_vs_cpu" in summary
    share = " and its share of the device's peak" if "mfu_pct" in summary else ""  # left out past the peak
    step = (
        "compute per step, its speedup" + share + ": the samples the GPU-vs-CPU verdict compares"
        if gpu
        else "compute per step" + share
    )
    epoch = "their median, spread and mean, " + ("their speedup, " if gpu else "")
    return (
        "The columns hold two kinds of measurement, each named in its header: whole epochs after the first ("
        + epoch
        + "images/s (their images over their seconds, all those epochs together, not at the median epoch), "
        "and the data wait's share of their time, both sides of it whole epochs), and the median "
        "training step of those epochs ("
        + step
        + "). The last column is the plain average over all epochs, warm-up included, as the lab words it."
    )


def _device_metas(out) -> dict:
    """Each device's record (its first complete run's meta.json), by device name."""
    return {str(v): m for v, m in metas_by(out.items, "device", unknown=True).items()}


def peak_flags(out) -> list[sanity.Flag]:
    """'MFU above 100%' for each device whose median step's share of its peak (the table's column) passed the
    whole of it: that device's measured peak is no bound (sanity.above_peak), as c1's and c2's pages say of
    theirs (a grader read 127% in the column with no word of it); else 'peak measured busy' where that peak
    was measured on a busy machine (_conclude.share_flags)."""
    summary = getattr(out, "summary", None)
    if summary is None or "mfu_pct" not in summary:
        return []
    metas = _device_metas(out)
    flags = []
    for row in summary.to_dict("records"):
        if row.get("mfu_pct") is None or not row["mfu_pct"] == row["mfu_pct"]:  # none recorded (nan)
            continue
        device = str(row["device"])
        share = Number(
            f"{device}: median step's share of device peak", float(row["mfu_pct"]), "%", "measured"
        )
        # above the peak, or a share of a peak measured busy: said as c1's and c2's pages say it
        flags += share_flags(metas.get(device), [share], label=device if len(summary) > 1 else "")
    return flags


def peaks_said(out) -> list:
    """Each device's own peak, which the table's share of device peak is of, named by its device (grade40g:
    the H200's C5 showed the GPU's 8.23% of a 494.5 TFLOP/s peak that neither the page nor its record
    stated)."""
    summary = getattr(out, "summary", None)
    if summary is None or "mfu_pct" not in summary:
        return []
    metas = _device_metas(out)
    parts = []
    for device in summary["device"]:
        fl = (metas.get(str(device)) or {}).get("flops") or {}
        if fl.get("peak_tflops"):
            peak = peak_number(fl)
            parts.append(
                say(
                    "{peak} for the {d}",
                    peak=replace(peak, name=f"{device}: {peak.name}"),
                    d=DEVICE_LABELS.get(str(device), str(device)),
                )
            )
    if not parts:
        return []
    return [
        say(
            "The table's shares of device peak are each of its device's own peak: {p}",
            p=join(parts, ", ", " and "),
        )
    ]


def conclude(cfg, out) -> tuple[list[Answer], list[sanity.Flag]]:
    """Epoch time on each device present; a GPU-vs-CPU verdict only when both ran (else partial: needs a GPU);
    the devices ran one after the other, which the verdict knows."""
    ep = out.epochs
    flags: list = [busy_of(out)]
    # each device's run's own record of whether it learned, as the line the run printed at its end says
    flags += learning_flags(
        out.items,
        lambda meta: (
            DEVICE_LABELS.get(str((meta.get("config") or {}).get("device")), "") if len(out.items) > 1 else ""
        ),
    )
    flags += peak_flags(out)
    said = []  # one sentence per device, the CPU's first: each names its own device
    dropped = []  # per device: what its first epoch, left out as warm-up, showed
    for device, g in sorted(ep.groupby("device", sort=False), key=lambda x: x[0] != "cpu"):
        label = DEVICE_LABELS.get(str(device), str(device))
        trend = sanity.trend(list(g["total_s"]), label=str(device))
        steady = drop_warmup(g)
        flags += [trend, sanity.too_few(len(steady), f"{device} epochs after warm-up")]
        x = num(f"{device}: epoch time (after warm-up)", steady["total_s"], "s")
        if trend is not None and trend.kind == "no steady state":
            said.append(
                say(
                    "The {d} epochs never settled (see the flag), so no typical {d} epoch time can be given; "
                    "their median is {x}",
                    d=label,
                    x=x,
                )
            )
        else:
            how = "median after warm-up" if (x.n or 0) > 1 else "the one epoch after the first"
            said.append(say("A {d} epoch took {x} (" + how + ")", d=label, x=x))
        if len(g) > 1:  # the lab's "average epoch time": every epoch, the first included, beside the median
            mean = Number(
                f"{device}: mean epoch time (all epochs)",
                float(g["total_s"].mean()),
                "s",
                "measured",
                n=len(g),
            )
            said.append(
                say(
                    "The plain mean of all {n} {d} epochs, the first included, is {m}",
                    n=counted(f"{device}: epochs", len(g)),
                    d=label,
                    m=mean,
                )
            )
        note = first_epoch_finding(list(g["total_s"]), who=f" on the {label}", name=f"{device}: ")
        if note is not None:
            dropped.append(note)
    question = "C5: average epoch time on GPU vs CPU"
    if "cuda" not in out.devices:
        head = say("No GPU was present, so there is no GPU time and no speedup")
        return [
            Answer(
                question,
                head,
                [*said, *dropped, *peaks_said(out)],
                worker_restart(cfg, [cfg.num_workers]),
                status="partial",
                missing="a GPU: run this task on a CUDA machine",
            )
        ], dedupe(flags)
    bt = steady_batches(out.items, "device", steps=True)  # compute per step: one sample an interval timed
    v, xa, xb = compare_configs(
        bt,
        "device",
        "cuda",
        "cpu",
        "train_s",
        "compute per step",
        "GPU",
        "CPU",
        loads=loads_by(out.items, "device"),
    )
    head = say("{v}", v=v.short("C5 compute")).up()
    details = [say("{v}", v=v.finding("C5 compute")).up(), *said, *dropped, *peaks_said(out)]
    if cfg.max_batches:  # e.g. the GPU kit's profile: the CPU row would otherwise take most of a lease
        details.append(
            say(
                "Every epoch, on both devices, was cut at {m} batches: these are partial epochs, and the "
                "comparison is of compute per step",
                m=setting("max_batches", int(cfg.max_batches)),
            )
        )
    background = [
        Background(
            "On a GPU the epoch's wall time is synchronized with the device at both ends and each step's "
            "work is timed with CUDA events, so asynchronous launches are not mistaken for finished work."
        ),
        *worker_restart(cfg, [cfg.num_workers]),  # grade38a: its first steps after the first epoch
    ]
    return [Answer(question, head, details, background, verdict=sample_record(v, xa, xb))], dedupe(flags)


def shown_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """The per-device summary as the page's table shows it: no share of a peak that some share passed
    (readable_share), as the page's 'MFU above 100%' flag says none can be read."""
    return readable_share(summary, "mfu_pct", 100)
