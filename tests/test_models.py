import pytest
import torch

from hpml_lab import models


def test_resnet18_parameter_count_and_output_shape():
    net = models.build("resnet18")
    assert models.count_parameters(net) == 11_173_962
    net.eval()
    with torch.no_grad():
        assert net(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_resnet18_has_the_lab_layout():
    net = models.build("resnet18")
    convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    shortcuts = [m for m in convs if m.kernel_size == (1, 1)]
    assert len(convs) == 20 and len(shortcuts) == 3  # 17 3x3 convs + 3 projection shortcuts
    assert net.linear.in_features == 512


def test_no_batchnorm_variant_has_no_bn_layers():
    net = models.build("resnet18", norm="none")
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in net.modules())
    assert net(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_registry_entries_share_one_class():
    assert {"resnet18", "resnet34", "resnet50"} <= set(models.available())
    assert type(models.build("resnet34")) is type(models.build("resnet18"))
    with pytest.raises(ValueError, match="valid models"):
        models.build("vgg16")


def test_imagenet_stem_accepts_64px():
    net = models.build("resnet_tiny", num_classes=200, stem="imagenet").eval()
    with torch.no_grad():
        assert net(torch.randn(1, 3, 64, 64)).shape == (1, 200)
