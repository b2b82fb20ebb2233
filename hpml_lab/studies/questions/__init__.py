"""Task questions: Lab 2's written questions Q1-Q4, answered from the model and real optimizers.

    hpml-lab run questions            # notebooks/questions.ipynb

study.py counts, conclusion.py says what its report concludes, figure.py draws its figure. TASK registers it
(hpml_lab.protocol; hpml_lab.studies.registry() finds it).
"""

from ...protocol import Task, later, reads_only

# the RunConfig fields the counts read: the model as built (its norm, its stem) and its random batch's seed
READS = ("model", "norm", "stem", "seed")

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
    gpu_timed=(9.0, "measured: 9 s on an H100 (the H100 check)"),
    smoke_s=6,
    gpu_with="c6",
    times=False,  # counts only: the same on a busy machine
    reads_data=False,  # one random batch of 2: the data folder is never opened
    ignores=reads_only(*READS),  # (grade21: 'batch_size=128')
    gpu_extra=(15.0, "reads the other tasks' results"),
    run=lambda cfg, settings=None: later("hpml_lab.studies.questions.study", "run")(cfg),
    conclude=lambda cfg, res: later("hpml_lab.studies.questions.conclusion", "conclude")(cfg, res.table),
)
