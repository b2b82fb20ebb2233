"""The Lab 5 scaling model, the all-reduce measurement under torchrun, and checkpointing's gradients."""
import math

import pytest
import torch

from hpml_lab import memory, models, scaling


def test_bus_bandwidth_and_ring_allreduce_model():
    assert scaling.bus_bandwidth(10.0, 2) == pytest.approx(10.0)
    assert scaling.bus_bandwidth(10.0, 4) == pytest.approx(15.0)
    assert scaling.allreduce_time(1e9, 1, 1e9) == 0.0
    assert scaling.allreduce_time(1e9, 4, 1e9) == pytest.approx(1.5)
    p = scaling.predict_epoch(0.1, n=2, per_gpu_batch=512, n_images=50_000, grad_bytes=1e8, busbw=1e9)
    assert p["steps"] == math.ceil(50_000 / 1024) and p["epoch_s"] == pytest.approx(p["steps"] * (0.1 + 0.1))


def test_model_reproduces_the_seeds_fitted_rows():
    t_step = 18.07 / math.ceil(50_000 / 512)
    one = scaling.predict_epoch(t_step, 1, 512, 50_000, scaling.RESNET18_GRAD_BYTES, 1e9)
    assert one["epoch_s"] == pytest.approx(18.07) and one["comm_s"] == 0


@pytest.mark.slow
def test_allreduce_measured_with_two_gloo_processes():
    df = scaling.measure_allreduce([4096, 400_000], nproc=2, repeats=3, warmup=1)
    assert list(df.world_size) == [2, 2] and set(df.backend) == {"gloo"}
    assert (df.time_s > 0).all() and (df.busbw_GBps == df.algbw_GBps).all()  # 2(n-1)/n = 1 at n = 2


def test_checkpointing_gives_every_parameter_a_gradient_and_the_same_one():
    torch.manual_seed(0)
    plain = models.build("resnet_tiny", num_classes=200, norm="none")
    ck = memory.Checkpointed(models.build("resnet_tiny", num_classes=200, norm="none"))
    ck.net.load_state_dict(plain.state_dict())
    x = torch.randn(4, 3, 64, 64)  # an input that does not require grad: the seed's trap
    plain(x).sum().backward()
    ck.train()
    ck(x).sum().backward()
    for (n, a), b in zip(plain.named_parameters(), ck.net.parameters()):
        assert b.grad is not None, n
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-5)


def test_activation_estimate_matches_the_seeds_first_activation():
    net = models.build("resnet18", num_classes=200, stem="imagenet")
    est = memory.activation_estimate(net, (3, 224, 224))
    assert est["first_activation_bytes"] == 112 * 112 * 64 * 4  # the seed's "3 MB per image"
    assert est["per_image_checkpointed_bytes"] < est["per_image_bytes"]
    assert memory.largest_batch(16e9, 1e6, 1e9) == 8192
