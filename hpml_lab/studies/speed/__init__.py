"""The speed ladder: from the lab's baseline to the fastest this machine allows, one measured rung at a time.

    hpml-lab run speed --profile smoke          # notebooks/speed.ipynb
    from hpml_lab.studies import speed
    result = speed.run(cfg, speed.Settings())   # every rung timed, written to results/speed/<run-id>/
    answers, flags = speed.conclude(cfg, result)
    fig = speed.chart(result)

PIL loader with workers -> tensor-resident loader -> channels_last -> bf16 autocast (fp16 with a GradScaler on
a GPU without bf16) -> torch.compile of the whole step -> CUDA graphs (a GPU's) -> a larger batch with the
learning rate scaled -> twice that batch; then the outside reference, a plain script in plain torch
(reference.py) at the last rung's settings. Per rung: images/s and the step time (median and spread over
interleaved repeats, warm-up left out), MFU and the images/s the device's peak would allow, and whole epochs
timed apart; per rung a verdict against the rung before it, so the ladder says which optimisations pay here
and which do not (on a CPU several do not), and the last rung's whole epoch against the plain script's at
its settings. How the
rungs are built and timed: study.py; what the report concludes: conclusion.py; the figure: figure.py.

This folder is the whole task: TASK registers it (hpml_lab.protocol; hpml_lab.studies.registry() finds it),
run() measures, conclude() states the findings.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from ...config import ConfigError, RunConfig, StudySettings
from ...protocol import Task, later, names_later

if TYPE_CHECKING:
    from .study import Ladder

__all__ = [
    "TASK",
    "Settings",
    "run",
    "conclude",
    "chart",
    "ladder_table",
    "spread_note",
    "Ladder",
    "Rung",
    "RUNGS",
    "plan",
    "measure",
]
# the names above from study.py, conclusion.py and figure.py, imported at first use (PEP 562): registering the
# task (hpml_lab.studies.registry(), the command line's front) imports no torch
LATER = {
    **dict.fromkeys(("conclude", "ladder_table", "spread_note"), "conclusion"),
    "chart": "figure",
    **dict.fromkeys(("COLUMNS", "RUNGS", "Ladder", "Rung", "measure", "plan"), "study"),
}
__getattr__ = names_later(__name__, LATER)


# the training set the ladder's last rung must fit its batch in (a subset, when given, is the set); a
# synthetic set with fewer images leaves that rung out at run time and says so
TRAIN_IMAGES = {"cifar10": 50_000}
# steps per rung, warm-up rounds included: the GPU profile's 7 rounds of 40 steps take 280 (seconds on a GPU);
# the cap keeps a run to hours even on a CPU. With steps 0 the device's default (study.STEPS) counts as its
# largest.
STEPS_MAX = 20_000
STEPS_DEFAULT_MAX = 40


@dataclass(frozen=True)
class Settings(StudySettings):
    """The ladder's own parameters (notebook parameters, -p / -f like RunConfig's)."""

    repeats: int = 5  # timed rounds: every rung runs once a round
    warmup: int = 1  # untimed rounds before them (compiles, autotunes, starts workers)
    steps: int = 0  # training steps per timed run; 0: by device (study.STEPS)
    batch_factor: int = 4  # the last rung's batch (and learning rate) over the baseline's
    compile_rung: str = (
        "on"  # "off" leaves torch.compile out (its CPU build takes minutes), said in the report
    )
    epoch_repeats: int = 3  # whole epochs timed per rung after the rounds (and warm epochs of the reference)
    reference: str = "on"  # "off" leaves out the outside reference (the plain script, reference.py)
    # epochs of the course's own lab2.py, run as written after the ladder (a GPU only: course.py); below 2 it
    # is left out (its first epoch is not compared)
    course_epochs: int = 4

    RANGES = {  # issue 43: warmup=1e9 ran without end; batch_factor=100000 failed inside the kernel
        "repeats": (1, 100, "timed rounds; every rung runs once in each"),
        "warmup": (0, 20, "untimed rounds before the timed ones; one builds what a rung compiles"),
        "steps": (0, 10_000, "training steps per timed run; 0: the device's default"),
        "batch_factor": (2, 1024, "the last rung's batch over the baseline's"),
        "epoch_repeats": (1, 20, "whole epochs timed per rung after the rounds"),
        "course_epochs": (0, 20, "epochs of the course's lab2.py on a GPU; below 2 it is left out"),
    }

    def check(self) -> None:
        for name in ("compile_rung", "reference"):
            if getattr(self, name) not in ("on", "off"):
                raise ConfigError(f"parameter {name!r} must be on or off, got {getattr(self, name)!r}")
        if self.compile_rung == "on" and self.warmup < 1:  # the page says the build is left out of the timing
            raise ConfigError(
                "parameter 'warmup' must be 1 or more while the compile rung runs (its build and the CUDA "
                "graphs' recording would be timed), or set compile_rung=off"
            )

    def check_run(self, cfg: RunConfig) -> None:
        """What the ladder can run with cfg: the batch rung's batch within the training set, its learning rate
        and the last rung's (times batch_factor, then twice that) within RunConfig's ranges, and every rung's
        steps within STEPS_MAX."""
        k = self.batch_factor
        images = cfg.subset or TRAIN_IMAGES.get(cfg.dataset, 0)
        if images and cfg.batch_size * k > images:
            raise ConfigError(
                f"parameter 'batch_factor' {k} makes the batch rung's batch {cfg.batch_size * k:,}, more "
                f"than the {images:,} training images{' of the subset' if cfg.subset else ''}: use at most "
                f"{max(2, images // cfg.batch_size)}"
            )
        for rung, f in (("the batch rung's", k), ("the last rung's", 2 * k)):  # big_batch, bigger_batch
            try:
                cfg.replace(batch_size=cfg.batch_size * f, lr=cfg.lr * f)
            except ConfigError as e:
                raise ConfigError(
                    f"parameter 'batch_factor' {k} makes {rung} batch {cfg.batch_size * f:,} and its "
                    f"learning rate {cfg.lr * f:g}, which cannot run ({e})"
                ) from None
        steps = self.steps or STEPS_DEFAULT_MAX
        if (self.warmup + self.repeats) * steps > STEPS_MAX:
            raise ConfigError(
                f"parameters 'warmup' + 'repeats' ({self.warmup + self.repeats} rounds) times 'steps' "
                f"({steps}) make {(self.warmup + self.repeats) * steps:,} training steps per rung, more "
                f"than the {STEPS_MAX:,} a ladder takes: fewer rounds or steps"
            )


_LADDER = {"data_root": "data", "model": "resnet18", "batch_size": 128, "subset": 0, "lr": 0.1}
# What a run's first output says these rungs take beyond their epochs on one H100 (predicted before any GPU
# ran them; the second H200 check, 2026-11-28, timed the whole task at 292 s: TASK.gpu_timed, which the GPU
# plan reads). The H100 check ran the six rungs of then, two compiled, in 109 s.
COURSE_S = (
    "the course's lab2.py as written in its own process (4 epochs at about 9 s, 8.86 s an epoch measured on "
    "an H100 at its defaults in the course folder's README, and its start: about 40 s in all)"
)
GPU_EXTRA = (
    210.0,
    "predicted: four compiled rungs (about 60 s, inductor's caches warm after the first), 5 rounds x 40 "
    "steps x 8 rungs (about 20 s), 3 whole epochs per rung (PIL 5.6 s, the tensor loader's rungs 0.6-4.4 s: "
    "about 60 s), the plain script in its own process (start, load, compile, 4 epochs: about 30 s), "
    + COURSE_S,
)
TASK = Task(
    "speed",
    "speed.ipynb",
    "Speed ladder: from the lab's baseline to the fastest this machine allows",
    order=14,
    slurm="--no-train",
    settings=Settings,
    ignores=("epochs",),  # whole epochs are timed epoch_repeats times a rung; the plain script runs its own
    gpu_runs=0,
    gpu_extra=GPU_EXTRA,
    gpu_priority=5,  # the fast path's figures first: its rungs, epochs and the plain script on the new GPU
    gpu_timed=(
        292.0,
        "measured: 292 s on an H200 (the second H200 check, 2026-11-28): four compiled rungs, rounds and 3 "
        "whole epochs per rung, the plain script and the course's lab2.py each in its own process",
    ),
    # estimated, not measured: `make report`'s 31 s on 2 idle cores with one whole epoch per rung, plus the
    # two more rounds of epochs (and the plain script's two more) at that run's epoch times
    smoke_s=49,
    # seconds on 2 CPU cores: the tiny network, no compile rung (its inductor build alone takes 1-2 minutes)
    tiny={
        "model": "resnet_tiny",
        "batch_size": 16,
        "subset": 128,
        "num_workers": 1,
        "repeats": 3,
        "warmup": 1,
        "steps": 1,
        "batch_factor": 2,
        "compile_rung": "off",
        "epoch_repeats": 1,
    },
    smoke={
        "model": "resnet_tiny",
        "batch_size": 32,
        "subset": 2048,
        "num_workers": 2,
        "lr": 0.025,
        "repeats": 5,
        "warmup": 1,
        "steps": 2,
        "batch_factor": 4,
        "compile_rung": "off",
        "epoch_repeats": 3,  # the first answer's verdict is on whole epochs: three each for a spread
    },
    full={**_LADDER, "num_workers": 2, "repeats": 5, "warmup": 2, "steps": 0, "compile_rung": "on"},
    gpu={**_LADDER, "num_workers": 8, "repeats": 5, "warmup": 2, "steps": 40, "compile_rung": "on"},
    run=lambda cfg, settings: run(cfg, settings),
    conclude=later("hpml_lab.studies.speed.conclusion", "conclude"),
)


def run(cfg: RunConfig, settings: Settings) -> Ladder:
    """Plan the rungs for cfg, time them, run the outside reference, and write ladder.csv, samples.json
    (images/s of each timed round), epochs.json (seconds of each whole epoch) and meta.json to
    cfg.run_dir()."""
    from ...device import configure, resolve_device
    from ...io import atomic_write_csv, atomic_write_json
    from ...results import new_meta
    from . import course
    from .study import COLUMNS, measure, plan

    settings.check_run(cfg)  # as the runner does before its kernel: a call from Python is checked too
    device = resolve_device(cfg.device)
    rungs = plan(cfg, settings, device)
    # the backend settings every rung's trainer sets, set before the record reads them (grade40g: its
    # environment said cudnn_benchmark false of a ladder that ran with it on)
    configure(device)
    meta = new_meta(cfg, device, settings=asdict(settings), status="complete")
    # the settings the baseline rung ran with (plan() sets the loader, its persistent workers, the precision
    # and compile), so the environment table's config row names no setting that did not act (grade20: it
    # showed persistent_workers off where the PIL rung ran with them on); each later rung's change is its row
    meta["config"] = {**meta["config"], **{k: v for k, v in rungs[0].cfg.to_dict().items() if k != "run_id"}}
    result = measure(rungs, settings, device)
    result.meta = {**meta, **result.meta, "run_dir": str(cfg.run_dir())}
    folder = cfg.run_dir()
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_csv(folder / "ladder.csv", result.table.to_dict("records"), COLUMNS)
    atomic_write_json(folder / "samples.json", result.samples)
    atomic_write_json(folder / "epochs.json", result.epochs)
    atomic_write_json(folder / "meta.json", result.meta)
    # last, the course's own lab2.py (a GPU only), with the ladder already saved: a run of it that is cut
    # short loses none of the ladder
    if device.type == "cuda":
        import torch

        torch.cuda.empty_cache()  # the ladder's memory back to the device for the course's process
    result.meta["course"] = course.measure(cfg.data_path(), device, settings.course_epochs, ladder=cfg)
    atomic_write_json(folder / "meta.json", result.meta)
    return result
