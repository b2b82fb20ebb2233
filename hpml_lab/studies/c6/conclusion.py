"""What the C6 report concludes: which optimizer trains best and how long each takes per step, as a training
sweep concludes it (lab2_conclusion.training_sweep).

    from hpml_lab.studies.c6 import conclusion
    answers, flags = conclusion.conclude(cfg, out)     # out: lab2.TrainingSweep of study.run
"""

from __future__ import annotations

from ... import sanity
from ...answers import Answer
from ..lab2_conclusion import training_sweep
from . import TASK

QUESTION = "C6: which optimizer trains best, and how long each epoch takes"


def conclude(cfg, out) -> tuple[list[Answer], list[sanity.Flag]]:
    """The sweep's answer over the optimizers; a run of the twin task (TASK.twin) with the same configuration
    whose epochs differ a lot flags the machine as noisy."""
    return training_sweep(cfg, out, "optimizer", QUESTION, twin=TASK.twin)
