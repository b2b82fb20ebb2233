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


# Parameter counts where the lab or a reference publishes them (10 classes unless said).
KNOWN = {
    ("resnet18", 10): 11_173_962,
    ("resnet18_adjusted", 100): 746_436,
    ("resnet34_adjusted", 100): 1_393_476,
    ("resnet50_adjusted", 100): 1_581_700,
    ("revnet38", 100): 476_020,
    ("revnet62", 100): 796_468,
    ("revnet110", 100): 1_437_364,
    ("revnet218", 100): 2_879_380,
}


@pytest.mark.parametrize("name", models.available())
def test_every_registered_model_builds_trains_one_step_and_counts(name):
    torch.manual_seed(0)
    net = models.build(name)
    x, y = torch.randn(2, 3, 32, 32), torch.tensor([1, 7])
    out = net(x)
    assert out.shape == (2, 10)
    torch.nn.functional.cross_entropy(out, y).backward()
    assert all(p.grad is not None for p in net.parameters() if p.requires_grad)
    for (known, classes), count in KNOWN.items():
        if known == name:
            assert models.count_parameters(models.build(name, num_classes=classes)) == count


def test_known_counts_name_registered_models():
    assert {name for name, _ in KNOWN} <= set(models.available())


def test_what_the_registry_knows_of_each_class_without_importing_it_is_the_class():
    """models.CLASSES lets a configuration be checked without torch; each entry must say what its class
    does."""
    import inspect

    for cls, (module, stems, arguments) in models.CLASSES.items():
        net = models.network_class(cls)
        assert net.__module__ == module and net.STEMS == stems, cls
        assert arguments == tuple(p for p in inspect.signature(net).parameters), cls
    assert models.stems("revnet38") == ("cifar",) and models.accepts("resnet18", "checkpoint_segments")
    assert not models.accepts("revnet38", "checkpoint_segments")
    with pytest.raises(ValueError, match="unknown class 'Net'"):
        models.register("mine", "Net")
