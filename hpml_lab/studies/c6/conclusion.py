"""What the C6 report concludes: which optimizer trains best and how long each takes per step, as a training
sweep concludes it (lab2_conclusion.training_sweep), and how the one learning rate they all ran at compares
with the adaptive optimizers' own defaults (rate_note).

    from hpml_lab.studies.c6 import conclusion
    answers, flags = conclusion.conclude(cfg, out)     # out: lab2.TrainingSweep of study.run
"""

from __future__ import annotations

import inspect

from ... import sanity
from ...answers import Answer, Number
from ...config import OPTIMIZER_TABLE
from ...findings import Finding, join, say
from ..lab2_conclusion import training_sweep
from . import TASK

QUESTION = "C6: which optimizer trains best, and how long each epoch takes"
# the optimizers whose torch.optim default learning rate the page compares with the one rate that ran: the
# adaptive ones, as a sentence names them (SGD's 0.1 is the lab's own choice for it); Adadelta's lr is no
# step size of its own but a factor on the step it computes from its running averages
ADAPTIVE = {"adagrad": "Adagrad", "adam": "Adam", "adadelta": "Adadelta"}


def default_lr(optimizer: str) -> float:
    """torch.optim's default lr for one of config.OPTIMIZER_TABLE's optimizers (read from its signature, as
    the installed torch defines it)."""
    import torch

    cls = getattr(torch.optim, OPTIMIZER_TABLE[optimizer][0])
    return float(inspect.signature(cls.__init__).parameters["lr"].default)


def rate_note(cfg, optimizers) -> Finding | None:
    """The one learning rate every optimizer ran at (cfg.lr, the lab's protocol) beside the torch.optim
    default of each adaptive optimizer that ran, and this rate as a multiple of it; for Adadelta, what its lr
    is (a factor on its computed step, 1 by default). None when no adaptive optimizer ran."""
    ran = [o for o in ADAPTIVE if o in set(optimizers)]
    if not ran:
        return None
    lr = Number("lr (ran)", float(cfg.lr), "", "setting", source="this run's settings")
    each = []
    for o in ran:
        d, name, cls_name = default_lr(o), ADAPTIVE[o], OPTIMIZER_TABLE[o][0]
        default = Number(
            f"{name}: torch.optim's default lr",
            d,
            "",
            "reference",
            source=f"torch.optim.{cls_name}'s signature",
        )
        times = Number(
            f"{name}: lr that ran / its default", float(cfg.lr) / d, "x", "setting", source="lr / default"
        )
        what = (
            "; its lr only scales the step it computes from its running averages" if o == "adadelta" else ""
        )
        each.append(
            say(
                "{name}'s is {default} (this rate is {times} it" + what + ")",
                name=name,
                default=default,
                times=times,
            )
        )
    return say(
        "Every optimizer ran at the same learning rate, {lr}, as the lab prescribes one rate for all (not "
        "each one's best); torch.optim's defaults differ: {each}",
        lr=lr,
        each=join(each, ", ", " and "),
    )


def conclude(cfg, out) -> tuple[list[Answer], list[sanity.Flag]]:
    """The sweep's answer over the optimizers, the learning rate's note first (rate_note); a run of the twin
    task (TASK.twin) with the same configuration whose epochs differ a lot flags the machine as noisy."""
    first = [f for f in (rate_note(cfg, list(out.summary["optimizer"])),) if f is not None]
    return training_sweep(cfg, out, "optimizer", QUESTION, twin=TASK.twin, first_notes=first)
