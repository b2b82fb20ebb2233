"""The lab5 task: its TASK and settings (here, importing no torch); its study in study.py, the torchrun
launches and what each rank runs in ranks.py, what its report concludes in conclusion.py, its figure in
figure.py."""

from dataclasses import dataclass

from ...config import ConfigError, StudySettings
from ...protocol import SMOKE_LR, Task, later

N_IMAGES = 50_000  # CIFAR-10 training images: epoch times are per full epoch


@dataclass(frozen=True)
class Settings(StudySettings):
    """Lab 5's own parameters."""

    lab_sizes: tuple[int, ...] = (32, 128, 512, 2048, 8192)  # per-worker batches, up to batch_size
    n_images: int = N_IMAGES

    RANGES = {
        "lab_sizes": (1, 1 << 20, "per-worker batches, as RunConfig's batch_size"),
        "n_images": (1, 100_000_000, "the images of the epoch the times are extrapolated to"),
    }

    def check(self) -> None:
        if not self.lab_sizes or min(self.lab_sizes) < 1 or self.n_images < 1:
            raise ConfigError("parameters 'lab_sizes' (per-worker batches) and 'n_images' must be 1 or more")


# lab5's batch_size is the largest per-worker batch of its sweep (32, 128, ... up to it)
TASK = Task(
    "lab5",
    "lab5_ddp_scaling.ipynb",
    "Lab 5: DDP scaling, speedup, all-reduce bandwidth, large batches",
    order=12,
    slurm="--gpus 4",
    smoke={"epochs": 2, "batch_size": 32, "max_batches": 2, "num_workers": 0, "lr": SMOKE_LR},
    settings=Settings,
    full={"epochs": 2, "batch_size": 8192, "max_batches": 0, "subset": 0, "num_workers": 2},
    gpu={"epochs": 2, "batch_size": 8192, "max_batches": 0, "subset": 0, "num_workers": 8},
    gpu_runs=0,
    gpu_priority=40,
    gpu_timed=(115.0, "measured: 115 s on an H200 (the first GPU check)"),
    smoke_s=53,
    gpu_extra=(150.0, "the batch sweep up to 8192 and the all-reduce measurement (review)"),
    run=later("hpml_lab.studies.lab5.study", "lab5"),
    conclude=later("hpml_lab.studies.lab5.conclusion", "conclude"),
)
