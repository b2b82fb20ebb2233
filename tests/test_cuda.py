"""Every CUDA path, checked where a GPU is (`pytest -m cuda`, the GPU check kit's tests stage); skipped elsewhere."""
import pickle
import subprocess
import sys
import time

import pytest
import torch

from hpml_lab import memory, models
from hpml_lab.config import RunConfig
from hpml_lab.profiling import DeviceTimer

pytestmark = pytest.mark.cuda


def test_cuda_events_agree_with_a_synchronized_wall_clock():
    dev = torch.device("cuda")
    torch.cuda._sleep(1000)  # warm the path
    torch.cuda.synchronize()
    timer = DeviceTimer(dev)
    t0 = time.perf_counter()
    timer.start()
    torch.cuda._sleep(200_000_000)  # a known spin on the GPU, about 0.1 s
    timer.stop()
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    assert timer.total() == pytest.approx(wall, rel=0.05)


def test_peak_memory_of_a_step_exceeds_its_activation_bytes():
    net = models.build("resnet18").cuda()
    peak = memory.cuda_peak_step(net, 64)["peak_allocated"]
    assert peak > memory.activation_bytes(net, 64, device="cuda") * 64 * 0.5


def test_out_of_memory_is_a_row_and_the_next_configuration_runs():
    rows = memory.cuda_max_batch(lambda: models.build("resnet_tiny"), [8, 2 ** 22])
    assert [r["status"] for r in rows] == ["ok", "oom"]
    assert memory.cuda_peak_step(models.build("resnet_tiny").cuda(), 8)["peak_allocated"] > 0


def test_bf16_autocast_loss_is_close_to_fp32():
    torch.manual_seed(0)
    net = models.build("resnet18").cuda().eval()
    x, y = torch.randn(32, 3, 32, 32, device="cuda"), torch.randint(0, 10, (32,), device="cuda")
    with torch.no_grad():
        full = torch.nn.functional.cross_entropy(net(x), y)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            half = torch.nn.functional.cross_entropy(net(x), y)
    assert half.float().item() == pytest.approx(full.item(), rel=0.03)


def test_compile_runs_a_training_step_on_cuda():
    from hpml_lab.training import build_model, build_optimizer, train_step

    cfg = RunConfig(model="resnet_tiny", compile=True, device="cuda")
    model = build_model(cfg, torch.device("cuda"))
    opt = build_optimizer(cfg, model.parameters())
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))
    _, loss, _ = train_step(model, opt, torch.nn.CrossEntropyLoss(), x, y, cfg, torch.device("cuda"))
    assert torch.isfinite(loss)


def test_torchrun_with_one_rank_on_cuda(cifar_root, tmp_path):
    # world size 1 starts no process group (NCCL is never started for one rank): the run is a plain CUDA run
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=1", "--rdzv-backend=c10d",
                        "--rdzv-endpoint=localhost:0", "-m", "hpml_lab", "--data-root", str(cifar_root),
                        "--results-dir", str(tmp_path), "--model", "resnet_tiny", "--epochs", "1", "--max-batches", "2",
                        "--batch-size", "8", "--num-workers", "0", "--device", "cuda", "--progress", "none"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    meta = next(tmp_path.rglob("meta.json")).read_text()
    assert '"status": "complete"' in meta and '"device": "cuda' in meta


def test_memory_snapshot_is_a_pickle_with_segments(tmp_path):
    path = memory.cuda_memory_snapshot(models.build("resnet_tiny").cuda(), 4, tmp_path / "snap.pickle")
    snap = pickle.loads(path.read_bytes())
    assert snap["segments"]
