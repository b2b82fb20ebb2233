"""Task C3: DataLoader time per epoch against num_workers

Its study code is shared by Lab 2's tasks (studies/lab2.py runs it, studies/lab2_answers.py concludes it); this
folder registers the task (hpml_lab.protocol, hpml_lab.studies.registry()).
"""

from ...protocol import GPU, Task
from .. import lab2, lab2_answers

TASK = Task(
    "c3",
    "c3_io.ipynb",
    "C3: DataLoader time per epoch against num_workers",
    order=3,
    slurm="--no-train",
    settings=lab2.C3Settings,
    smoke={"epochs": 3, "batch_size": 32, "max_batches": 40},
    gpu={**GPU, "epochs": 3, "max_batches": 100},
    full={"epochs": 3, "batch_size": 128, "max_batches": 0, "subset": 0},
    gpu_runs=0,
    gpu_priority=69,  # just before C4, which reads its results in the same command (gpu_with)
    smoke_s=17,
    gpu_extra=(
        60.0,
        "loader sweep, no model: up to 5 worker counts x 3 epochs x 100 batches of PIL decoding",
    ),
    run=lambda cfg, settings: lab2.c3_loader_sweep(cfg, **vars(settings)),
    conclude=lab2_answers.c3,
)
