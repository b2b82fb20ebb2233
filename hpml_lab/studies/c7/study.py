"""C7's study: the same model with BatchNorm and without it, default SGD (lab2.training_sweep).

hpml-lab run c7 --profile smoke          # notebooks/c7_batchnorm.ipynb calls run()
from hpml_lab import RunConfig
from hpml_lab.studies.c7 import study
out = study.run(RunConfig(task="c7"))     # lab2.TrainingSweep: epochs, batches, a summary per norm
"""

from __future__ import annotations

from ...config import RunConfig
from ..lab2 import TrainingSweep, training_sweep


def run(cfg: RunConfig, log=print) -> TrainingSweep:
    """The same model with BatchNorm ("bn") and without ("none"), default SGD."""
    return training_sweep(cfg, "norm", ["bn", "none"], log=log)
