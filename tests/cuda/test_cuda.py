"""Every CUDA path, checked where a GPU is (`pytest -m cuda`, the GPU check kit's tests stage); skipped
elsewhere."""

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


def test_peak_minus_resident_memory_of_a_step_covers_its_activations():
    net = models.build("resnet18").cuda()
    step = memory.cuda_peak_step(net, 64)
    # what the step adds above the weights, gradients and optimizer state it starts from holds at least the
    # tensors saved for backward (measured by the saved-tensor hooks)
    assert (
        step["peak_allocated"] - step["resident_before"]
        >= memory.activation_bytes(net, 64, device="cuda") * 64
    )


def test_out_of_memory_is_raised_inside_the_model_and_is_a_row():
    free, _ = torch.cuda.mem_get_info()
    big = int(0.4 * free) // (
        3 * 32 * 32 * 4
    )  # its input alone takes 40% of free memory: the step's OOM is the model's
    per_sample = memory.activation_bytes(models.build("resnet_tiny").cuda(), 4, device="cuda")
    assert big * per_sample > free  # the activations cannot fit beside it
    rows = memory.cuda_max_batch(lambda: models.build("resnet_tiny"), [8, big])
    assert [r["status"] for r in rows] == ["ok", "oom"] and "out of memory" in rows[1]["error"].lower()
    assert (
        memory.cuda_peak_step(models.build("resnet_tiny").cuda(), 8)["peak_allocated"] > 0
    )  # memory was freed


def test_bf16_autocast_loss_is_close_to_fp32():
    torch.manual_seed(0)
    net = models.build("resnet18").cuda().eval()
    x, y = torch.randn(32, 3, 32, 32, device="cuda"), torch.randint(0, 10, (32,), device="cuda")
    with torch.no_grad():
        full = torch.nn.functional.cross_entropy(net(x), y)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            half = torch.nn.functional.cross_entropy(net(x), y)
    assert half.float().item() == pytest.approx(full.item(), rel=0.03)


def test_compile_builds_a_graph_and_runs_a_training_step_on_cuda():
    import torch._dynamo
    from torch._dynamo.utils import counters

    from hpml_lab.step import build_model, build_optimizer, train_step

    torch._dynamo.reset()
    counters.clear()
    cfg = RunConfig(model="resnet_tiny", compile=True, device="cuda")
    model = build_model(cfg, torch.device("cuda"))
    opt = build_optimizer(cfg, model.parameters())
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))
    _, loss, _ = train_step(model, opt, torch.nn.CrossEntropyLoss(), x, y, cfg, torch.device("cuda"))
    assert torch.isfinite(loss)
    assert counters["stats"]["unique_graphs"] >= 1  # a graph was captured and compiled, not an eager fallback


def test_fast_path_step_runs_convolutions_in_bf16_on_channels_last_input():
    from hpml_lab.step import build_model, build_optimizer, train_step

    cfg = RunConfig(model="resnet_tiny", precision="bf16", channels_last=True, device="cuda")
    model = build_model(cfg, torch.device("cuda"))
    seen = []
    conv = next(m for m in model.modules() if isinstance(m, torch.nn.Conv2d))
    conv.register_forward_hook(
        lambda m, inp, out: seen.append(
            (
                out.dtype,
                inp[0].is_contiguous(memory_format=torch.channels_last),
                m.weight.is_contiguous(memory_format=torch.channels_last),
            )
        )
    )
    opt = build_optimizer(cfg, model.parameters())
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))
    train_step(model, opt, torch.nn.CrossEntropyLoss(), x, y, cfg, torch.device("cuda"))
    assert seen == [(torch.bfloat16, True, True)]


def test_the_data_sheet_peak_is_the_one_for_this_gpu():
    from hpml_lab import flops

    name = torch.cuda.get_device_name(0)
    sheet = flops.data_sheet(name)
    pk = flops.peak(torch.device("cuda"), "bf16")
    if (
        sheet is None or "bf16" not in sheet[0]
    ):  # outside the table, or no bf16 units: measured, never borrowed
        assert pk.measured and pk.source.startswith("measured")
    else:
        assert not pk.measured and pk.tflops == sheet[0]["bf16"] and pk.source == f"{sheet[1]}: {name}"
        if "H100" in name:
            assert "H100" in sheet[1] and ("PCIe" in sheet[1]) == ("PCIe" in name)


def test_timing_invariants_hold_with_sync_each_step_off(cifar_root, tmp_path):
    from hpml_lab.training import train

    cfg = RunConfig(
        task="t",
        data_root=str(cifar_root),
        results_dir=str(tmp_path),
        model="resnet_tiny",
        batch_size=32,
        epochs=2,
        max_batches=5,
        num_workers=0,
        device="cuda",
        progress="none",
        loader="tensor",
        sync_each_step=False,
    )
    run = train(cfg, write=False)
    ep = run.epochs
    assert (ep["train_s"] > 0).all() and (ep["data_s"] >= 0).all()
    # the fast path's timing: the device's time over intervals of log_every steps, which the host's queuing of
    # the batches (data_s) overlaps, so each is within the epoch's wall time, not their sum
    assert run.meta["timing"] == "interval"
    for col in ("train_s", "data_s"):
        assert (ep[col] <= ep["total_s"] * 1.001 + 1e-4).all(), ep[["data_s", "train_s", "total_s"]]
    assert len(run.batches) == 10 and (run.batches["train_s"] > 0).all()


def _fast(cifar_root, tmp_path, **changes):
    return RunConfig(
        task="t",
        data_root=str(cifar_root),
        results_dir=str(tmp_path),
        model="resnet_tiny",
        batch_size=64,
        num_workers=0,
        device="cuda",
        progress="none",
        loader="tensor",
        channels_last=True,
        **changes,
    )


def _step(cfg, compile):
    from hpml_lab.step import Step, build_model, build_optimizer

    torch.manual_seed(0)
    model = build_model(cfg, torch.device("cuda"), compile=False)
    opt = build_optimizer(cfg, model.parameters())
    return Step(model, opt, torch.nn.CrossEntropyLoss(), cfg, torch.device("cuda"), compile=compile)


def test_the_graphed_step_makes_no_host_sync(cifar_root, tmp_path):
    """CUDA's own check: any synchronizing call in the steady-state step raises
    (torch.cuda.set_sync_debug_mode)."""
    from hpml_lab.data.gpu_loader import TensorLoader

    cfg = _fast(cifar_root, tmp_path, precision="bf16", compile=True, compile_mode="reduce-overhead")
    step = _step(cfg, compile=True)
    batches = list(TensorLoader.from_config(cfg, torch.device("cuda")))
    for x, y in batches[:4]:  # compile, record, capture the CUDA graphs
        step(x, y)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        kept = [step(x, y) for x, y in batches[4:] + batches[:4]]
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert all(torch.isfinite(loss) for loss, _ in kept)
    seen = step.describe()
    assert seen["cuda_graphs"] and seen["graph_breaks"] == 0 and seen["recompiles"] == 0
    assert seen["optimizer_kernel"] == "fused"


def _take_state(dst, src):
    """`dst` (an eager Step) takes `src`'s weights, buffers and momentum: the next step of each starts from
    the same place."""
    with torch.no_grad():
        for a, b in zip(dst.model.parameters(), src.model.parameters()):
            a.copy_(b)
            momentum = src.optimizer.state.get(b, {}).get("momentum_buffer")
            if momentum is not None:
                dst.optimizer.state[a]["momentum_buffer"] = momentum.detach().clone()
        for a, b in zip(dst.model.buffers(), src.model.buffers()):
            a.copy_(b)


def test_the_graphed_step_updates_the_weights_as_the_eager_step_does(cifar_root, tmp_path):
    """The issue's compiled run at lr 0.4 sat at chance: one graphed step must move every weight as the eager
    one (fp32: TF32 off, so the two differ by rounding), and so must each later one, the replayed CUDA graphs
    among them, taken from the same weights and momentum. Compared step by step: over several steps at lr 0.4
    the two runs' rounding differences grow, and a check after several passed or failed by the backend flags
    an earlier test had left (an H100, 2026-11-28: 5.9% apart alone, under 5% after the file's other
    tests)."""
    from hpml_lab.data.gpu_loader import TensorLoader
    from hpml_lab.flops import tf32

    cfg = _fast(cifar_root, tmp_path, lr=0.4)
    with tf32(False):
        eager, graphed = (
            _step(cfg, False),
            _step(cfg.replace(compile=True, compile_mode="reduce-overhead"), True),
        )
        batches = list(TensorLoader.from_config(cfg, torch.device("cuda")))[:6]
        start = [p.detach().clone() for p in eager.model.parameters()]
        le, _ = eager(*batches[0])
        lg, _ = graphed(*batches[0])
        torch.testing.assert_close(lg, le, rtol=1e-4, atol=1e-5)
        for p0, pe, pg in zip(start, eager.model.parameters(), graphed.model.parameters()):
            assert (pg - pe).norm() <= 1e-3 * (pe - p0).norm()
        # the first calls of a CUDA-graph tree run eagerly (its warm-up), the later ones replay the captured
        # graphs: a stale or skipped replay moves the weights otherwise than the eager step from where they
        # are
        for k, (x, y) in enumerate(batches[1:], start=2):
            _take_state(eager, graphed)
            before = [p.detach().clone() for p in graphed.model.parameters()]
            lg, _ = graphed(x, y)
            le, _ = eager(x, y)
            torch.testing.assert_close(lg, le, rtol=1e-3, atol=1e-5, msg=f"step {k}")
            dg = torch.cat([(p - b).flatten() for p, b in zip(graphed.model.parameters(), before)])
            de = torch.cat([(p - b).flatten() for p, b in zip(eager.model.parameters(), before)])
            assert (dg - de).norm() <= 2e-2 * de.norm(), k  # a skipped replay: 1 (no update)


@pytest.mark.parametrize("optimizer", ["sgd", "sgd_nesterov", "adagrad", "adadelta", "adam"])
def test_every_optimizer_steps_on_the_fast_path(cifar_root, tmp_path, optimizer):
    """C6 sweeps every optimizer on the fast path at the gpu profile: each must build with the kernel
    fastpath.optimizer_options picks on CUDA and take steps (Adagrad's fused kernel is a CPU's only)."""
    from hpml_lab.data.gpu_loader import TensorLoader

    cfg = _fast(cifar_root, tmp_path, optimizer=optimizer)
    step = _step(cfg, False)
    for x, y in list(TensorLoader.from_config(cfg, torch.device("cuda")))[:3]:
        loss, _ = step(x, y)
    assert torch.isfinite(loss).item()
    assert step.describe()["optimizer_kernel"] in ("fused", "foreach")


def test_a_graphed_run_is_one_graph_for_the_whole_run_and_learns(cifar_root, tmp_path):
    from hpml_lab.training import train

    cfg = _fast(
        cifar_root, tmp_path, precision="bf16", compile=True, compile_mode="reduce-overhead", epochs=4
    )
    run = train(cfg, write=False)
    seen = run.meta["step"]
    assert (seen["compiled"], seen["cuda_graphs"], seen["compile_mode"]) == (True, True, "reduce-overhead")
    assert seen["graph_breaks"] == 0 and seen["recompiles"] == 0  # batches of one shape: no partial batch
    assert run.meta["loader_dropped"] == 1000 % 64 and (run.batches["images"] == 64).all()
    eager = train(cfg.replace(compile=False), write=False)
    assert (
        "did_not_learn" in eager.meta or "did_not_learn" not in run.meta
    )  # eager learned: so did the graphed run
    assert run.epochs["loss"].iloc[-1] < run.epochs["loss"].iloc[0]


def test_torchrun_with_one_rank_on_cuda(cifar_root, tmp_path):
    # world size 1 starts no process group (NCCL is never started for one rank): the run is a plain CUDA run
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node=1",
            "--rdzv-backend=c10d",
            "--rdzv-endpoint=localhost:0",
            "-m",
            "hpml_lab",
            "--data-root",
            str(cifar_root),
            "--results-dir",
            str(tmp_path),
            "--model",
            "resnet_tiny",
            "--epochs",
            "1",
            "--max-batches",
            "2",
            "--batch-size",
            "8",
            "--num-workers",
            "0",
            "--device",
            "cuda",
            "--progress",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    meta = next(tmp_path.rglob("meta.json")).read_text()
    assert '"status": "complete"' in meta and '"device": "cuda' in meta


def test_memory_snapshot_is_a_pickle_with_segments(tmp_path):
    path = memory.cuda_memory_snapshot(models.build("resnet_tiny").cuda(), 4, tmp_path / "snap.pickle")
    snap = pickle.loads(path.read_bytes())
    assert snap["segments"]
