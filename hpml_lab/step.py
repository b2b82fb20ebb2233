"""The training step: `Step`, the step train() runs (host-to-device copy, forward, loss and the batch's
correct count, backward, update; compiled whole under compile=true, replayed as CUDA graphs where the compile
mode captures them); `train_step`, the one plain step other callers share (the benchmarks, profiler traces,
the memory timings, the Lab 2 questions); fp16's loss scale, kept per optimizer; and how the model and the
optimizer are built. The loop around the step is hpml_lab.training's train().

    from hpml_lab.step import Step, build_model, build_optimizer
    model = build_model(cfg, device)
    step = Step(model, build_optimizer(cfg, model.parameters()), nn.CrossEntropyLoss(), cfg, device)
    loss, correct = step(x, y)   # device tensors: nothing read on the host
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any

import torch
from torch import nn

from . import fastpath, models
from .config import OPTIMIZER_TABLE, RunConfig
from .data import classes_of


class Step:
    """The training step train() runs, built once per run: host-to-device copy, forward, loss and the batch's
    correct count, backward, optimizer step, gradients set to None. Returns (loss, correct) as device tensors;
    nothing in it reads a device value on the host or branches on one (tests/unit/test_step.py counts host
    reads), so the host queues the next step while the device works.

    compile=True: forward, loss and correct count are one torch.compile'd function (fastpath.compile_step:
    static shapes, cfg's backend and mode), whose backward AOTAutograd compiles with it; the model's own
    compile wrapper, if it has one, is looked through, so the step is one graph rather than a graph with eager
    ends. The optimizer is not compiled: on the fast path it is torch's fused kernel
    (fastpath.optimizer_options), one multi-tensor launch that a compile would only re-derive. Where the mode
    captures CUDA graphs, each step is marked as a new replay and its two outputs are copied out of the
    graph's memory, which the next replay overwrites."""

    def __init__(
        self,
        model,
        optimizer,
        criterion,
        cfg: RunConfig,
        device: torch.device,
        compile: bool = False,
        wrapper_compiled: bool = False,
    ):
        self.model, self.optimizer, self.criterion, self.cfg, self.device = (
            model,
            optimizer,
            criterion,
            cfg,
            device,
        )
        self.scaler = None
        if cfg.precision == "fp16":
            self.scaler = _SCALERS.get(optimizer) or _SCALERS.setdefault(
                optimizer, fastpath.grad_scaler(cfg, device)
            )
        self.compiled = compile
        # under torchrun the DDP wrapper is compiled instead (train()): the model's forward and backward, not
        # the loss and count; said so in describe()
        self.wrapper_compiled = wrapper_compiled and not compile
        self.graphs = compile and fastpath.captures_graphs(cfg, device)
        self._plain = getattr(model, "_orig_mod", model) if compile else model
        self.forward = fastpath.compile_step(cfg, self._forward, device) if compile else self._forward
        if compile or self.wrapper_compiled:
            from torch._dynamo.utils import counters, guard_failures

            counters.clear()  # describe() reports this run's graphs, breaks and recompiles
            guard_failures.clear()

    def _forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with fastpath.autocast(self.cfg, self.device):
            out = self._plain(x)
            loss = self.criterion(out, y)
        return loss, (out.detach().argmax(1) == y).sum()

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = fastpath.to_device(x, self.device, self.cfg.channels_last)
        y = y.to(self.device, non_blocking=True)
        if self.graphs:
            torch.compiler.cudagraph_mark_step_begin()
        loss, correct = self.forward(x, y)
        (self.scaler.scale(loss) if self.scaler else loss).backward()
        if self.scaler:
            self.scaler.step(self.optimizer)  # fused optimizers take the inf check on the device
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        loss = loss.detach()
        return (loss.clone(), correct.clone()) if self.graphs else (loss, correct)

    def describe(self) -> dict[str, Any]:
        """What ran, for meta.json: compiled or not, the mode that ran, CUDA graphs (false where inductor
        skipped them), the optimizer's kernel, and what dynamo and inductor counted since this step was built
        (graphs, graph breaks, recompiles, CUDA graph skips). The counters are the process's: one compiled
        step at a time."""
        groups = self.optimizer.param_groups
        first = groups[0] if groups else {}
        kernel = "fused" if first.get("fused") else "foreach" if first.get("foreach") else "default"
        compiled = self.compiled or self.wrapper_compiled
        out: dict[str, Any] = {
            "compiled": compiled,
            "compile_mode": fastpath.compile_mode(self.cfg, self.device) if compiled else None,
            "cuda_graphs": self.graphs,
            "optimizer_kernel": kernel,
        }
        if compiled:
            out["compiled_what"] = (
                "the whole step (forward, loss, correct count; backward with it)"
                if self.compiled
                else "the DDP wrapper (the model's forward and backward; the loss and count eager)"
            )
            from torch._dynamo.utils import counters, guard_failures

            skips = int(counters["inductor"].get("cudagraph_skips", 0))
            out.update(  # a recompile is a compiled frame whose guards failed (a new shape, a changed global)
                graphs=int(counters["stats"].get("unique_graphs", 0)),
                graph_breaks=int(sum(counters["graph_break"].values())),
                recompiles=int(sum(len(reasons) for reasons in guard_failures.values())),
                cudagraph_skips=skips,  # inductor ran a graph without CUDA graphs (it logs why)
                cuda_graphs=self.graphs and not skips,
            )
        return out


# fp16's loss scale, one per optimizer: it adapts over the steps, whichever caller (train, bench, tracing)
# makes them
_SCALERS: weakref.WeakKeyDictionary[torch.optim.Optimizer, torch.amp.GradScaler] = weakref.WeakKeyDictionary()


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    criterion: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    cfg: RunConfig | None,
    device: torch.device,
    phase=None,
):
    """One training step as train() times it: host-to-device copy (channels-last if asked), forward and
    loss (under cfg.precision's autocast), backward, optimizer step. Returns (logits, loss, labels on device).
    With precision=fp16 the loss is scaled by a GradScaler kept with the optimizer, so every caller's steps
    share one scale that adapts over the run.

    The one step of the package: train(), the benchmarks, profiler traces (tracing.trace_steps), the memory
    timings (memory.make_step) and the Lab 2 questions all call it. `cfg=None` is a plain fp32 step;
    `phase(name)` wraps each part in a context manager (tracing passes torch.profiler.record_function,
    so a trace labels copy / forward / backward / optimizer exactly as train() counts them)."""
    label = phase or (lambda name: contextlib.nullcontext())
    with label("copy"):
        x = fastpath.to_device(x, device, bool(cfg and cfg.channels_last))
        y = y.to(device, non_blocking=True)
    with label("forward"), fastpath.autocast(cfg, device) if cfg is not None else contextlib.nullcontext():
        out = model(x)
        loss = criterion(out, y)
    scaler = None
    if cfg is not None and cfg.precision == "fp16":
        scaler = _SCALERS.get(optimizer) or _SCALERS.setdefault(optimizer, fastpath.grad_scaler(cfg, device))
    with label("backward"):
        optimizer.zero_grad(set_to_none=True)
        (scaler.scale(loss) if scaler else loss).backward()
    with label("optimizer"):
        if scaler:
            scaler.step(optimizer)  # skipped when the scaled gradients overflowed; the scale then shrinks
            scaler.update()
        else:
            optimizer.step()
    return out, loss, y


def build_model(cfg: RunConfig, device: torch.device | None = None, compile: bool = True) -> nn.Module:
    """The model cfg names, sized for cfg's dataset (classes, stem, norm, checkpoint segments); with `device`,
    moved there and given the fast path's format and compilation (fastpath.apply_to_model) as cfg asks;
    compile=False checks that compiling can work but leaves it to the caller (train() compiles DDP's
    wrapper)."""
    extra = {"checkpoint_segments": cfg.checkpoint_segments} if cfg.checkpoint_segments else {}
    model = models.build(cfg.model, num_classes=classes_of(cfg), norm=cfg.norm, stem=cfg.stem, **extra)
    return model if device is None else fastpath.apply_to_model(cfg, model.to(device), compile=compile)


def build_optimizer(cfg: RunConfig, params) -> torch.optim.Optimizer:
    """cfg.optimizer from config.OPTIMIZER_TABLE, with cfg.lr and cfg.weight_decay (and cfg.momentum where the
    table says it applies: the SGD family)."""
    cls, fixed, takes_momentum = OPTIMIZER_TABLE[cfg.optimizer]
    extra = {"momentum": cfg.momentum} if takes_momentum else {}
    params = list(params)
    device = params[0].device if params and torch.is_tensor(params[0]) else torch.device("cpu")
    opt_cls = getattr(torch.optim, cls)
    kernel = fastpath.optimizer_options(cfg, opt_cls, device)  # fused or foreach on the fast path
    return opt_cls(params, lr=cfg.lr, weight_decay=cfg.weight_decay, **fixed, **extra, **kernel)
