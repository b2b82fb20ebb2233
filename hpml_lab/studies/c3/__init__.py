"""Task C3: DataLoader time per epoch against num_workers

study.py runs it, conclusion.py says what its report concludes, figure.py draws its figure. TASK registers it
(hpml_lab.protocol; hpml_lab.studies.registry() finds it).
"""

from dataclasses import dataclass

from ...config import ConfigError, StudySettings
from ...protocol import GPU, Task, later, reads_only

MAX_WORKERS = 64


@dataclass(frozen=True)
class Settings(StudySettings):
    """C3's own parameters: the sweep's stopping rule (notebook parameters, -p like RunConfig's)."""

    max_workers: int = MAX_WORKERS  # the largest worker count tried
    tolerance: float = 0.03  # a count improves when its median is this much below the best so far
    patience: int = 1  # counts in a row allowed not to improve, beyond the first, before stopping

    RANGES = {
        "max_workers": (1, 1024, "more loader workers than any node has cores"),
        "tolerance": (0, 0.99, "a share of the best median so far"),
        "patience": (0, 64, "worker counts in a row; the sweep tries at most 64"),
    }

    def check(self) -> None:
        if self.max_workers < 1 or not 0 <= self.tolerance < 1 or self.patience < 0:
            raise ConfigError(
                "parameters: 'max_workers' must be 1 or more, 'tolerance' in [0, 1), 'patience' 0 or more"
            )


TASK = Task(
    "c3",
    "c3_io.ipynb",
    "C3: DataLoader time per epoch against num_workers",
    order=3,
    slurm="--no-train",
    settings=Settings,
    smoke={"epochs": 3, "batch_size": 32, "max_batches": 40},
    gpu={**GPU, "epochs": 3, "max_batches": 100},
    full={"epochs": 3, "batch_size": 128, "max_batches": 0, "subset": 0},
    gpu_runs=0,
    gpu_priority=69,  # just before C4, which reads its results in the same command (gpu_with)
    gpu_timed=(77.0, "measured: 77 s on an H100 (the H100 check)"),
    smoke_s=17,
    gpu_extra=(
        60.0,
        "loader sweep, no model: up to 5 worker counts x 3 epochs x 100 batches of PIL decoding",
    ),
    # the lab's DataLoader alone (build_train_loader), timed over epochs of at most max_batches: no model is
    # built, so the page names no model, optimizer or precision (grade23: its config row listed them)
    ignores=reads_only(
        "dataset",
        "data_root",
        "subset",
        "augment",
        "batch_size",
        "shuffle",
        "num_workers",
        "seed",
        "epochs",
        "max_batches",
        "device",
    ),
    run=lambda cfg, settings: later("hpml_lab.studies.c3.study", "run")(cfg, **vars(settings)),
    conclude=later("hpml_lab.studies.c3.conclusion", "conclude"),
)
