"""The dataloading task: its study and what its report concludes."""

from ...protocol import Task, later, reads_only

TASK = Task(
    "dataloading",
    "dataloading.ipynb",
    "Data loading from high-latency storage: workers, threads, tensor-resident",
    order=13,
    slurm="--no-train",
    tiny={"batch_size": 16, "subset": 48, "epochs": 1, "num_workers": 0},
    # 128 PNG files, 3 passes per loader at 0/5/20/50 ms per file: about a minute on 2 cores
    smoke={"batch_size": 16, "subset": 128, "epochs": 3, "num_workers": 2},
    full={"batch_size": 128, "subset": 2560, "epochs": 3, "num_workers": 2},
    # the simulated sleeps need no GPU: the GPU kit runs a tenth of the files, 2 passes
    gpu={"batch_size": 128, "subset": 256, "epochs": 2, "num_workers": 2},
    gpu_runs=0,
    gpu_priority=140,
    smoke_s=33,
    gpu_extra=(
        # the baseline's and the worker loader's sleeps: 75 ms a file over the four latencies
        lambda profile, steps, workers: (
            int(profile.get("subset", 0)) * 0.075 * int(profile.get("epochs", 1)) / workers * 2
        ),
        "simulated storage sleeps: files x (0+5+20+50) ms x passes / workers, for the loaders",
    ),
    # its loaders read image files it writes from CIFAR-10 (augmented as the lab's are, whatever `augment`):
    # no model is built (grade23: its config row listed model=resnet18, lr=0.1)
    ignores=reads_only(
        "dataset", "data_root", "subset", "batch_size", "epochs", "num_workers", "device", "seed"
    ),
    run=lambda cfg, settings=None: later("hpml_lab.studies.dataloading.study", "study")(cfg),
    conclude=later("hpml_lab.studies.dataloading.conclusion", "conclude"),
)
