"""The lab tasks: id -> notebook, title and the parameter profiles.

    hpml-lab tasks          # lists them
    hpml-lab run c1 --profile smoke

A new lab task is one study module and one notebook: the module (hpml_lab/studies/<name>.py) has its run(), its
conclude() and a plain `TASK = {"id": ..., "notebook": ..., "title": ..., "smoke": {...}}` (Task's fields; studies/
does not import report/), and is registered from there when this module loads, after the lab's own tasks below.

`smoke` fits 2 CPU cores in seconds (small subset, few batches, the same code
path); `full` is the lab's real setting (5 epochs, the whole dataset,
batch 128), meant for a GPU. Profiles only set parameters the notebook has;
-p and -f override them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config import ConfigError, StudySettings
from ..studies import lab2
from ..studies.lab5 import scaling
from ..studies.memory import memory_study as memory

FULL_LAB = {"epochs": 5, "batch_size": 128, "max_batches": 0, "subset": 0, "num_workers": 2}
# Smoke runs use batch 32: the lab's lr 0.1 (for batch 128) scaled linearly to it, so that the short runs
# learn instead of diverging (lr 0.1 at batch 32 reached losses of 8-15). Each report shows this as a setting
# that differs from the lab's; full profiles keep lr 0.1.
SMOKE_LR = 0.1 * 32 / 128


@dataclass(frozen=True)
class Task:
    id: str
    notebook: str
    title: str
    smoke: dict[str, Any] = field(default_factory=dict)
    full: dict[str, Any] = field(default_factory=lambda: dict(FULL_LAB))
    settings: type[StudySettings] | None = None  # the study's own parameters, beside RunConfig's
    tiny: dict[str, Any] = field(default_factory=lambda: dict(TINY))
    gpu: dict[str, Any] = field(default_factory=lambda: dict(GPU))

    def profile(self, name: str) -> dict[str, Any]:
        if name not in PROFILES:
            raise ConfigError(f"unknown profile {name!r}; valid profiles: {', '.join(PROFILES)}")
        return dict({"smoke": self.smoke, "full": self.full, "tiny": self.tiny, "gpu": self.gpu}[name])


PROFILES = ("smoke", "full", "tiny", "gpu")
# gpu: the GPU check kit's size (report/gpucheck.py): the lab's settings on the whole dataset, 2 epochs where the
# lab's 5 add only time, so that every task together fits one 30-minute GPU lease. Estimates until a GPU run says.
GPU = {"epochs": 2, "batch_size": 128, "max_batches": 0, "subset": 0, "num_workers": 8}
# tiny: seconds per task, for the test suite and dry runs (the runner keeps the keys a notebook takes)
TINY = {"model": "resnet_tiny", "epochs": 2, "max_batches": 2, "batch_size": 16, "num_workers": 0}

TASKS: dict[str, Task] = {
    t.id: t
    for t in [
        Task(
            "c1",
            "c1_training.ipynb",
            "C1: training, per-batch loss and top-1 accuracy",
            smoke={"epochs": 2, "batch_size": 32, "max_batches": 20, "num_workers": 1, "lr": SMOKE_LR},
        ),
        Task(
            "c2",
            "c2_timing.ipynb",
            "C2: time per epoch: data loading, training, total",
            smoke={"epochs": 3, "batch_size": 32, "max_batches": 12, "num_workers": 1, "lr": SMOKE_LR},
        ),
        Task(
            "memory",
            "memory.ipynb",
            "Memory: RevNet and gradient checkpointing against ResNet",
            settings=memory.Settings,
            tiny={**TINY, "epochs": 1, "batch_size": 2},
            gpu={**GPU, "epochs": 1, "max_batches": 200},
            # batch 8 as in the reference's table; 25 steps per network for the loss curves, lr scaled down
            # from 0.1 at batch 128 (lr 0.03 at batch 8 made the RevNet's loss jump in the first steps)
            smoke={"epochs": 1, "batch_size": 8, "max_batches": 25, "num_workers": 0, "lr": 0.01},
        ),
        # Lab 2, C3 to C8 and the questions (hpml_lab/studies/lab2.py, hpml_lab/studies/questions.py)
        Task(
            "c3",
            "c3_io.ipynb",
            "C3: DataLoader time per epoch against num_workers",
            settings=lab2.C3Settings,
            smoke={"epochs": 3, "batch_size": 32, "max_batches": 40},
            gpu={**GPU, "epochs": 3, "max_batches": 100},
            full={"epochs": 3, "batch_size": 128, "max_batches": 0, "subset": 0},
        ),
        Task(
            "c4",
            "c4_profiling.ipynb",
            "C4: data loading vs compute, 1 worker vs the best; profiler trace",
            smoke={"epochs": 2, "batch_size": 32, "max_batches": 3, "lr": SMOKE_LR},
            full={k: v for k, v in FULL_LAB.items() if k != "num_workers"},
        ),
        Task(
            "c5",
            "c5_devices.ipynb",
            "C5: epoch time on every device present (GPU vs CPU)",
            smoke={"epochs": 4, "batch_size": 32, "max_batches": 5, "num_workers": 1, "lr": SMOKE_LR},
            # 10 batches an epoch: the CPU row costs about 1.3 s a step even on a 16-core CPU (GPU kit, gpuplan.py)
            gpu={**GPU, "epochs": 2, "max_batches": 10},
        ),
        Task(
            "c6",
            "c6_optimizers.ipynb",
            "C6: SGD, Nesterov, Adagrad, Adadelta, Adam",
            smoke={
                "model": "resnet_tiny",
                "epochs": 3,
                "batch_size": 32,
                "max_batches": 6,
                "num_workers": 0,
                "lr": SMOKE_LR,
            },
        ),
        Task(
            "c7",
            "c7_batchnorm.ipynb",
            "C7: with and without BatchNorm",
            smoke={
                "model": "resnet_tiny",
                "epochs": 3,
                "batch_size": 32,
                "max_batches": 6,
                "num_workers": 0,
                "lr": SMOKE_LR,
            },
        ),
        Task(
            "c8",
            "c8_compile.ipynb",
            "C8: torch.compile vs eager; profiler trace",
            tiny={
                **TINY,
                "compile_backend": "eager",
            },  # graph capture without a C++ build: seconds, not a minute
            smoke={
                "model": "resnet_tiny",
                "epochs": 3,
                "batch_size": 32,
                "max_batches": 8,
                "num_workers": 0,
                "lr": SMOKE_LR,
            },
        ),
        Task(
            "questions",
            "questions.ipynb",
            "Lab 2 questions Q1-Q4 from the model and optimizers",
            smoke={},
            full={},
        ),
        Task(
            "tinyimagenet",
            "tinyimagenet.ipynb",
            "TinyImageNet: data-loading bottleneck, activation memory, checkpointing, DP and DDP epoch times",
            smoke={
                "dataset": "tinyimagenet",
                "data_root": "data",
                "model": "resnet_tiny",
                "epochs": 2,
                "batch_size": 32,
                "max_batches": 4,
                "num_workers": 2,
                "lr": SMOKE_LR,
            },
            full={
                "dataset": "tinyimagenet",
                "epochs": 2,
                "batch_size": 512,
                "max_batches": 0,
                "subset": 0,
                "num_workers": 2,
                "stem": "imagenet",
            },
            gpu={
                "dataset": "tinyimagenet",
                "epochs": 2,
                "batch_size": 512,
                "max_batches": 50,
                "subset": 0,
                "num_workers": 8,
                "stem": "imagenet",
            },
        ),
        # lab5's batch_size is the largest per-worker batch of its sweep (32, 128, ... up to it)
        Task(
            "lab5",
            "lab5_ddp_scaling.ipynb",
            "Lab 5: DDP scaling, speedup, all-reduce bandwidth, large batches",
            smoke={"epochs": 2, "batch_size": 32, "max_batches": 2, "num_workers": 0, "lr": SMOKE_LR},
            settings=scaling.Settings,
            full={"epochs": 2, "batch_size": 8192, "max_batches": 0, "subset": 0, "num_workers": 2},
            gpu={"epochs": 2, "batch_size": 8192, "max_batches": 0, "subset": 0, "num_workers": 8},
        ),
        Task(
            "dataloading",
            "dataloading.ipynb",
            "Data loading from high-latency storage: workers, threads, tensor-resident",
            tiny={"batch_size": 16, "subset": 48, "epochs": 1, "num_workers": 0},
            # 128 PNG files, 3 passes per loader at 0/5/20/50 ms per file: about a minute on 2 cores
            smoke={"batch_size": 16, "subset": 128, "epochs": 3, "num_workers": 2},
            full={"batch_size": 128, "subset": 2560, "epochs": 3, "num_workers": 2},
            # the simulated sleeps need no GPU: the GPU kit runs a tenth of the files, 2 passes
            gpu={"batch_size": 128, "subset": 256, "epochs": 2, "num_workers": 2},
        ),
    ]
}


def register(task: Task) -> Task:
    """Add a task; an id registered twice is refused (the way models register)."""
    if task.id in TASKS:
        raise ConfigError(f"task {task.id!r} is registered twice")
    TASKS[task.id] = task
    return task


def register_studies(modules=None) -> list[str]:
    """Register every study module's `TASK` (a dict of Task's fields); returns the ids added."""
    import importlib
    import pkgutil

    from .. import studies

    if modules is None:
        modules = [
            importlib.import_module(f"{studies.__name__}.{m.name}")
            for m in pkgutil.iter_modules(studies.__path__)
            if not m.name.startswith("_")
        ]
    return [register(Task(**m.TASK)).id for m in modules if isinstance(getattr(m, "TASK", None), dict)]


register_studies()


def get(task_id: str) -> Task:
    if task_id not in TASKS:
        raise ConfigError(f"unknown task {task_id!r}; valid tasks: {', '.join(TASKS)} (see `hpml-lab tasks`)")
    return TASKS[task_id]
