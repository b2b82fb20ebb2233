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
        130.0,
        "predicted: its two training runs, its rounds in which the two steps take turns, and its trace; cut "
        "off after 97 s on an H200 (the second H200 check, 2026-11-28) before its report",
    ),
    smoke_s=50,
    gpu_extra=(150.0, "torch.compile of ResNet-18 (review: 1.5-2.5 min cold)"),
    run=lambda cfg, settings=None: later("hpml_lab.studies.c8.study", "run")(cfg),
    conclude=later("hpml_lab.studies.c8.conclusion", "conclude"),
)
