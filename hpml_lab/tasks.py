"""The lab tasks: id -> notebook, title and the two parameter profiles.

    hpml-lab tasks          # lists them
    hpml-lab run c1 --profile smoke

`smoke` fits 2 CPU cores in seconds (small subset, few batches, the same code
path); `full` is the lab's real setting (5 epochs, the whole dataset,
batch 128), meant for a GPU. Profiles only set parameters the notebook has;
-p and -f override them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .config import ConfigError

FULL_LAB = {"epochs": 5, "batch_size": 128, "max_batches": 0, "subset": 0, "num_workers": 2}


@dataclass(frozen=True)
class Task:
    id: str
    notebook: str
    title: str
    smoke: dict[str, Any] = field(default_factory=dict)
    full: dict[str, Any] = field(default_factory=lambda: dict(FULL_LAB))

    def profile(self, name: str) -> dict[str, Any]:
        if name not in PROFILES:
            raise ConfigError(f"unknown profile {name!r}; valid profiles: {', '.join(PROFILES)}")
        return dict(self.smoke if name == "smoke" else self.full)


PROFILES = ("smoke", "full")

TASKS: dict[str, Task] = {
    t.id: t
    for t in [
        Task("c1", "c1_training.ipynb", "C1: training, per-batch loss and top-1 accuracy",
             # lr 0.03: batch 32 at lr 0.1 diverges for the first dozens of steps, longer than a smoke run
             smoke={"epochs": 2, "batch_size": 32, "max_batches": 20, "num_workers": 1, "lr": 0.03}),
        Task("c2", "c2_timing.ipynb", "C2: time per epoch: data loading, training, total",
             smoke={"epochs": 3, "batch_size": 32, "max_batches": 5, "num_workers": 1}),
        Task("dataloading", "dataloading.ipynb",
             "Data loading from high-latency storage: workers, threads, tensor-resident",
             # 128 PNG files, 3 passes per loader at 0/5/20/50 ms per file: about a minute on 2 cores
             smoke={"batch_size": 16, "subset": 128, "epochs": 3, "num_workers": 2},
             full={"batch_size": 128, "subset": 2560, "epochs": 3, "num_workers": 2}),
    ]
}


def get(task_id: str) -> Task:
    if task_id not in TASKS:
        raise ConfigError(f"unknown task {task_id!r}; valid tasks: {', '.join(TASKS)} (see `hpml-lab tasks`)")
    return TASKS[task_id]
