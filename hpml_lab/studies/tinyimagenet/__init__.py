"""The tinyimagenet task: its study and what its report concludes."""

from ...protocol import SMOKE_LR, Task, later

TASK = Task(
    "tinyimagenet",
    "tinyimagenet.ipynb",
    "TinyImageNet: data-loading bottleneck, activation memory, checkpointing, DP and DDP epoch times",
    order=11,
    slurm="--gpus 2",
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
    gpu_runs=4,
    gpu_priority=130,
    smoke_s=18,
    needs=(
        (
            lambda cfg: cfg.dataset == "tinyimagenet",
            "runs on dataset=tinyimagenet only (its model and answers are for 64 x 64 images of 200 classes)",
        ),
    ),
    gpu_extra=(60.0, "DataParallel/DDP set-up on one GPU and the 64x64 data"),
    run=lambda cfg, settings=None: later("hpml_lab.studies.tinyimagenet.study", "run")(cfg),
    conclude=later("hpml_lab.studies.tinyimagenet.conclusion", "conclude"),
)
