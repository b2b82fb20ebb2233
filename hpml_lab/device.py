"""Device helpers every layer uses: pick the device, seed every generator, recognise and clean up
after an out-of-memory error.

    from hpml_lab.device import resolve_device, seed_everything, is_oom, free_cuda_memory
    device = resolve_device("auto")      # cuda if present, else cpu
"""

from __future__ import annotations

import gc
import random
from contextlib import contextmanager

import numpy as np
import torch

from .config import ConfigError


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            "device 'cuda' was asked for but CUDA is not available here; use device=cpu or device=auto"
        )
    return torch.device(name)


def configure(device: torch.device) -> None:
    """Backend settings every timed run shares: on CUDA, cuDNN autotuning (cudnn.benchmark: the fastest
    convolution kernels are picked in the first steps, which the warm-up absorbs). TF32 stays at torch's
    defaults (convolutions in TF32, matmuls not); meta.json records both."""
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def is_oom(e: BaseException) -> bool:
    """An out-of-memory error: torch's own, a RuntimeError that says so (older paths, DDP ranks), or the CPU
    allocator's "can't allocate memory"."""
    text = str(e).lower()
    return (
        isinstance(e, (torch.cuda.OutOfMemoryError, MemoryError))
        or "out of memory" in text
        or "can't allocate memory" in text
    )


def free_cuda_memory() -> None:
    """After an OOM (and its exception dropped): collect unreachable tensors, then give the
    allocator's cached blocks back, so the next configuration starts from a clean device."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


@contextmanager
def torch_threads(n: int):
    """torch's intra-op threads set to n inside the block, the previous count restored after it."""
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)
