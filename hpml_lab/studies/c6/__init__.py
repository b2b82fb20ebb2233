"""Task C6: SGD, Nesterov, Adagrad, Adadelta, Adam

study.py runs it, conclusion.py says what its report concludes (both through the training sweep Lab 2's
tasks share: lab2.py, lab2_conclusion.py). TASK registers it (hpml_lab.protocol; hpml_lab.studies.registry()).
"""

from ...protocol import GPU, SMOKE_LR, Task, later

TASK = Task(
    "c6",
    "c6_optimizers.ipynb",
    "C6: SGD, Nesterov, Adagrad, Adadelta, Adam",
    order=6,
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
    gpu_runs=5,
    gpu_priority=90,
    gpu_timed=(
        50.0,
        "predicted: 5 runs x 2 epochs on the fast path (tensor loader, channels_last: 3.3 s an epoch at "
        "batch 128 on the H100's speed ladder), the runs' set-up, the kernel's start; 68 s measured with "
        "the PIL loader",
    ),
    smoke_s=19,
    run=lambda cfg, settings=None: later("hpml_lab.studies.c6.study", "run")(cfg),
    twin=("c7", "norm"),  # C6's sgd and C7's bn are the same training (the lab's defaults)
    conclude=later("hpml_lab.studies.c6.conclusion", "conclude"),
)
