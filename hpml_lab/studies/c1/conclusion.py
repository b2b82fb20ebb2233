"""What the C1 report concludes: where the per-batch loss and top-1 started and ended, and one learning
headline decided from verdicts of the last batches against the first and of top-1 against chance.

    from hpml_lab.studies.c1 import conclusion
    answers, flags = conclusion.conclude(cfg, run)     # run: results.Run of hpml_lab.train
"""

from __future__ import annotations

import math

import pandas as pd

from ... import sanity
from ...answers import Answer, Number
from ...data import classes_of
from ...findings import Background, Finding, fmt_in, say
from ...verdict import compare, sample_record
from .._conclude import counted, epochs_shown, training_flags


def _ends(k: Number, which: str) -> Finding:
    """'the last 4 batches' / 'the first batch', the count a Number of the record."""
    return say(f"the {which} batch") if k.value == 1 else say(f"the {which} {{k}} batches", k=k)


def conclude(cfg, run) -> tuple[list[Answer], list[sanity.Flag]]:
    """Per-batch loss and top-1: where they started and ended, and one learning headline decided from verdicts
    of the last batches against the first (loss and top-1) and top-1 against chance; diverged runs are not a
    result. The headline states the verdict that decided it; a loss that did not measurably change says so as
    a verdict."""
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
    # a verdict's ratio is of medians: its sentence names that aggregate (the means are said beside it, as
    # means)
    v = compare(last["loss"], first["loss"], la.plain(), lb.plain(), what="median training loss", **seq)
    va = compare(
        last["acc"], first["acc"], la.plain(), lb.plain(), what="median top-1", lower_is_better=False, **seq
    )
    l0 = Number("mean loss, first batches", float(first["loss"].mean()), "", "measured", n=k)
    l1 = Number("mean loss, last batches", float(last["loss"].mean()), "", "measured", n=k)
    top0 = Number("top-1, first batches", float(100 * first["acc"].mean()), "%", "measured", n=k)
    top1 = Number("top-1, last batches", float(100 * last["acc"].mean()), "%", "measured", n=k)
    chance = Number(
        "chance top-1",
        100 / classes,
        "%",
        "predicted",
        source=fmt_in("1 / {classes} classes: a uniform guess", classes=classes),
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
        "chance loss",
        sanity.chance_loss(classes),
        "",
        "predicted",
        source=fmt_in("ln {classes}: a uniform guess", classes=classes),
    )
    # the headline is the verdict in words, read in one breath (at most one number); the full statement, with
    # its interval and counts, is the first detail
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
        # the two measures disagree: say both, neither "learned" (the loss ties) nor "no learning" (top-1
        # rose)
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


def epochs_table(epochs: pd.DataFrame) -> pd.DataFrame:
    """C1's epochs as its page shows them: loss, top-1, epoch time and the training compute's share of the
    device's peak (left out where a share passes the whole peak: readable_share)."""
    return epochs_shown(
        epochs,
        {
            "epoch": "epoch",
            "batches": "batches",
            "images": "images",
            "loss": "mean loss",
            "acc": "top-1 acc",
            "total_s": "epoch time (s)",
            "mfu": "training compute, share of device peak",
        },
    )
