"""The synthetic Tiny ImageNet: a tiny-imagenet-200.zip in the official layout, with real 64x64 JPEGs of a
learnable class pattern. tinyimagenet.synthesize writes it and prepares it like a download.

    synthesize_archive("data/tiny-imagenet-200.zip", classes=10, per_class=20)
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..io import atomic_file
from .checks import SEED_MAX, in_range, signals_deferred

if TYPE_CHECKING:
    import torch

FOLDER = "tiny-imagenet-200"
MARKER = "SYNTHETIC.json"
SIZE = 64
# synth options: (flag, lowest, highest); the real set has 200 classes, 500 train, 50 val each, 10,000 test
LIMITS = {
    "classes": ("--classes", 1, 200),
    "per_class": ("--per-class", 1, 1000),
    "val_per_class": ("--val-per-class", 0, 100),
    "n_test": ("--n-test-images", 0, 20_000),
    "seed": ("--seed", 0, SEED_MAX),
}


class _Zip(zipfile.ZipFile):
    def writestr(self, *args, **kwargs):
        with (
            signals_deferred()
        ):  # interrupted inside, zipfile's close() raises ValueError, not the interruption
            super().writestr(*args, **kwargs)


def is_synthetic_zip(path: Path) -> bool:
    """path is a readable zip that this synthesizer wrote (it holds tiny-imagenet-200/SYNTHETIC.json)."""
    try:
        with zipfile.ZipFile(path) as z:
            return f"{FOLDER}/{MARKER}" in z.namelist()
    except (OSError, zipfile.BadZipFile, EOFError, RuntimeError, NotImplementedError):
        return False


def check_options(**values) -> None:
    """Every synth option inside its range (LIMITS), before anything is written or deleted."""
    for key, value in values.items():
        flag, lo, hi = LIMITS[key]
        in_range(flag, value, lo, hi)


def _render(label_ids: np.ndarray, protos: dict, gen: torch.Generator) -> np.ndarray:
    """64x64 images of a class stripe pattern (frequency, angle, colour) at a random phase on a
    smooth random background, plus noise: learnable, not trivial. Returns N x 64 x 64 x 3 uint8."""
    import torch  # here: checking a synthetic archive needs no torch

    n = len(label_ids)
    lab = torch.as_tensor(label_ids)
    yy, xx = torch.meshgrid(torch.arange(float(SIZE)), torch.arange(float(SIZE)), indexing="ij")
    freq, angle, color = protos["freq"][lab], protos["angle"][lab], protos["color"][lab]
    phase = torch.rand(n, generator=gen) * 2 * torch.pi
    coord = xx[None] * torch.cos(angle)[:, None, None] + yy[None] * torch.sin(angle)[:, None, None]
    img = 0.2 * torch.sin(2 * torch.pi * freq[:, None, None] * coord / SIZE + phase[:, None, None])[:, None]
    img = img * color[:, :, None, None]
    coarse = torch.rand(n, 3, 4, 4, generator=gen) - 0.5
    img += 0.4 * torch.nn.functional.interpolate(coarse, size=SIZE, mode="bilinear", align_corners=False)
    img += 0.5 + 0.06 * torch.randn(n, 3, SIZE, SIZE, generator=gen)
    return (img.clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()


def _jpeg(arr: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def synthesize_archive(
    path: str | os.PathLike,
    classes: int = 200,
    per_class: int = 10,
    val_per_class: int = 2,
    n_test: int = 20,
    seed: int = 0,
) -> Path:
    """Write a synthetic tiny-imagenet-200.zip in the official layout with real 64x64 JPEGs.

    Deterministic from `seed`; written to a temporary name then renamed.
    """
    import torch

    check_options(classes=classes, per_class=per_class, val_per_class=val_per_class, n_test=n_test, seed=seed)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    protos = {
        "freq": 1.0 + 7.0 * torch.rand(classes, generator=gen),
        "angle": torch.rand(classes, generator=gen) * torch.pi,
        "color": torch.nn.functional.normalize(torch.rand(classes, 3, generator=gen) * 2 - 1, dim=1),
    }
    wnids = [f"n{90000000 + i:08d}" for i in range(classes)]  # not real WordNet ids, on purpose
    top = FOLDER + "/"
    with atomic_file(path) as tmp:  # a whole archive or none
        with _Zip(tmp, "w", compression=zipfile.ZIP_STORED) as z:
            z.writestr(top + "wnids.txt", "".join(w + "\n" for w in wnids))
            z.writestr(top + "words.txt", "".join(f"{w}\tsynthetic class {i}\n" for i, w in enumerate(wnids)))
            chunk = max(1, 2048 // per_class)  # whole classes per render call: few, large tensor ops
            for c0 in range(0, classes, chunk):
                cs = np.arange(c0, min(c0 + chunk, classes))
                imgs = _render(np.repeat(cs, per_class), protos, gen).reshape(
                    len(cs), per_class, SIZE, SIZE, 3
                )
                for c, per in zip(cs, imgs):
                    w, boxes = wnids[c], []
                    for i, arr in enumerate(per):
                        name = f"{w}_{i}.JPEG"
                        z.writestr(f"{top}train/{w}/images/{name}", _jpeg(arr))
                        boxes.append(f"{name}\t0\t0\t63\t63\n")
                    z.writestr(f"{top}train/{w}/{w}_boxes.txt", "".join(boxes))
            val_labels = np.repeat(np.arange(classes), val_per_class)
            val_labels = val_labels[torch.randperm(len(val_labels), generator=gen).numpy()]
            ann = []
            for i, (c, arr) in enumerate(zip(val_labels, _render(val_labels, protos, gen))):
                z.writestr(f"{top}val/images/val_{i}.JPEG", _jpeg(arr))
                ann.append(f"val_{i}.JPEG\t{wnids[c]}\t0\t0\t63\t63\n")
            z.writestr(top + "val/val_annotations.txt", "".join(ann))
            test_labels = torch.randint(0, classes, (n_test,), generator=gen).numpy()
            for i, arr in enumerate(_render(test_labels, protos, gen)):
                z.writestr(f"{top}test/images/test_{i}.JPEG", _jpeg(arr))
            z.writestr(
                top + MARKER,
                json.dumps(
                    {
                        "generator": "hpml-lab synthetic Tiny ImageNet v1",
                        "seed": seed,
                        "classes": classes,
                        "per_class": per_class,
                        "val_per_class": val_per_class,
                        "n_test": n_test,
                        "note": "Synthetic 64x64 JPEGs with learnable class structure; not the real Tiny "
                        "ImageNet.",
                    },
                    indent=2,
                ),
            )
    return path
