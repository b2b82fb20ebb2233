"""Data-loading study pieces: the file dataset, concurrent fetching inside a worker, the preload."""

import threading

import numpy as np
import torch
from torch.utils.data import DataLoader

from hpml_lab.data import cifar, lab_transform
from hpml_lab.studies.dataloading.dataloading_study import (
    FileImageDataset,
    ThreadedFileDataset,
    preload,
    time_passes,
    write_image_files,
)


class CountingThreaded(ThreadedFileDataset):
    """Records how many reads were waiting on 'storage' at the same time."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.active = self.peak = 0
        self.guard = threading.Lock()

    def read(self, i):
        with self.guard:
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            return super().read(i)
        finally:
            with self.guard:
                self.active -= 1


def test_files_round_trip_and_threads_fetch_concurrently(cifar_root, tmp_path):
    src = cifar.CIFAR10Files(cifar_root)
    paths = write_image_files(src.data[:12], src.targets[:12], tmp_path / "files")
    plain = FileImageDataset(paths, 0.0, transform=lab_transform(False))
    images, labels = preload(plain, threads=4)
    np.testing.assert_array_equal(images, src.data[:12])  # PNG is lossless
    assert labels == src.targets[:12]

    threaded = CountingThreaded(paths, 0.02, transform=lab_transform(False), threads=4)
    a = list(DataLoader(plain, batch_size=4, shuffle=False))
    b = list(DataLoader(threaded, batch_size=4, shuffle=False))  # __getitems__: one call per batch
    for (xa, ya), (xb, yb) in zip(a, b):
        torch.testing.assert_close(xa, xb)
        assert torch.equal(ya, yb)
    assert threaded.peak > 1  # the batch's files were waited on concurrently
    assert threaded.__getstate__()["_pool"] is None  # the pool is never pickled into workers


def test_time_passes_counts_every_batch(cifar_root, tmp_path):
    src = cifar.CIFAR10Files(cifar_root)
    paths = write_image_files(src.data[:10], src.targets[:10], tmp_path / "files")
    passes = time_passes(
        DataLoader(FileImageDataset(paths, latency_s=0.01), batch_size=4), 2, torch.device("cpu")
    )
    assert len(passes) == 2 and all(len(p["waits"]) == 3 for p in passes)
    # 10 files at 10 ms each in the main process: every pass waits at least 0.1 s in total, 40 ms per full batch
    assert all(sum(p["waits"]) >= 0.1 and min(p["waits"][:2]) >= 0.04 for p in passes)
