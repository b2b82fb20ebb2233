"""Shared fixtures: a small synthetic CIFAR-10 written once per session, and tiny configs.

Tests marked `cuda` run only where CUDA is (`pytest -m cuda` selects them: the GPU check kit's tests stage);
elsewhere they are skipped with that reason."""
from __future__ import annotations

import pytest
import torch

from hpml_lab.config import RunConfig
from hpml_lab.data import cifar


@pytest.fixture(scope="session")
def cifar_root(tmp_path_factory):
    """A synthetic CIFAR-10 in the real format with 1,000 + 200 images (seconds to write)."""
    root = tmp_path_factory.mktemp("data")
    cifar.synthesize(root, seed=0, n_train=1000, n_test=200)
    return root


@pytest.fixture
def tiny_cfg(cifar_root, tmp_path):
    """A config that trains the tiny ResNet for a few CPU batches and writes results under tmp_path."""
    return RunConfig(task="test", data_root=str(cifar_root), results_dir=str(tmp_path / "results"),
                     model="resnet_tiny", batch_size=32, epochs=2, max_batches=3, num_workers=0,
                     device="cpu", progress="none")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA (marked cuda)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
