"""A tensor-resident CIFAR-10 loader: the whole uint8 dataset on the training device, augmented batched there.

    from hpml_lab.data.gpu_loader import TensorLoader
    loader = TensorLoader.from_config(cfg, device)     # what RunConfig(loader="tensor") uses
    for x, y in loader: ...                            # float32 N x 3 x 32 x 32, normalised; int64 labels

The lab's pipeline decodes each image to PIL, crops, flips, converts and
normalises it in a worker process, one image at a time. Here the dataset is
one N x 3 x 32 x 32 uint8 tensor (150 MB for CIFAR-10) on the device, and one
batch is augmented with a few whole-batch tensor ops: zero padding of 4
pixels, a gather that applies every image's own crop offset and horizontal
flip at once, and a fused uint8 -> float conversion with normalisation
(x * 1/(255 std) - mean/std). The augmentation distribution is the lab's:
crop offsets uniform over the 9 x 9 = 81 positions of a 40 x 40 padded image,
flip with probability one half, padding pixels 0 before normalisation
(tests/unit/test_gpu_loader.py checks both statistically and against the PIL
pipeline at fixed offsets).

A run's loader (from_config) hands out batches of one shape: each epoch's last partial batch is dropped
(`dropped` images an epoch, different ones each epoch as the order is reshuffled), so a compiled step is built
once for the epoch and CUDA graphs replay it whole; a set smaller than one batch keeps its one batch.

Randomness comes from a CPU torch.Generator seeded with cfg.seed (epoch order,
offsets, flips), so runs are reproducible and the same on CPU and CUDA. Each
epoch's order, offsets and flips are drawn at once and reach the device in one
copy; a batch then only slices them.

Under DDP (torchrun) each rank holds the dataset on its own device and takes its
share of every epoch's permutation as DistributedSampler does: the permutation is
padded with its first items to a multiple of the world size W, and rank r takes
items r, r+W, r+2W, ... The permutation comes from a generator seeded with
cfg.seed on every rank (so all ranks agree on it), the crops and flips from a
second one seeded per rank (reproducible, different on each rank). With
augmentation off, W ranks at batch B/W see exactly the images one process sees
at batch B (tests/cluster/test_distributed.py trains both and compares the weights).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from . import cifar, cifar_files

PAD = 4


def sample_params(n: int, generator: torch.Generator, size: int = 32, padding: int = PAD):
    """Per-image crop offsets (top, left) in 0..2*padding and flip flags, like RandomCrop +
    RandomHorizontalFlip."""
    span = 2 * padding + 1
    top = torch.randint(0, span, (n,), generator=generator)
    left = torch.randint(0, span, (n,), generator=generator)
    flip = torch.rand(n, generator=generator) < 0.5
    return top, left, flip


def augment_batch(
    images: torch.Tensor,
    top: torch.Tensor,
    left: torch.Tensor,
    flip: torch.Tensor,
    scale: torch.Tensor,
    shift: torch.Tensor,
    padding: int = PAD,
    memory_format: torch.memory_format = torch.contiguous_format,
) -> torch.Tensor:
    """Crop (after zero padding), flip and normalise a uint8 batch B x C x H x W in a few batched ops.

    `top`, `left` (offsets into the padded image) and `flip` are per image; `scale` and `shift` are
    per channel (1/(255 std) and -mean/std). Returns float32 B x C x H x W on images.device.
    """
    b, c, h, w = images.shape
    dev = images.device
    padded = F.pad(images, (padding, padding, padding, padding)) if padding else images
    rows = top.to(dev)[:, None] + torch.arange(h, device=dev)  # B x H
    cols = left.to(dev)[:, None] + torch.arange(w, device=dev)  # B x W
    cols = torch.where(flip.to(dev)[:, None], cols.flip(1), cols)  # flip = read columns backwards
    # One gather: index rows and columns of each image's own window (flattened H*W of the padded image).
    pw = w + 2 * padding
    flat = (rows[:, :, None] * pw + cols[:, None, :]).reshape(b, 1, h * w).expand(b, c, h * w)
    out = torch.gather(padded.reshape(b, c, -1), 2, flat).reshape(b, c, h, w)
    out = out.to(torch.float32, memory_format=memory_format)
    return out.mul_(scale.view(1, c, 1, 1)).add_(shift.view(1, c, 1, 1))


class TensorLoader:
    """Iterable of (images, labels) batches like a DataLoader, with the dataset resident on `device`.

    Args:
        images: uint8 N x H x W x C (NumPy or tensor, as CIFAR10Files.data) or N x C x H x W tensor.
        labels: N integer labels.
        batch_size, shuffle, drop_last: as in DataLoader.
        augment: random crop with padding and horizontal flip (the lab's); False only normalises.
        mean, std: per-channel normalisation, in [0, 1] units.
        seed: seeds the order, crop offsets and flips (one generator for the loader's lifetime).
        channels_last: hand out batches in channels-last memory format.
        rank, world_size: this process's share under DDP (items rank, rank+world_size, ... of each epoch).
    """

    def __init__(
        self,
        images,
        labels: Sequence[int] | torch.Tensor,
        batch_size: int,
        device: torch.device | str = "cpu",
        *,
        shuffle: bool = True,
        augment: bool = True,
        drop_last: bool = False,
        mean: Sequence[float] = cifar.MEAN,
        std: Sequence[float] = cifar.STD,
        seed: int = 0,
        channels_last: bool = False,
        padding: int = PAD,
        rank: int = 0,
        world_size: int = 1,
    ):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in 0..{world_size - 1}")
        self.device = torch.device(device)
        x = torch.as_tensor(np.asarray(images)) if not torch.is_tensor(images) else images
        if x.dtype != torch.uint8 or x.dim() != 4:
            raise ValueError(
                f"images must be a uint8 N x H x W x C or N x C x H x W array, got {x.dtype} {tuple(x.shape)}"
            )
        if x.shape[-1] in (1, 3) and x.shape[1] not in (1, 3):
            x = x.permute(0, 3, 1, 2)  # N H W C -> N C H W
        self.images = x.contiguous().to(self.device)
        self.labels = torch.as_tensor(labels, dtype=torch.long).to(self.device)
        if len(self.labels) != len(self.images):
            raise ValueError(f"{len(self.images)} images but {len(self.labels)} labels")
        self.batch_size, self.shuffle, self.augment, self.drop_last = batch_size, shuffle, augment, drop_last
        self.padding = padding
        std_t = torch.tensor(std, dtype=torch.float32)
        self.scale = (1.0 / (255.0 * std_t)).to(self.device)
        self.shift = (-torch.tensor(mean, dtype=torch.float32) / std_t).to(self.device)
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self.rank, self.world_size = rank, world_size
        # One process: one generator for the order and the augmentation (as always). Several ranks: the order
        # from a generator every rank seeds alike, the augmentation from one seeded per rank.
        self.generator = torch.Generator().manual_seed(seed if world_size == 1 else seed + 7919 * (rank + 1))
        self.order_generator = self.generator if world_size == 1 else torch.Generator().manual_seed(seed)
        self.pin = self.device.type == "cuda"

    @classmethod
    def from_config(cls, cfg, device: torch.device | str, rank: int = 0, world_size: int = 1) -> TensorLoader:
        """The training set of cfg (subset applied) with cfg's batch size, seed, augment and shuffle; under
        DDP this rank's share. Batches of one shape: the epoch's last partial batch is dropped where the epoch
        has a full one (`dropped` says how many images that leaves out)."""
        ds = cifar_files.CIFAR10Files(cfg.data_path(), train=True)
        n = min(cfg.subset, len(ds)) if cfg.subset else len(ds)
        return cls(
            ds.data[:n],
            ds.targets[:n],
            cfg.batch_size,
            device,
            shuffle=cfg.shuffle,
            augment=cfg.augment,
            seed=cfg.seed,
            channels_last=cfg.channels_last,
            rank=rank,
            world_size=world_size,
            drop_last=math.ceil(n / world_size) >= cfg.batch_size,
        )

    @property
    def dropped(self) -> int:
        """Images of this rank's epoch that no batch carries (the partial batch drop_last leaves out)."""
        return self.per_rank() % self.batch_size if self.drop_last else 0

    def per_rank(self) -> int:
        """Items this rank sees an epoch: all of them in one process, ceil(N / W) under DDP
        (DistributedSampler's)."""
        return math.ceil(len(self.labels) / self.world_size)

    def __len__(self) -> int:
        n = self.per_rank()
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def epoch_order(self) -> torch.Tensor:
        """This epoch's item order for this rank (draws from the order generator)."""
        n = len(self.labels)
        order = torch.randperm(n, generator=self.order_generator) if self.shuffle else torch.arange(n)
        if self.world_size > 1:
            total = self.per_rank() * self.world_size
            if total > n:  # pad with the first items, as DistributedSampler(drop_last=False) does
                order = torch.cat([order, order.repeat(math.ceil(total / n))[: total - n]])
            order = order[self.rank : total : self.world_size]
        return order

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        order = self.epoch_order()
        # The whole epoch's crop offsets and flips drawn at once and copied to the device in one transfer
        # (with the order): no host draw, pin or copy per batch, which on a compiled GPU step of about 2 ms
        # cost about 100 us a batch. Drawn from the same CPU generator, so the distribution and the CPU/CUDA
        # equality hold.
        params = sample_params(len(order), self.generator, padding=self.padding) if self.augment else None
        if self.pin:
            packed = torch.stack([order, *(t.long() for t in params)]) if params else order[None]
            packed = packed.pin_memory().to(self.device, non_blocking=True)
            order, params = packed[0], (tuple(packed[1:3]) + (packed[3].bool(),) if params else None)
        else:
            order = order.to(self.device)
        for i in range(len(self)):
            s = slice(i * self.batch_size, (i + 1) * self.batch_size)
            idx = order[s]
            yield self.batch(idx, tuple(p[s] for p in params) if params else None), self.labels[idx]

    def batch(self, idx: torch.Tensor, params: tuple[torch.Tensor, ...] | None = None) -> torch.Tensor:
        """Augmented, normalised float images for dataset indices `idx` (on the device); `params` (top, left,
        flip) as drawn for the epoch, else drawn here for this batch."""
        x = self.images[idx]
        k = x.shape[0]
        if self.augment:
            if params is None:
                params = tuple(
                    t.to(self.device) for t in sample_params(k, self.generator, padding=self.padding)
                )
            top, left, flip = params
            return augment_batch(x, top, left, flip, self.scale, self.shift, self.padding, self.memory_format)
        out = x.to(torch.float32, memory_format=self.memory_format)
        return out.mul_(self.scale.view(1, -1, 1, 1)).add_(self.shift.view(1, -1, 1, 1))
