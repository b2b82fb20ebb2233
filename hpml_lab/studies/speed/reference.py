"""The speed ladder's outside reference: the plainest script that trains the lab's ResNet-18 on CIFAR-10 on
one device, in plain torch (nothing from hpml_lab), so the ladder shows how far the project is from what the
framework gives. Data resident on the device, the lab's augmentation per image, bf16 autocast, channels_last,
fused SGD, the step compiled (reduce-overhead: CUDA graphs); each epoch timed whole, synchronized at both
ends.

    python hpml_lab/studies/speed/reference.py --data data --device cuda --batch 1024 --epochs 4
Prints one JSON line: each epoch's seconds, images and mean loss (epoch 1 includes the compile).
"""

import argparse
import json
import pickle
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)


class Block(nn.Module):  # BasicBlock: two 3x3 convolutions, a 1x1 projection where the shape changes
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        project = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        self.sc = nn.Identity() if stride == 1 and cin == cout else project

    def forward(self, x):
        return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + self.sc(x))


def resnet(widths=(64, 128, 256, 512), blocks=(2, 2, 2, 2), classes=10):
    """ResNet-18 with the CIFAR stem (a 3x3 convolution, stride 1): 11,173,962 parameters, the lab's."""
    layers, cin = (
        [nn.Conv2d(3, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU()],
        widths[0],
    )
    for i, (w, n) in enumerate(zip(widths, blocks)):
        for j in range(n):
            layers.append(Block(cin, w, 2 if i and not j else 1))
            cin = w
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes))


def load(root, device, subset=0):
    """The five training batch files as uint8 N x 32 x 32 x 3 images and their labels, on the device."""
    files = [Path(root) / "cifar-10-batches-py" / f"data_batch_{i}" for i in range(1, 6)]
    parts = [pickle.loads(f.read_bytes(), encoding="bytes") for f in files]
    x = np.concatenate([p[b"data"] for p in parts]).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    y = np.concatenate([p[b"labels"] for p in parts])[: subset or None]
    return torch.from_numpy(x[: len(y)].copy()).to(device), torch.from_numpy(y).long().to(device)


def batches(x, y, batch):
    """One epoch of full batches, each image randomly cropped from its 4-pixel padding and flipped half the
    time."""
    dev, r = x.device, torch.arange(32, device=x.device)
    pad, order = F.pad(x, (0, 0, 4, 4, 4, 4)), torch.randperm(len(y), device=dev)
    mean, std = torch.tensor(MEAN, device=dev), torch.tensor(STD, device=dev)
    for i in range(len(y) // batch):
        idx = order[i * batch : (i + 1) * batch]
        top, left = torch.randint(0, 9, (2, batch, 1), device=dev)
        cols = torch.where(torch.rand(batch, 1, device=dev) < 0.5, left + 31 - r, left + r)
        img = pad[idx[:, None, None], (top + r)[:, :, None], cols[:, None, :]]  # B x 32 x 32 x 3
        yield (
            ((img.float() / 255 - mean) / std).permute(0, 3, 1, 2),
            y[idx],
        )  # NCHW view of NHWC: channels_last


def make_step(model, opt, mode="reduce-overhead", precision="bf16"):
    """forward + loss compiled (AOTAutograd compiles its backward), the fused optimizer eager; returns the
    loss."""
    dev = next(model.parameters()).device.type

    def forward(xb, yb):
        with torch.autocast(dev, torch.bfloat16, enabled=precision == "bf16"):
            return F.cross_entropy(model(xb), yb)

    fwd = forward if mode == "eager" else torch.compile(forward, mode=None if mode == "default" else mode)
    graphs = dev == "cuda" and mode in ("reduce-overhead", "max-autotune")

    def step(xb, yb):
        if graphs:
            torch.compiler.cudagraph_mark_step_begin()
        loss = fwd(xb, yb)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach().clone()

    return step


OPTIONS = {"data": "data", "device": "cuda", "batch": 512, "epochs": 4, "lr": 0.4, "subset": 0}
OPTIONS |= {"mode": "reduce-overhead", "precision": "bf16", "widths": "64,128,256,512", "blocks": "2,2,2,2"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for k, v in OPTIONS.items():
        parser.add_argument(f"--{k}", type=type(v), default=v)
    args = parser.parse_args(argv)
    dev, sizes = (
        torch.device(args.device),
        [[int(v) for v in s.split(",")] for s in (args.widths, args.blocks)],
    )
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    x, y = load(args.data, dev, args.subset)
    model = resnet(*sizes).to(dev, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4, fused=True)
    step, epochs = make_step(model, opt, args.mode, args.precision), []
    for _ in range(args.epochs):
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0, total, n = time.perf_counter(), torch.zeros((), device=dev), 0
        for xb, yb in batches(x, y, args.batch):
            total, n = total + step(xb, yb), n + len(yb)
        loss = total.item() / max(1, n // args.batch)  # waits for the device: the epoch's end
        epochs.append({"seconds": time.perf_counter() - t0, "images": n, "loss": loss})
    print(json.dumps({**vars(args), "epochs": epochs}))


if __name__ == "__main__":
    main()
