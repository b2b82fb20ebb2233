"""Datasets and loaders, chosen by RunConfig.

from hpml_lab.data import build_train_loader, dataset_info
loader = build_train_loader(cfg, device)
dataset_info(cfg)   # {"name": "cifar10", "kind": "synthetic", "root": ..., "fingerprint": "16 hex digits"}
"""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..config import ConfigError
from . import cifar, tinyimagenet
from .errors import DatasetError

if TYPE_CHECKING:  # torch is imported where a loader is built, not here: the data commands that only check or
    # fetch files (and the command line's front) do without it
    import torch
    from torch.utils.data import DataLoader, Dataset

__all__ = [
    "DatasetError",
    "build_loader",
    "build_train_loader",
    "dataset_info",
    "train_dataset",
    "check_dataset",
    "lab_transform",
    "num_classes",
    "classes_of",
    "worker_init",
]

NUM_CLASSES = {"cifar10": 10, "tinyimagenet": 200}


def num_classes(dataset: str) -> int:
    """The official class count of a dataset (CIFAR-10 10, Tiny ImageNet 200)."""
    return NUM_CLASSES[dataset]


def classes_of(cfg, meta: Mapping | None = None) -> int:
    """How many classes a run's data holds: the count its meta.json recorded, else the prepared folder's (a
    partial or synthetic Tiny ImageNet has the classes its wnids.txt names, e.g. 4), else the official count.
    Chance levels and the model's output layer use it: a 4-class set said "chance 0.5%" from the official
    200."""
    recorded = ((meta or {}).get("dataset") or {}).get("classes") if isinstance(meta, Mapping) else None
    if isinstance(recorded, int) and not isinstance(recorded, bool) and recorded >= 1:
        return recorded
    if cfg.dataset == "tinyimagenet" and (cfg.data_path() / tinyimagenet.FOLDER / "wnids.txt").is_file():
        try:
            found = len(tinyimagenet.wnids(cfg.data_path()))
        except (OSError, DatasetError):  # not prepared (yet): the official count
            found = 0
        if found:
            return found
    return num_classes(cfg.dataset)


def lab_transform(augment: bool = True, mean=cifar.MEAN, std=cifar.STD, size: int = 32):
    """The lab's per-sample PIL pipeline: RandomCrop(size, padding=4), flip, to float, Normalize."""
    import torch
    from torchvision.transforms import v2

    steps = [v2.RandomCrop(size, padding=4), v2.RandomHorizontalFlip(0.5)] if augment else []
    steps += [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(mean, std)]
    return v2.Compose(steps)


def check_dataset(cfg) -> str:
    """Fail fast (DatasetError naming the command that prepares it); returns 'real' or 'synthetic'."""
    from .checks import FINGERPRINT, no_planted_caches

    if cfg.dataset == "cifar10":
        no_planted_caches(cfg.data_path() / cifar.FOLDER, [cifar.CHECKED, cifar.VERIFIED, FINGERPRINT])
        return cifar.check(cfg.data_path())
    if cfg.dataset == "tinyimagenet":
        no_planted_caches(cfg.data_path() / tinyimagenet.FOLDER, [FINGERPRINT])
        return tinyimagenet.check(cfg.data_path())
    raise DatasetError(f"dataset {cfg.dataset!r} is not available in this version of hpml-lab")


def dataset_info(cfg) -> dict[str, Any]:
    """What a run records about its data, and what makes two runs' data the same (sweeps.same_run): name,
    kind, folder and a content fingerprint, so data replaced under the same path is other data."""
    return {
        "name": cfg.dataset,
        "kind": check_dataset(cfg),
        "root": str(cfg.data_path()),
        "fingerprint": fingerprint(cfg),
        "classes": classes_of(cfg),
    }


def fingerprint(cfg) -> str:
    """CIFAR-10: a hash of every batch file's bytes (cached by their sizes and times). Tiny ImageNet: of its
    preparation record and text files, and of the stamps of its class folders (an image replaced in place,
    keeping its folder's times, is not seen)."""
    from .checks import content_fingerprint

    if cfg.dataset == "cifar10":
        folder = cfg.data_path() / cifar.FOLDER
        return content_fingerprint(
            folder, cifar.TRAIN_FILES + cifar.TEST_FILES + [cifar.META_FILE], "CIFAR-10 file"
        )
    folder = cfg.data_path() / tinyimagenet.FOLDER
    texts = [
        n for n in (tinyimagenet.RECORD, "wnids.txt", "val/val_annotations.txt") if (folder / n).is_file()
    ]
    dirs = sorted(
        str(d.relative_to(folder))
        for top in ("train", "val", "test")
        if (folder / top).is_dir()
        for d in [folder / top, *(folder / top).glob("*"), *(folder / top).glob("*/images")]
        if d.is_dir()
    )
    from .checks import stamp

    return content_fingerprint(
        folder, texts, "Tiny ImageNet file", also=stamp(folder, dirs, "Tiny ImageNet folder")
    )


def train_dataset(cfg, transform=None) -> Dataset:
    from torch.utils.data import Subset

    from .cifar_files import CIFAR10Files

    if cfg.dataset == "tinyimagenet":  # 64x64 JPEG folders; subset spread over the classes
        ds = tinyimagenet.train_set(
            cfg.data_path(),
            transform
            if transform is not None
            else lab_transform(cfg.augment, tinyimagenet.MEAN, tinyimagenet.STD, size=tinyimagenet.SIZE),
        )
        return Subset(ds, tinyimagenet.spread_indices(len(ds), cfg.subset)) if cfg.subset else ds
    if cfg.dataset != "cifar10":
        check_dataset(cfg)
    ds = CIFAR10Files(
        cfg.data_path(),
        train=True,
        transform=transform if transform is not None else lab_transform(cfg.augment),
    )
    if cfg.subset:
        ds = Subset(ds, range(min(cfg.subset, len(ds))))
    return ds


def worker_init(worker_id: int) -> None:
    """What every DataLoader worker of the kit runs first. A distinct, reproducible seed derived from the
    loader's base seed. And SIGTERM ends the worker quietly (exit status 0): Slurm at a time limit, the job
    script's warning handler and `kill` of a process tree send SIGTERM to the workers along with the main
    process, and a worker killed by it makes the main process's DataLoader raise "worker ... is killed by
    signal: Terminated", which turned an interrupted run into a failed one (or none at all, when it came
    while the run's files were written). The main process, signalled too, marks the run interrupted."""
    import numpy as np
    import torch

    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)
    signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(0))


def build_train_loader(cfg, device: torch.device, dataset: Dataset | None = None, **overrides) -> DataLoader:
    """The lab's DataLoader: shuffled with a seeded generator, cfg.num_workers workers,
    pinned memory on CUDA. `overrides` go to DataLoader (e.g. persistent_workers=True)."""
    import torch
    from torch.utils.data import DataLoader

    ds = dataset if dataset is not None else train_dataset(cfg)
    gen = torch.Generator().manual_seed(cfg.seed)
    kwargs: dict[str, Any] = dict(
        batch_size=cfg.batch_size,
        shuffle=cfg.shuffle,
        num_workers=cfg.num_workers,
        pin_memory=device.type == "cuda",
        generator=gen,
        worker_init_fn=worker_init,
        drop_last=False,
    )
    kwargs.update(overrides)
    return DataLoader(ds, **kwargs)


def build_loader(cfg, device: torch.device, dist_env=None):
    """The training loader cfg asks for: the lab's PIL DataLoader (with a DistributedSampler when
    dist_env is a multi-process run), or the tensor-resident one (CIFAR-10; under DDP each rank its share)."""
    if cfg.loader == "tensor":
        if cfg.dataset != "cifar10":
            raise ConfigError(f"loader 'tensor' supports cifar10 only, not {cfg.dataset!r}; use loader=pil")
        from .gpu_loader import TensorLoader

        if dist_env is not None and dist_env.distributed:
            return TensorLoader.from_config(cfg, device, rank=dist_env.rank, world_size=dist_env.world_size)
        return TensorLoader.from_config(cfg, device)
    from .. import distributed

    ds = train_dataset(cfg)
    overrides = {"persistent_workers": True} if cfg.persistent_workers and cfg.num_workers > 0 else {}
    if dist_env is not None:
        overrides.update(distributed.sampler_kwargs(ds, cfg.shuffle, cfg.seed, dist_env))
    return build_train_loader(cfg, device, dataset=ds, **overrides)
