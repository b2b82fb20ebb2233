"""The lab5 task: its study and what its report concludes."""

from ...protocol import SMOKE_LR, Task
from . import scaling, scaling_answers

# lab5's batch_size is the largest per-worker batch of its sweep (32, 128, ... up to it)
TASK = Task(
    "lab5",
    "lab5_ddp_scaling.ipynb",
    "Lab 5: DDP scaling, speedup, all-reduce bandwidth, large batches",
    order=12,
    slurm="--gpus 4",
    smoke={"epochs": 2, "batch_size": 32, "max_batches": 2, "num_workers": 0, "lr": SMOKE_LR},
    settings=scaling.Settings,
    full={"epochs": 2, "batch_size": 8192, "max_batches": 0, "subset": 0, "num_workers": 2},
    gpu={"epochs": 2, "batch_size": 8192, "max_batches": 0, "subset": 0, "num_workers": 8},
    gpu_runs=0,
    gpu_priority=40,
    smoke_s=53,
    gpu_extra=(150.0, "the batch sweep up to 8192 and the all-reduce measurement (review)"),
    run=scaling.lab5,
    conclude=scaling_answers.conclude,
)
