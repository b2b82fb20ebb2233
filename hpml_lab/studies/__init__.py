"""The lab studies: one folder per lab task (its study and its conclusions), Lab 2's shared code beside them, built on the core modules of hpml_lab (never on report/).

| module | task ids | what it measures |
|---|---|---|
| lab2 | c3 .. c8 | Lab 2: DataLoader workers, data vs compute, devices, optimizers, BatchNorm, torch.compile |
| questions/questions_study | questions | Lab 2 Q1-Q4 computed from the model and real optimizers |
| memory/memory_study | memory | RevNet and gradient checkpointing against ResNet: activation bytes, peak, largest batch |
| dataloading/dataloading_study | dataloading | loading from high-latency storage: workers, threads inside workers, tensor-resident |
| lab5/scaling | lab5 | Lab 5: DDP scaling model, measured all-reduce, compute sweep |
| tinyimagenet/tinyimagenet_study | tinyimagenet | Tiny ImageNet: the bottleneck, activation memory, per-batch vs epoch time |
| bench | (hpml-lab bench) | speed benchmarks that print ratios measured in one run: options, saving, printing |
| bench_measure | (hpml-lab bench) | the benchmarks' four measurements: loader, step, overhead, stall |
| lab2_answers | c1 .. c8 | what those reports conclude, from the typed results |
| questions/questions_answers | questions | what the questions report concludes: exact counts |
| memory/memory_answers | memory | what the memory report concludes, and its tables |
| dataloading/dataloading_answers | dataloading | what the data-loading report concludes |
| tinyimagenet/tinyimagenet_answers | tinyimagenet | what the Tiny ImageNet report concludes |
| lab5/scaling_answers | lab5 | what the Lab 5 report concludes |
| _conclude | | shared pieces of the conclusions |

Each is run by its notebook (`hpml-lab run TASK`) or from Python.
"""

from __future__ import annotations

import importlib
import pkgutil


def registry() -> dict:
    """{task id: Task} of every task folder under hpml_lab/studies/ (its __init__.py's TASK), in lab order: the one
    way a task is registered (hpml_lab.protocol)."""
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
