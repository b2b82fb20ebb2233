"""The Lab 5 scaling model, the all-reduce measurement under torchrun, and checkpointing's gradients."""

import math

import pytest

from hpml_lab import memory, models
from hpml_lab.studies.lab5 import scaling


def test_bus_bandwidth_and_ring_allreduce_model():
    assert scaling.bus_bandwidth(10.0, 2) == pytest.approx(10.0)
    assert scaling.bus_bandwidth(10.0, 4) == pytest.approx(15.0)
    assert scaling.allreduce_time(1e9, 1, 1e9) == 0.0
    assert scaling.allreduce_time(1e9, 4, 1e9) == pytest.approx(1.5)
    p = scaling.predict_epoch(0.1, n=2, per_gpu_batch=512, n_images=50_000, grad_bytes=1e8, busbw=1e9)
    assert p["steps"] == math.ceil(50_000 / 1024) and p["epoch_s"] == pytest.approx(p["steps"] * (0.1 + 0.1))


def test_strong_scaling_speedup_is_bounded_by_workers_and_falls_with_bandwidth():
    def speedup(n, busbw):
        one = scaling.predict_epoch(0.1, 1, 512, 50_000, scaling.RESNET18_GRAD_BYTES, busbw)["epoch_s"]
        return one / scaling.predict_epoch(0.1, n, 512, 50_000, scaling.RESNET18_GRAD_BYTES, busbw)["epoch_s"]

    assert speedup(4, 1e15) == pytest.approx(
        4 * 98 / 100, rel=1e-3
    )  # steps: ceil(50000/512)=98 vs ceil(50000/2048)=25
    assert speedup(4, 1e9) < speedup(4, 1e10) < speedup(4, 1e15) < 4
    assert speedup(2, 1e9) < speedup(4, 1e9)


@pytest.mark.slow
def test_allreduce_measured_with_two_gloo_processes():
    df = scaling.measure_allreduce([4096, 400_000], nproc=2, repeats=3, warmup=1, device="cpu")
    assert list(df.world_size) == [2, 2] and set(df.backend) == {"gloo"}
    assert (df.time_s > 0).all() and (df.busbw_GBps == df.algbw_GBps).all()  # 2(n-1)/n = 1 at n = 2


def test_first_activation_matches_the_seeds_back_of_envelope():
    net = models.build("resnet18", num_classes=200, stem="imagenet")
    assert memory.first_activation_bytes(net, 224) == 112 * 112 * 64 * 4  # the seed's "3 MB per image"


def test_allreduce_fit_recovers_latency_and_bandwidth_and_falls_back_on_noise():
    import pandas as pd

    from hpml_lab.studies.lab5 import scaling

    sizes = [1e5, 1e6, 1e7]
    exact = pd.DataFrame(
        {
            "world_size": 2,
            "bytes": sizes,
            "time_s": [50e-6 + b / 2e9 for b in sizes],
            "busbw_GBps": [b / (50e-6 + b / 2e9) / 1e9 for b in sizes],
        }
    )
    fit = scaling.fit_allreduce(exact)
    assert (
        fit["method"] == "fit"
        and abs(fit["latency_s"] - 50e-6) < 1e-9
        and abs(fit["busbw_Bps"] / 2e9 - 1) < 1e-6
    )
    noisy = exact.assign(time_s=[3e-3, 1e-3, 2e-3])  # larger messages faster: no usable line
    fb = scaling.fit_allreduce(noisy)
    assert fb["method"].startswith("largest message") and fb["latency_s"] == 3e-3 and fb["busbw_Bps"] > 0


def test_allreduce_note_names_a_link_peak_only_for_an_nccl_measurement():
    import types

    import pandas as pd

    def res(backend, on_gpu, workers):
        return types.SimpleNamespace(
            allreduce=pd.DataFrame({"backend": [backend]}), on_gpu=on_gpu, workers_here=workers
        )

    assert "450 GB/s" in scaling.allreduce_note(res("nccl", True, 4), "NVIDIA H100 80GB HBM3")
    one_gpu = scaling.allreduce_note(
        res("gloo", True, 1), "NVIDIA H100 80GB HBM3"
    )  # gloo between CPU processes
    assert "GB/s" not in one_gpu and "gloo" in one_gpu and "inherit" in one_gpu
    assert scaling.allreduce_note(res("gloo", False, 2), None).startswith("No link peak applies")


def test_link_peak_matches_gpu_names_as_whole_words():
    assert [
        scaling.link_peak(n)
        for n in (
            "NVIDIA H100 80GB HBM3",
            "NVIDIA A100-SXM4-80GB",
            "Tesla V100-SXM2-16GB",
            "NVIDIA L4",
            "NVIDIA L40S",
            "NVIDIA H100 NVL",
            None,
        )
    ] == [450.0, 300.0, 150.0, 32.0, None, None, None]


def test_q1_counts_full_batch_steps_only(tiny_cfg):
    """An epoch of 40 images at batch 16 ends with an 8-image step: it is no step of batch 16, so Q1 leaves it out
    (counted, it read as twice the throughput)."""
    from hpml_lab.studies.lab5.scaling import compute_sweep

    q1 = compute_sweep(
        tiny_cfg.replace(task="lab5", subset=40, max_batches=0, batch_size=16), [16], n_images=160
    )
    row = q1.iloc[0]
    assert row.status == "ok" and row.batches_timed == 2 and len(row.step_times_s.split(";")) == 2
