"""C6's study: the same training with SGD, SGD with Nesterov, Adagrad, Adadelta and Adam
(lab2.training_sweep).

hpml-lab run c6 --profile smoke          # notebooks/c6_optimizers.ipynb calls run()
from hpml_lab import RunConfig
from hpml_lab.studies.c6 import study
out = study.run(RunConfig(task="c6"))     # lab2.TrainingSweep: epochs, batches, a summary per optimizer
"""

from __future__ import annotations

from ...config import OPTIMIZERS, RunConfig
from ..lab2 import TrainingSweep, training_sweep


def run(cfg: RunConfig, optimizers=OPTIMIZERS, log=print) -> TrainingSweep:
    """SGD, SGD+Nesterov, Adagrad, Adadelta, Adam with the same lr / momentum / weight decay (where they
    apply)."""
    return training_sweep(cfg, "optimizer", list(optimizers), log=log)
