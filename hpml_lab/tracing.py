"""torch.profiler traces of a few training steps: Chrome-trace JSON (open in https://ui.perfetto.dev),
a top-operators table, and where the time went.

    from hpml_lab.tracing import trace_steps, breakdown
    tr = trace_steps(model, loader, device, optimizer, out_path="results/c4/trace/trace.json")
    tr.path, tr.top_ops     # the JSON and a DataFrame of the costliest operators
    bd = breakdown(tr.path) # GPU kernels in the trace: Holistic Trace Analysis; else the labelled ranges

The breakdown of a trace with GPU kernels is computed by Holistic Trace Analysis (the PyTorch project's trace
analysis library, package traceinsight, module hta): its temporal breakdown (kernel compute, other kernels
such as memory copies and communication, GPU idle) and its idle-time breakdown (host wait, kernel wait,
other). A CPU trace has no GPU timeline for it to read, so there the step's labelled ranges are summed
instead, and the breakdown says which it is and why.

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


def record_trace(
    folder: Path, meta_cfg, device: torch.device, model, loader, optimizer, steps: int, cfg, **extra
):
    """trace_steps into a folder of its own (folder/trace.json, its top operators and its record): the
    record states the machine's load read before the trace, under the folder's name, as every run's does, and
    its start read before it too (a record written after the trace gave as its start the moment it was
    written); `meta_cfg`: the traced model's own settings, `extra`: more record fields."""
    from . import results
    from .sanity import machine_load

    before = machine_load(run=folder.name)
    started = results.now()
    tr = trace_steps(model, loader, device, optimizer, folder / "trace.json", steps=steps, cfg=cfg)
    results.write_derived(
        folder,
        {"top_ops": tr.top_ops},
        results.new_meta(
            meta_cfg,
            device,
            kind="trace",
            run_id=folder.name,
            steps=tr.steps,
            warmup_steps=tr.warmup,
            machine=before,
            started_at=started,
            **extra,
        ),
    )
    return tr


def trace_steps(
    model: nn.Module,
    loader,
    device: torch.device,
    optimizer: torch.optim.Optimizer,
    out_path: str | os.PathLike,
    steps: int = 3,
    warmup: int = 1,
    top: int = 15,
    cfg=None,
) -> Trace:
    """Profile `warmup` + `steps` training steps (only the last `steps` are recorded) and export the trace.

    The step is train()'s (step.train_step: with `cfg`, channels-last copies and cfg.precision's autocast
    as cfg asks), labelled copy / forward / backward / optimizer; "data" is the time in next(loader) alone."""
    from .step import train_step

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
            prof = profile(
                activities=activities,
                schedule=schedule(wait=0, warmup=warmup, active=steps, repeat=1),
                on_trace_ready=export,
            )
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


TOP_OPS_HEADERS = {
    "self_cpu_ms": "self CPU (ms)",
    "cpu_total_ms": "CPU incl. children (ms)",
    "self_device_ms": "self GPU (ms)",
    "share_self_cpu": "share of self CPU",
}


def recorded(tr, what: str = "training step(s)") -> str:
    """The sentence a report puts above a trace: how many steps were kept and how many warm-up steps were
    not."""
    return (
        f"`torch.profiler` recorded {tr.steps} {what} after {tr.warmup} warm-up step(s) that were not kept."
    )


def top_ops_table(tr) -> pd.DataFrame:
    """A trace's top-operators table with a reader's column names; the GPU column only where the trace timed
    a device (a CPU trace's column was zeros, read as measured)."""
    ops = tr.top_ops
    if "self_device_ms" in ops and not (ops["self_device_ms"] > 0).any():
        ops = ops.drop(columns=["self_device_ms"])
    return ops.rename(columns=TOP_OPS_HEADERS)


def top_operators(prof, top: int = 15) -> pd.DataFrame:
    """The operators with the most self CPU time (our step labels excluded), in milliseconds."""
    rows = []
    for ev in prof.key_averages():
        if ev.key in ("data", "copy", "forward", "backward", "optimizer") or ev.key.startswith(
            "ProfilerStep"
        ):
            continue
        rows.append(
            {
                "operator": ev.key,
                "calls": ev.count,
                "self_cpu_ms": ev.self_cpu_time_total / 1e3,
                "cpu_total_ms": ev.cpu_time_total / 1e3,
                "self_device_ms": getattr(ev, "self_device_time_total", 0.0) / 1e3,
            }
        )
    df = pd.DataFrame(rows, columns=TOP_OPS_COLUMNS[:-1])
    total = df["self_cpu_ms"].sum()
    df["share_self_cpu"] = df["self_cpu_ms"] / total if total else 0.0
    key = "self_device_ms" if df["self_device_ms"].sum() > 0 else "self_cpu_ms"
    return df.sort_values(key, ascending=False).head(top).reset_index(drop=True)


LABELS = ("data", "copy", "forward", "backward", "optimizer")


@dataclass
class Breakdown:
    """Where a trace's time went: `table` (category, time_ms, share), `idle` (HTA's idle-time breakdown, or
    None), `source` (what computed it) and `note` (why that source, for the report)."""

    table: pd.DataFrame
    idle: pd.DataFrame | None
    source: str
    note: str


def _events(path: Path) -> list[dict]:
    import gzip
    import json

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f).get("traceEvents", [])


def has_gpu_kernels(path: str | os.PathLike) -> bool:
    return any(str(e.get("cat", "")).lower() == "kernel" for e in _events(Path(path)))


def labelled_ranges(path: str | os.PathLike) -> pd.DataFrame:
    """Host time in the step's labelled ranges (data, copy, forward, backward, optimizer), summed over the
    recorded steps: category, time_ms, share of their sum."""
    totals = {k: 0.0 for k in LABELS}
    for e in _events(Path(path)):
        if e.get("ph") == "X" and e.get("name") in totals and e.get("cat") in ("user_annotation", "cpu_op"):
            totals[e["name"]] += float(e.get("dur", 0.0)) / 1e3
    return _with_share(pd.DataFrame({"category": list(totals), "time_ms": list(totals.values())}))


def _with_share(df: pd.DataFrame) -> pd.DataFrame:
    """df with a `share` column: each row's time_ms over the column's sum (0 when the sum is 0)."""
    total = df["time_ms"].sum()
    return df.assign(share=df["time_ms"] / total if total else 0.0)


def breakdown(path: str | os.PathLike) -> Breakdown:
    """HTA's temporal and idle-time breakdown when the trace holds GPU kernels, else the labelled ranges."""
    path = Path(path)
    if not has_gpu_kernels(path):
        return Breakdown(
            labelled_ranges(path),
            None,
            "labelled ranges of the step (host time)",
            "This trace has no GPU kernels (a CPU run): Holistic Trace Analysis breaks down GPU time "
            "(kernel compute, memory and communication kernels, idle) and has no GPU timeline to read "
            "here, so the table sums the host time in the step's labelled ranges instead.",
        )
    return _hta_breakdown(path)


def _hta_breakdown(path: Path) -> Breakdown:
    import contextlib
    import io
    import logging
    import shutil
    import tempfile
    from importlib import metadata

    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory(prefix="hpml-hta-") as folder:
        shutil.copy(path, Path(folder) / path.name)  # HTA reads every trace in a folder; this one alone
        logging.getLogger("hta").setLevel(logging.ERROR)
        # HTA logs its parsing steps and trips pandas deprecation warnings: kept out of the reports
        with (
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")
            # every recorded step: HTA leaves out the last ProfilerStep unless asked (trace_steps records
            # exactly the steps it keeps, so the last one is as complete as the others)
            analysis = TraceAnalysis(trace_dir=folder, include_last_profiler_step=True)
            temporal = analysis.get_temporal_breakdown(visualize=False)
            idle = analysis.get_idle_time_breakdown(visualize=False)
    idle = idle[0] if isinstance(idle, tuple) else idle
    row = temporal.iloc[0]
    table = _with_share(
        pd.DataFrame(
            {
                "category": ["kernel compute", "other kernels (memory, communication)", "GPU idle"],
                "time_ms": [
                    row["compute_time(us)"] / 1e3,
                    row["non_compute_time(us)"] / 1e3,
                    row["idle_time(us)"] / 1e3,
                ],
            }
        )
    )
    idle_table = None
    if idle is not None and len(idle):
        by_cause = idle.groupby("idle_category", as_index=False)["idle_time"].sum()
        idle_table = _with_share(
            pd.DataFrame({"idle cause": by_cause["idle_category"], "time_ms": by_cause["idle_time"] / 1e3})
        )
    try:
        version = metadata.version("traceinsight")
    except metadata.PackageNotFoundError:
        version = metadata.version("HolisticTraceAnalysis")
    return Breakdown(
        table,
        idle_table,
        f"Holistic Trace Analysis (traceinsight {version})",
        "Computed by Holistic Trace Analysis from this trace's GPU timeline: kernel compute, other "
        "kernels (memory copies and sets, communication) and time the GPU sat idle between kernels; "
        "the idle time by cause: host wait (the GPU waited on the CPU to queue work), kernel wait "
        "(short gaps between back-to-back kernels), other.",
    )
