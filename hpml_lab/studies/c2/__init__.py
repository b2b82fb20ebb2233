"""Task C2: time per epoch: data loading, training, total

hpml_lab.train runs it; conclusion.py says what its report concludes, figure.py draws its figure. TASK
registers it (hpml_lab.protocol; hpml_lab.studies.registry() finds it).
"""

from ...protocol import SMOKE_LR, Task, later

TASK = Task(
    "c2",
    "c2_timing.ipynb",
    "C2: time per epoch: data loading, training, total",
    order=2,
    smoke={"epochs": 3, "batch_size": 32, "max_batches": 12, "num_workers": 1, "lr": SMOKE_LR},
    gpu_runs=1,
    gpu_priority=20,
    gpu_timed=(
        24.0,
        "measured: 24 s on an H200 (the second H200 check, 2026-11-28), the synthetic CIFAR-10 written in "
        "the command's set-up",
    ),
    smoke_s=41,
    needs=(
        (
            lambda cfg: cfg.epochs >= 2,
            "needs epochs of 2 or more: its first epoch is the warm-up, and the timing is of the epochs "
            "after it",
        ),
    ),
    run=lambda cfg, settings=None: later("hpml_lab.training", "train")(cfg),
    conclude=later("hpml_lab.studies.c2.conclusion", "conclude"),
)
