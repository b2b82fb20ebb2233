"""Task C8: torch.compile vs eager; profiler trace

study.py runs it, conclusion.py says what its report concludes (its figure is plots.median_bars). TASK
registers it (hpml_lab.protocol; hpml_lab.studies.registry() finds it)."""

from ...protocol import SMOKE_LR, TINY, Task, later

TASK = Task(
    "c8",
    "c8_compile.ipynb",
    "C8: torch.compile vs eager; profiler trace",
    order=8,
    tiny={**TINY, "compile_backend": "eager"},  # graph capture without a C++ build: seconds, not a minute
    smoke={
        "model": "resnet_tiny",
        "epochs": 3,
        "batch_size": 32,
        "max_batches": 8,
        "num_workers": 0,
        "lr": SMOKE_LR,
    },
    gpu_runs=2,
    gpu_priority=10,
    gpu_timed=(
        93.0,
        "predicted: 78 s measured on an H200 (the first GPU check), and about 15 s for the rounds in which "
        "the two steps take turns (two fresh models, the compiled one from inductor's warm cache; 9 rounds "
        "x 6 steps x 2 modes)",
    ),
    smoke_s=50,
    gpu_extra=(150.0, "torch.compile of ResNet-18 (review: 1.5-2.5 min cold)"),
    run=lambda cfg, settings=None: later("hpml_lab.studies.c8.study", "run")(cfg),
    conclude=later("hpml_lab.studies.c8.conclusion", "conclude"),
)
