"""What the C2 report concludes: data-loading, training and total time per epoch, the first epoch kept out of
the summary; the first step of each epoch against the rest, and what the whole epochs show of the first epoch
in the light of that verdict (a start-up every epoch repeats is never denied); its epoch table.

    from hpml_lab.studies.c2 import conclusion
    answers, flags = conclusion.conclude(cfg, run)     # run: results.Run of hpml_lab.train
    conclusion.epoch_table(run.epochs, disjoint)       # the per-epoch times as the report shows them
"""

from __future__ import annotations

import pandas as pd

from ... import sanity
from ...answers import Answer, Number
from ...findings import Background, Finding, say
from ...flops import peak_number
from ...profiling import summarize
from ...results import drop_warmup
from ...verdict import compare, sample_record
from .._conclude import counted, epochs_shown, num, training_flags
from ..lab2_conclusion import first_epoch_finding, timing_disjoint, worker_restart


def conclude(cfg, run) -> tuple[list[Answer], list[sanity.Flag]]:
    """Data-loading, training and total time per epoch, the first epoch kept out of the summary; whether that
    first epoch took longer, said only when the later epochs were steady; the first step of each epoch against
    the rest (a verdict); the causes a small CPU usually has, as background."""
    ep = run.epochs
    # the epochs after warm-up that hold all three times: every number of the answer is of the same epochs
    # (review32: a missing data time gave a share of two epochs' data over three epochs' totals)
    steady = steady_epochs(ep)
    flags = training_flags(cfg, run.batches, ep, run.meta)
    few = sanity.too_few(len(steady), "epochs after warm-up")
    if few:
        flags.append(few)
    question = "C2: data-loading, training and total time per epoch"
    if steady.empty:
        return [
            Answer(
                question,
                say("No epoch after warm-up holds its data-loading, training and total times"),
                [],
                [],
                status="partial",
                missing="an epoch after warm-up with all three times",
            )
        ], flags
    data = num("data loading per epoch", steady["data_s"], "s")
    train = num("training per epoch", steady["train_s"], "s")
    total = num("total per epoch", steady["total_s"], "s")
    share = Number(
        "data-loading share of the epoch",
        float(100 * steady["data_s"].sum() / steady["total_s"].sum()),
        "%",
        "measured",
        n=len(steady),
    )
    other = Number(
        "other share of the epoch (neither timer)",
        float(
            100 * (steady["total_s"] - steady["data_s"] - steady["train_s"]).sum() / steady["total_s"].sum()
        ),
        "%",
        "measured",
        n=len(steady),
    )
    which = (
        say("the one epoch after the first")
        if len(steady) == 1
        else say("median of the {n} after the first", n=counted("epochs after the first", len(steady)))
    )
    head = say("Waiting for data takes {share} of an epoch (the times are below)", share=share)
    details = [
        say(
            "Per epoch ({which}): data loading {data}, training {train}, total {total}",
            which=which,
            data=data,
            train=train,
            total=total,
        ),
        say("The rest of the epoch, {other}, is time outside both timers (the loop's own work)", other=other)
        if timing_disjoint(cfg, run.meta)
        # the GPU's steps overlap the host's wait for data: no rest of the epoch is theirs to split
        else say(
            "Data loading and training overlap on this GPU (no synchronize between steps, sync_each_step "
            "off), so the epoch is not their sum and no rest of it is stated"
        ),
    ]
    background = [
        Background(
            "A first epoch often holds one-time costs (the loader workers' first start, allocator growth, "
            "kernel selection), which is why every summary here leaves it out."
        )
    ]
    fl = (run.meta or {}).get("flops")
    if fl and "mfu" in steady:
        peak = peak_number(fl)  # the machine's one peak, as the environment table states it
        mfu = num("training compute, share of this device's peak", steady["mfu"], "%", 100)
        if mfu.value > 100:
            # faster than the peak: that peak was measured low (the page's 'MFU above 100%' flag), no bound
            details.append(
                say(
                    "The training compute ran at more FLOP/s than {peak}, the peak measured for this device, "
                    "so that peak is no bound and no share of it can be read",
                    peak=peak,
                )
            )
        else:
            details.append(
                say(
                    "The training compute reached {mfu} of this device's peak; {peak} is that peak, not the "
                    "rate training ran at",
                    mfu=mfu,
                    peak=peak,
                )
            )
    # the first step of each epoch, then the whole epochs: both from the one verdict, so that the epochs'
    # sentence never denies a start-up the steps show
    step, verdict, repeats = first_step_finding(run.batches), None, False
    if step is not None:
        details.append(step)
        sv, rest, firsts = first_step_verdict(run.batches)
        verdict = {"first_step": sample_record(sv, rest, firsts)}
        repeats = sv.outcome == "better"  # a later step beats the first: each epoch starts slow
    details += warmup_findings(ep[ep["total_s"].notna()], repeats)
    if step is not None:  # the first step's time, explained where workers start again each epoch
        background += worker_restart(cfg, [cfg.num_workers])
    return [Answer(question, head, details, background, verdict=verdict)], flags


TIMES = ("data_s", "train_s", "total_s")


def steady_epochs(epochs: pd.DataFrame) -> pd.DataFrame:
    """The epochs after warm-up that hold all three times (data loading, training, total): the answer and the
    summary table read the same ones."""
    steady = drop_warmup(epochs)
    return steady.dropna(subset=[c for c in TIMES if c in steady])


def warmup_findings(ep: pd.DataFrame, repeats: bool = False) -> list[Finding]:
    """What the whole epochs show of the first epoch, left out of every summary (lab2_conclusion
    .first_epoch_finding): `repeats` when the first-step verdict found each epoch's first step slower, so that
    the sentence does not deny the start-up every epoch repeats."""
    f = first_epoch_finding(list(ep.total_s), repeats=repeats)
    return [] if f is None else [f]


def first_step_verdict(batches: pd.DataFrame):
    """Each epoch's first training step against the later steps: (verdict, later steps, first steps)."""
    firsts = list(batches.groupby("epoch")["train_s"].first())
    rest = list(batches[batches.groupby("epoch").cumcount() > 0]["train_s"])
    v = compare(  # each epoch's first step and its later steps take turns, so the load hits both alike
        rest,
        firsts,
        "a later step",
        "an epoch's first step",
        what="training time per step",
        interleaved=True,
    )
    return v, rest, firsts


def first_step_finding(batches: pd.DataFrame) -> Finding | None:
    """Each epoch's first training step against the later steps, as its verdict states it: a comparison within
    epochs (per step); where it finds the first step slower, what follows for the summaries: every epoch
    repeats that start-up, so leaving out the first epoch does not remove it. No table shows per-step
    times."""
    if not (batches.groupby("epoch").cumcount() > 0).any():
        return None
    v, _, _ = first_step_verdict(batches)
    said = say(
        "Within each epoch, per step (medians over the run's steps; a comparison of steps, not of whole "
        "epochs, and no table here shows it): {v}",
        v=v.finding("C2 first step"),
    )
    if v.outcome != "better":  # no start-up of its own in each epoch's first step shows
        return said
    return say(
        "{said}. So an epoch's first step typically takes longer than its later ones (a comparison of "
        "medians, not of every epoch); that start-up stays in each epoch's time, and leaving out the first "
        "epoch does not remove it",
        said=said,
    )


def epoch_table(epochs: pd.DataFrame, disjoint: bool = True) -> pd.DataFrame:
    """C2's per-epoch times as the report shows them; the rest of the epoch (total - data - training) only
    where the two intervals are disjoint (timing_disjoint), since where they overlap it is no part of the
    epoch."""
    ep = epochs.assign(other_s=epochs["total_s"] - epochs["data_s"] - epochs["train_s"])
    names = {
        "epoch": "epoch",
        "batches": "batches",
        "images": "images",
        "data_s": "data loading (s)",
        "train_s": "training (s)",
        **({"other_s": "other (s)"} if disjoint else {}),
        "total_s": "total (s)",
        "images_per_s": "images/s",
        "tflops": "TFLOP/s (training)",
        "mfu": "share of device peak",
    }
    return epochs_shown(ep, names)


def summary_table(epochs: pd.DataFrame) -> pd.DataFrame:
    """C2's summary over the epochs after warm-up: per time, its n, median, interquartile range (none under
    sanity.MIN_SAMPLES epochs, where the page's 'too few samples' flag says why: the table leaves the cell
    empty, '-', as every other page does), min and max."""
    steady = steady_epochs(epochs)  # the answer's epochs, each with all three times
    rows = []
    for col, label in (("data_s", "data loading"), ("train_s", "training"), ("total_s", "total epoch")):
        s = summarize(steady[col])
        rows.append(
            {
                "time": label,
                "n epochs": s["n"],
                "median (s)": s["median"],
                "IQR (s)": s["iqr"] if s["n"] >= sanity.MIN_SAMPLES else None,
                "min (s)": s["min"],
                "max (s)": s["max"],
            }
        )
    return pd.DataFrame(rows)
