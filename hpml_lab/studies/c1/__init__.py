"""Task C1: training, per-batch loss and top-1 accuracy

hpml_lab.train runs it; conclusion.py says what its report concludes, figure.py draws its figure. TASK
registers it (hpml_lab.protocol; hpml_lab.studies.registry() finds it).
"""

from ...protocol import SMOKE_LR, Task, later

TASK = Task(
    "c1",
    "c1_training.ipynb",
    "C1: training, per-batch loss and top-1 accuracy",
    order=1,
    smoke={"epochs": 2, "batch_size": 32, "max_batches": 20, "num_workers": 1, "lr": SMOKE_LR},
    gpu_runs=1,
    gpu_priority=80,
    gpu_timed=(24.0, "measured: 24 s on an H200 (the second H200 check, 2026-11-28)"),
    smoke_s=41,
    run=lambda cfg, settings=None: later("hpml_lab.training", "train")(cfg),
    conclude=later("hpml_lab.studies.c1.conclusion", "conclude"),
)
