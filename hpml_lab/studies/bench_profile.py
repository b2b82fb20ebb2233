"""`hpml-lab bench profile`: torch.profiler over steps of the project's fast path and of the plain script
(speed/reference.py) on the same device, and what a profile says per step (kernels by kind, the device's busy
and idle time, launch calls). bench.py runs it; the other four measurements are bench_measure.py's.

    from hpml_lab.studies import bench_profile
    bench_profile.bench_profile(opts, device)   # opts: bench.Settings as a dict, completed by bench.run
"""

from __future__ import annotations

import re
from typing import Any

import torch

from ..fastpath import compile_mode
from ..profiling import synchronize
from .bench_measure import Trainer, base_cfg, cfg_fields, fast_cfg

# Kernel kinds by name (cuDNN, cuBLAS/CUTLASS, inductor's Triton, ATen's own), first match wins; a CPU's aten
# operators by the same words.
KINDS = (
    ("convolution", re.compile(r"conv|cudnn|implicit_gemm|xmma_fprop|dgrad|wgrad|winograd|fprop", re.I)),
    ("matrix product", re.compile(r"gemm|cutlass|matmul|\bmm\b|addmm|sm90_|sm80_|ampere_|hopper", re.I)),
    ("fused (inductor)", re.compile(r"^triton_|^cpp_fused|^CompiledFunction", re.I)),
    ("optimizer", re.compile(r"multi_tensor|fused_sgd|fused_adam|foreach|sgd|adam", re.I)),
    ("batch norm", re.compile(r"batch_norm|batchnorm|bn_|welford", re.I)),
    ("copy or fill", re.compile(r"memcpy|memset|copy|fill|cat|index|gather|pad|clone", re.I)),
    ("reduction", re.compile(r"reduce|sum|mean|max|argmax|softmax|nll|cross_entropy", re.I)),
    (
        "elementwise",
        re.compile(r"elementwise|vectorized|unrolled|relu|add|mul|where|div|threshold|sub", re.I),
    ),
)
# ATen operators that only describe or allocate tensors (no arithmetic): not counted as a CPU's kernels
METADATA_OPS = re.compile(
    r"^aten::(empty|as_strided|view|reshape|t|transpose|expand|select|slice|detach|unsqueeze|squeeze|permute|"
    r"alias|resolve_\w+|contiguous|_unsafe_view|lift_fresh|result_type|to|_to_copy|empty_like|empty_strided|"
    r"zeros_like|ones_like|set_|is_\w+|item|_local_scalar_dense|size|stride|numel|flatten)$"
)
LAUNCHES = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cudaGraphLaunch",
)


def kind_of(name: str) -> str:
    return next((k for k, rx in KINDS if rx.search(name)), "other")


def profile_summary(events, steps: int, cuda: bool) -> dict[str, Any]:
    """Per step, from torch.profiler's events: kernels (count and time by kind), the device's busy and idle
    time between its first and last kernel (idle: the gaps where it waited on the host), and the host's launch
    calls. On a CPU there are no kernels: its ATen operators that compute (METADATA_OPS left out) stand in,
    each by its own time (its children's apart, so nothing is counted twice), and gaps are not measured (the
    host does the work itself)."""
    from torch.autograd import DeviceType

    if cuda:
        ks = [e for e in events if e.device_type == DeviceType.CUDA]
        spans = sorted((e.time_range.start, e.time_range.end, e.name) for e in ks)
    else:
        ks = [e for e in events if e.name.startswith("aten::") and not METADATA_OPS.match(e.name)]
        spans = sorted((e.time_range.start, e.time_range.start + e.self_cpu_time_total, e.name) for e in ks)
    by_kind: dict[str, dict[str, float]] = {}
    for start, end, name in spans:
        k = by_kind.setdefault(kind_of(name), {"count": 0.0, "ms": 0.0})
        k["count"] += 1 / steps
        k["ms"] += (end - start) / 1000 / steps
    out: dict[str, Any] = {
        "kernels_per_step": len(spans) / steps,
        "kernel_ms_per_step": sum(e - s for s, e, _ in spans) / 1000 / steps,
        "by_kind": {k: {"count": round(v["count"], 2), "ms": v["ms"]} for k, v in sorted(by_kind.items())},
    }
    if cuda and spans:
        busy, gaps, reach = 0.0, [], spans[0][0]
        for s0, e0, _ in spans:  # union of the kernels' intervals; a gap is time no kernel ran
            if s0 > reach:
                gaps.append(s0 - reach)
            busy += max(0.0, e0 - max(s0, reach))
            reach = max(reach, e0)
        span = reach - spans[0][0]
        out.update(
            span_ms_per_step=span / 1000 / steps,
            busy_ms_per_step=busy / 1000 / steps,
            idle_ms_per_step=(span - busy) / 1000 / steps,
            idle_share=(span - busy) / span if span > 0 else float("nan"),
            gaps_over_10us_per_step=sum(g > 10 for g in gaps) / steps,
            largest_gaps_us=sorted(gaps, reverse=True)[:5],
        )
        calls = [e.name for e in events if e.device_type == DeviceType.CPU and e.name in LAUNCHES]
        out["launch_calls_per_step"] = {n: calls.count(n) / steps for n in sorted(set(calls))}
    else:
        out["gaps_note"] = "not measured on a CPU: the host runs each operator itself"
    return out


def bench_profile(opts: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """torch.profiler over `steps` steps of the project's fast path (its loader's batch and step.Step, as
    the speed ladder's fastest configuration at this batch: on CUDA bf16, channels_last, compiled with CUDA
    graphs) and of the plain script's (speed/reference.py: its own batches and step at the same batch,
    precision and compile mode) on the same device, each after warm-up steps that compile and capture; per
    step, each side's kernels by kind, device busy and idle time, launch calls (profile_summary). Ratio: the
    project's device span per step over the script's (its kernel time on a CPU). Run it first on a GPU: it
    says where the project's step differs from the framework's plain one."""
    from torch.profiler import ProfilerActivity, profile

    from .speed.reference import batches as ref_batches
    from .speed.reference import load as ref_load
    from .speed.reference import make_step as ref_make_step
    from .speed.reference import resnet as ref_resnet

    opts = {
        **opts,
        "channels_last": True,
    }  # the script's layout, on a CPU too: the two steps differ in code only
    cfg = fast_cfg(base_cfg(opts, device), opts, device, num_workers=0)
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    steps, warm = opts["steps"], opts["warmup"] + 3  # the first steps compile, record and capture CUDA graphs

    def measure(step_once) -> dict[str, Any]:
        for _ in range(warm):
            step_once()
        synchronize(device)
        with profile(activities=activities) as prof:
            for _ in range(steps):
                step_once()
            synchronize(device)
        return profile_summary(prof.events(), steps, cuda)

    tr = Trainer(cfg, device)
    project = measure(lambda: tr.step(*tr.next_batch()))
    project["step"] = tr._step.describe()
    tr.close()
    from .. import models

    cls, args = models.arguments(cfg.model)
    side: dict[str, Any]
    if cls != "ResNet" or args.get("block") != "basic" or cfg.precision not in ("fp32", "bf16"):
        side = {
            "status": "not run",
            "why": "the reference script has basic-block ResNets in bf16 or fp32 only",
        }
    else:
        torch.manual_seed(cfg.seed)
        x, y = ref_load(opts["data_root"], device, cfg.subset)
        model = ref_resnet(args["widths"], args["num_blocks"]).to(device, memory_format=torch.channels_last)
        opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=0.9, weight_decay=5e-4, fused=True)
        mode = compile_mode(cfg, device) if cfg.compile else "eager"
        ref_step = ref_make_step(model, opt, mode, cfg.precision)
        feed = {"it": iter(())}

        def ref_once():
            try:
                xb, yb = next(feed["it"])
            except StopIteration:
                feed["it"] = ref_batches(x, y, cfg.batch_size)
                xb, yb = next(feed["it"])
            ref_step(xb, yb)

        side = {"status": "measured", **measure(ref_once), "mode": mode}
    key = "span_ms_per_step" if cuda else "kernel_ms_per_step"
    ratio = project[key] / side[key] if side.get("status") == "measured" and side.get(key) else None
    return {
        "unit": "per training step (the batch's preparation on the device included)",
        "steps_profiled": steps,
        "warmup_steps": warm,
        "project": project,
        "reference": side,
        "ratio": ratio,
        "ratio_meaning": f"project {key} / reference {key} (above 1: the project's step takes longer)",
        "config": cfg_fields(cfg),
        "activities": [a.name for a in activities],
    }
