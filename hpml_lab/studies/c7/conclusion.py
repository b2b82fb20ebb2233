"""What the C7 report concludes: average loss and top-1 with and without BatchNorm, and which trains best, as
a training sweep concludes it (lab2_conclusion.training_sweep), with the averages over all epochs said first.

    from hpml_lab.studies.c7 import conclusion
    answers, flags = conclusion.conclude(cfg, out)     # out: lab2.TrainingSweep of study.run
"""

from __future__ import annotations

from ... import sanity
from ...answers import Answer, Number
from ...findings import Finding, say
from ..lab2_conclusion import training_sweep
from . import TASK

QUESTION = "C7: average loss and top-1 without BatchNorm vs with it"
# the norms as a sentence names them: 'no BatchNorm', not 'none' of them
SHOWN = {"bn": "BatchNorm", "none": "no BatchNorm"}


def averages(cfg, out) -> Finding | None:
    """The mean loss and top-1 over all epochs with BatchNorm and without it (the table's means, the lab's
    question), each a Number named for its norm; None unless both norms completed with their means."""
    s = out.summary
    if "mean_loss" not in s or not {"bn", "none"} <= set(s["norm"]):
        return None
    r = s.set_index("norm")

    def mean(norm: str, what: str, column: str, unit: str = "", scale: float = 1.0) -> Number:
        name, value = SHOWN[norm], float(scale * r.loc[norm, column])
        return Number(f"{name}: mean {what} over all epochs", value, unit, "measured", n=int(cfg.epochs))

    return say(
        "Average over all epochs: with BatchNorm loss {bn_loss}, top-1 {bn_top1}; "
        "without it loss {none_loss}, top-1 {none_top1}",
        bn_loss=mean("bn", "loss", "mean_loss"),
        bn_top1=mean("bn", "top-1", "mean_acc", "%", 100),
        none_loss=mean("none", "loss", "mean_loss"),
        none_top1=mean("none", "top-1", "mean_acc", "%", 100),
    )


def header_stand_in(cfg) -> sanity.Flag | None:
    """The page header's stand-in flag, shown before the runs: each network's parameter count (with
    BatchNorm and without it: the two differ by BatchNorm's weights and the convolutions' biases), counted
    on each as built for cfg, as the runs build it and record it in meta.json's parameters (the answer's flag
    reads those); None for the lab's model."""
    from ... import models
    from ...data import classes_of

    if cfg.model == sanity.LAB["model"]:
        return None
    stem = {"stem": cfg.stem} if models.accepts(cfg.model, "stem") else {}
    counts = {
        SHOWN[norm]: models.count_parameters(
            models.build(cfg.model, num_classes=classes_of(cfg), norm=norm, **stem)
        )
        for norm in SHOWN  # the two norms study.run trains
    }
    return sanity.stand_in(cfg, counts=counts)


def conclude(cfg, out) -> tuple[list[Answer], list[sanity.Flag]]:
    """The sweep's answer over the two norms, the averages over all epochs first among its notes; a run of the
    twin task (TASK.twin) with the same configuration whose epochs differ a lot flags the machine as noisy."""
    first = [f for f in (averages(cfg, out),) if f is not None]
    return training_sweep(cfg, out, "norm", QUESTION, shown=SHOWN, twin=TASK.twin, first_notes=first)
