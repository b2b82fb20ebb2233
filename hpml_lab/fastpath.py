"""The fast training path: RunConfig options that train() applies, each off by default.

    python -m hpml_lab --channels-last true --amp true --compile true --loader tensor
    hpml-lab bench step            # the seed baseline against the fast path (hpml_lab.bench)

- channels_last: model weights and input batches in NHWC memory format (cuDNN and oneDNN
  pick faster convolution kernels for it, above all with bfloat16 on tensor cores).
- amp: bfloat16 autocast around forward and loss. On CUDA that uses tensor cores; on CPU it
  is applied too (torch.autocast("cpu")), which pays off only on CPUs with bf16 units (AMX,
  AVX512-BF16) and is usually slower elsewhere: measure it. bfloat16 keeps float32's exponent
  range, so no gradient scaler is needed.
- compile: torch.compile(model); compilation happens in the first steps (epoch 1).
- pinned memory and non_blocking copies: the DataLoader pins on CUDA, and train() copies
  batches with non_blocking=True; nothing to switch.
- persistent_workers: DataLoader workers survive epoch ends (no re-fork each epoch).
- loader="tensor": hpml_lab.data.gpu_loader.TensorLoader, the dataset resident on the device (chosen by
  hpml_lab.data.build_loader).

Models are built by training.build_model and loaders by data.build_loader; this module holds only what the
fast path changes: the model's format and compilation, the copy, autocast, and unwrapping for saving.
"""
from __future__ import annotations

import contextlib
import logging

import torch
from torch import nn



def apply_to_model(cfg, model: nn.Module) -> nn.Module:
    """channels_last weights and torch.compile, as cfg asks (the model is already on its device)."""
    if cfg.channels_last:
        model = model.to(memory_format=torch.channels_last)
    if cfg.compile:
        if not torch.cuda.is_available():  # inductor warns "No CUDA runtime is found" on every CPU build: noise
            logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
        model = torch.compile(model, backend=cfg.compile_backend)
    return model


def to_device(x: torch.Tensor, device: torch.device, channels_last: bool = False) -> torch.Tensor:
    """Asynchronous copy (from pinned memory on CUDA), in channels-last format for 4-D batches if asked."""
    if channels_last and x.dim() == 4:
        return x.to(device, non_blocking=True, memory_format=torch.channels_last)
    return x.to(device, non_blocking=True)


def autocast(cfg, device: torch.device):
    """bfloat16 autocast when cfg.amp, else a no-op context."""
    if not cfg.amp:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


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
