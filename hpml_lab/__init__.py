"""hpml-lab: profile, benchmark and optimize ResNet training in PyTorch, reported as HTML.

    from hpml_lab import RunConfig, train
    run = train(RunConfig(task="c1", epochs=1, max_batches=5))

See README.md for the commands; `hpml-lab --help` for the CLI.

`train` and `Run` are imported when first used (PEP 562), so that importing any part of the package does not
import torch: the command line's front (help, tasks, init, slurm, data, bad input) answers without it.
"""

from .config import ConfigError, RunConfig
from .protocol import names_later

__version__ = "0.1.0"
__all__ = ["ConfigError", "RunConfig", "Run", "train", "__version__"]
__getattr__ = names_later(__name__, {"train": "training", "Run": "results"})
