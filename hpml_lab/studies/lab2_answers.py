"""What the Lab 2 reports C1 to C8 conclude (the questions: questions_answers.py), computed: one function per task turns its study's
result (lab2.C4Result, lab2.TrainingSweep, ...; a results.Run for C1 and C2) into the answer record's answers
(hpml_lab.answers.Answer, every number tagged) and the sanity flags that apply.

    from hpml_lab.studies import lab2_answers
    nb.answer(cfg, info, *lab2_answers.c1(cfg, run))     # at the end of the C1 notebook

No sentence here states a direction it did not compute: comparisons come from hpml_lab.verdict, flags from
hpml_lab.sanity. tests/test_conclusions.py and test_findings.py feed canned results to every branch.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .. import sanity
from ..answers import Answer, Number
from ..data import num_classes
from ..profiling import summarize
from ..results import drop_warmup, read_run
from ..verdict import best, compare, sample_record
from ._conclude import (
    compare_configs,
    dedupe,
    first_up,
    meta_machine,
    num,
    short,
    steady_batches,
    training_flags,
    twin_noise,
    workers,
)


def c1(cfg, run) -> tuple[list[Answer], list[sanity.Flag]]:
    """Per-batch loss and top-1: where they started and ended, and one learning sentence decided from verdicts of
    the last batches against the first (loss and top-1) and top-1 against chance; diverged runs are not a result."""
    b = run.batches
    k = max(1, len(b) // 10)
    first, last = b.head(k), b.tail(k)
    classes = num_classes(cfg.dataset)
    chance = 100 / classes
    flags = training_flags(cfg, b, run.epochs, run.meta)
    diverged = any(f.kind == "diverged" for f in flags)
    batches = "batch" if k == 1 else f"{k} batches"
    v = compare(
        last["loss"], first["loss"], f"the last {batches}", f"the first {batches}", what="training loss"
    )
    va = compare(
        last["acc"],
        first["acc"],
        f"the last {batches}",
        f"the first {batches}",
        what="top-1",
        lower_is_better=False,
    )
    top0, top1 = 100 * first["acc"].mean(), 100 * last["acc"].mean()
    rise = f"top-1 went from {top0:.1f}% to {top1:.1f}% (chance {chance:.0f}%) over {len(b)} batches"
    l0, l1 = first["loss"].mean(), last["loss"].mean()
    ends = f"from {l0:.3f} over the first {batches} to {l1:.3f} over the last {batches}"  # names both verdict sides
    if diverged:
        text = (
            f"Training diverged: the loss ended at {l1:.2f}, above chance "
            f"({sanity.chance_loss(classes):.2f}); these curves are not a result."
        )
    elif (v.outcome == "better" or va.outcome == "better") and top1 > chance:
        loss = (
            f"the training loss fell {ends}"
            if v.outcome == "better"
            else f"the training loss rose {ends}"
            if v.outcome == "worse"
            else f"the training loss went from {l0:.3f} to {l1:.3f} (no measurable change)"
        )
        text = f"The run learned: {loss} and {rise}, above chance."
    elif v.outcome == "better":
        text = (
            f"The training loss fell {ends}, but {rise}: not above chance, so no learning shows in the accuracy "
            "yet."
        )
    elif v.reason == "too few samples":
        text = (
            f"The training loss went from {l0:.3f} to {l1:.3f} and {rise}, but with {k} "
            f"{'batch' if k == 1 else 'batches'} at each end there are too few samples to tell whether the run "
            "learned."
        )
    elif v.outcome == "worse":
        text = f"The run did not learn: the training loss rose {ends} and {rise}."
    else:
        text = f"The run did not measurably learn: {v.sentence().rstrip('.')}, and {rise}."
    nums = [
        Number("mean loss, first batches", float(l0), "", "measured", n=k),
        Number("mean loss, last batches", float(l1), "", "measured", n=k),
        Number("top-1, first batches", float(top0), "%", "measured", n=k),
        Number("top-1, last batches", float(top1), "%", "measured", n=k),
        Number("chance top-1", chance, "%", "predicted", source=f"1 / {classes} classes: a uniform guess"),
    ]
    if diverged:
        nums.append(
            Number(
                "chance loss",
                sanity.chance_loss(classes),
                "",
                "predicted",
                source=f"ln {classes}: the loss of a uniform guess",
            )
        )
    return [
        Answer(
            "C1: per-batch training loss and top-1 accuracy",
            text,
            "answered",
            nums,
            verdict=None
            if diverged
            else {
                "loss": sample_record(v, last["loss"], first["loss"]),
                "top1": sample_record(va, last["acc"], first["acc"]),
            },
        )
    ], flags


def busy_peak_note(fl: dict, machine: dict | None) -> str:
    """The caveat an MFU needs when its peak was measured on a busy machine (or its load is unknown)."""
    peak_load = (fl or {}).get("machine") or machine
    if sanity.busy(peak_load):
        return (
            " The peak was measured while the machine was busy, so this share is uncertain: a peak measured at "
            "another load gives another share."
        )
    return ""


def c2(cfg, run) -> tuple[list[Answer], list[sanity.Flag]]:
    """Data-loading, training and total time per epoch, the first epoch kept out of the summary, and whether that
    first epoch was slower (a verdict, stated only when it was)."""
    ep = run.epochs
    steady = drop_warmup(ep)
    share = float(steady["data_s"].sum() / steady["total_s"].sum())
    flags = training_flags(cfg, run.batches, ep, run.meta)
    few = sanity.too_few(len(steady), "epochs after warm-up")
    if few:
        flags.append(few)
    nums = [
        num("data loading per epoch", steady["data_s"], "s"),
        num("training per epoch", steady["train_s"], "s"),
        num("total per epoch", steady["total_s"], "s"),
        Number("data-loading share of the epoch", 100 * share, "%", "measured", n=len(steady)),
    ]
    fl = (run.meta or {}).get("flops")
    mfu_text = ""
    if fl and "mfu" in steady:
        measured_peak = str(fl.get("peak_source", "")).startswith("measured")
        nums.append(
            Number(
                f"this device's {fl['precision']} peak",
                float(fl["peak_tflops"]),
                "TFLOP/s",
                "measured" if measured_peak else "reference",
                n=1 if measured_peak else None,
                source="" if measured_peak else str(fl.get("peak_source", "")),
            )
        )
        nums.append(num("training compute, share of this device's peak", steady["mfu"], "%", 100))
        mfu_text = (
            f" The training compute ran at {nums[-1].value:.3g}% of this device's {fl['precision']} peak "
            f"({fl['peak_tflops']:.3g} TFLOP/s; {fl['peak_source']})"
            + (
                ": above 100% because the peak was measured while the machine was busier than during training, "
                "so read it as 'near this CPU's own matrix-product speed'."
                if nums[-1].value > 100
                else "."
            )
            + busy_peak_note(fl, (run.meta or {}).get("machine"))
        )
    nums += warmup_numbers(ep)
    which = (
        "the one epoch after the first"
        if len(steady) == 1
        else f"median of the {len(steady)} after the first"
    )
    text = (
        f"Per epoch ({which}): data loading "
        f"{nums[0].value:.3g} s, training {nums[1].value:.3g} s, total {nums[2].value:.3g} s; waiting for data "
        f"is {share_text(100 * share)} of the epoch." + mfu_text + " " + warmup_sentence(ep)
    )
    return [
        Answer("C2: data-loading, training and total time per epoch", text.strip(), "answered", nums)
    ], flags


def share_text(pct: float) -> str:
    """A percentage as the answer box shows it: 3 significant digits, so 0.335% is never rounded to 0%."""
    return f"{pct:.3g}%"


def warmup_sentence(ep: pd.DataFrame) -> str:
    """Why the first epoch is left out, said only as far as the data show it: slower than every later one, or not."""
    if len(ep) < 2:
        return ""
    first, later = float(ep.iloc[0].total_s), list(ep.iloc[1:].total_s)
    if first > max(later):  # single values side by side, no verdict: "took longer than each", not "slower"
        return (
            f"The first epoch took {first:.3g} s, longer than each later one (at most {max(later):.3g} s): it "
            "likely includes warm-up (worker start-up, allocator growth), which is why the summary leaves it out."
        )
    span = f"{later[0]:.3g} s" if len(later) == 1 else f"{min(later):.3g}-{max(later):.3g} s"
    return (
        f"The first epoch took {first:.3g} s, no longer than the later ones ({span}): "
        "no warm-up shows in this run; the summary leaves it out only to be the same for every run."
    )


def warmup_numbers(ep: pd.DataFrame) -> list[Number]:
    """The epoch times warmup_sentence states: the first epoch's, and the shortest and longest later one's."""
    if len(ep) < 2:
        return []
    later = list(ep.iloc[1:].total_s)
    return [
        Number("first epoch", float(ep.iloc[0].total_s), "s", "measured", n=1),
        Number("shortest later epoch", float(min(later)), "s", "measured", n=1),
        Number("longest later epoch", float(max(later)), "s", "measured", n=1),
    ]


def first_step_note(batches: pd.DataFrame, cores: int) -> str:
    """Whether each epoch's first training step is slower than the rest, and by how much (computed), with
    the cause it points to on a small CPU (a loader worker starting up shares the cores)."""
    firsts = batches.groupby("epoch")["train_s"].first()
    rest = batches[batches.groupby("epoch").cumcount() > 0]["train_s"]
    if rest.empty:
        return ""
    v = compare(list(rest), list(firsts), "later steps", "first step of an epoch", what="training time")
    if v.outcome != "better":
        return f"The first training step of an epoch is not measurably slower than the others: {v.sentence()}"
    return (
        f"{v.sentence()} On {cores} CPU cores the loader's worker processes start at each epoch and share the "
        "cores with training, so part of the loader's start-up cost lands in 'training' here."
    )


# C3 times the loader alone: no model, optimizer or lr to compare, but the lab's batch and whole dataset
C3_LAB = {"batch_size": 128, "max_batches": 0, "subset": 0}


def c3(cfg, sweep) -> tuple[list[Answer], list[sanity.Flag]]:
    """The best DataLoader worker count, with every count the data cannot separate from it called a tie."""
    samples = {int(n): list(g["seconds"]) for n, g in sweep.rows.groupby("num_workers")}
    b = best(samples, what="DataLoader time per epoch")
    top = samples[b.label]
    med = summarize(top)["median"]
    tied = [n for n in b.tied if n != b.label]
    if tied:
        text = (
            f"{workers(b.label)} had the lowest median ({med:.3g} s per epoch) but cannot be told apart from "
            f"{workers(tied)}: a tie, so no single best count is shown by this run."
        )
    else:
        text = f"Best count: {workers(b.label)}, {med:.3g} s per epoch (median), faster than every other count tried."
    nums = [num(f"{n} worker{'' if n == 1 else 's'}, epoch", v, "s") for n, v in sorted(samples.items())]
    flags = [sanity.busy(meta_machine(sweep))]
    few = min(len(v) for v in samples.values())
    flags.append(sanity.too_few(few, "timed epochs per worker count"))
    verdicts = {str(k): v.as_dict() for k, v in b.verdicts.items()}
    ans = Answer(
        "C3: DataLoader time per epoch against workers; the best count",
        text,
        "answered",
        nums,
        verdict={
            "best": b.label,
            "tied": list(b.tied),
            "against": verdicts,
            "samples": {str(k): v for k, v in samples.items()},
        },
    )
    return [ans], [f for f in flags if f is not None]


def c3_rows_of(summary_dir: str) -> pd.DataFrame | None:
    """The timed epochs of the C3 sweep a loader summary was made from (None when they are gone)."""
    try:
        runs = read_run(Path(summary_dir)).meta.get("runs", [])
        return pd.concat([read_run(Path(summary_dir).parent / r).table("loader") for r in runs])
    except (OSError, ValueError, KeyError):
        return None


def runner_up(rows: pd.DataFrame | None, best: int) -> int | None:
    """The count with C3's lowest median epoch other than `best` (None without C3's rows): when C3's best is 1 worker,
    C4 compares 1 worker with it, so that the task still compares two counts."""
    if rows is None or rows.empty:
        return None
    medians = rows[rows["num_workers"] != best].groupby("num_workers")["seconds"].median()
    return int(medians.idxmin()) if len(medians) else None


def c3_tag(best_n: int, rows: pd.DataFrame | None) -> str:
    """How C3 stands behind the count C4 uses: its verdict's best, a count tied with others, or given."""
    if rows is None or rows.empty:
        return "the count given"
    b = best(
        {int(n): list(g["seconds"]) for n, g in rows.groupby("num_workers")}, what="DataLoader time per epoch"
    )
    others = [str(n) for n in b.tied if n != best_n]
    if best_n == b.label and not others:
        return "C3's best"
    if best_n in b.tied:
        return f"C3's stopping rule; C3 could not tell it from {workers(others)}: a tie"
    return f"C3's stopping rule; C3's verdict favours {workers(b.label)}"


NOT_INTERLEAVED = (
    "The two counts ran one after the other, not interleaved, so a change in the machine's load "
    "between them shows up as a difference."
)


def c4(cfg, out) -> tuple[list[Answer], list[sanity.Flag]]:
    """Data loading vs compute per step with 1 worker and with the count C3 chose (named a best only when C3's
    verdict named one), each difference a verdict, said to come from runs made one after the other."""
    best_n = int(out.best)
    bt = steady_batches(out.items, "num_workers")
    flags: list = []
    for n, g in bt.groupby("num_workers"):
        flags += sanity.run_flags(
            cfg.replace(num_workers=int(n)), g["loss"], [], None, num_classes(cfg.dataset)
        )
    flags.append(sanity.busy(meta_machine(out)))
    nums = []
    for n, g in bt.groupby("num_workers"):
        nums += [
            num(f"{workers(n)}: data wait per step", g["data_s"], "ms", 1000),
            num(f"{workers(n)}: compute per step", g["train_s"], "ms", 1000),
        ]
    tag = c3_tag(best_n, getattr(out, "c3_rows", None))
    against = getattr(out, "against", None)
    against = best_n if against is None and best_n != 1 else against
    if against is None or against == 1:
        text = f"The count C3 gave is 1 worker ({tag}), so 1 worker is compared with nothing: " + (
            f"data wait {short(nums[0].value)} ms and compute {short(nums[1].value)} ms per step (medians)."
        )
        return [Answer("C4: data loading vs compute, 1 worker vs the best", text, "answered", nums)], dedupe(
            flags
        )
    labels = (workers(against), "1 worker")
    vd, da, db = compare_configs(bt, "num_workers", against, 1, "data_s", "data wait per step", *labels)
    vc, ca, cb = compare_configs(bt, "num_workers", against, 1, "train_s", "compute per step", *labels)
    lead = (
        f"{workers(against)} ({tag}) against 1 worker."
        if against == best_n
        else f"The count C3 gave is 1 worker ({tag}), so 1 worker is compared with C3's next best count, "
        f"{workers(against)}."
    )
    text = f"{lead} Data wait: {vd.sentence()} Compute: {vc.sentence()} " + NOT_INTERLEAVED
    return [
        Answer(
            "C4: data loading vs compute, 1 worker vs the best",
            text,
            "answered",
            nums,
            verdict={
                "data": sample_record(vd, da, db),
                "compute": sample_record(vc, ca, cb),
                "interleaved": False,
                "c3": tag,
                "against": against,
            },
        )
    ], dedupe(flags)


def c5(cfg, out) -> tuple[list[Answer], list[sanity.Flag]]:
    """Epoch time on each device present; a GPU-vs-CPU verdict only when both ran (else partial: needs a GPU)."""
    ep = out.epochs
    flags: list = [sanity.busy(meta_machine(out))]
    nums = []
    for d, g in ep.groupby("device", sort=False):
        flags.append(sanity.trend(list(g["total_s"])))
        steady = drop_warmup(g)
        flags.append(sanity.too_few(len(steady), f"{d} epochs after warm-up"))
        nums.append(num(f"{d}: epoch time (after warm-up)", steady["total_s"], "s"))
    cpu = nums[0]
    trending = any(f is not None and f.kind == "no steady state" for f in flags)
    lead = (
        f"The CPU epochs never settled (see the flag), so no typical CPU epoch time can be given; their median is "
        f"{cpu.value:.3g} s."
        if trending
        else f"A CPU epoch took {cpu.value:.3g} s (median after warm-up)."
    )
    if "cuda" not in out.devices:
        ans = Answer(
            "C5: average epoch time on GPU vs CPU",
            lead + " No GPU was present: no GPU time, no speedup.",
            "partial",
            nums,
            missing="a GPU: run this task on a CUDA machine",
        )
        return [ans], dedupe(flags)
    bt = steady_batches(out.items, "device")
    v, xa, xb = compare_configs(bt, "device", "cuda", "cpu", "train_s", "compute per step", "GPU", "CPU")
    if cfg.max_batches:  # e.g. the GPU kit's profile: the CPU row would otherwise take most of a lease
        lead += (
            f" Every epoch, on both devices, was cut at {cfg.max_batches} batches: these are partial epochs, "
            f"and the comparison below is of compute per step."
        )
    ans = Answer(
        "C5: average epoch time on GPU vs CPU",
        lead + " " + v.sentence(),
        "answered",
        nums,
        verdict=sample_record(v, xa, xb),
    )
    return [ans], dedupe(flags)


def training_sweep(cfg, out, field: str, question: str) -> tuple[list[Answer], list[sanity.Flag]]:
    """C6/C7: which setting of `field` trains best (last-epoch batch losses, a verdict with ties), how fast each
    is per step, and which diverged or stayed at chance (said in sweep_notes); a run of the twin task with the
    same configuration whose epochs differ a lot flags the machine as noisy."""
    b = out.batches
    flags: list = [
        sanity.stand_in(cfg),
        sanity.busy(meta_machine(out)),
        twin_noise(cfg, getattr(out, "items", None), field),
    ]
    nums = []
    raw = _usable(cfg, out, field, flags)
    samples = {shown_setting(field, v): x for v, x in raw.items()}  # "no BatchNorm", not "none"
    for v in raw:
        nums.append(num(f"{shown_setting(field, v)}: last-epoch batch loss", raw[v], ""))
        nums.append(
            num(
                f"{shown_setting(field, v)}: compute per step (after warm-up)",
                drop_warmup(b[b[field] == v])["train_s"],
                "ms",
                1000,
            )
        )
    flags.append(
        sanity.too_few(min((len(x) for x in samples.values()), default=0), "last-epoch batches per setting")
    )
    if len(samples) >= 2:
        bst = best(samples, what="last-epoch training loss")
        tied = [str(t) for t in bst.tied if t != bst.label]
        text = (
            f"Lowest last-epoch training loss: {bst.label}"
            + (
                f", but it cannot be told apart from {', '.join(tied)} (a tie)."
                if tied
                else ", lower than every other setting at 95% confidence."
            )
        ) + (
            f" One seed, {cfg.epochs} epoch(s) of training-set statistics: early training, not which generalises best."
        )
        verdict = {
            "best": str(bst.label),
            "tied": [str(t) for t in bst.tied],
            "against": {
                str(k): sample_record(v, samples[bst.label], samples[k]) for k, v in bst.verdicts.items()
            },
        }
        status, missing = "answered", ""
    else:
        text = (
            f"Fewer than two settings trained without diverging, so none can be compared: "
            f"{' '.join(sweep_notes(cfg, out, field)[:-1])}"
        ).rstrip(": ")
        verdict, status, missing = None, "partial", "two settings that train without diverging"
    return [Answer(question, text, status, nums, missing=missing, verdict=verdict)], dedupe(flags)


SHOWN_SETTINGS = {("norm", "bn"): "BatchNorm", ("norm", "none"): "no BatchNorm"}


def shown_setting(field: str, value) -> str:
    """A setting's value as a sentence names it: C7's norm 'none' reads 'no BatchNorm' (not 'none' of them)."""
    return SHOWN_SETTINGS.get((field, value), str(value))


def _usable(cfg, out, field: str, flags: list | None = None) -> dict:
    """Setting -> its last-epoch batch losses, for each complete setting that did not diverge (a diverged one
    adds its flag to `flags`)."""
    b, s = out.batches, out.summary
    classes = num_classes(cfg.dataset)
    last = b[b["epoch"] == b["epoch"].max()]
    samples = {}
    for v in s[s["status"] == "complete"][field]:
        losses = list(b.loc[b[field] == v, "loss"])
        d = sanity.diverged(losses, classes)
        if d:
            if flags is not None:
                flags.append(sanity.Flag("diverged", f"{shown_setting(field, v)}: {d.message}"))
            continue
        samples[v] = list(last.loc[last[field] == v, "loss"])
    return samples


def sweep_notes(cfg, out, field: str) -> list[str]:
    """C6/C7's prose beyond the answer: which settings failed, diverged or ended at chance, and how to read the
    per-step times."""
    b, s = out.batches, out.summary
    classes = num_classes(cfg.dataset)
    lines = [
        f"{shown_setting(field, r[field])}: not usable ({r['status']})."
        for _, r in s[s["status"] != "complete"].iterrows()
    ]
    for v in s[s["status"] == "complete"][field]:
        losses = list(b.loc[b[field] == v, "loss"])
        name = shown_setting(field, v)
        if sanity.diverged(losses, classes):
            lines.append(f"{name} diverged (loss {losses[-1]:.2f} at the end): not a result.")
        elif sanity.at_chance(losses, classes):
            tail = losses[-max(1, len(losses) // 5) :]
            lines.append(
                f"{name} did not get clearly below chance (mean loss over the last fifth "
                f"{sum(tail) / len(tail):.2f} against ln {classes} = {sanity.chance_loss(classes):.2f}): it has "
                "not learned in this run."
            )
    return lines + [
        "Times are per training step after each run's warm-up epoch; the runs took turns on a shared "
        "machine, so compare them only through the spreads shown."
    ]


def c8(cfg, out) -> tuple[list[Answer], list[sanity.Flag]]:
    """Compiled vs eager per training step (compute only: the data wait is not the question), the compile cost
    from the first epoch, and after how many steps compiling pays back."""
    flags: list = [sanity.stand_in(cfg), sanity.busy(meta_machine(out))]
    done = [it for it in out.items if it.complete]
    bt = steady_batches(done, "compile")
    if bt["compile"].nunique() < 2:
        eager = num("eager: compute per step", bt["train_s"], "ms", 1000)
        ans = Answer(
            "C8: does torch.compile pay off?",
            f"Only eager ran ({out.message or 'no compiled run'}): "
            f"{eager.value:.3g} ms per step; no comparison.",
            "partial",
            [eager],
            missing="a compiled run (see the notice above)",
        )
        return [ans], dedupe(flags)
    v, comp, eag = compare_configs(
        bt, "compile", True, False, "train_s", "compute per step", "compiled", "eager"
    )
    from ..sweeps import tables

    allb = tables(done, "batches", with_config=("compile",))
    first = allb[allb["epoch"] == allb["epoch"].min()].groupby("compile")["train_s"].sum()
    med_c, med_e = summarize(comp)["median"], summarize(eag)["median"]
    n_first = int((allb["epoch"] == allb["epoch"].min()).sum() / 2)
    cost = float(
        first[True] - first[False] - n_first * (med_c - med_e)
    )  # extra epoch-1 time beyond the step gap
    nums = [
        num("eager: compute per step", eag, "ms", 1000),
        num("compiled: compute per step", comp, "ms", 1000),
    ]
    if cost > 0:
        nums.append(Number("compile cost (epoch 1, beyond eager's warm-up)", cost, "s", "measured", n=1))
        text = first_up(v.sentence()) + f" Compiling cost about {cost:.3g} s in epoch 1."
    else:  # epoch 1 was no slower than the step gap explains: no cost is measurable, and none is a number to state
        text = (
            first_up(v.sentence())
            + " Compiling added no measurable time to epoch 1 beyond the per-step difference."
        )
    if v.outcome == "better" and cost > 0:
        steps = cost / (med_e - med_c)
        nums.append(
            Number(
                "break-even",
                steps,
                "steps",
                "predicted",
                source="compile cost / (eager step - compiled step), from the medians above",
            )
        )
        text += f" It pays back after about {steps:,.0f} steps ({steps * cfg.batch_size:,.0f} images at batch {cfg.batch_size})."
    elif v.outcome == "better":
        text += " It pays back from the first steps."
    elif v.reason == "too few samples":
        text += " Too few steps to tell whether compiling pays back."
    else:
        text += " With no measurable gain per step, compiling does not pay back at this size and setting."
    return [
        Answer("C8: does torch.compile pay off?", text, "answered", nums, verdict=sample_record(v, comp, eag))
    ], dedupe(flags)
