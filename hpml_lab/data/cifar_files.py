"""The CIFAR-10 Dataset over the pickled batch files (hpml_lab.data.cifar reads and checks them), real or
synthetic alike: a module of its own so that the data commands that only check, write or fetch files do not
import torch."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from torch.utils.data import Dataset

from . import cifar


class CIFAR10Files(Dataset):
    """CIFAR-10 read from the pickled batch files, real or synthetic alike.

    Items are (PIL image, label) passed through `transform`, like
    torchvision.datasets.CIFAR10. `.data` is the uint8 array N x 32 x 32 x 3
    and `.targets` the labels, for loaders that skip PIL altogether.
    """

    def __init__(self, root: str | os.PathLike, train: bool = True, transform: Callable | None = None):
        self.data, self.targets, self.classes, self.kind = cifar.read(root, train)
        self.root = Path(root)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i: int):
        from PIL import Image

        img = Image.fromarray(self.data[i])
        if self.transform is not None:
            img = self.transform(img)
        return img, self.targets[i]
