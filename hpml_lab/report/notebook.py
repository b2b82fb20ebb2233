"""What the lab notebooks call, as `nb.<name>`: the run's config from the parameters cell, and how long those
settings take on this CPU when a notebook is opened by hand. The page's record (page_record.py), its displays
(displays.py) and its figures (figures.py) are re-exported here, so that a notebook imports one module.

In a notebook, right after the `parameters` cell:

    from hpml_lab.report import notebook as nb
    cfg = nb.config("c1", globals())   # every RunConfig field set in the parameters cell
    info = nb.header(cfg)              # dataset notice (synthetic data is flagged), ran-vs-lab, hardware
    ...
    nb.answer(cfg, info, *conclusion.conclude(cfg, run))   # the answer record and box (c1/conclusion.py)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..config import RunConfig, check_keys
from ..envinfo import environment  # the lab5 notebook names the GPU from nb.environment()
from .displays import (
    HOW_TO_OPEN,
    MEMORY_HEADERS,
    artifact,
    breakdown_or_error,
    data_notice,
    environment_table,
    header,
    memory_table,
    settings_notice,
    shown_path,
    trace_breakdown,
    warn,
)
from .figures import _RUN, alt_text, save_figure, stand_in_label
from .page_record import (
    Markdown,
    answer,
    display,
    hold_figure,
    hold_numbers,
    hold_table,
    new_page,
    number_text,
    reused_note,
    said,
    table,
)

__all__ = [
    "HOW_TO_OPEN",
    "MEMORY_HEADERS",
    "TRAIN_IMAGES",
    "alt_text",
    "answer",
    "artifact",
    "breakdown_or_error",
    "config",
    "cpu_time_notice",
    "data_notice",
    "environment",
    "environment_table",
    "header",
    "hold_figure",
    "hold_numbers",
    "hold_table",
    "injected_names",
    "memory_table",
    "new_page",
    "number_text",
    "parameter_names",
    "reused_note",
    "said",
    "save_figure",
    "settings_notice",
    "shown_path",
    "stand_in_label",
    "step_seconds",
    "table",
    "trace_breakdown",
    "warn",
]


def config(task: str, namespace: Mapping[str, Any]) -> RunConfig:
    """RunConfig from the RunConfig fields defined in `namespace` (the notebook's globals). Under papermill,
    however it was started, a parameter the notebook does not take is refused here (papermill itself only
    warns and runs with the default)."""
    from . import tasks

    t = tasks.TASKS.get(task)
    study = t.settings.field_names() if t is not None and t.settings is not None else []
    check_keys(
        sorted(injected_names(namespace)),
        also=study,
        where=f" for task {task}",
        shown=sorted({*RunConfig.field_names(), *study}),
    )
    given = parameter_names(namespace)
    params = {
        k: namespace[k]
        for k in RunConfig.field_names()
        if k in namespace and k != "task" and (given is None or k in given)
    }
    cfg = RunConfig(task=task, **params)
    _RUN["model"] = cfg.model
    new_page()  # a notebook run again in the same kernel starts its page afresh
    if not injected_names(namespace) and os.environ.get("HPML_RENDERING") != "1":
        notice = cpu_time_notice(cfg)  # opened in JupyterLab, not run with a profile: how long it takes here
        if notice:
            display(Markdown(notice))
    return cfg


# the training images of each dataset's full training set (the lab's settings train on all of them)
TRAIN_IMAGES = {"cifar10": 50_000, "tinyimagenet": 100_000}


def step_seconds(cfg: RunConfig) -> float:
    """Seconds of one training step of cfg's model at cfg's batch on this CPU, as train() takes it: one step
    at a batch of up to 16 images twice (the first builds the kernels for its shape), the second timed and
    scaled to cfg's batch (a CPU's step grows about linearly with the batch): seconds, also for ResNet-18 at
    batch 128."""
    import time

    import torch

    from ..step import build_model, build_optimizer, train_step

    device = torch.device("cpu")
    model = build_model(cfg, device, compile=False)
    optimizer = build_optimizer(cfg, model.parameters())
    size = 64 if cfg.dataset == "tinyimagenet" else 32
    took, batch = 0.0, min(16, cfg.batch_size)
    x, y = torch.randn(batch, 3, size, size), torch.randint(0, 10, (batch,))
    for _ in range(2):  # the first step of a shape also builds its kernels: the second is the one to time
        t0 = time.perf_counter()
        train_step(model, optimizer, torch.nn.CrossEntropyLoss(), x, y, None, device)
        took = time.perf_counter() - t0
    return took * cfg.batch_size / batch


def cpu_time_notice(cfg: RunConfig, measure=step_seconds) -> str | None:
    """For a notebook opened in JupyterLab on a machine without CUDA (no profile applied): how long its
    settings take here, from a step of its model measured now, and how to pick the smoke or tiny settings
    instead (those that differ from its own). None where the run goes to a GPU."""
    import math

    from ..device import resolve_device
    from ..ticker import about
    from . import tasks

    if resolve_device(cfg.device).type != "cpu":
        return None
    task = tasks.TASKS.get(cfg.task)
    if task is None:
        return None
    images = TRAIN_IMAGES.get(cfg.dataset, 50_000)
    images = min(images, cfg.subset) if cfg.subset else images
    per_epoch = math.ceil(images / cfg.batch_size)
    per_epoch = min(per_epoch, cfg.max_batches) if cfg.max_batches else per_epoch
    steps = task.gpu_runs * cfg.epochs * per_epoch
    extra = f", plus {task.gpu_extra[1]}" if task.gpu_extra else ""
    if steps:
        step = measure(cfg)
        told = (
            f"**On this CPU these settings take {about(steps * step)} of training**: {task.gpu_runs} run(s) "
            f"of {cfg.epochs} epoch(s) x {per_epoch} batches of {cfg.batch_size}, at {step:.2g} s a step of "
            f"{cfg.model} (measured here just now){extra}."
        )
    else:
        told = "This task's time here is not estimated: its work is not one training loop" + (
            f" ({task.gpu_extra[1]})." if task.gpu_extra else "."
        )
        if task.smoke_s:
            told += f" Its smoke profile took about {round(task.smoke_s)} s on 2 idle cores."

    def settings(profile: str) -> dict[str, Any]:
        return {k: v for k, v in task.profile(profile).items() if hasattr(cfg, k) and k != "data_root"}

    other = [p for p in ("smoke", "tiny") if any(getattr(cfg, k) != v for k, v in settings(p).items())]
    if not other or (steps and steps * step <= 120):
        return told
    how = " or ".join(
        f"the **{p}** profile's ({', '.join(f'`{k} = {v!r}`' for k, v in settings(p).items())})"
        for p in other
    )
    return (
        f"{told} For a demonstration in a minute or less, set in the parameters cell the values of {how}, or "
        f"run it from a terminal: `hpml-lab run {task.id} --profile {other[0]}`."
    )


def parameter_names(namespace: Mapping[str, Any]) -> set[str] | None:
    """The names the notebook's parameters cell and papermill's injected cell assign (both start with '#
    Parameters'): the only names config() reads, so that `from hpml_lab.studies import precision` in a later
    cell is never taken for a parameter. None outside a kernel with input history (then every RunConfig name
    is read, modules left out)."""
    import ast

    cells = [
        src
        for src in namespace.get("In", []) or []
        if isinstance(src, str) and src.lstrip().startswith("# Parameters")
    ]
    if not cells:
        return None
    names: set[str] = set()
    for src in cells:
        for node in ast.parse(src).body:
            if isinstance(node, ast.Assign):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def injected_names(namespace: Mapping[str, Any]) -> list[str]:
    """The names papermill injected: its cell (tagged injected-parameters) starts with the line '# Parameters'
    and is in the kernel's input history ("In"). Empty in an interactive session."""
    import ast

    names: list[str] = []
    for src in namespace.get("In", []) or []:
        if isinstance(src, str) and src.split("\n", 1)[0].strip() == "# Parameters":
            for node in ast.parse(src).body:
                if isinstance(node, ast.Assign):
                    names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return names
