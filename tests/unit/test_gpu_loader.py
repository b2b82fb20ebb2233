"""Tensor-resident loader: same augmentation distribution as the lab's PIL pipeline, same outputs at fixed
crop/flip, DataLoader-like iteration; and the fast-path options of train()."""

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms.v2 import functional as TF

from hpml_lab import fastpath, train
from hpml_lab.data import build_loader, cifar_files, lab_transform
from hpml_lab.data.gpu_loader import TensorLoader, augment_batch

cuda = pytest.mark.cuda


def coded_images(n: int) -> np.ndarray:
    """Images whose pixels say where they come from: R = 1 + 7*row, G = 1 + 7*col (padding reads 0)."""
    r = np.arange(32, dtype=np.uint8)
    img = np.zeros((32, 32, 3), np.uint8)
    img[..., 0] = 1 + 7 * r[:, None]
    img[..., 1] = 1 + 7 * r[None, :]
    return np.repeat(img[None], n, axis=0)


def recover(out: torch.Tensor):
    """Crop offsets into the padded image and flip flags, read back from un-normalised outputs (x 255)."""
    v = torch.round(out * 255).long()
    row16 = (v[:, 0, 16, 16] - 1) // 7  # source row of output row 16 = top + 12
    col16, col17 = (v[:, 1, 16, 16] - 1) // 7, (v[:, 1, 16, 17] - 1) // 7
    flip = col17 < col16
    top = row16 - 12
    left = torch.where(flip, col16 - 11, col16 - 12)  # flipped: output col c reads left + 31 - c - 4
    return top, left, flip


def check_uniform(top, left, flip):
    n = len(top)
    assert top.min() >= 0 and top.max() <= 8 and left.min() >= 0 and left.max() <= 8
    counts = torch.bincount(top * 9 + left, minlength=81).double()
    expected = n / 81
    chi2 = ((counts - expected) ** 2 / expected).sum().item()
    # 80 degrees of freedom: mean 80, sd 12.6; 150 is beyond the 99.999th percentile.
    assert (counts > 0).all() and chi2 < 150, chi2
    share = flip.double().mean().item()
    assert abs(share - 0.5) < 5 * (0.25 / n) ** 0.5, share


def test_tensor_augmentation_is_uniform_over_81_crops_and_flips_half():
    n = 81 * 150
    loader = TensorLoader(coded_images(n), [0] * n, batch_size=1000, mean=(0, 0, 0), std=(1, 1, 1), seed=1)
    out = torch.cat([x for x, _ in loader])
    check_uniform(*recover(out))


def test_pil_pipeline_has_the_same_distribution():
    n = 81 * 40  # slower per image; the same bounds scale with n
    t = lab_transform(True, mean=(0, 0, 0), std=(1, 1, 1))
    torch.manual_seed(0)
    img = Image.fromarray(coded_images(1)[0])
    out = torch.stack([t(img) for _ in range(n)])
    check_uniform(*recover(out))


def test_equal_to_pil_pipeline_at_fixed_crop_and_flip(cifar_root):
    ds = cifar_files.CIFAR10Files(cifar_root, train=True)
    loader = TensorLoader(ds.data[:18], ds.targets[:18], batch_size=18)
    top = torch.arange(18) % 9
    left = torch.flip(torch.arange(18), [0]) % 9
    flip = torch.arange(18) % 2 == 0
    out = augment_batch(loader.images, top, left, flip, loader.scale, loader.shift)
    plain = lab_transform(augment=False)
    ref = []
    for i in range(18):
        img = TF.crop(TF.pad(Image.fromarray(ds.data[i]), [4]), int(top[i]), int(left[i]), 32, 32)
        ref.append(plain(TF.horizontal_flip(img) if flip[i] else img))
    torch.testing.assert_close(out, torch.stack(ref), atol=1e-5, rtol=0)


def test_loader_iterates_like_a_dataloader(cifar_root, tiny_cfg):
    ds = cifar_files.CIFAR10Files(cifar_root)
    kept = TensorLoader(
        ds.data[:100], ds.targets[:100], 32, "cpu"
    )  # drop_last=False, as DataLoader's default
    assert len(kept) == 4 and kept.dropped == 0
    batches = list(kept)
    assert [x.shape[0] for x, _ in batches] == [32, 32, 32, 4]
    x, y = batches[0]
    assert x.dtype == torch.float32 and x.shape[1:] == (3, 32, 32) and y.dtype == torch.long
    seen = torch.cat([y for _, y in batches])
    assert sorted(seen.tolist()) == sorted(ds.targets[:100])  # a permutation
    first = torch.cat([y for _, y in kept])
    assert not torch.equal(seen, first)  # reshuffled each epoch
    # a run's loader: batches of one shape (static shapes for a compiled step), the partial batch left out and
    # said
    loader = TensorLoader.from_config(tiny_cfg.replace(subset=100, batch_size=32), "cpu")
    assert len(loader) == 3 and loader.dropped == 4
    batches = list(loader)
    assert [x.shape[0] for x, _ in batches] == [32, 32, 32]
    x, y = batches[0]
    assert set(torch.cat([y for _, y in batches]).tolist()) <= set(ds.targets[:100])
    # a set smaller than one batch keeps its one batch
    small = TensorLoader.from_config(tiny_cfg.replace(subset=20, batch_size=32), "cpu")
    assert [b[0].shape[0] for b in small] == [20] and small.dropped == 0
    again = TensorLoader.from_config(tiny_cfg.replace(subset=100, batch_size=32), "cpu")
    torch.testing.assert_close(next(iter(again))[0], x)  # seeded: reproducible
    noaug = TensorLoader.from_config(
        tiny_cfg.replace(subset=8, batch_size=8, augment=False, shuffle=False), "cpu"
    )
    ref = torch.stack(
        [lab_transform(False)(Image.fromarray(a)) for a in cifar_files.CIFAR10Files(cifar_root).data[:8]]
    )
    torch.testing.assert_close(next(iter(noaug))[0], ref, atol=1e-5, rtol=0)


def test_fast_path_options_off_by_default_and_train(tiny_cfg):
    from hpml_lab.config import ConfigError, RunConfig

    d = RunConfig()
    assert (d.channels_last, d.precision, d.compile, d.persistent_workers, d.loader) == (
        False,
        "fp32",
        False,
        False,
        "pil",
    )
    with pytest.raises(ConfigError, match="valid values: pil, tensor"):
        RunConfig(loader="gpu")
    run = train(
        tiny_cfg.replace(loader="tensor", channels_last=True, precision="bf16", batch_size=8), write=False
    )  # low precision on a CPU is slow: batch 8 keeps it a second
    assert len(run.batches) == 6 and np.isfinite(run.batches["loss"]).all()
    conv = next(m for m in run.model.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)


def test_compile_wraps_the_model_and_unwrap_gives_plain_keys(tiny_cfg):
    from hpml_lab import models

    m = models.build("resnet_tiny", num_classes=10)
    wrapped = fastpath.apply_to_model(tiny_cfg.replace(compile=True), m)
    assert wrapped is not m and fastpath.unwrap(wrapped) is m  # compiled lazily: nothing runs here
    assert list(fastpath.unwrap(wrapped).state_dict()) == list(m.state_dict())


def test_pil_loader_persistent_workers(tiny_cfg):
    loader = build_loader(tiny_cfg.replace(num_workers=1, persistent_workers=True), torch.device("cpu"))
    assert loader.persistent_workers
    assert not build_loader(tiny_cfg, torch.device("cpu")).persistent_workers


def test_an_epochs_crops_and_flips_are_drawn_at_once():
    """One draw of the epoch's order, offsets and flips (then sliced per batch), not one per batch."""
    from hpml_lab.data.gpu_loader import augment_batch, sample_params

    images = torch.randint(0, 256, (10, 3, 32, 32), dtype=torch.uint8)
    loader = TensorLoader(images, list(range(10)), batch_size=4, seed=3)
    batches = list(loader)
    g = torch.Generator().manual_seed(3)
    order = torch.randperm(10, generator=g)
    top, left, flip = sample_params(10, g)  # all 10 at once, right after the order
    assert [len(b[1]) for b in batches] == [4, 4, 2]
    for i, (x, y) in enumerate(batches):
        s = slice(4 * i, 4 * i + 4)
        assert torch.equal(y, order[s])
        want = augment_batch(images[order[s]], top[s], left[s], flip[s], loader.scale, loader.shift)
        torch.testing.assert_close(x, want, atol=0, rtol=0)


@cuda
def test_tensor_loader_on_cuda_matches_cpu(tiny_cfg):
    cpu = next(iter(TensorLoader.from_config(tiny_cfg, "cpu")))
    gpu = next(iter(TensorLoader.from_config(tiny_cfg, "cuda")))
    assert gpu[0].device.type == "cuda"
    torch.testing.assert_close(gpu[0].cpu(), cpu[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(gpu[1].cpu(), cpu[1])


@cuda
def test_fast_path_trains_on_cuda(tiny_cfg):
    run = train(
        tiny_cfg.replace(device="cuda", loader="tensor", channels_last=True, precision="bf16"), write=False
    )
    assert np.isfinite(run.batches["loss"]).all() and (run.epochs["train_s"] > 0).all()
