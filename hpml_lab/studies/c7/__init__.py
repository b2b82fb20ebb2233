"""Task C7: with and without BatchNorm

Its study code is shared by Lab 2's tasks (studies/lab2.py runs it, studies/lab2_answers.py concludes it); this
folder registers the task (hpml_lab.protocol, hpml_lab.studies.registry()).
"""

from ...protocol import GPU, SMOKE_LR, Task, later

QUESTION = "C7: average loss and top-1 without BatchNorm vs with it"

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
    smoke_s=10,
    run=lambda cfg, settings=None: later("hpml_lab.studies.lab2", "c7_batchnorm")(cfg),
    conclude=lambda cfg, out: later("hpml_lab.studies.lab2_answers", "training_sweep")(
        cfg, out, "norm", QUESTION
    ),
)
