"""The lab tasks: id -> notebook, title and the parameter profiles, built from the tasks' own folders.

    hpml-lab tasks          # lists them
    hpml-lab run c1 --profile smoke

A new lab task is one folder, hpml_lab/studies/<task_id>/, whose __init__.py holds its `TASK` (a
hpml_lab.protocol.Task: id, title, notebook, lab order, profiles, settings, what the GPU plan needs), plus its
notebook: `TASKS` is hpml_lab.studies.registry(), in lab order. No task is listed here.
"""

from __future__ import annotations

from ..config import ConfigError
from ..protocol import FULL_LAB, GPU, PROFILES, SMOKE_LR, TINY, Task  # noqa: F401 (re-exported)
from ..studies import registry

TASKS: dict[str, Task] = registry()


def register(task: Task) -> Task:
    """Add a task at run time (tests, experiments); an id registered twice is refused (the way models register)."""
    if task.id in TASKS:
        raise ConfigError(f"task {task.id!r} is registered twice")
    TASKS[task.id] = task
    return task


def get(task_id: str) -> Task:
    if task_id not in TASKS:
        raise ConfigError(f"unknown task {task_id!r}; valid tasks: {', '.join(TASKS)} (see `hpml-lab tasks`)")
    return TASKS[task_id]
