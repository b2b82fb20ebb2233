"""Task C5: epoch time on every device present (GPU vs CPU)

study.py runs it, conclusion.py says what its report concludes (its figure is plots.median_bars). TASK
registers it (hpml_lab.protocol; hpml_lab.studies.registry() finds it)."""

from ...protocol import GPU, SMOKE_LR, Task, later

# reference (review): ResNet-18, batch 128, one training step on a fast 16-core CPU: about 1.3 s
CPU_STEP_S = 1.3

TASK = Task(
    "c5",
    "c5_devices.ipynb",
    "C5: epoch time on every device present (GPU vs CPU)",
    order=5,
    smoke={"epochs": 4, "batch_size": 32, "max_batches": 5, "num_workers": 1, "lr": SMOKE_LR},
    # 10 batches an epoch: the CPU row costs about 1.3 s a step even on a 16-core CPU (GPU kit, gpuplan.py)
    gpu={**GPU, "epochs": 2, "max_batches": 10},
    gpu_runs=1,
    gpu_priority=30,
    gpu_timed=(30.0, "measured: 30 s on an H200 (the second H200 check, 2026-11-28)"),
    smoke_s=29,
    needs=(
        (
            lambda cfg: cfg.epochs >= 2,
            "needs epochs of 2 or more: it compares the median epoch after the warm-up epoch on each device",
        ),
    ),
    gpu_extra=(
        lambda profile, steps, workers: int(profile.get("epochs", 1)) * steps * CPU_STEP_S,
        "the CPU row: epochs x max_batches steps at the CPU step time",
    ),
    run=lambda cfg, settings=None: later("hpml_lab.studies.c5.study", "run")(cfg),
    conclude=later("hpml_lab.studies.c5.conclusion", "conclude"),
)
