"""What the Lab 2 reports C1 to C8 conclude (the questions: questions_answers.py), computed: one function per task turns its study's
result (lab2.C4Result, lab2.TrainingSweep, ...; a results.Run for C1 and C2) into the answer record's answers
(hpml_lab.answers.Answer, every number tagged) and the sanity flags that apply.

    from hpml_lab.studies import lab2_answers
    nb.answer(cfg, info, *lab2_answers.c1(cfg, run))     # at the end of the C1 notebook

No sentence here states a direction it did not compute: comparisons come from hpml_lab.verdict, flags from
hpml_lab.sanity. tests/studies/test_conclusions.py and test_findings.py feed canned results to every branch.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from .. import sanity
from ..answers import Answer, Number
from ..data import classes_of
from ..findings import Background, Finding, join, say
from ..flops import peak_number
from ..profiling import summarize
from ..results import drop_warmup, read_run
from ..verdict import MIN_SAMPLES, best, compare, sample_record
from ._conclude import (
    busy_of,
    compare_configs,
    counted,
    dedupe,
    loads_by,
    num,
    on_gpu,
    sampling,
    setting,
    steady_batches,
    training_flags,
    twin_noise,
    worker_label,
    workers,
    workers_list,
)
from ._conclude import timing_disjoint as _timing_disjoint


def _ends(k: Number, which: str) -> Finding:
    """'the last 4 batches' / 'the first batch', the count a Number of the record."""
    return say(f"the {which} batch") if k.value == 1 else say(f"the {which} {{k}} batches", k=k)


def c1(cfg, run) -> tuple[list[Answer], list[sanity.Flag]]:
    """Per-batch loss and top-1: where they started and ended, and one learning headline decided from verdicts of
    the last batches against the first (loss and top-1) and top-1 against chance; diverged runs are not a result.
    The headline states the verdict that decided it; a loss that did not measurably change says so as a verdict."""
    b = run.batches
    k = max(1, len(b) // 10)
    first, last = b.head(k), b.tail(k)
    classes = classes_of(cfg, run.meta)
    flags = training_flags(cfg, b, run.epochs, run.meta)
    diverged = any(f.kind == "diverged" for f in flags)
    kn = counted("batches at each end", k)
    la, lb = _ends(kn, "last"), _ends(kn, "first")
    # the first batches ran before the last ones (one run), but a loss or top-1 does not depend on the load
    seq = dict(interleaved=False)
    # a verdict's ratio is of medians: its sentence names that aggregate (the means are said beside it, as means)
    v = compare(last["loss"], first["loss"], la.plain(), lb.plain(), what="median training loss", **seq)
    va = compare(
        last["acc"], first["acc"], la.plain(), lb.plain(), what="median top-1", lower_is_better=False, **seq
    )
    l0 = Number("mean loss, first batches", float(first["loss"].mean()), "", "measured", n=k)
    l1 = Number("mean loss, last batches", float(last["loss"].mean()), "", "measured", n=k)
    top0 = Number("top-1, first batches", float(100 * first["acc"].mean()), "%", "measured", n=k)
    top1 = Number("top-1, last batches", float(100 * last["acc"].mean()), "%", "measured", n=k)
    chance = Number(
        "chance top-1", 100 / classes, "%", "predicted", source=f"1 / {classes} classes: a uniform guess"
    )
    total = counted("batches", len(b))
    loss_v, acc_v = v.finding("C1 loss", la, lb), va.finding("C1 top-1", la, lb)
    rise = say(
        "the mean top-1 went from {a} over {lb} to {b} over {la} ({n} batches in all; chance {c})",
        a=top0,
        b=top1,
        lb=lb,
        la=la,
        n=total,
        c=chance,
    )
    above = top1.value > chance.value
    # a loss not clearly below chance is no learning, whatever top-1 did (c7 says "has not learned" of it)
    loss_at_chance = sanity.at_chance(list(b["loss"]), classes)
    details: list = []
    chance_loss = Number(
        "chance loss", sanity.chance_loss(classes), "", "predicted", source=f"ln {classes}: a uniform guess"
    )
    # the headline is the verdict in words, read in one breath (at most one number); the full statement, with its
    # interval and counts, is the first detail
    end, start = say("the end"), say("the start")
    loss_s, acc_s = v.short("C1 loss", end, start), va.short("C1 top-1", end, start)
    if diverged:
        cl = chance_loss
        finite = int(b["loss"].map(math.isfinite).sum())
        if finite == len(b):
            head = say(
                "Training diverged: the loss ended at {l1}, above chance; these curves are not a result",
                l1=l1,
            )
            details = [say("The chance loss is {cl}", cl=cl)]
        else:  # NaN or inf: no number to state (a record refuses one), where it happened instead
            head = say("Training diverged: the loss became NaN or infinite; these curves are not a result")
            details = [
                say(
                    "The loss was finite for {f} of {n} batches (chance loss {cl})",
                    f=counted("batches with a finite loss", finite),
                    n=total,
                    cl=cl,
                )
            ]
    elif v.outcome == "better" and above and not loss_at_chance:
        head = say("The run learned: {v}", v=loss_s)
        details = [say("{v}", v=loss_v).up(), say("{v}", v=acc_v).up(), say("{r}: above chance", r=rise).up()]
    elif v.outcome == "better" and not loss_at_chance:
        head = say("No learning shows in the accuracy yet: top-1 is not above chance")
        details = [say("{r}, not above chance", r=rise).up(), say("{v}", v=loss_v).up()]
    elif v.outcome == "better":
        head = say(
            "This run does not show learning: its loss ended not clearly below chance ({cl})", cl=chance_loss
        )
        details = [say("Although {v}", v=loss_v), say("{v}", v=acc_v).up(), say("{r}", r=rise).up()]
    elif v.outcome == "tie" and v.reason != "too few samples" and va.outcome == "better" and above:
        # the two measures disagree: say both, neither "learned" (the loss ties) nor "no learning" (top-1 rose)
        head = say("Mixed evidence of learning: {va}, but not on the loss", va=acc_s)
        details = [say("{va}", va=acc_v).up(), say("But {v}", v=loss_v), say("{r}", r=rise).up()]
    elif v.outcome == "tie" and v.reason != "too few samples" and va.outcome == "better":
        head = say("This run does not show learning: {v}", v=loss_s)
        details = [say("{v}", v=loss_v).up(), say("{v}", v=acc_v).up(), say("{r}", r=rise).up()]
    elif v.reason == "too few samples":
        head = say("Too few batches at each end to tell whether the run learned")
        details = [
            say("{v}", v=loss_v).up(),
            say(
                "The mean loss went from {l0} over {lb} to {l1} over {la}, and {r}",
                l0=l0,
                lb=lb,
                l1=l1,
                la=la,
                r=rise,
            ),
        ]
    elif v.outcome == "worse":
        head = say("The run did not learn: {v}", v=loss_s)
        details = [say("{v}", v=loss_v).up(), say("{v}", v=acc_v).up(), say("{r}", r=rise).up()]
    else:
        head = say("The run did not measurably learn: {v}", v=loss_s)
        details = [say("{v}", v=loss_v).up(), say("{r}", r=rise).up()]
    background = [
        Background(
            "This is training accuracy on augmented images, not test accuracy; one seed says nothing about "
            "run-to-run spread."
        )
    ]
    verdict = None
    if not diverged:
        verdict = {
            "loss": sample_record(v, last["loss"], first["loss"]),
            "top1": sample_record(va, last["acc"], first["acc"]),
        }
    return [
        Answer("C1: per-batch training loss and top-1 accuracy", head, details, background, verdict=verdict)
    ], flags


def busy_peak_note(fl: dict, machine: dict | None) -> Finding | None:
    """The caveat an MFU needs when its peak was measured on a busy machine (or its load is unknown)."""
    peak_load = (fl or {}).get("machine") or machine
    if sanity.busy(peak_load):
        return say(
            "The peak was measured while the machine was busy, so this share is uncertain: a peak measured at "
            "another load gives another share"
        )
    return None


def timing_disjoint(cfg, meta) -> bool:
    """_conclude.timing_disjoint for a run of `cfg` (its sync_each_step) whose meta is `meta`."""
    return _timing_disjoint(cfg.sync_each_step, meta)


def timing_method(cfg, meta) -> list[Finding]:
    """How train() timed this run, said only as far as its settings make it true: what data loading holds (worker
    start-up only with workers; a device-resident loader's queued work), how training is timed on this device,
    whether the two intervals can overlap (sync_each_step, the device), and what the rest of the epoch is."""
    gpu, synced = on_gpu(meta), bool(cfg.sync_each_step)
    if cfg.loader == "tensor":
        data = (
            "Data loading is the time next(loader) takes to crop, flip and normalise a batch of the dataset held "
            "on the device"
            + (
                ": on the GPU, without a synchronize after each step, that is only the time to queue the work, "
                "whose run time falls in neither interval, only in the total"
                if gpu and not synced
                else ", its work waited for before the step starts"
                if gpu
                else ""
            )
        )
        data = say(data)
    elif cfg.num_workers > 0:
        data = say(
            "Data loading is the host's wait in next(loader), the start of the loader's worker processes on an "
            "epoch's first batch included; the host-to-device copy is not data loading but part of training"
        )
    else:
        data = say(
            "Data loading is the time next(loader) takes, the training process reading and augmenting each batch "
            "itself (no worker processes); the host-to-device copy is not data loading but part of training"
        )
    if not gpu:
        timed = say(
            "Training (copy, forward, backward, optimizer step) is timed with perf_counter: on the CPU the work runs "
            "as it is issued, so the two intervals never overlap and data loading + training is at most the total"
        )
    elif synced:
        timed = say(
            "Training (copy, forward, backward, optimizer step) is timed with CUDA events, and the device is "
            "synchronized after every step (sync_each_step on), so the two intervals never overlap and data "
            "loading + training is at most the total"
        )
    else:
        timed = say(
            "Training (copy, forward, backward, optimizer step) is timed with CUDA events read at the epoch's end, "
            "and the device is not synchronized between steps (sync_each_step off): the host fetches the next "
            "batch while the GPU still works, so the two intervals can overlap and data loading + training can "
            "exceed the total"
        )
    total = say(
        "The total is the synchronized wall time of the whole epoch; "
        + (
            "the rest of it is the loop's own work (metrics, Python)"
            if timing_disjoint(cfg, meta)
            else "where the two intervals overlap, total minus data loading minus training is not the loop's own "
            "work, and it is not shown"
        )
    )
    # shown on their own (nb.said), each a sentence
    return [say("{x}.", x=f) for f in (data, timed, total)]


def c2(cfg, run) -> tuple[list[Answer], list[sanity.Flag]]:
    """Data-loading, training and total time per epoch, the first epoch kept out of the summary; whether that first
    epoch took longer, said only when the later epochs were steady; the first step of each epoch against the rest
    (a verdict); the causes a small CPU usually has, as background."""
    ep = run.epochs
    steady = drop_warmup(ep)
    flags = training_flags(cfg, run.batches, ep, run.meta)
    few = sanity.too_few(len(steady), "epochs after warm-up")
    if few:
        flags.append(few)
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
            "Data loading and training overlap on this GPU (no synchronize between steps, sync_each_step off), "
            "so the epoch is not their sum and no rest of it is stated"
        ),
    ]
    background = [
        Background(
            "A first epoch often holds one-time costs (worker start-up, allocator growth, kernel selection), which "
            "is why every summary here leaves it out."
        )
    ]
    fl = (run.meta or {}).get("flops")
    if fl and "mfu" in steady:
        peak = peak_number(fl)  # the machine's one peak, as the environment table states it
        mfu = num("training compute, share of this device's peak", steady["mfu"], "%", 100)
        details.append(
            say(
                "The training compute reached {mfu} of this device's peak; {peak} is that peak, not the rate "
                "training ran at",
                mfu=mfu,
                peak=peak,
            )
        )
        if mfu.value > 100:
            details.append(say("That is more than the whole peak: the peak was measured under another load"))
            background.append(
                Background(
                    "A share above the whole peak means the peak was measured while the machine was busier than "
                    "during training: read it as near this CPU's own matrix-product speed."
                )
            )
        note = busy_peak_note(fl, (run.meta or {}).get("machine"))
        if note is not None:
            details.append(note)
    details += warmup_findings(ep)
    step, verdict = first_step_finding(run.batches), None
    if step is not None:
        details.append(step)
        sv, rest, firsts = first_step_verdict(run.batches)
        verdict = {"first_step": sample_record(sv, rest, firsts)}
    if (
        step is not None and cfg.num_workers > 0
    ):  # with no worker process there is no worker start-up to explain
        background.append(
            Background(
                "On a small CPU the loader's worker processes start at each epoch and share the cores with "
                "training, so part of their start-up can land in the first step's training time."
            )
        )
    return [
        Answer(
            "C2: data-loading, training and total time per epoch", head, details, background, verdict=verdict
        )
    ], flags


STEADY_SPREAD = 1.1  # later epochs whose longest is more than this times the shortest are not steady


def warmup_findings(ep: pd.DataFrame) -> list[Finding]:
    """Whether the first epoch took longer, as far as the data show it: said only when the later epochs were steady
    (a climbing load makes later epochs longer, and a warm-up then cannot be seen)."""
    if len(ep) < 2:
        return []
    later = list(ep.iloc[1:].total_s)
    first = Number("first epoch", float(ep.iloc[0].total_s), "s", "measured", n=1)
    lo = Number("shortest later epoch", float(min(later)), "s", "measured", n=1)
    hi = Number("longest later epoch", float(max(later)), "s", "measured", n=1)
    if first.value > hi.value:  # single values side by side, no verdict: "took longer than each"
        return [
            say("The first epoch took {first}, longer than each later one (at most {hi})", first=first, hi=hi)
        ]
    if len(later) > 1 and hi.value > STEADY_SPREAD * lo.value:
        return [
            say(
                "The first epoch took {first}, but the later epochs were not steady ({lo} to {hi}), so this run "
                "cannot show whether the first holds a warm-up",
                first=first,
                lo=lo,
                hi=hi,
            )
        ]
    span = say("{lo}", lo=lo) if len(later) == 1 else say("{lo} to {hi}", lo=lo, hi=hi)
    return [
        say(
            "The first epoch took {first}, no longer than the later ones ({span}): no warm-up shows in this run",
            first=first,
            span=span,
        )
    ]


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
    epochs (per step), which the per-epoch warm-up sentence does not contradict; no table shows per-step times."""
    if not (batches.groupby("epoch").cumcount() > 0).any():
        return None
    v, _, _ = first_step_verdict(batches)
    return say(
        "Within each epoch, per step (medians over the run's steps; a comparison of steps, not of whole epochs, "
        "and no table here shows it): {v}",
        v=v.finding("C2 first step"),
    )


# C3 times the loader alone: no model, optimizer or lr to compare, but the lab's batch and whole dataset
C3_LAB = {"batch_size": 128, "max_batches": 0, "subset": 0}


def best_findings(b, labels: dict, name: str) -> list[Finding]:
    """Each verdict of a verdict.best() (the best against every other label) as a Finding: a summary over several
    comparisons states them all, never only the first."""
    return [
        say(
            "Against {other}: {v}", other=labels[k], v=v.finding(f"{name} vs {k}", labels[b.label], labels[k])
        )
        for k, v in b.verdicts.items()
    ]


def too_few_why(vs, name: str) -> Finding:
    """How few epochs the undecided verdicts `vs` had, and how many a verdict needs."""
    least = min(min(v.n_a, v.n_b) for v in vs)
    return say(
        "as few as {n} epochs timed for a count, and a verdict needs {min} on each side",
        n=counted(f"{name}: fewest epochs timed for a count", least),
        min=Number(f"{name}: samples needed", MIN_SAMPLES, "", "setting", source="verdict.MIN_SAMPLES"),
    )


def too_few_split(b, name: str) -> tuple[list, list, Finding | None]:
    """(counts tied with the best because a verdict could decide, counts not decided because either side had
    fewer than MIN_SAMPLES samples, the finding that says how few were timed and how many are needed or None):
    too few samples is no evidence of a tie, and a sentence must not call it one."""
    tied = [k for k in b.tied if k != b.label]
    few = [k for k in tied if b.verdicts[k].undecided]
    if not few:
        return tied, [], None
    return [k for k in tied if k not in few], few, too_few_why([b.verdicts[k] for k in few], name)


def c2_epoch_table(epochs: pd.DataFrame, disjoint: bool = True) -> pd.DataFrame:
    """C2's per-epoch times as the report shows them; the rest of the epoch (total - data - training) only where
    the two intervals are disjoint (timing_disjoint), since where they overlap it is no part of the epoch."""
    ep = epochs.assign(other_s=epochs["total_s"] - epochs["data_s"] - epochs["train_s"])
    cols = ["epoch", "batches", "images", "data_s", "train_s", *(["other_s"] if disjoint else []), "total_s"]
    cols += ["images_per_s", "tflops", "mfu"]
    return ep[[c for c in cols if c in ep]].rename(
        columns={
            "data_s": "data loading (s)",
            "train_s": "training (s)",
            "other_s": "other (s)",
            "total_s": "total (s)",
            "images_per_s": "images/s",
            "tflops": "TFLOP/s (training)",
            "mfu": "share of device peak",
        }
    )


def c3(cfg, sweep) -> tuple[list[Answer], list[sanity.Flag]]:
    """The best DataLoader worker count, with every count the data cannot separate from it called a tie; each
    comparison stated; the counts ran one after the other (a fact of the design, said); what more counts than
    cores usually cost is background, not a finding of this run."""
    samples = {int(n): list(g["seconds"]) for n, g in sweep.rows.groupby("num_workers")}
    b = best(samples, what="DataLoader time per epoch", loads=c3_loads(sweep.rows))
    labels = {n: worker_label(n, f"C3 worker count {n}") for n in samples}
    nums = {n: num(f"{n} worker{'' if n == 1 else 's'}, epoch", v, "s") for n, v in sorted(samples.items())}
    tied, few, why = too_few_split(b, "C3")
    separated = len(b.verdicts) - len(tied) - len(few)
    if few and not tied and not separated:
        head = say("No best worker count: too few epochs were timed to tell the counts apart")
        lead = say(
            "{best} had the lowest median ({med} per epoch), but too few epochs were timed to tell it from any "
            "other count ({why}), so this run names no best count",
            best=labels[b.label],
            med=nums[b.label],
            why=why,
        )
    elif tied or few:
        parts = []
        if tied:
            parts.append(say("{t}: a tie", t=join([labels[n] for n in tied], ", ", " and ")))
        if few:
            parts.append(
                say(
                    "{f}, of which too few epochs were timed ({why})",
                    f=join([labels[n] for n in few], ", ", " and "),
                    why=why,
                )
            )
        head = say(
            "No single best worker count: the lowest median, {best}, cannot be told apart from some others",
            best=labels[b.label],
        )
        lead = say(
            "{best} had the lowest median ({med} per epoch) but cannot be told apart from {parts}, so this run "
            "shows no single best count",
            best=labels[b.label],
            med=nums[b.label],
            parts=join(parts, "; nor from "),
        )
    else:
        head = say("Best worker count: {best}, separated from every other count tried", best=labels[b.label])
        lead = say(
            "{best} took {med} per epoch (median), separated from each of the {k} other counts tried",
            best=labels[b.label],
            med=nums[b.label],
            k=counted("other counts tried", separated),
        )
    per_count = [say("{w} {t}", w=labels[n], t=nums[n]) for n in sorted(nums)]
    details = [lead.up(), say("Per count (median epoch): {all}", all=join(per_count, ", "))]
    details += best_findings(b, labels, "C3")
    design = sampling(b.verdicts.values())
    if design == "sequential":
        details.append(
            say(
                "The counts ran one after the other, smallest first, so a change in the machine's load during the "
                "sweep shows up as a difference between counts"
            )
        )
    elif design == "interleaved":
        details.append(say("The counts took turns, so a change in the machine's load hit them alike"))
    cores = getattr(sweep, "cores", None)
    over = [n for n in samples if cores and n > cores]
    if over:
        details.append(
            say(
                "This process may use {cores} CPU cores; {over} of the counts tried exceed that",
                cores=setting("usable CPU cores", int(cores), source="os.sched_getaffinity"),
                over=counted("counts above the usable cores", len(over)),
            )
        )
    background = [
        Background(
            "Worker processes beyond the usable cores time-share them: they usually add start-up and scheduling "
            "cost without adding compute. Every epoch pays the workers' start-up (non-persistent workers), which "
            "weighs more the shorter the epoch; in training the workers also compete with the training process, "
            "so the best count for training can differ from this loader-only one (C4 checks it)."
        )
    ]
    flags = [busy_of(sweep)]
    fewest = min(len(v) for v in samples.values())
    flags.append(sanity.too_few(fewest, "timed epochs per worker count"))
    verdicts = {str(k): v.as_dict() for k, v in b.verdicts.items()}
    ans = Answer(
        "C3: DataLoader time per epoch against workers; the best count",
        head,
        details,
        background,
        verdict={
            "best": b.label,
            "tied": list(b.tied),  # undecided counts among them: too few samples to compare (not a tie)
            "undecided": few,
            "against": verdicts,
            "samples": {str(k): v for k, v in samples.items()},
        },
    )
    return [ans], [f for f in flags if f is not None]


def c3_rows_of(summary_dir: str) -> pd.DataFrame | None:
    """The timed epochs of the C3 sweep a loader summary was made from, each with its run's load per core (None
    when they are gone)."""
    try:
        runs = read_run(Path(summary_dir)).meta.get("runs", [])
        return pd.concat([with_load(read_run(Path(summary_dir).parent / r), "loader") for r in runs])
    except (OSError, ValueError, KeyError):
        return None


def with_load(run, table: str) -> pd.DataFrame:
    """A run's table with the machine's load per core recorded before the run (NaN when not recorded)."""
    m = run.meta.get("machine") or {}
    load = (
        float(m["load1"]) / float(m["cores"]) if m.get("load1") is not None and m.get("cores") else math.nan
    )
    return run.table(table).assign(load_per_core=load)


def c3_loads(rows: pd.DataFrame) -> dict:
    """Worker count -> the load per core of its runs: C3's counts ran one after the other, so each comparison is
    sequential and cannot tell when the load moved. No load recorded: an empty list (the verdict says so)."""
    col = rows["load_per_core"] if "load_per_core" in rows else pd.Series(math.nan, index=rows.index)
    return {int(n): [float(x) for x in g.dropna().unique()] for n, g in col.groupby(rows["num_workers"])}


def runner_up(rows: pd.DataFrame | None, best: int) -> int | None:
    """The count with C3's lowest median epoch other than `best` (None without C3's rows): when C3's best is 1 worker,
    C4 compares 1 worker with it, so that the task still compares two counts."""
    if rows is None or rows.empty:
        return None
    medians = rows[rows["num_workers"] != best].groupby("num_workers")["seconds"].median()
    return int(medians.idxmin()) if len(medians) else None


def c3_tag(best_n: int, rows: pd.DataFrame | None) -> Finding:
    """How C3 stands behind the count C4 uses: its verdict's best, a count tied with others, or given."""
    if rows is None or rows.empty:
        return say("the count given")
    b = best(
        {int(n): list(g["seconds"]) for n, g in rows.groupby("num_workers")},
        what="DataLoader time per epoch",
        loads=c3_loads(rows),
    )
    if best_n == b.label:
        tied, few, why = too_few_split(b, "C3")
        if not tied and not few:
            return say("C3's best")
        parts = []
        if tied:
            parts.append(say("could not tell it from {t}: a tie", t=workers_list(tied, "C3 tied count")))
        if few:
            parts.append(
                say(
                    "timed too few epochs to tell it from {f}: {why}",  # said inside C4's parentheses
                    f=workers_list(few, "C3 undecided count"),
                    why=why,
                )
            )
        return say("C3's lowest median; C3 {parts}", parts=join(parts, "; and "))
    # the stopping rule chose another count than the lowest median: only that pair was compared
    low, v = worker_label(b.label, "C3 lowest-median count"), b.verdicts.get(best_n)
    if v is None:  # C3's rows hold no epoch of the count it chose (its run folder gone): nothing was compared
        return say(
            "C3's stopping rule; its epochs are not in C3's results, so C3 compared it with no other count"
        )
    if v.undecided:
        return say(
            "C3's stopping rule; C3's lowest median was {low}, and C3 timed too few epochs to tell the two apart: "
            "{why}",
            low=low,
            why=too_few_why([v], "C3"),
        )
    if best_n in b.tied:
        return say("C3's stopping rule; C3 could not tell it from {low}, its lowest median: a tie", low=low)
    return say("C3's stopping rule; C3's verdict favours {w}", w=worker_label(b.label, "C3 favoured count"))


def c4(cfg, out) -> tuple[list[Answer], list[sanity.Flag]]:
    """Data loading vs compute per step with 1 worker and with the count C3 chose (named a best only when C3's
    verdict named one), each difference a verdict that knows the counts ran one after the other (and cannot tell
    when the load moved between them); the data share per count as findings; what workers usually do, background."""
    best_n = int(out.best)
    bt = steady_batches(out.items, "num_workers")
    # each count's run diverged or not; the settings that differ are the page's own (notebook.answer), not a
    # count's: a count's run_flags said "num_workers 0 (lab 2)" beside a config of 1
    flags: list = [
        sanity.diverged(g["loss"], classes_of(cfg), label=worker_label(n, f"C4 worker count {n}"))
        for n, g in bt.groupby("num_workers")
    ]
    flags.append(busy_of(out))
    waits, computes = {}, {}
    for n, g in bt.groupby("num_workers"):
        waits[int(n)] = num(f"{workers(n)}: data wait per step", g["data_s"], "ms", 1000)
        computes[int(n)] = num(f"{workers(n)}: compute per step", g["train_s"], "ms", 1000)
    labels = {n: worker_label(n, f"C4 worker count {n}") for n in waits}
    tag = c3_tag(best_n, getattr(out, "c3_rows", None))
    shares = []
    summary = getattr(out, "summary", None)
    if summary is not None and "data_share" in summary:
        for n, r in summary.set_index("num_workers").iterrows():
            if int(n) in labels:
                share = Number(
                    f"{workers(n)}: data share of the epoch",
                    float(100 * r["data_share"]),
                    "%",
                    "measured",
                    n=int(r.get("n", 1) or 1),
                )
                shares.append(say("{share} with {w}", share=share, w=labels[int(n)]))
    details = [say("Waiting for data is a share of the epoch of {s}", s=join(shares, ", "))] if shares else []
    background = [
        Background(
            "With one worker a single process decodes and augments every image; when that takes longer than a "
            "step, the loop waits. Workers share the CPU cores with the training computation, so more workers can "
            "also slow the compute down; on a GPU node compute is usually fast and loading can dominate unless "
            "enough workers feed it."
        )
    ]
    against = getattr(out, "against", None)
    against = best_n if against is None and best_n != 1 else against
    question = "C4: data loading vs compute, one worker vs the best"
    if against is None or against == 1:
        one = next(iter(waits))
        head = say(
            "The count C3 gave is {one} ({tag}), so it is compared with nothing: data wait {wait} and compute "
            "{compute} per step (medians)",
            one=labels[one],
            tag=tag,
            wait=waits[one],
            compute=computes[one],
        )
        return [Answer(question, head, details, background)], dedupe(flags)
    loads = loads_by(out.items, "num_workers")
    names = (workers(against), "1 worker")
    vd, da, db = compare_configs(
        bt, "num_workers", against, 1, "data_s", "data wait per step", *names, loads=loads
    )
    vc, ca, cb = compare_configs(
        bt, "num_workers", against, 1, "train_s", "compute per step", *names, loads=loads
    )
    lab = (labels[against], labels[1])
    lead = (
        say("{w} ({tag}) against {one}", w=labels[against], tag=tag, one=labels[1])
        if against == best_n
        else say(
            "The count C3 gave is {one} ({tag}), so it is compared with C3's next best count, {w}",
            one=labels[1],
            tag=tag,
            w=labels[against],
        )
    )
    head = say("Data wait: {d}", d=vd.short("C4 data wait", *lab))
    details = [
        lead.up(),
        say("Data wait: {d}", d=vd.finding("C4 data wait", *lab)),
        say("Compute: {c}", c=vc.finding("C4 compute", *lab)),
        *details,
    ]
    how = {
        "sequential": "; the counts ran one after the other, not interleaved",
        "interleaved": "; the counts took turns",
    }
    details.append(
        say(
            "Both compare medians per training step, from every batch after each run's warm-up epoch"
            + how.get(sampling([vd, vc]), "")
        )
    )
    epoch_note = per_epoch_wait_note(summary, waits, labels, against)
    if epoch_note is not None:
        details.append(epoch_note)
    return [
        Answer(
            question,
            head,
            details,
            background,
            verdict={
                "data": sample_record(vd, da, db),
                "compute": sample_record(vc, ca, cb),
                "interleaved": False,
                "c3": tag.plain(),
                "against": against,
            },
        )
    ], dedupe(flags)


def per_epoch_wait_note(summary, waits: dict, labels: dict, against: int) -> Finding | None:
    """When the table's data wait per epoch (median epoch) orders the two counts otherwise than the median wait per
    step does, both aggregates named and why they can differ; None when they agree or the table lacks the column."""
    if summary is None or "data_median_s" not in summary:
        return None
    per_epoch = {int(n): float(x) for n, x in zip(summary["num_workers"], summary["data_median_s"])}
    if against not in per_epoch or 1 not in per_epoch:
        return None
    if (waits[against].value - waits[1].value) * (per_epoch[against] - per_epoch[1]) >= 0:
        return None
    counts = dict(
        zip(summary["num_workers"].astype(int), summary["n"] if "n" in summary else [1] * len(summary))
    )
    ep = {
        n: Number(
            f"{workers(n)}: data wait per epoch (median epoch)",
            per_epoch[n],
            "s",
            "measured",
            n=int(counts[n]),
        )
        for n in (against, 1)
    }
    return say(
        "The table's data wait is per epoch ({ea} with {wa}, {eb} with {wb}: median epoch) and orders the two "
        "counts the other way round from the median per step: an epoch's total holds every step's wait, the few "
        "long ones too (such as a worker's start-up on an epoch's first step), which a median per step leaves out",
        ea=ep[against],
        wa=labels[against],
        eb=ep[1],
        wb=labels[1],
    )


DEVICE_LABELS = {"cpu": "CPU", "cuda": "GPU"}


def c5(cfg, out) -> tuple[list[Answer], list[sanity.Flag]]:
    """Epoch time on each device present; a GPU-vs-CPU verdict only when both ran (else partial: needs a GPU); the
    devices ran one after the other, which the verdict knows."""
    ep = out.epochs
    flags: list = [busy_of(out)]
    said = []  # one sentence per device, the CPU's first: each names its own device
    for d, g in sorted(ep.groupby("device", sort=False), key=lambda x: x[0] != "cpu"):
        label = DEVICE_LABELS.get(str(d), str(d))
        trend = sanity.trend(list(g["total_s"]), label=str(d))
        steady = drop_warmup(g)
        flags += [trend, sanity.too_few(len(steady), f"{d} epochs after warm-up")]
        x = num(f"{d}: epoch time (after warm-up)", steady["total_s"], "s")
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
    lead = said[0]
    question = "C5: average epoch time on GPU vs CPU"
    if "cuda" not in out.devices:
        head = say("No GPU was present, so there is no GPU time and no speedup")
        return [
            Answer(question, head, [lead], status="partial", missing="a GPU: run this task on a CUDA machine")
        ], dedupe(flags)
    bt = steady_batches(out.items, "device")
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
    details = [say("{v}", v=v.finding("C5 compute")).up(), *[say("{s}", s=x) for x in said]]
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
            "On a GPU the epoch's wall time is synchronized with the device at both ends and each step's work is "
            "timed with CUDA events, so asynchronous launches are not mistaken for finished work."
        )
    ]
    return [Answer(question, head, details, background, verdict=sample_record(v, xa, xb))], dedupe(flags)


def training_sweep(cfg, out, field: str, question: str) -> tuple[list[Answer], list[sanity.Flag]]:
    """C6/C7: which setting of `field` trains best (last-epoch batch losses, a verdict with ties), how fast each
    is per step, and which diverged or stayed at chance (sweep_notes). A winner is named first only when it is
    separated and has learned: when a setting did not get below chance the headline says so; a tie opens as a tie.
    A run of the twin task with the same configuration whose epochs differ a lot flags the machine as noisy."""
    b = out.batches
    flags: list = [
        sanity.stand_in(cfg),
        busy_of(out),
        twin_noise(cfg, getattr(out, "items", None), field),
    ]
    raw = _usable(cfg, out, field, flags)
    samples = {shown_setting(field, v): x for v, x in raw.items()}  # "no BatchNorm", not "none"
    per_step = []
    for v in raw:
        name = shown_setting(field, v)
        step = num(
            f"{name}: compute per step (after warm-up)", drop_warmup(b[b[field] == v])["train_s"], "ms", 1000
        )
        per_step.append(say("{name} {step}", name=name, step=step))
    flags.append(
        sanity.too_few(min((len(x) for x in samples.values()), default=0), "last-epoch batches per setting")
    )
    notes = sweep_notes(cfg, out, field)
    classes = classes_of(cfg)
    at_chance = [
        shown_setting(field, v) for v in raw if sanity.at_chance(list(b.loc[b[field] == v, "loss"]), classes)
    ]
    epochs = setting("epochs", int(cfg.epochs))
    background = [
        Background(
            "One seed and a few epochs of training-set statistics show early training, not which setting "
            "generalises best."
        ),
    ]
    sequential = say(
        "The settings ran one after the other, so their per-step times are listed, not compared: a change of the "
        "machine's load between runs would show up as a difference"
    )
    if len(samples) < 2:
        head = say("Fewer than two settings trained without diverging, so none can be compared")
        return [
            Answer(
                question,
                head,
                notes,
                background,
                status="partial",
                missing="two settings that train without diverging",
            )
        ], dedupe(flags)
    bst = best(samples, what="last-epoch training loss", interleaved=False)  # runs one after the other
    tied = [t for t in bst.tied if t != bst.label]
    finals = {k: num(f"{k}: last-epoch batch loss", x, "") for k, x in samples.items()}
    if len(at_chance) == len(samples) or (not tied and bst.label in at_chance):
        head = (
            say("No winner: no setting got clearly below the chance loss")
            if len(at_chance) == len(samples)
            else say(
                "No winner: the lowest-loss setting, {best}, did not get clearly below the chance loss",
                best=bst.label,
            )
        )
        lead = say(
            "No winner can be named: {names} clearly below chance loss in {e} epochs, so which setting trains "
            "best is not shown by this run",
            names=not_below(at_chance),
            e=epochs,
        )
    elif tied:  # the leaders tie: that is why no winner, whatever the others did
        head = say(
            "No winner: {best} had the lowest last-epoch loss but cannot be told apart from {n} other settings"
            if len(tied) > 1
            else "No winner: {best} had the lowest last-epoch loss but cannot be told apart from {n} other setting",
            best=bst.label,
            n=counted("settings tied with the lowest loss", len(tied)),
        )
        lead = say(
            "No winner can be named: {best} had the lowest median batch loss of the last epoch ({loss}) but "
            "cannot be told apart from {tied}: a tie",
            best=bst.label,
            loss=finals[bst.label],
            tied=join([say("{t}", t=t) for t in tied], ", ", " and "),
        )
    else:
        head = say(
            "Lowest last-epoch training loss: {best}, separated from each other setting", best=bst.label
        )
        lead = say(
            "Lowest last-epoch training loss: {best} (median batch loss {loss}), separated from each other "
            "setting after {e} epochs",
            best=bst.label,
            loss=finals[bst.label],
            e=epochs,
        )
    labels = {k: k for k in samples}
    details = [
        lead,
        say(
            "Median batch loss of the last epoch (the table's loss is each epoch's mean): {all}",
            all=join([say("{k} {x}", k=k, x=x) for k, x in finals.items()], ", "),
        ),
    ]
    details += best_findings(bst, labels, "last-epoch loss")
    details.append(say("Compute per step after warm-up: {all}", all=join(per_step, ", ")))
    details.append(sequential)
    details += notes
    verdict = {
        "best": str(bst.label),
        "tied": [str(t) for t in bst.tied],
        "against": {
            str(k): sample_record(v, samples[bst.label], samples[k]) for k, v in bst.verdicts.items()
        },
    }
    return [Answer(question, head, details, background, verdict=verdict)], dedupe(flags)


def not_below(names: list[str]) -> Finding:
    """'A did not get' / 'neither A nor B got' / 'A, B and C did not get': a list of settings that stayed at chance,
    read as a sentence for any count."""
    if len(names) == 1:
        return say("{a} did not get", a=names[0])
    if len(names) == 2:
        return say("neither {a} nor {b} got", a=names[0], b=names[1])
    return say("{all} did not get", all=join([say("{n}", n=n) for n in names], ", ", " and "))


SHOWN_SETTINGS = {("norm", "bn"): "BatchNorm", ("norm", "none"): "no BatchNorm"}


def shown_setting(field: str, value) -> str:
    """A setting's value as a sentence names it: C7's norm 'none' reads 'no BatchNorm' (not 'none' of them)."""
    return SHOWN_SETTINGS.get((field, value), str(value))


def _usable(cfg, out, field: str, flags: list | None = None) -> dict:
    """Setting -> its last-epoch batch losses, for each complete setting that did not diverge (a diverged one
    adds its flag to `flags`)."""
    b, s = out.batches, out.summary
    classes = classes_of(cfg)
    last = b[b["epoch"] == b["epoch"].max()]
    samples = {}
    for v in s[s["status"] == "complete"][field]:
        losses = list(b.loc[b[field] == v, "loss"])
        d = sanity.diverged(losses, classes, label=shown_setting(field, v))
        if d:
            if flags is not None:
                flags.append(d)
            continue
        samples[v] = list(last.loc[last[field] == v, "loss"])
    return samples


def sweep_notes(cfg, out, field: str) -> list[Finding]:
    """C6/C7's findings beyond the verdict: which settings failed, diverged or ended at chance (their numbers in the
    record), and C7's averages over all epochs."""
    b, s = out.batches, out.summary
    classes = classes_of(cfg)
    chance = Number(
        "chance loss", sanity.chance_loss(classes), "", "predicted", source=f"ln {classes}: a uniform guess"
    )
    lines = [
        say("{name}: not usable ({status})", name=shown_setting(field, r[field]), status=str(r["status"]))
        for _, r in s[s["status"] != "complete"].iterrows()
    ]
    for v in s[s["status"] == "complete"][field]:
        losses = list(b.loc[b[field] == v, "loss"])
        name = shown_setting(field, v)
        if sanity.diverged(losses, classes):
            end = Number(f"{name}: last batch loss", float(losses[-1]), "", "measured", n=1)
            lines.append(
                say(
                    "{name}'s loss ended far above chance ({end} at the end against the chance loss {chance}): it "
                    "diverged or has not settled, so it is not a result",
                    name=name,
                    end=end,
                    chance=chance,
                )
            )
        elif sanity.at_chance(losses, classes):
            tail = losses[-max(1, len(losses) // 5) :]
            mean = Number(
                f"{name}: mean loss over the last fifth", sum(tail) / len(tail), "", "measured", n=len(tail)
            )
            lines.append(
                say(
                    # the label does not start the sentence: 'sgd' stays lower-case, 'no BatchNorm' no double negative
                    "Not clearly below chance: {name} (mean loss over the last fifth {mean} against the chance "
                    "loss {chance}); it has not learned in this run",
                    name=name,
                    mean=mean,
                    chance=chance,
                )
            )
    if field == "norm" and "mean_loss" in s and {"bn", "none"} <= set(s["norm"]):
        r = s.set_index("norm")
        avg = {
            k: (
                Number(
                    f"{shown_setting(field, k)}: mean loss over all epochs",
                    float(r.loc[k, "mean_loss"]),
                    "",
                    "measured",
                    n=int(cfg.epochs),
                ),
                Number(
                    f"{shown_setting(field, k)}: mean top-1 over all epochs",
                    float(100 * r.loc[k, "mean_acc"]),
                    "%",
                    "measured",
                    n=int(cfg.epochs),
                ),
            )
            for k in ("bn", "none")
        }
        lines.insert(
            0,
            say(
                "Average over all epochs: with BatchNorm loss {bl}, top-1 {ba}; without it loss {nl}, top-1 {na}",
                bl=avg["bn"][0],
                ba=avg["bn"][1],
                nl=avg["none"][0],
                na=avg["none"][1],
            ),
        )
    return lines


HOST_WAIT = Background(
    "A GPU idles between kernels when the host has not yet queued the next one (Python and each kernel's launch "
    'take host time); fusing kernels, larger batches and CUDA graphs (torch.compile\'s mode "reduce-overhead") '
    "shorten that wait."
)


def c8_trace_idle(out, breakdown) -> tuple[list[Finding], list[Background]]:
    """What the traced steps' GPU timeline says, from Holistic Trace Analysis (`breakdown`, tracing.breakdown of
    out.trace.path): the share of the traced steps' time the GPU sat idle and, where HTA found gaps between
    kernels, the share of those gaps (summed over streams) that were waits for the host to queue work, with the
    usual reading of such waits as background. Nothing without a GPU timeline: a CPU trace, no breakdown, or the
    error computing one (report/notebook.py breakdown_or_error)."""
    if getattr(breakdown, "idle", None) is None:
        return [], []
    table = breakdown.table.set_index("category")["share"]  # tracing's rows, "GPU idle" among them
    src = f"{breakdown.source}, from the trace of the steps torch.profiler recorded"
    steps = setting(
        "steps traced", int(out.trace.steps), source="the profiler's schedule (tracing.trace_steps)"
    )

    def share(name: str, value) -> Number:  # a share HTA measured over the traced steps, in %
        return Number(name, 100 * float(value), "%", "measured", n=steps.value, source=src)

    idle = share("GPU idle, share of the traced steps' time", table["GPU idle"])
    mode = "compiled" if out.traced_mode == "compile" else "eager"
    caveat = (
        "the profiler slows the host's work, and each traced step waits for the GPU before the next one starts, "
        "so these shares may overstate the idle time of steps run without it"
    )
    causes = breakdown.idle.set_index("idle cause")["share"]  # HTA's causes: host_wait, kernel_wait, other
    if "host_wait" not in causes.index or not breakdown.idle["time_ms"].sum() > 0:  # no gap between kernels
        return [
            say(
                "In the {steps} {mode} steps traced with torch.profiler, the GPU sat idle {idle} of the time "
                "(Holistic Trace Analysis); " + caveat,
                steps=steps,
                mode=mode,
                idle=idle,
            )
        ], []
    host = share("host wait, share of the gaps between kernels (summed over streams)", causes["host_wait"])
    return [
        say(
            "In the {steps} {mode} steps traced with torch.profiler, the GPU sat idle {idle} of the time, and {host} "
            "of the gaps between its kernels (summed over streams) were waits for the host to queue work (Holistic "
            "Trace Analysis); " + caveat,
            steps=steps,
            mode=mode,
            idle=idle,
            host=host,
        )
    ], [HOST_WAIT]


def c8(cfg, out, breakdown=None) -> tuple[list[Answer], list[sanity.Flag]]:
    """Compiled vs eager per training step (compute only: the data wait is not the question), a verdict that knows
    the two ran one after the other (and cannot tell when the load moved between them), the compile cost from the
    first epoch, and after how many steps compiling pays back (only from a separated verdict). With the traced
    steps' GPU breakdown (`breakdown`, tracing.breakdown of out.trace.path), where their GPU time went (c8_trace_idle)."""
    flags: list = [sanity.stand_in(cfg), busy_of(out)]
    done = [it for it in out.items if it.complete]
    bt = steady_batches(done, "compile")
    question = "C8: does torch.compile pay off?"
    idle_details, idle_background = c8_trace_idle(out, breakdown)
    if bt["compile"].nunique() < 2:
        eager = num("eager: compute per step", bt["train_s"], "ms", 1000)
        head = say("Only eager ran, so there is no comparison: {eager} per step", eager=eager)
        return [
            Answer(
                question,
                head,
                [say("Why only eager: {why}", why=out.message or "no compiled run"), *idle_details],
                idle_background,
                status="partial",
                missing="a compiled run (see the notice above)",
            )
        ], dedupe(flags)
    v, comp, eag = compare_configs(
        bt,
        "compile",
        True,
        False,
        "train_s",
        "compute per step",
        "compiled",
        "eager",
        loads=loads_by(done, "compile"),
    )
    from ..sweeps import tables

    allb = tables(done, "batches", with_config=("compile",))
    med_c, med_e = summarize(comp)["median"], summarize(eag)["median"]
    firsts = c8_first_epochs(out)
    cost_n = firsts.get("cost")
    cost = cost_n.value if cost_n is not None else 0.0
    e_step = num("eager: compute per step", eag, "ms", 1000)
    c_step = num("compiled: compute per step", comp, "ms", 1000)
    ran = counted("compiled steps run", int(allb["compile"].eq(True).sum()))
    how = {
        "sequential": " made one after the other (not interleaved)",
        "interleaved": " taking turns (interleaved)",
    }
    per_step = say(
        "Per step after warm-up, from the two runs" + how.get(sampling([v]), "") + ": {v}",
        v=v.finding("C8 step"),
    )
    details = [per_step, say("Per step after warm-up (medians): eager {e}, compiled {c}", e=e_step, c=c_step)]
    if cost_n is not None:
        details.append(
            say(
                "In its first epoch each run's compute exceeded its steps at their median after warm-up, the "
                "compiled run's by {bc} and eager's by {be} (one first epoch each, runs made one after the other): "
                "the difference, {cost}, holds the compile",
                bc=firsts["compiled"]["beyond"],
                be=firsts["eager"]["beyond"],
                cost=cost_n,
            )
        )
    else:  # epoch 1 was no slower than the step gap explains: no cost is measurable, and none is a number to state
        details.append(
            say("Compiling added no measurable time to the first epoch beyond the per-step difference")
        )
    if v.outcome == "better" and cost_n is not None:
        steps = cost / (med_e - med_c)
        src = "compile cost / (eager step - compiled step), from the medians above"
        even = Number("break-even", steps, "steps", "predicted", source=src)
        images = Number(
            "break-even images", steps * cfg.batch_size, "images", "predicted", source=src + " x batch size"
        )
        batch = setting("batch_size", int(cfg.batch_size))
        paid = steps <= ran.value
        head = say(
            "Compiling paid off: its compile cost is paid back after about {even}"
            if paid
            else "Compiling did not pay off in this run: its compile cost is paid back only after about {even}",
            even=even,
        )
        details.insert(
            0,
            say(
                (
                    "Within the {ran} steps run, the compile cost ({cost}) is paid back"
                    if paid
                    else "Within the {ran} steps run, the compile cost ({cost}) is not paid back"
                ),
                ran=ran,
                cost=cost_n,
            ),
        )
        details.append(say("That break-even is {images} at batch {batch}", images=images, batch=batch))
    elif v.outcome == "better":
        head = say("Compiling paid off from the first step: no compile cost was measurable")
        details.insert(
            0,
            say("The compiled run's first epoch held no measurable compile cost ({ran} steps run)", ran=ran),
        )
    elif v.reason == "too few samples":
        head = say("Too few steps to tell whether compiling pays off")
    else:
        head = say("This run does not show compiling paying off: no measurable gain per step")
        details.insert(
            0, say("With no measurable gain per step, the compile cost is not paid back at this size")
        )
    background = [
        Background(
            "Compiling costs time once, on the first steps, and can pay back later when each compiled step is "
            "cheaper; how much a step gains depends on the model, its size and the device."
        )
    ]
    details += idle_details
    background += idle_background
    return [Answer(question, head, details, background, verdict=sample_record(v, comp, eag))], dedupe(flags)


def c8_first_epochs(out) -> dict:
    """The compile cost, computed once for the answer and the table (c8_first_epoch_table): per mode ("compiled",
    "eager"), the first epoch's compute (its train_s summed: the wait for data is not compile's doing), its steps,
    the median step after warm-up, and the first epoch's compute beyond those steps at that median, each a Number;
    "cost": the compiled run's excess minus eager's (eager's own warm-up taken out), None when it is not above 0
    (no cost to state). Empty without both modes."""
    from ..sweeps import tables

    done = [it for it in out.items if it.complete]
    if not done:
        return {}
    allb = tables(done, "batches", with_config=("compile",))
    steady = drop_warmup(allb)
    got: dict = {}
    for flag, mode in ((True, "compiled"), (False, "eager")):
        first = allb[
            (allb["compile"] == flag) & (allb["epoch"] == allb.loc[allb["compile"] == flag, "epoch"].min())
        ]
        later = steady[steady["compile"] == flag]["train_s"]
        if first.empty or later.empty:
            continue
        median = float(later.median())
        epoch1 = float(first["train_s"].sum())
        got[mode] = {
            "steps": counted(f"{mode}: epoch 1 steps", len(first)),
            "compute": Number(f"{mode}: epoch 1 compute", epoch1, "s", "measured", n=1),
            "median": num(f"{mode}: compute per step", later, "ms", 1000),  # the answer's per-step median
            "beyond": Number(
                f"{mode}: epoch 1 compute beyond its steps at the median",
                epoch1 - len(first) * median,
                "s",
                "measured",
                n=1,
                source="epoch 1's compute - its steps x the median step after warm-up",
            ),
        }
    if {"compiled", "eager"} <= got.keys():
        cost = got["compiled"]["beyond"].value - got["eager"]["beyond"].value
        got["cost"] = (
            Number(
                "compile cost (epoch 1, beyond eager's warm-up)",
                cost,
                "s",
                "measured",
                n=1,
                source="compiled's epoch-1 compute beyond its steps at the median - eager's",
            )
            if cost > 0
            else None
        )
    return got


def c8_epochs_table(summary: pd.DataFrame) -> pd.DataFrame:
    """lab2.c8_compile's whole-epoch summary as the report shows it: whole epochs, the wait for data included, named
    so (the compile cost is computed from compute alone: c8_first_epoch_table), and no second compile cost."""
    return summary.drop(columns=["first_minus_steady_s"], errors="ignore").rename(
        columns={
            "n": "n epochs (steady)",
            "median_s": "steady median, whole epoch (s)",
            "iqr_s": "IQR (s)",
            "min_s": "min (s)",
            "max_s": "max (s)",
            "mean_s": "mean (s)",
            "first_epoch_s": "epoch 1, whole epoch (s)",
        }
    )


def c8_first_epoch_table(out) -> pd.DataFrame:
    """The first epoch's compute per mode as c8_first_epochs computes it for the answer (each cell a value of the
    answer's Numbers), and the compile cost in the compiled row."""
    firsts = c8_first_epochs(out)
    rows = []
    for mode in ("eager", "compiled"):
        if mode not in firsts:
            continue
        f = firsts[mode]
        cost = firsts.get("cost") if mode == "compiled" else None
        rows.append(
            {
                "mode": mode,
                "epoch 1 steps": f["steps"].value,
                "epoch 1 compute (s)": f["compute"].value,
                "median step after warm-up (ms)": f["median"].value,
                "epoch 1 compute beyond its steps at that median (s)": f["beyond"].value,
                "compile cost: compiled's excess - eager's (s)": cost.value if cost is not None else None,
            }
        )
    return pd.DataFrame(rows)


def c8_steps(out) -> pd.DataFrame:
    """C8's figure data, per training step as its answer states it (not per epoch): for eager and compiled, the
    median, min and max compute per step in ms after warm-up (columns median_s/min_s/max_s hold ms, n the steps)."""
    bt = steady_batches([it for it in out.items if it.complete], "compile")
    rows = []
    for flag, g in bt.groupby("compile", sort=True):
        ms = 1000 * g["train_s"]
        rows.append(
            {
                "mode": "compiled" if flag else "eager",
                "median_s": ms.median(),
                "min_s": ms.min(),
                "max_s": ms.max(),
                "n": len(ms),
            }
        )
    return pd.DataFrame(rows)
