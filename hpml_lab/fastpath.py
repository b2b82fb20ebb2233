"""The fast training path: RunConfig options that train() applies, each off by default.

    python -m hpml_lab --channels-last true --precision bf16 --compile true --loader tensor
    hpml-lab bench step            # the reference baseline against the fast path (hpml_lab.studies.bench)

- channels_last: model weights and input batches in NHWC memory format (cuDNN and oneDNN
  pick faster convolution kernels for it, above all with bfloat16 on tensor cores).
- precision: bf16 or fp16 autocast around forward and loss. On CUDA that uses tensor cores; on CPU it
  is applied too (torch.autocast("cpu")), which pays off only on CPUs with such units (AMX,
  AVX512-BF16) and is usually slower elsewhere: measure it. bfloat16 keeps float32's exponent
  range, so no gradient scaler is needed; fp16 (V100s have no bf16) gets a GradScaler in the step.
  tf32 turns on TF32 matrix products and convolutions on CUDA. amp=true (deprecated) is bf16.
- compile: torch.compile with static shapes, a fresh compile per run: train() compiles the whole step's
  forward, loss and correct count as one graph (its backward with it: step.Step), DDP's wrapper under
  torchrun; compilation happens in the first steps (epoch 1); compile_available says beforehand whether it can
  build here. compile_mode "reduce-overhead" or "max-autotune" also captures the step's graphs as CUDA graphs
  on a GPU (one launch replays all its kernels); on a CPU every mode runs as plain inductor (compile_mode()).
- the optimizer: fused where torch has a fused kernel for it on the device, else foreach on a GPU
  (optimizer_options), on the fast path only (the tensor loader): the lab's runs keep torch's default.
- pinned memory and non_blocking copies: the DataLoader pins on CUDA, and train() copies
  batches with non_blocking=True; nothing to switch.
- persistent_workers: DataLoader workers survive epoch ends (no re-fork each epoch).
- loader="tensor": hpml_lab.data.gpu_loader.TensorLoader, the dataset resident on the device (chosen by
  hpml_lab.data.build_loader).

Models are built by step.build_model and loaders by data.build_loader; this module holds only what the
fast path changes: the model's format and compilation (and whether compiling can work here), the copy,
autocast and loss scaling, and unwrapping for saving.
"""

from __future__ import annotations

import contextlib
import logging

import torch
from torch import nn

from .config import ConfigError


def check_backend(backend: str) -> None:
    """A ConfigError (one line, before any compute) for a backend name torch.compile does not know."""
    import torch._dynamo as dynamo

    known = set(dynamo.list_backends(exclude_tags=())) | {"inductor"}
    if backend not in known:
        raise ConfigError(
            f"parameter 'compile_backend' is {backend!r}; valid backends: {', '.join(sorted(known))}"
        )


def _python_include() -> str:
    """Where Python.h is, read as Triton reads it (the default scheme; Debian's posix_local as
    posix_prefix)."""
    import sysconfig

    scheme = sysconfig.get_default_scheme()
    return sysconfig.get_paths(scheme="posix_prefix" if scheme == "posix_local" else scheme)["include"]


def compile_available(backend: str, device: str = "auto") -> str:
    """'' when torch.compile with `backend` can build its code on `device` here, else the reason it cannot.

    Only inductor builds anything, and the tools are looked up as inductor and Triton look for them: on a CPU
    inductor compiles C++ with $CXX, else g++ (torch._inductor.config.cpp.cxx); on CUDA Triton builds its
    launcher with $CC, else gcc, else clang (triton.runtime.build). Both need Python's headers."""
    import os
    import shutil
    from pathlib import Path

    from .device import resolve_device

    if not hasattr(torch, "compile"):
        return f"torch {torch.__version__} has no torch.compile"
    try:
        import torch._dynamo as dynamo

        known = set(dynamo.list_backends(exclude_tags=())) | {"inductor"}
    except Exception as e:  # pragma: no cover - depends on the build
        return f"torch.compile is not usable here ({type(e).__name__}: {e})"
    if backend not in known:
        return f"unknown compile backend {backend!r}; available: {', '.join(sorted(known))}"
    if backend == "inductor":
        kind = resolve_device(device).type if device == "auto" else torch.device(device).type
        env, names = ("CC", ("gcc", "clang")) if kind == "cuda" else ("CXX", ("g++",))
        named = os.environ.get(env, "").strip()
        if (
            named
        ):  # the compiler the variable names must exist and run (CXX=/nonexistent/g++ failed at step 1)
            exe = named.split()[0]
            found = (os.path.isfile(exe) and os.access(exe, os.X_OK)) if os.sep in exe else shutil.which(exe)
            if not found:
                return (
                    f"${env} is {named!r} but {exe} is not an executable file (or not on PATH); point ${env} "
                    f"at a {'C' if kind == 'cuda' else 'C++'} compiler or unset it"
                )
        elif not any(shutil.which(c) for c in names):
            return (
                f"the inductor backend on {kind} needs a {'C' if kind == 'cuda' else 'C++'} compiler: none "
                f"of ${env}, {', '.join(names)} was found (install {'gcc' if kind == 'cuda' else 'g++'})"
            )
        include = _python_include()
        if not (Path(include) / "Python.h").is_file():
            return (
                f"the inductor backend needs Python's headers (Python.h) and they are missing ({include}; "
                "install python3-dev)"
            )
    return ""


def apply_to_model(cfg, model: nn.Module, compile: bool = True) -> nn.Module:
    """channels_last weights and torch.compile, as cfg asks (the model is already on its device). A missing
    compiler or header is a ConfigError here, before any compute, not an error deep in the first step; with
    compile=False the check is made and compiling is left to the caller (train() compiles DDP's wrapper)."""
    if cfg.channels_last:
        model = model.to(memory_format=torch.channels_last)
    if cfg.compile:
        device = next(model.parameters()).device.type if any(True for _ in model.parameters()) else "cpu"
        why_not = compile_available(cfg.compile_backend, device)
        if why_not:
            raise ConfigError(f"compile=true cannot run: {why_not}; or set compile=false")
        if compile:
            model = compile_model(cfg, model)
    return model


GRAPH_MODES = ("reduce-overhead", "max-autotune")  # the modes whose inductor captures CUDA graphs


def compile_mode(cfg, device: torch.device | str) -> str:
    """The torch.compile mode that runs for cfg on `device`: cfg.compile_mode with inductor on CUDA; on a CPU,
    and with any other backend, "default" (CUDA graphs and Triton's autotuning are CUDA's; other backends take
    no mode)."""
    if torch.device(device).type != "cuda" or cfg.compile_backend != "inductor":
        return "default"
    return cfg.compile_mode


def captures_graphs(cfg, device: torch.device | str) -> bool:
    """Whether cfg's compiled step replays CUDA graphs on `device`: inductor in a mode that captures them, or
    dynamo's own `cudagraphs` backend (CUDA graphs over eager kernels), on CUDA."""
    if not cfg.compile or torch.device(device).type != "cuda":
        return False
    return cfg.compile_backend == "cudagraphs" or compile_mode(cfg, device) in GRAPH_MODES


def _compile(cfg, fn, device):
    import torch._dynamo as dynamo

    if not torch.cuda.is_available():  # inductor warns "No CUDA runtime is found" on every CPU build: noise
        logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    dynamo.reset()
    dynamo.config.fail_on_recompile_limit_hit = True
    mode = compile_mode(cfg, device)
    kwargs = {"mode": mode} if mode != "default" else {}
    return torch.compile(fn, backend=cfg.compile_backend, dynamic=False, **kwargs)


def compile_step(cfg, fn, device: torch.device | str):
    """torch.compile(fn) as compile_model compiles a model (static shapes, a fresh compile, cfg's backend and
    the mode compile_mode() gives): step.Step compiles its forward, loss and correct count with it."""
    return _compile(cfg, fn, device)


def compile_model(cfg, model: nn.Module) -> nn.Module:
    """torch.compile(model, backend=cfg.compile_backend, dynamic=False), a fresh compile for every run.

    Static shapes: the last batch of an epoch is usually smaller, and with dynamic shapes left to dynamo that
    batch makes it recompile a shape-generic graph at the end of epoch 1, which then serves every later full
    batch. Static shapes compile the partial batch's graph once, beside the full one. Dynamo's cache is shared
    by every run in a process (a sweep over batch sizes adds two graphs a size), so it is emptied first: each
    run pays, and reports, its own compile, and never meets dynamo's recompile limit, past which it would
    silently run eager code under a "compiled" label; should a run still hit the limit, it is an error."""
    params = next(iter(model.parameters()), None)
    return _compile(cfg, model, params.device if params is not None else "cpu")


# Optimizers whose fused kernel torch lacks on a device its fused list names: Adagrad's is CPU-only (torch's
# adagrad.py checks with cuda_unsupported=True, and its first step raises on CUDA)
FUSED_NOT_ON = {"Adagrad": ("cuda",)}


def optimizer_options(cfg, cls: type, device: torch.device | str) -> dict[str, bool]:
    """{"fused": True} where `cls` has a fused kernel on `device`, else {"foreach": True} on a GPU, on the
    fast path (the tensor loader); {} otherwise (the lab's runs keep torch's default: foreach on a GPU, a loop
    on a CPU). A fused optimizer updates every parameter in one multi-tensor kernel and needs no host read of
    the step count (GradScaler skips its found-inf check on the host with it too)."""
    import inspect

    if cfg.loader != "tensor":
        return {}
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

        fused_on = _get_fused_kernels_supported_devices()
    except ImportError:  # pragma: no cover - older or newer torch: CUDA has them wherever fused= exists
        fused_on = ["cuda"]
    kind = torch.device(device).type
    takes = inspect.signature(cls.__init__).parameters
    if "fused" in takes and kind in fused_on and kind not in FUSED_NOT_ON.get(cls.__name__, ()):
        return {"fused": True}
    if "foreach" in takes and kind == "cuda":
        return {"foreach": True}
    return {}


def to_device(x: torch.Tensor, device: torch.device, channels_last: bool = False) -> torch.Tensor:
    """Asynchronous copy (from pinned memory on CUDA), in channels-last format for 4-D batches if asked."""
    if channels_last and x.dim() == 4:
        return x.to(device, non_blocking=True, memory_format=torch.channels_last)
    return x.to(device, non_blocking=True)


_AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}


def autocast(cfg, device: torch.device):
    """Autocast in cfg.precision's type (bf16 or fp16; amp=true is bf16), else a no-op context."""
    dtype = _AUTOCAST.get(cfg.precision)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def grad_scaler(cfg, device: torch.device) -> torch.amp.GradScaler | None:
    """fp16 needs its loss scaled (small gradients underflow in fp16): a GradScaler for the device; None
    otherwise (bf16 has fp32's range)."""
    return torch.amp.GradScaler(device.type) if cfg.precision == "fp16" else None


def check_precision(cfg, device: torch.device) -> None:
    """Refuse, in one line and before any compute, a precision this torch cannot run on the device: a
    convolution's forward and backward under its autocast, once."""
    dtype = _AUTOCAST.get(cfg.precision)
    if dtype is None:
        return
    try:
        conv = nn.Conv2d(3, 2, 3).to(device)
        with torch.autocast(device_type=device.type, dtype=dtype):
            out = conv(torch.randn(1, 3, 4, 4, device=device))
        out.float().sum().backward()
    except (RuntimeError, TypeError, NotImplementedError) as e:
        raise ConfigError(
            f"precision={cfg.precision} is not supported on {device.type} by torch "
            f"{torch.__version__}: {str(e).strip().splitlines()[0][:120]}"
        ) from None


@contextlib.contextmanager
def matmul_precision(cfg, device: torch.device):
    """precision=tf32: TF32 matrix products and convolutions on CUDA for the block, the caller's settings put
    back after it; any other precision leaves PyTorch's settings as they are."""
    if cfg.precision != "tf32" or device.type != "cuda":
        yield
        return
    from .flops import tf32

    with tf32(True):
        yield


def unwrap(model: nn.Module) -> nn.Module:
    """The plain module under DDP, DataParallel and torch.compile wrappers, so a saved state_dict
    has the same keys however the model was trained."""
    while True:
        if isinstance(model, (nn.DataParallel, nn.parallel.DistributedDataParallel)):
            model = model.module
        elif hasattr(model, "_orig_mod"):
            model = model._orig_mod
        else:
            return model
