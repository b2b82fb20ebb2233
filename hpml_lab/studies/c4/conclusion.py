"""What the C4 report concludes: data loading against compute per step with 1 worker and with the count C3
chose (named a best only where C3's verdict named one), each difference a verdict that knows the counts ran
one after the other.

    from hpml_lab.studies.c4 import conclusion
    answers, flags = conclusion.conclude(cfg, out)     # out: study.C4Result
    conclusion.c3_tag(out.best, out.c3_rows).plain()   # how C3 stands behind the count: "C3's best", ...
"""

from __future__ import annotations

import pandas as pd

from ... import sanity
from ...answers import Answer, Number
from ...data import classes_of
from ...findings import Background, Finding, fmt_in, join, say
from ...verdict import best, sample_record
from .._conclude import (
    busy_of,
    compare_configs,
    dedupe,
    loads_by,
    num,
    sampling,
    steady_batches,
    worker_label,
    workers,
    workers_list,
)
from ..c3.conclusion import loads_of, too_few_split, too_few_why


def c3_tag(best_n: int, rows: pd.DataFrame | None) -> Finding:
    """How C3 stands behind the count C4 uses: its verdict's best, a count tied with others, or given."""
    if rows is None or rows.empty:
        return say("the count given")
    b = best(
        {int(n): list(g["seconds"]) for n, g in rows.groupby("num_workers")},
        what="DataLoader time per epoch",
        loads=loads_of(rows),
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
            "C3's stopping rule; C3's lowest median was {low}, and C3 timed too few epochs to tell the two "
            "apart: {why}",
            low=low,
            why=too_few_why([v], "C3"),
        )
    if best_n in b.tied:
        return say("C3's stopping rule; C3 could not tell it from {low}, its lowest median: a tie", low=low)
    return say("C3's stopping rule; C3's verdict favours {w}", w=worker_label(b.label, "C3 favoured count"))


def conclude(cfg, out) -> tuple[list[Answer], list[sanity.Flag]]:
    """Data loading vs compute per step with 1 worker and with the count C3 chose (named a best only when C3's
    verdict named one), each difference a verdict that knows the counts ran one after the other (and cannot
    tell when the load moved between them); the data share per count as findings; what workers usually do,
    background."""
    best_n = int(out.best)
    bt = steady_batches(out.items, "num_workers")
    # each count's run diverged or not; the settings that differ are the page's own (notebook.answer), not a
    # count's: a count's run_flags said "num_workers 0 (lab 2)" beside a config of 1
    flags: list = [
        sanity.diverged(g["loss"], classes_of(cfg), label=worker_label(n, fmt_in("C4 worker count {n}", n=n)))
        for n, g in bt.groupby("num_workers")
    ]
    flags.append(busy_of(out))
    waits, computes = {}, {}
    for n, g in bt.groupby("num_workers"):
        waits[int(n)] = num(f"{workers(n)}: data wait per step", g["data_s"], "ms", 1000)
        computes[int(n)] = num(f"{workers(n)}: compute per step", g["train_s"], "ms", 1000)
    labels = {n: worker_label(n, fmt_in("C4 worker count {n}", n=n)) for n in waits}
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
            "With one worker a single process decodes and augments every image; when that takes longer than "
            "a step, the loop waits. Workers share the CPU cores with the training computation, so more "
            "workers can also slow the compute down; on a GPU node compute is usually fast and loading can "
            "dominate unless enough workers feed it."
        )
    ]
    against = getattr(out, "against", None)
    against = best_n if against is None and best_n != 1 else against
    question = "C4: data loading vs compute, one worker vs the best"
    if against is None or against == 1:
        one = next(iter(waits))
        head = say(
            "The count C3 gave is {one} ({tag}), so it is compared with nothing: data wait {wait} and "
            "compute {compute} per step (medians)",
            one=labels[one],
            tag=tag,
            wait=waits[one],
            compute=computes[one],
        )
        return [Answer(question, head, details, background)], dedupe(flags)
    loads = loads_by(out.items, "num_workers")
    names = dict(label_a=workers(against), label_b="1 worker")  # each side named, the compared count first
    vd, da, db = compare_configs(
        bt, "num_workers", against, 1, "data_s", "data wait per step", **names, loads=loads
    )
    vc, ca, cb = compare_configs(
        bt, "num_workers", against, 1, "train_s", "compute per step", **names, loads=loads
    )
    lab = dict(label_a=labels[against], label_b=labels[1])
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
    head = say("Data wait: {d}", d=vd.short("C4 data wait", **lab))
    details = [
        lead.up(),
        say("Data wait: {d}", d=vd.finding("C4 data wait", **lab)),
        say("Compute: {c}", c=vc.finding("C4 compute", **lab)),
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
    """When the table's data wait per epoch (median epoch) orders the two counts otherwise than the median
    wait per step does, both aggregates named and why they can differ; None when they agree or the table lacks
    the column."""
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
        "The table's data wait is per epoch ({ea} with {wa}, {eb} with {wb}: median epoch) and orders the "
        "two counts the other way round from the median per step: an epoch's total holds every step's wait, "
        "the few long ones too (such as a worker's start-up on an epoch's first step), which a median per "
        "step leaves out",
        ea=ep[against],
        wa=labels[against],
        eb=ep[1],
        wb=labels[1],
    )
