"""Sanity flags from canned runs: a diverged run, a trend, n=2, a busy machine, a stand-in model, a live plot."""
import math

from hpml_lab import sanity
from hpml_lab.config import RunConfig


def test_diverged_run_is_flagged_and_a_learning_one_is_not():
    assert sanity.diverged([2.3, 5.0, 9.7, 12.1, 15.4], 10).kind == "diverged"  # c2's smoke run
    assert sanity.diverged([2.3, 2.1, 1.9, 1.8, 1.6], 10) is None
    assert "NaN" in sanity.diverged([2.3, math.nan], 10).message
    assert sanity.at_chance([2.30, 2.31, 2.30], 10) and not sanity.at_chance([2.3, 1.2, 1.1], 10)


def test_growing_epochs_are_no_steady_state():
    f = sanity.trend([2.31, 3.71, 8.83, 12.0])  # c5's epochs
    assert f.kind == "no steady state" and "growing" in f.message
    assert sanity.trend([2.31, 3.71, 8.83]).kind == "no steady state"  # two epochs after warm-up, 2.4x apart
    assert sanity.trend([2.31, 3.71]) is None  # one epoch after warm-up: nothing to trend
    assert sanity.trend([1.9, 2.3, 1.7]) is None  # two epochs 26% apart: noise, not a trend
    assert sanity.trend([1.9, 2.3, 1.7, 1.4]).kind == "no steady state"  # three, each 10% lower
    assert sanity.trend([3.0, 1.00, 1.02, 0.99]) is None  # warm-up then steady


def test_too_few_samples():
    assert sanity.too_few(2).kind == "too few samples" and sanity.too_few(3) is None


def test_busy_machine():
    assert sanity.busy({"load1": 3.5, "cores": 2, "steal_pct": 0}).kind == "machine busy"
    assert sanity.busy({"load1": 0.4, "cores": 2, "steal_pct": 25.0}).kind == "machine busy"
    assert sanity.busy({"load1": 0.4, "cores": 2, "steal_pct": 1.0}) is None
    load = sanity.machine_load(0.01)
    assert load["cores"] >= 1 and "load1" in load and "steal_pct" in load


def test_stand_in_and_settings_that_differ():
    cfg = RunConfig(model="resnet_tiny", batch_size=32, lr=0.025, max_batches=6, epochs=3)
    kinds = [f.kind for f in sanity.run_flags(cfg)]
    assert kinds == ["stand-in model", "settings differ"]
    rows = {r["setting"]: (r["ran"], r["lab"]) for r in sanity.ran_vs_lab(cfg)}
    assert rows == {"model": ("resnet_tiny", "resnet18"), "lr": ("0.025", "0.1"), "batch_size": ("32", "128"),
                    "epochs": ("3", "5"), "max_batches": ("6", "all")}
    assert sanity.run_flags(RunConfig()) == []  # the lab's own settings raise nothing
    # a live plot's redraws count in total_s: flagged from what the run did (meta.json), else from the config
    assert [f.kind for f in sanity.run_flags(RunConfig(progress="plot"))] == ["live plot"]
    assert sanity.run_flags(RunConfig(progress="plot"), meta={"progress": "bar"}) == []  # outside a kernel: a bar
    assert [f.kind for f in sanity.run_flags(RunConfig(), meta={"progress": "plot"})] == ["live plot"]
