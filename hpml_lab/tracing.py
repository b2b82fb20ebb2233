"""torch.profiler traces of a few training steps: Chrome-trace JSON (open in https://ui.perfetto.dev)
and a top-operators table.

    from hpml_lab.tracing import trace_steps
    tr = trace_steps(model, loader, device, optimizer, out_path="results/c4/trace/trace.json")
    tr.path, tr.top_ops     # the JSON and a DataFrame of the costliest operators

The steps are labelled data / copy / forward / backward / optimizer (record_function): data is the
wait on the loader, copy the host-to-device transfer, which train() counts as training time.
The profiler's schedule skips `warmup`
steps before recording (they are traced but not kept), so the first step's one-off
costs (allocator growth, kernel selection, compilation) do not pollute the table.
The profiler adds a few microseconds per operator: use the trace for shares and
ordering, and the timers in hpml_lab.profiling for durations.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from .profiling import synchronize

if not torch.cuda.is_available():
    # Kineto logs "gpuGetDeviceCount failed" as an ERROR on machines without a GPU, although nothing failed;
    # read lazily when the first profiler starts. GPU machines keep its log.
    os.environ.setdefault("KINETO_LOG_LEVEL", "5")
from .io import atomic_file

TOP_OPS_COLUMNS = ["operator", "calls", "self_cpu_ms", "cpu_total_ms", "self_device_ms", "share_self_cpu"]


@dataclass
class Trace:
    path: Path
    top_ops: pd.DataFrame
    steps: int
    warmup: int


def trace_steps(model: nn.Module, loader, device: torch.device, optimizer: torch.optim.Optimizer,
                out_path: str | os.PathLike, steps: int = 3, warmup: int = 1, top: int = 15, cfg=None) -> Trace:
    """Profile `warmup` + `steps` training steps (only the last `steps` are recorded) and export the trace.

    The step is train()'s (training.train_step: with `cfg`, channels-last copies and bf16 autocast as cfg
    asks), labelled copy / forward / backward / optimizer; "data" is the wait on the loader alone."""
    from .training import train_step

    out_path = Path(out_path)
    with atomic_file(out_path) as tmp:  # the trace appears whole or not at all
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        criterion = nn.CrossEntropyLoss()
        model.train()

        def export(prof):  # called once the recorded window ends
            prof.export_chrome_trace(str(tmp))

        done = 0
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Profiler clears events")  # one cycle: nothing lost
            prof = profile(activities=activities, schedule=schedule(wait=0, warmup=warmup, active=steps, repeat=1),
                           on_trace_ready=export)
            prof.start()
            try:
                it = iter(loader)
                while done < warmup + steps:
                    with record_function("data"):
                        try:
                            x, y = next(it)
                        except StopIteration:
                            it = iter(loader)
                            x, y = next(it)
                    train_step(model, optimizer, criterion, x, y, cfg, device, phase=record_function)
                    synchronize(device)
                    prof.step()
                    done += 1
                del it
            finally:
                prof.stop()
    return Trace(out_path, top_operators(prof, top), steps, warmup)


def top_operators(prof, top: int = 15) -> pd.DataFrame:
    """The operators with the most self CPU time (our step labels excluded), in milliseconds."""
    rows = []
    for ev in prof.key_averages():
        if ev.key in ("data", "copy", "forward", "backward", "optimizer") or ev.key.startswith("ProfilerStep"):
            continue
        rows.append({"operator": ev.key, "calls": ev.count, "self_cpu_ms": ev.self_cpu_time_total / 1e3,
                     "cpu_total_ms": ev.cpu_time_total / 1e3,
                     "self_device_ms": getattr(ev, "self_device_time_total", 0.0) / 1e3})
    df = pd.DataFrame(rows, columns=TOP_OPS_COLUMNS[:-1])
    total = df["self_cpu_ms"].sum()
    df["share_self_cpu"] = df["self_cpu_ms"] / total if total else 0.0
    key = "self_device_ms" if df["self_device_ms"].sum() > 0 else "self_cpu_ms"
    return df.sort_values(key, ascending=False).head(top).reset_index(drop=True)
