"""DDP on CPU with gloo, launched by torchrun: the environment helper, and the equivalence test.

Two ranks at batch B/2 each, no BatchNorm, no augmentation, no shuffling, must
end with the weights of one process at batch B: DistributedSampler gives rank r
the items r, r+2, ..., so the two half-batches are exactly the single batch, and
DDP averages the two per-rank mean gradients into the full-batch mean gradient.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hpml_lab import distributed

ROOT = Path(__file__).resolve().parents[2]


def test_read_env_torchrun_slurm_and_single():
    tr = distributed.read_env(
        {
            "RANK": "3",
            "WORLD_SIZE": "4",
            "LOCAL_RANK": "1",
            "LOCAL_WORLD_SIZE": "2",
            "SLURM_PROCID": "0",
            "SLURM_NTASKS": "2",
        }
    )
    assert (tr.rank, tr.world_size, tr.local_rank, tr.local_world_size, tr.launcher) == (
        3,
        4,
        1,
        2,
        "torchrun",
    )
    assert tr.distributed and not tr.is_main
    # a task srun started for a step (srun sets the SLURM_STEP_* variables)
    sl = distributed.read_env(
        {
            "SLURM_PROCID": "5",
            "SLURM_NTASKS": "8",
            "SLURM_STEP_NUM_TASKS": "8",
            "SLURM_LOCALID": "1",
            "SLURM_STEP_TASKS_PER_NODE": "4(x2)",
            "SLURM_STEP_ID": "0",
        }
    )
    assert (sl.rank, sl.world_size, sl.local_rank, sl.local_world_size, sl.launcher) == (5, 8, 1, 4, "slurm")
    # A batch script (one Slurm task) is a single process, not a distributed run.
    one = distributed.read_env({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"})
    assert not one.distributed and one.is_main and one.launcher == "none"
    # The batch step of a 4-task allocation (where the notebook runs): SLURM_PROCID=0, SLURM_NTASKS=4, no step
    # variables. It is one process: joining a group there would wait for 3 ranks that never come.
    batch = distributed.read_env(
        {
            "SLURM_JOB_ID": "7",
            "SLURM_PROCID": "0",
            "SLURM_NTASKS": "4",
            "SLURM_NTASKS_PER_NODE": "2",
            "SLURM_NNODES": "2",
            "SLURM_LOCALID": "0",
        }
    )
    assert not batch.distributed and batch.world_size == 1


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1.5"])
def test_bad_process_group_timeout_is_one_clear_error(value):
    from hpml_lab.config import ConfigError

    with pytest.raises(ConfigError, match="HPML_DIST_TIMEOUT_S must be a whole number of seconds above 0"):
        distributed.timeout_seconds({"HPML_DIST_TIMEOUT_S": value})
    assert (
        distributed.timeout_seconds({}) == 300
        and distributed.timeout_seconds({"HPML_DIST_TIMEOUT_S": "60"}) == 60
    )


def test_single_process_helpers_are_identities():
    env = distributed.setup(torch.device("cpu"))
    assert not env.distributed and env.device == "cpu"
    t = torch.tensor([1.0, 2.0])
    assert torch.equal(distributed.all_reduce_sum(t), t)
    model = torch.nn.Linear(2, 2)
    assert distributed.wrap_model(model, env) is model
    wrapped, note = distributed.wrap_data_parallel(model, torch.device("cpu"))
    assert wrapped is model and "skipped" in note


def test_leave_returns_code_alone_and_exits_a_rank_with_its_output_flushed(tmp_path):
    assert distributed.leave(3) == 3  # this process never joined a group: nothing happens
    # A rank that joined a group ends by os._exit: the code survives, buffered output is not lost
    # and nothing queued for interpreter exit runs (finalization is what it skips).
    script = (
        "import atexit, sys; from hpml_lab import distributed as d; d._joined = True; "
        "atexit.register(lambda: print('finalized')); print('result', end=''); "
        "sys.stderr.write('warn'); sys.exit(d.leave(5))"
    )
    r = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**{k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert (r.returncode, r.stdout, r.stderr) == (5, "result", "warn")


def _run(cmd, tmp_path, env_extra=None):
    # faulthandler: should a rank die of a signal, its Python stack is in stderr
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
        "HPML_DIST_TIMEOUT_S": "120",
        "PYTHONFAULTHANDLER": "1",
        **(env_extra or {}),
    }
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)


def _one_process_vs_two_ranks(common: list, tmp_path) -> dict:
    """Train `common` once at batch 16 (task one) and with torchrun on 2 ranks at batch 8 (task ddp); the
    final weights must match. Returns the single process's weights. The single process is `python -m
    hpml_lab`'s main called in the test's process, on one thread as each rank (a process of its own only cost
    its imports)."""
    from hpml_lab.__main__ import main
    from hpml_lab.device import torch_threads

    with torch_threads(1):
        code = main(
            [*common, "--batch-size", "16", "--task", "one", "--save-model", str(tmp_path / "one.pt")]
        )
    assert code == 0
    ddp = _run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node=2",
            "--rdzv-backend=c10d",
            "--rdzv-endpoint=localhost:0",
            "-m",
            "hpml_lab",
            *common,
            "--batch-size",
            "8",
            "--task",
            "ddp",
            "--save-model",
            str(tmp_path / "ddp.pt"),
        ],
        tmp_path,
    )
    assert ddp.returncode == 0, ddp.stdout[-1500:] + ddp.stderr[-6000:]
    a, b = torch.load(tmp_path / "one.pt"), torch.load(tmp_path / "ddp.pt")
    assert a.keys() == b.keys()  # saved unwrapped: no "module." prefix
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=1e-4, atol=1e-5, msg=lambda m: f"{k}: {m}")
    return a


@pytest.mark.slow
def test_ddp_two_ranks_equal_one_process_at_double_batch(cifar_root, tmp_path):
    common = [
        "--model",
        "resnet_tiny",
        "--norm",
        "none",
        "--augment",
        "false",
        "--shuffle",
        "false",
        "--subset",
        "96",
        "--epochs",
        "2",
        "--max-batches",
        "3",
        "--num-workers",
        "0",
        "--device",
        "cpu",
        "--data-root",
        str(cifar_root),
        "--results-dir",
        str(tmp_path / "results"),
        "--progress",
        "none",
        "--lr",
        "0.05",
    ]
    a = _one_process_vs_two_ranks(common, tmp_path)
    # Only rank 0 wrote results, and the metrics are global (16 images a batch over both ranks).
    runs = list((tmp_path / "results" / "ddp").iterdir())
    assert len(runs) == 1 and runs[0].name.startswith("ddp2-")
    meta = json.loads((runs[0] / "meta.json").read_text())
    assert meta["status"] == "complete"
    assert meta["distributed"]["world_size"] == 2 and meta["distributed"]["backend"] == "gloo"
    assert meta["distributed"]["global_batch"] == 16
    import pandas as pd

    ep_ddp = pd.read_csv(runs[0] / "epochs.csv")
    ep_one = pd.read_csv(next((tmp_path / "results" / "one").iterdir()) / "epochs.csv")
    assert ep_ddp["images"].tolist() == ep_one["images"].tolist() == [48, 48]
    assert ep_ddp["loss"].values == pytest.approx(ep_one["loss"].values, rel=1e-4)
    assert ep_ddp["acc"].tolist() == ep_one["acc"].tolist()
    assert (
        ep_ddp["data_s"] + ep_ddp["train_s"] <= ep_ddp["total_s"] + 1e-6
    ).all()  # one rank's times, not mixed
    from hpml_lab import models

    torch.manual_seed(0)
    init = models.build("resnet_tiny", num_classes=10, norm="none").state_dict()
    assert any(not torch.allclose(init[k], a[k]) for k in a)  # training moved the weights


def test_distributed_sampler_shards_and_reshuffles_per_epoch():
    env1 = distributed.DistEnv(rank=1, world_size=2, launcher="torchrun")
    plain = distributed.sampler_kwargs(list(range(10)), shuffle=False, seed=0, env=env1)
    assert plain["shuffle"] is False and list(plain["sampler"]) == [1, 3, 5, 7, 9]
    s = distributed.sampler_kwargs(list(range(100)), shuffle=True, seed=0, env=env1)["sampler"]
    s.set_epoch(1)
    e1 = list(s)
    s.set_epoch(2)
    assert list(s) != e1 and len(e1) == 50  # without set_epoch every epoch would reuse one order
    assert distributed.sampler_kwargs(list(range(10)), True, 0, distributed.DistEnv()) == {}


@pytest.mark.slow
def test_tensor_loader_under_ddp_two_ranks_equal_one_process(cifar_root, tmp_path):
    """The fast path under torchrun: each rank holds the data and takes items r, r+2, ... of every epoch's
    permutation (shuffled here), so 2 ranks at batch 8 train exactly as 1 process at batch 16 (augment off).
    Compiled too (aot_eager: dynamo and AOTAutograd without a C++ build), DDP's wrapper compiled under
    torchrun."""
    common = [
        "--model",
        "resnet_tiny",
        "--norm",
        "none",
        "--augment",
        "false",
        "--loader",
        "tensor",
        "--compile",
        "true",
        "--compile-backend",
        "aot_eager",
        "--subset",
        "64",
        "--epochs",
        "2",
        "--max-batches",
        "0",
        "--device",
        "cpu",
        "--data-root",
        str(cifar_root),
        "--results-dir",
        str(tmp_path / "results"),
        "--progress",
        "none",
        "--lr",
        "0.05",
    ]
    _one_process_vs_two_ranks(common, tmp_path)
    import pandas as pd

    run = next((tmp_path / "results" / "ddp").iterdir())
    assert json.loads((run / "meta.json").read_text())["config"]["loader"] == "tensor"
    assert pd.read_csv(run / "epochs.csv")["images"].tolist() == [64, 64]  # 4 global batches of 16 an epoch


def test_tensor_loader_shards_like_distributed_sampler_and_augments_per_rank():
    from torch.utils.data.distributed import DistributedSampler

    from hpml_lab.data.gpu_loader import TensorLoader

    images = torch.randint(0, 256, (10, 3, 8, 8), dtype=torch.uint8)
    labels = torch.arange(10)
    one = TensorLoader(images, labels, 4, shuffle=True, augment=False, seed=3)
    ranks = [
        TensorLoader(images, labels, 2, shuffle=True, augment=False, seed=3, rank=r, world_size=3)
        for r in range(3)
    ]
    for _ in range(2):  # two epochs: the same permutation on every rank, each its own share of it
        order = one.epoch_order()
        shares = [t.epoch_order() for t in ranks]
        padded = torch.cat([order, order[:2]])  # 10 items over 3 ranks: padded to 12 with the first items
        for r, share in enumerate(shares):
            assert share.tolist() == padded[r::3].tolist()
    # The sharding rule is DistributedSampler's (not shuffled, the two agree item for item)
    for r in range(3):
        plain = TensorLoader(images, labels, 2, shuffle=False, augment=False, rank=r, world_size=3)
        assert plain.epoch_order().tolist() == list(DistributedSampler(range(10), 3, r, shuffle=False))
        assert len(plain) == 2  # ceil(ceil(10 / 3) / 2)
    # With augmentation on: reproducible per rank, different between ranks (one image repeated: only the crops
    # and flips can differ)
    same = images[:1].expand(10, -1, -1, -1).contiguous()
    aug = lambda r: [x for x, _ in TensorLoader(same, labels, 4, augment=True, seed=1, rank=r, world_size=2)]
    assert all(torch.equal(x, y) for x, y in zip(aug(0), aug(0)))
    assert not all(torch.equal(x, y) for x, y in zip(aug(0), aug(1)))
    with pytest.raises(ValueError, match="rank 2"):
        TensorLoader(images, labels, 4, rank=2, world_size=2)
