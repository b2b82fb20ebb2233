"""C8's study: eager against torch.compile, same configuration and seed, and a torch.profiler trace of a few
steps.

hpml-lab run c8 --profile smoke          # notebooks/c8_compile.ipynb calls run()
from hpml_lab import RunConfig
from hpml_lab.studies.c8 import study
out = study.run(RunConfig(task="c8"))     # C8Result: epochs, a summary per mode, the speedup, the trace
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from ... import results
from ...config import RunConfig
from ...data import build_loader
from ...device import resolve_device, seed_everything
from ...fastpath import check_backend, compile_available
from ...profiling import summarize
from ...results import drop_warmup
from ...sanity import machine_load
from ...step import build_model, build_optimizer
from ...sweeps import run_sweep, tables
from ...training import train
from ..lab2 import stats_row


@dataclass
class C8Result:
    """C8: eager against torch.compile."""

    epochs: pd.DataFrame
    summary: pd.DataFrame
    speedup: float | None  # per-step compute, eager / compiled; None when only eager ran
    compile_cost_s: float | None
    message: str  # why compile did not run, or ""
    backend: str
    trace: Any
    traced_mode: str  # "compile" or "eager"
    items: list


# ------------------------------------------------------------------ C8: torch.compile
def run(cfg: RunConfig, trace_steps: int = 3, log=print) -> C8Result:
    """Eager vs torch.compile(model, backend=cfg.compile_backend), same config and seed.

    Epoch 1 of the compiled run includes compilation. Reports the first-epoch time of each, the steady-state
    median, the speedup (per-step compute after warm-up, eager median / compiled median) and the estimated
    compile cost (extra first-epoch time beyond eager's own warm-up). When compile is not available or fails,
    `message` says why and only the eager row is shown.
    """
    from ...tracing import trace_steps as _trace

    backend = cfg.compile_backend
    if hasattr(torch, "compile"):
        check_backend(backend)
    base = cfg.replace(run_id="")
    eager_cfg = base.replace(run_id=f"eager-{base.config_hash()}")
    comp_cfg = base.replace(compile=True, run_id=f"compile-{backend}-{base.config_hash()}")
    why_not = compile_available(backend, cfg.device)
    compiled_model = {}

    def run_compiled(c: RunConfig):  # train() compiles with cfg.compile_backend (hpml_lab.fastpath)
        out = train(c, extra_meta={"mode": "compile", "compile_backend": backend})
        compiled_model["m"] = out.model
        return out

    items = run_sweep([eager_cfg], lambda c: train(c, extra_meta={"mode": "eager"}), log=log)
    message = ""
    if why_not:
        message = f"torch.compile was not run: {why_not}. Only the eager row is shown."
    else:
        items += run_sweep([comp_cfg], run_compiled, on_error="record", log=log)
        if not items[-1].complete:
            message = (
                f"torch.compile (backend {backend}) failed: {items[-1].error}. "
                f"Only the eager row is shown; the error is recorded in {items[-1].run_dir}/meta.json."
            )
    for it in items:
        it_mode = "eager" if it.cfg.run_id.startswith("eager") else f"compile ({backend})"
        it.value = it_mode
    epochs = tables(items, "epochs")
    modes = {it.run_dir.name: it.value for it in items if it.complete}
    if not epochs.empty:
        epochs["mode"] = epochs["run_id"].map(modes)
    st = drop_warmup(epochs)
    rows = []
    for run_id, mode in modes.items():
        e, s = epochs[epochs["run_id"] == run_id], st[st["run_id"] == run_id]
        rows.append(
            {
                **stats_row(s["total_s"], mode=mode),
                "first_epoch_s": e["total_s"].iloc[0],
                "first_minus_steady_s": e["total_s"].iloc[0] - summarize(s["total_s"])["median"],
            }
        )
    summary = pd.DataFrame(rows)
    speedup = compile_cost = None
    if len(summary) == 2:
        eager, comp = summary.iloc[0], summary.iloc[1]
        step = (
            drop_warmup(tables([it for it in items if it.complete], "batches"))
            .groupby("run_id")["train_s"]
            .median()
        )
        ids = list(modes)
        speedup = float(step[ids[0]] / step[ids[1]])  # per-step compute: the data wait is not compile's doing
        compile_cost = comp["first_minus_steady_s"] - eager["first_minus_steady_s"]
    # trace: the compiled model when this call compiled it, else an eager model
    device = resolve_device(cfg.device)
    seed_everything(cfg.seed)
    traced = "m" in compiled_model
    model = compiled_model["m"] if traced else build_model(cfg.replace(compile=False), device)
    opt = build_optimizer(cfg, model.parameters())
    tdir = cfg.run_dir().parent / f"trace-{'compile-' + backend if traced else 'eager'}-{base.config_hash()}"
    # the trace's record states the load before it, as every run's does, not its own, named after its folder
    before = machine_load(run=tdir.name)
    tr = _trace(
        model, build_loader(cfg, device), device, opt, tdir / "trace.json", steps=trace_steps, cfg=cfg
    )
    results.write_derived(
        tdir,
        {"top_ops": tr.top_ops},
        results.new_meta(
            comp_cfg if traced else eager_cfg,  # the traced model's own settings: compile on where it was
            device,
            kind="trace",
            run_id=tdir.name,
            traced_mode="compile" if traced else "eager",
            steps=tr.steps,
            warmup_steps=tr.warmup,
            machine=before,
        ),
    )
    return C8Result(
        epochs, summary, speedup, compile_cost, message, backend, tr, "compile" if traced else "eager", items
    )
