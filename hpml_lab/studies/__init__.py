"""The lab studies: one folder per lab task, built on the core modules of hpml_lab (never on report/), and the
modules several tasks share beside them.

A task's folder, hpml_lab/studies/<task_id>/ (docs/adding-a-task.md): `__init__.py` holds its TASK (and its
settings; it imports no torch), `study.py` what runs (where the task has run code of its own: C1 and C2 run
hpml_lab.train), `conclusion.py` what its report concludes, `figure.py` its figures (where it draws its
own); more modules may sit beside them. The folders: c1 .. c8 (Lab 2), questions (Lab 2's Q1-Q4), memory,
tinyimagenet, lab5, dataloading, speed.

| module | what it holds |
|---|---|
| lab2 | what several Lab 2 tasks run: a timing summary row, the warm-up note, the training sweep |
| lab2_conclusion | what several Lab 2 tasks conclude: the timing method, best-of verdicts, a sweep's answer |
| _conclude | pieces every conclusion shares: a measured median as a Number, flags without repeats, ... |
| bench | (hpml-lab bench) speed benchmarks that print ratios measured in one run: options, saving, printing |
| bench_measure | (hpml-lab bench) four measurements: loader, step, overhead, stall; the trainer they share |
| bench_profile | (hpml-lab bench profile) torch.profiler of the fast step beside the plain script's |

Each task is run by its notebook (`hpml-lab run TASK`) or from Python.
"""

from __future__ import annotations

import importlib
import pkgutil


def registry() -> dict:
    """{task id: Task} of every task folder under hpml_lab/studies/ (its __init__.py's TASK), in lab order:
    the one way a task is registered (hpml_lab.protocol)."""
    found = []
    for m in pkgutil.iter_modules(__path__):
        if m.ispkg and not m.name.startswith("_"):
            task = getattr(importlib.import_module(f"{__name__}.{m.name}"), "TASK", None)
            if task is not None:
                found.append(task)
    ids = [t.id for t in found]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError(f"tasks registered twice: {dup}")
    return {t.id: t for t in sorted(found, key=lambda t: (t.order, t.id))}
