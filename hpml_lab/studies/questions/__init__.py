"""The questions task: its study and what its report concludes."""

from ...protocol import Task, later

TASK = Task(
    "questions",
    "questions.ipynb",
    "Lab 2 questions Q1-Q4 from the model and optimizers",
    order=9,
    slurm="--no-train",
    smoke={},
    full={},
    gpu_runs=0,
    gpu_priority=100,
    smoke_s=6,
    gpu_with="c6",
    gpu_extra=(15.0, "reads the other tasks' results"),
    run=lambda cfg, settings=None: later("hpml_lab.studies.questions.study", "run")(cfg),
    conclude=lambda cfg, res: later("hpml_lab.studies.questions.conclusion", "conclude")(cfg, res.table),
)
