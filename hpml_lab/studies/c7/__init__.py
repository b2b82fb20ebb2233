"""Task C7: with and without BatchNorm

study.py runs it, conclusion.py says what its report concludes (both through the training sweep Lab 2's
tasks share: lab2.py, lab2_conclusion.py). TASK registers it (hpml_lab.protocol; hpml_lab.studies.registry()).
"""

from ...protocol import GPU, SMOKE_LR, Task, later

TASK = Task(
    "c7",
    "c7_batchnorm.ipynb",
    "C7: with and without BatchNorm",
    order=7,
    smoke={
        "model": "resnet_tiny",
        "epochs": 3,
        "batch_size": 32,
        "max_batches": 6,
        "num_workers": 0,
        "lr": SMOKE_LR,
    },
    # the GPU check trains on the fast path where the question (which setting trains best) allows it: the
    # tensor-resident loader and channels_last, fp32 as the lab's; the page's settings table and flag say so
    gpu={**GPU, "loader": "tensor", "channels_last": True},
    gpu_runs=2,
    gpu_priority=110,
    gpu_timed=(
        28.0,
        "measured: 28 s on an H200 (the second H200 check, 2026-11-28): 2 runs x 2 epochs on the fast path",
    ),
    smoke_s=10,
    run=lambda cfg, settings=None: later("hpml_lab.studies.c7.study", "run")(cfg),
    twin=("c6", "optimizer"),  # C7's bn and C6's sgd are the same training (the lab's defaults)
    conclude=later("hpml_lab.studies.c7.conclusion", "conclude"),
)
