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
    return RunConfig(
        task="test",
        data_root=str(cifar_root),
        results_dir=str(tmp_path / "results"),
        model="resnet_tiny",
        batch_size=32,
        epochs=2,
        max_batches=3,
        num_workers=0,
        device="cpu",
        progress="none",
    )


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA (marked cuda)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


_REAL = ("slurm", "browser", "cuda")  # tests that need a real outside part; the log says whether they ran


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line per marker of _REAL: how many of its tests passed, failed or were skipped (and why), so a CI
    log shows whether the Slurm, browser and CUDA tests ran for real here."""
    counts: dict[str, dict[str, int]] = {m: {} for m in _REAL}
    reasons: dict[str, set] = {m: set() for m in _REAL}
    for outcome in ("passed", "failed", "skipped", "error"):
        for rep in terminalreporter.stats.get(outcome, []):
            keywords = getattr(rep, "keywords", {}) or {}
            for m in _REAL:
                if m in keywords and (rep.when == "call" or outcome in ("skipped", "error")):
                    counts[m][outcome] = counts[m].get(outcome, 0) + 1
                    if outcome == "skipped" and isinstance(rep.longrepr, tuple):
                        reasons[m].add(str(rep.longrepr[2]).removeprefix("Skipped: "))
    for m in _REAL:
        if counts[m]:
            line = ", ".join(f"{n} {k}" for k, n in sorted(counts[m].items()))
            why = f" ({'; '.join(sorted(reasons[m]))})" if reasons[m] else ""
            terminalreporter.write_line(f"{m} tests: {line}{why}")
