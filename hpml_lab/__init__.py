"""hpml-lab: profile, benchmark and optimize ResNet training in PyTorch, reported as HTML.

    from hpml_lab import RunConfig, train
    run = train(RunConfig(task="c1", epochs=1, max_batches=5))

See README.md for the commands; `hpml-lab --help` for the CLI.
"""

from .config import ConfigError, RunConfig
from .results import Run
from .training import train

__version__ = "0.1.0"
__all__ = ["ConfigError", "RunConfig", "Run", "train", "__version__"]
