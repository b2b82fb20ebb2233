"""The study protocol: what a lab task declares about itself, in one place beside its code.

    # hpml_lab/studies/<task_id>/__init__.py
    from ...protocol import Task
    TASK = Task("c9", "c9_precision.ipynb", "C9: bf16 vs fp32", order=9, smoke={...}, gpu_runs=2)

`hpml_lab.studies.registry()` finds every `studies/<task_id>/` folder and returns {id: TASK} in lab order; the
task table of `hpml-lab tasks` (and the README's, `hpml-lab tasks --markdown README.md`), the GPU plan's
inputs (report/gpuplan.py), the lab order of the index and the bundle are all built from it: a new task is its
folder, its notebook and its tests. A task's `run(cfg, settings) -> result` and `conclude(cfg, result) ->
(answers, flags)` live in its folder too (`Task.run`, `Task.conclude` where the notebook calls them through
the protocol). A TASK names them with `later(module, name)`, imported at their first call: registering a task
imports no torch, so the command line's front (help, tasks, init, slurm, every refusal of bad input) answers
without it, in 0.3-1.6 s of CPU here, also on a login node (a run's parent imports torch at its end, for the
index's machine line).

Profiles: `smoke` fits 2 CPU cores in seconds (small subset, few batches, the same code path); `full` is the
lab's real setting (5 epochs, the whole dataset, batch 128), meant for a GPU; `tiny` takes seconds per task
(tests, dry runs); `gpu` is the GPU check kit's size. Profiles only set parameters the notebook has; -p and -f
override them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from .config import ConfigError, RunConfig, StudySettings

FULL_LAB = {"epochs": 5, "batch_size": 128, "max_batches": 0, "subset": 0, "num_workers": 2}
# Smoke runs use batch 32: the lab's lr 0.1 (for batch 128) scaled linearly to it, so that the short runs
# learn instead of diverging (lr 0.1 at batch 32 reached losses of 8-15). Each report shows this as a setting
# that differs from the lab's; full profiles keep lr 0.1.
SMOKE_LR = 0.1 * 32 / 128
PROFILES = ("smoke", "full", "tiny", "gpu")
# gpu: the GPU check kit's size (hpml_lab/gpu/): the lab's settings on the whole dataset, 2 epochs where the
# lab's 5 add only time, so that every task together fits one 30-minute GPU lease. Estimates until a GPU run
# says.
GPU = {"epochs": 2, "batch_size": 128, "max_batches": 0, "subset": 0, "num_workers": 8}
# tiny: seconds per task, for the test suite and dry runs (the runner keeps the keys a notebook takes)
TINY = {"model": "resnet_tiny", "epochs": 2, "max_batches": 2, "batch_size": 16, "num_workers": 0}


@dataclass(frozen=True)
class Task:
    """One lab task. `order`: its place in the lab (index, bundle, `hpml-lab tasks`). What the GPU plan needs
    to estimate it: `gpu_runs` (training configurations run at the gpu profile, each for its epochs),
    `gpu_extra` (seconds beyond training epochs and why), `gpu_timed` (what a GPU check timed, which replaces
    the estimate), `gpu_priority` (lower runs earlier, in case the check is cut short) and `gpu_with` (a task
    whose device command it must share: a bare machine keeps nothing between commands)."""

    id: str
    notebook: str
    title: str
    order: int = 100
    smoke: dict[str, Any] = field(default_factory=dict)
    full: dict[str, Any] = field(default_factory=lambda: dict(FULL_LAB))
    settings: type[StudySettings] | None = None  # the study's own parameters, beside RunConfig's
    tiny: dict[str, Any] = field(default_factory=lambda: dict(TINY))
    gpu: dict[str, Any] = field(default_factory=lambda: dict(GPU))
    gpu_runs: int = 1
    # seconds beyond the training epochs and what they are: a number, or a function of (the gpu profile, steps
    # per epoch, loader workers) that computes them
    gpu_extra: tuple[float | Callable[[dict, int, int], float], str] | None = None
    # what a GPU check timed for the whole task at the gpu profile (seconds, and a basis saying where:
    # "measured: 21 s on an H200 ..."), or a prediction named as one ("predicted: ...") where the task changed
    # after it was timed; the plan takes it instead of its own model (tests/unit/test_gpucheck.py reads each
    # measured one against the manifest its basis names)
    gpu_timed: tuple[float, str] | None = None
    gpu_priority: int = 100
    gpu_with: str = ""
    # the options `hpml-lab slurm <id>` needs for the lab's settings beyond its defaults (one GPU node, one
    # GPU, the training step then the notebook): "--gpus 4" for a multi-GPU task, "--no-train" for a
    # sweep-only one. The README's task table prints that command (`hpml-lab tasks --markdown`).
    slurm: str = ""
    # seconds `make report` (smoke) took for it in a fresh clone on 2 idle cores (measured; None: not yet):
    # the first estimate `hpml-lab report` gives of what is left, before a run of its own recorded a time
    smoke_s: float | None = None
    # the task whose sweep shares a configuration with this one's (its id, the field its sweep varies): one
    # training run made twice, whose epoch times should agree; the conclusion flags a noisy machine otherwise
    twin: tuple[str, str] | None = None
    # what a run's config must satisfy, each with the line that refuses it (after "task <id> "), checked
    # before any kernel starts (report/guards.py preflight)
    needs: tuple[tuple[Callable[[Any], bool], str], ...] = ()
    # whether its page states a time: a busy machine is flagged only where it can change a number shown (the
    # questions' counts are the same on a busy machine; a grader read "timings take longer" on a page of none)
    times: bool = True
    # whether its timings are of steps on batches already loaded (memory's: interleaved rounds on one random
    # batch, and its convergence runs' compute per step), never of the data pipeline: the data notice then
    # says the data's content does not change them, not that they reflect the real pipeline
    fixed_batch: bool = False
    # whether its study reads the dataset (the questions count a model's parameters and bytes from one random
    # batch: no image is read, so their page says so instead of 'computed on a synthetic cifar10')
    reads_data: bool = True
    # RunConfig fields its study never reads (speed times whole epochs by its epoch_repeats, not `epochs`):
    # the environment table's config row leaves them out, so a page names no setting that did not act on it
    ignores: tuple[str, ...] = ()
    run: Callable[..., Any] | None = None  # run(cfg, settings) -> result
    conclude: Callable[..., Any] | None = None  # conclude(cfg, result) -> (answers, flags)

    def profile(self, name: str) -> dict[str, Any]:
        if name not in PROFILES:
            raise ConfigError(f"unknown profile {name!r}; valid profiles: {', '.join(PROFILES)}")
        return dict({"smoke": self.smoke, "full": self.full, "tiny": self.tiny, "gpu": self.gpu}[name])


def reads_only(*names: str) -> tuple[str, ...]:
    """Task.ignores for a study that reads only `names` of RunConfig: every other field (a loader sweep reads
    no model, no optimizer)."""
    known = {f.name for f in fields(RunConfig)}
    if unknown := set(names) - known:
        raise ValueError(f"not RunConfig fields: {sorted(unknown)}")
    return tuple(f.name for f in fields(RunConfig) if f.name not in names)


def later(module: str, name: str) -> Callable[..., Any]:
    """`module.name` (module absolute), imported when first called: how a TASK names its run and conclude."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"{module}.{name}, imported at the first call."
    return call


def names_later(package: str, where: dict[str, str]) -> Callable[[str], Any]:
    """A package's module `__getattr__` (PEP 562) giving each name of `where` from the package's submodule
    where[name], imported at first use. A submodule must not share a name it gives: importing it would make
    the package's attribute that module."""

    def __getattr__(name: str) -> Any:
        if name in where:
            return getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
