"""Task C4: data loading vs compute, 1 worker vs the best; profiler trace

study.py runs it, conclusion.py says what its report concludes, figure.py draws its figure. TASK registers it
(hpml_lab.protocol; hpml_lab.studies.registry() finds it).
"""

from ...protocol import FULL_LAB, GPU, SMOKE_LR, Task, later

TASK = Task(
    "c4",
    "c4_profiling.ipynb",
    "C4: data loading vs compute, 1 worker vs the best; profiler trace",
    order=4,
    smoke={"epochs": 2, "batch_size": 32, "max_batches": 3, "lr": SMOKE_LR},
    full={k: v for k, v in FULL_LAB.items() if k != "num_workers"},
    # each epoch after the first is one sample of C4's comparison (its steps run back to back, so they are
    # not samples): 4 epochs give 3 a side, the fewest a verdict takes; at the gpu profile's 2 its page could
    # only say "too few samples"
    gpu={**GPU, "epochs": 4},
    gpu_runs=2,
    gpu_priority=70,
    gpu_timed=(
        95.0,
        "predicted: 54 s measured on an H200 at 2 epochs a worker count (C3 run first in the same command), "
        "and about 10 s for each of the 4 epochs added",
    ),
    # C3's results give C4 its worker count; without them C4 runs C3's whole sweep itself (176 s of C4's 230 s
    # on the H200 check). The same command, C3 first: each command starts bare
    gpu_with="c3",
    smoke_s=30,
    gpu_extra=(20.0, "the profiler trace and its analysis"),
    run=lambda cfg, settings=None: later("hpml_lab.studies.c4.study", "run")(cfg),
    conclude=later("hpml_lab.studies.c4.conclusion", "conclude"),
)
