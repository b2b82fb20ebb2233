import pytest

from hpml_lab.config import ConfigError, RunConfig


def test_defaults_are_the_lab_settings():
    cfg = RunConfig()
    assert (cfg.model, cfg.optimizer, cfg.lr, cfg.momentum, cfg.weight_decay) == ("resnet18", "sgd", 0.1, 0.9, 5e-4)
    assert (cfg.batch_size, cfg.epochs, cfg.num_workers) == (128, 5, 2)


def test_unknown_key_names_it_and_lists_valid_ones():
    with pytest.raises(ConfigError) as e:
        RunConfig.from_dict({"batchsize": 64})
    msg = str(e.value)
    assert "'batchsize'" in msg and "batch_size" in msg and "\n" not in msg


@pytest.mark.parametrize("params", [{"batch_size": "64"}, {"epochs": 2.5}, {"augment": 1}, {"lr": "fast"}])
def test_wrong_type_is_rejected(params):
    with pytest.raises(ConfigError, match="must be"):
        RunConfig(**params)


@pytest.mark.parametrize("params, word", [
    ({"batch_size": 0}, "at least 1"), ({"optimizer": "sgdd"}, "valid values"), ({"lr": -0.1}, "positive"),
    ({"num_workers": -1}, "0 or more"), ({"model": "resnet19"}, "valid models"), ({"momentum": 1.5}, "below 1"),
])
def test_bad_value_is_rejected(params, word):
    with pytest.raises(ConfigError, match=word):
        RunConfig(**params)


def test_coercion_from_command_line_strings():
    cfg = RunConfig.from_dict({"batch_size": "64", "augment": "false", "lr": "1e-3", "device": "cpu"}, coerce=True)
    assert cfg.batch_size == 64 and cfg.augment is False and cfg.lr == 0.001
    with pytest.raises(ConfigError, match="true or false"):
        RunConfig.from_dict({"augment": "maybe"}, coerce=True)


def test_int_is_accepted_for_float_and_frozen():
    cfg = RunConfig(lr=1)
    assert isinstance(cfg.lr, float)
    with pytest.raises(Exception):
        cfg.lr = 0.5  # type: ignore[misc]


def test_run_id_is_stable_and_ignores_output_location():
    a = RunConfig(epochs=2)
    assert a.resolved_run_id() == RunConfig(epochs=2, results_dir="elsewhere").resolved_run_id()
    assert a.resolved_run_id() != RunConfig(epochs=3).resolved_run_id()
