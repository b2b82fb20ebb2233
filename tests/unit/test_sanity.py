"""Sanity flags from canned runs: a diverged run, a trend, n=2, a busy machine, a stand-in model, a live
plot."""

import math

from hpml_lab import sanity
from hpml_lab.answers import Number
from hpml_lab.config import RunConfig


def test_diverged_run_is_flagged_and_a_learning_one_is_not():
    assert sanity.diverged([2.3, 5.0, 9.7, 12.1, 15.4], 10).kind == "diverged"  # c2's smoke run
    assert sanity.diverged([2.3, 2.1, 1.9, 1.8, 1.6], 10) is None
    assert "NaN" in sanity.diverged([2.3, math.nan], 10).message
    assert sanity.at_chance([2.30, 2.31, 2.30], 10) and not sanity.at_chance([2.3, 1.2, 1.1], 10)
    assert sanity.at_chance([2.3, 2.4, 2.43], 10)  # above chance is no learning (memory's resnet at 2.43)
    assert not sanity.at_chance([2.3, 2.2, 2.15], 10)  # 2.15 < 0.95 * 2.303: clearly below
    # just above chance + margin (2.8026): the loss shows the digits that put it above (review 15: '2.8')
    just = sanity.diverged([2.8031] * 5, 10)
    assert "(2.803, mean of the last 1 batches) is above chance level ln(10) = 2.3 + 0.5" in just.message


def test_a_run_still_at_chance_after_its_second_epoch_did_not_learn():
    ln10 = math.log(10)
    # the compiled run: loss 2.304 = ln(10) from its second epoch, top-1 at chance
    f = sanity.did_not_learn([2.41, 2.304], [0.11, 0.10], 10)
    assert f.kind == "did not learn" and "after epoch 2" in f.message
    # through the one formatter, as every number of a page
    assert f.message.startswith(
        "after epoch 2 its loss 2.3 and top-1 10% are still at chance (loss at or above 2.19, within 5% of "
        "the chance loss ln(10) = 2.3; top-1 at or below 15%): the run did not learn"
    )
    # named for the flag: an answer's own "chance loss" (c1's, with its source) never meets a second one
    assert {n.name for n in f.numbers()} >= {"did not learn: last epoch's loss", "did not learn: chance loss"}
    # the loss near chance beside a top-1 clearly above it (or the reverse) learned something: no flag, where
    # either alone once said "did not learn" of a run at 2.2 times chance
    assert sanity.did_not_learn([2.3, 2.2], [0.1, 0.4], 10) is None
    assert sanity.did_not_learn([2.25, 2.2], [0.15, 0.22], 10) is None
    assert sanity.did_not_learn([2.3, 1.9], [0.1, 0.15], 10) is None
    # both at chance: the loss within 5% of ln(10) (2.19 and up), top-1 at or below 15%
    f = sanity.did_not_learn([2.3, 2.2], [0.1, 0.15], 10)
    assert (
        "its loss 2.2 and top-1 15% are still at chance (" in f.message
        and "top-1 at or below 15%)" in f.message
    )
    assert sanity.did_not_learn([2.3, 0.95 * ln10 - 0.01], [0.1, 0.1], 10) is None  # just below: it learned
    assert sanity.did_not_learn([2.3, 2.2], [0.1, 0.16], 10) is None
    # top-1 not measured: the loss alone says it, and the flag names no top-1
    f = sanity.did_not_learn([2.3, 2.2], [], 10)
    assert f is not None and "top-1 not measured (loss at or above 2.19, within 5% of the chance" in f.message
    assert not any("top-1" in n.name for n in f.numbers())
    # few classes: chance plus 5 points at most (4 classes: 30%, not 1.5 x 25% = 37.5%)
    assert sanity.chance_top1(4) == 0.30 and sanity.chance_top1(10) == 0.15
    assert sanity.did_not_learn([1.4, 1.36], [0.30, 0.36], 4) is None  # 36% of 4 classes is not chance
    assert sanity.did_not_learn([1.4, 1.36], [0.26, 0.28], 4) is not None  # ln 4 = 1.39: both at chance
    # one epoch is too early; a NaN loss is "diverged"'s; 200 classes scale both thresholds
    assert sanity.did_not_learn([2.304], [0.1], 10) is None
    assert sanity.did_not_learn([2.3, math.nan], [0.1, 0.1], 10) is None
    assert sanity.did_not_learn([5.3, 5.1], [0.01, 0.005], 200) is not None  # 5.1 >= 0.95 ln(200) = 5.03
    assert sanity.did_not_learn([5.3, 5.1], [0.01, 0.05], 200) is None  # top-1 10x chance: it learned
    assert sanity.did_not_learn([5.3, 4.9], [0.005, 0.006], 200) is None  # the loss clearly below ln(200)
    # a later epoch is judged: a run that sat at chance in epoch 2 and learned by epoch 4 learned
    assert sanity.did_not_learn([2.4, 2.3, 2.1, 1.5], [0.1, 0.1, 0.2, 0.45], 10) is None


def test_the_did_not_learn_threshold_is_said_as_the_rule_applies_it():
    """Grader (c8): a run at 14.5% top-1 was called "at chance (10%)" while another at 15.2% was not flagged:
    the flag named 1 / classes where the rule is 15%. Every flag states the one rule, the same way, and a run
    just above 15% gets none."""
    at = sanity.did_not_learn([2.31, 2.30], [0.10, 0.145], 10)
    assert "top-1 14.5% are still at chance (" in at.message and "top-1 at or below 15%)" in at.message
    assert "(10%)" not in at.message
    assert sanity.did_not_learn([2.31, 2.30], [0.10, 0.152], 10) is None
    rule = sanity.chance_rule(10).plain()
    assert (
        rule == "loss at or above 2.19, within 5% of the chance loss ln(10) = 2.3; top-1 at or below 15%"
        and rule in at.message
    )
    # four classes: the same rule with its own thresholds (30%, not 1.5 x 25%)
    assert "top-1 at or below 30%" in sanity.chance_rule(4).plain()
    # a sweep's flag is named for its setting, its numbers too, so two settings' flags never share a name
    sgd = sanity.learning_flag(
        {"did_not_learn": {"epoch": 3, "loss": 2.27, "acc": 0.13, "classes": 10}}, "sgd"
    )
    assert sgd.message.startswith("sgd: after epoch 3 its loss 2.27 and top-1 13% are still at chance")
    assert "sgd: did not learn: last epoch's loss" in {n.name for n in sgd.numbers()}


def test_a_loss_and_the_rule_s_limit_beside_it_show_their_order_as_the_page_prints_them():
    """grade18 (c8's log): 'its loss 2.1878 ... (loss at or above 2.19 ...)': the limit 2.18746, printed at
    its own 3 digits, read above a loss that is at chance by the rule. The limit shows the digits that put it
    on its side of the loss it sits beside, the loss then its side of the limit as printed, in the flag, the
    mid-run note and its withdrawal alike."""
    limit = (1 - sanity.CHANCE_MARGIN) * sanity.chance_loss(10)
    assert 2.1872 < limit < 2.1878

    def loss_and_limit(text: str) -> tuple[float, float]:
        loss = float(text.split("its loss ", 1)[1].split(" ", 1)[0])
        return loss, float(text.split("loss at or above ", 1)[1].split(",", 1)[0])

    at = sanity.did_not_learn([2.31, 2.1878], [0.10, 0.10], 10).message
    shown_loss, shown_limit = loss_and_limit(at)
    assert shown_loss >= shown_limit and shown_limit < 2.1878  # 'loss 2.19 ... at or above 2.187'
    note = sanity.chance_note([2.31, 2.1878], [0.10, 0.10], 10, last_epoch=4).plain()
    assert loss_and_limit(note)[0] >= loss_and_limit(note)[1]
    left = sanity.chance_left([2.31, 2.30, 2.1872], [0.10, 0.10, 0.10], 10, noted=2).plain()
    shown_loss, shown_limit = loss_and_limit(left)
    assert "is below the rule's limit" in left and shown_loss < shown_limit  # '2.187 ... at or above 2.1875'
    # away from the limit both keep their own digits: the rule reads as chance_rule says it
    assert sanity.chance_rule(10).plain() in sanity.did_not_learn([2.31, 2.30], [0.10, 0.10], 10).message
    # a sweep's flags each name their own limit, so two runs' limits at different digits share no name
    sgd = sanity.learning_flag(
        {"did_not_learn": {"epoch": 3, "loss": 2.1878, "acc": 0.1, "classes": 10}}, "sgd"
    )
    assert "sgd: did not learn: loss limit" in {n.name for n in sgd.numbers()}


def test_the_runs_own_record_is_its_flag_and_a_diverged_run_gets_only_that_flag():
    cfg = RunConfig(model="resnet18", epochs=5)
    rec = {
        "did_not_learn": {
            "epoch": 2,
            "loss": 2.304,
            "acc": 0.1,
            "classes": 10,
            "message": "after epoch 2 ...",
        }
    }
    flags = sanity.run_flags(cfg, [2.3, 2.3, 2.304], [], rec)
    # the flag is rebuilt from the record's values, its numbers named, not its message repeated
    assert [f.kind for f in flags] == ["did not learn"] and flags[0].message.startswith(
        "after epoch 2 its loss 2.3"
    )
    assert (
        flags[0].numbers() and flags[0].message == sanity.did_not_learn([2.4, 2.304], [0.1, 0.1], 10).message
    )
    old = {"did_not_learn": {"epoch": 2, "loss": 2.304, "acc": 0.1}}  # a record of another shape: words alone
    assert [f.message for f in sanity.run_flags(cfg, [2.3, 2.3, 2.304], [], old)] == [
        "the run recorded that it did not learn (meta.json's did_not_learn)"
    ]
    assert sanity.run_flags(cfg, [2.3, 2.3, 2.304], [], {}) == []  # no record: no flag
    kinds = [f.kind for f in sanity.run_flags(cfg, [2.3, math.nan], [], rec)]
    assert kinds == ["diverged"]


def test_growing_epochs_are_no_steady_state():
    f = sanity.trend([2.31, 3.71, 8.83, 12.0])  # c5's epochs
    assert (
        f.kind == "no steady state" and "growing (3.71 s -> 8.83 s -> 12 s; epoch one: 2.31 s)" in f.message
    )
    # c2's smoke epochs 73.64, 76.10, 37.66 read "keep shrinking (73.64 -> 76.10 -> 37.66 s)": epoch 1 is not
    # the trend
    # two epochs after warm-up make one move, said as one (grade39a: "keep growing" of 0.302 s -> 0.706 s)
    assert (
        "epoch more than halved (76.1 s -> 37.7 s; epoch one: 73.6 s)"
        in sanity.trend([73.64, 76.10, 37.66]).message
    )
    two = sanity.trend([2.31, 3.71, 8.83])  # two epochs after warm-up, 2.4x apart
    assert (
        two.kind == "no steady state" and "warm-up epoch more than doubled (3.71 s -> 8.83 s" in two.message
    )
    assert sanity.trend([2.31, 3.71]) is None  # one epoch after warm-up: nothing to trend
    assert sanity.trend([1.9, 2.3, 1.7]) is None  # two epochs 26% apart: noise, not a trend
    assert sanity.trend([1.9, 2.3, 1.7, 1.4]).kind == "no steady state"  # three, each 10% lower
    assert sanity.trend([3.0, 1.00, 1.02, 0.99]) is None  # warm-up then steady


def test_too_few_samples():
    assert sanity.too_few(2).kind == "too few samples" and sanity.too_few(3) is None
    # what is left out is the interquartile range: a table beside it still shows a min and a max (grade27a)
    said = sanity.too_few(2, "timed epochs per setting").message
    assert "no interquartile range to show" in said and "no spread" not in said
    assert "(a min and a max, where a table gives them, are the values themselves)" in said


def test_busy_machine():
    assert sanity.busy({"load1": 3.5, "cores": 2, "steal_pct": 0}).kind == "machine busy"
    assert sanity.busy({"load1": 0.4, "cores": 2, "steal_pct": 25.0}).kind == "machine busy"
    assert sanity.busy({"load1": 0.4, "cores": 2, "steal_pct": 1.0}) is None
    load = sanity.machine_load(0.01)
    assert load["cores"] >= 1 and "load1" in load and "steal_pct" in load


def test_steal_is_sampled_over_the_time_since_the_last_sample_when_that_is_long_enough(monkeypatch):
    """A sweep's runs wait for no sample of their own: the window is the time since the previous run's sample
    (at least sample_s, at most STEAL_WINDOW_MAX_S); the first, or one long after, waits sample_s. On a fake
    clock (sanity's time.monotonic and time.sleep), so a busy machine cannot move a sample across a bound."""
    clock, slept = [100.0], []

    def sleep(s):
        slept.append(s)
        clock[0] += s

    monkeypatch.setattr(sanity, "_LAST_STAT", None)
    monkeypatch.setattr(sanity.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(sanity.time, "sleep", sleep)
    first = sanity.machine_load(0.1)
    assert slept == [0.1] and first["steal_window_s"] == 0.1
    clock[0] += 2.5  # a run of 2.5 s
    second = sanity.machine_load(0.1)  # the last sample is 2.5 s old: it is the window
    assert slept == [0.1] and second["steal_window_s"] == 2.5 and second["steal_pct"] is not None
    clock[0] += 0.05
    third = sanity.machine_load(0.1)  # 0.05 s: too recent, a wait of its own
    assert slept == [0.1, 0.1] and third["steal_window_s"] == 0.1
    clock[0] += sanity.STEAL_WINDOW_MAX_S + 1
    sanity.machine_load(0.1)  # long ago: not "before the run"
    assert slept == [0.1, 0.1, 0.1]


def test_stand_in_and_settings_that_differ():
    cfg = RunConfig(model="resnet_tiny", batch_size=32, lr=0.025, max_batches=6, epochs=3)
    kinds = [f.kind for f in sanity.run_flags(cfg)]
    assert kinds == ["stand-in model", "settings differ"]
    rows = {r["setting"]: (r["ran"], r["lab"]) for r in sanity.ran_vs_lab(cfg)}
    assert rows == {
        "model": ("resnet_tiny", "resnet18"),
        "lr": ("0.025", "0.1"),
        "batch_size": ("32", "128"),
        "epochs": ("3", "5"),
        "max_batches": ("6", "all"),
    }
    assert sanity.run_flags(RunConfig()) == []  # the lab's own settings raise nothing
    # a live plot's redraws count in total_s: flagged from what the run did (meta.json), else from the config
    assert [f.kind for f in sanity.run_flags(RunConfig(progress="plot"))] == ["live plot"]
    assert (
        sanity.run_flags(RunConfig(progress="plot"), meta={"progress": "bar"}) == []
    )  # outside a kernel: a bar
    assert [f.kind for f in sanity.run_flags(RunConfig(), meta={"progress": "plot"})] == ["live plot"]


def test_busy_threshold_is_per_core_and_stated():
    # 2 cores: 2.0 is exactly one per core (not above), 4.0 is the load the reviewed reports ran at
    assert sanity.busy({"load1": 2.0, "cores": 2, "steal_pct": 0.0}) is None
    f = sanity.busy({"load1": 4.0, "cores": 2, "steal_pct": 0.0})
    assert f.kind == "machine busy" and "4 on 2 usable cores" in f.message and "above 1 per core" in f.message
    assert (
        sanity.busy({"load1": 4.0, "cores": 8, "steal_pct": None}) is None
    )  # the same load on 8 cores is fine
    assert "steal 25%, above 10%" in sanity.busy({"load1": None, "cores": 2, "steal_pct": 25.0}).message
    assert sanity.busy(None) is None and sanity.busy({}) is None
    # grade14: just above the line, the flag and the environment table show the digits that put it above
    just = {"load1": 2.00244140625, "cores": 2, "steal_pct": 10.004, "run": "r1"}
    f = sanity.busy(just)
    assert "load average 2.002 on 2 usable cores, above 1 per core" in f.message
    assert "CPU steal 10.004%, above 10%" in f.message
    assert sanity.load_finding(just).plain() == "load average 2.002 on 2 usable cores, CPU steal 10.004%"


def test_busiest_seen_flags_a_report_when_any_of_its_runs_was_busy():
    idle, loaded = {"load1": 0.5, "cores": 2, "steal_pct": 0.0}, {"load1": 6.5, "cores": 2, "steal_pct": 0.0}
    assert sanity.busiest_seen([idle, None]) is None
    assert "6.5" in sanity.busiest_seen([idle, loaded, idle]).message
    assert sanity.busiest_seen([]) is None
    before = len(sanity._SEEN)
    sanity.observe(loaded)
    sanity.observe(None)  # a run whose meta.json has no load recorded adds nothing
    try:
        assert len(sanity._SEEN) == before + 1 and sanity.busiest_seen().kind == "machine busy"
        # a reading that is no run's (a peak's measurement, review24) is not counted; a run's is
        sanity.machine_load(0.01, seen=False)
        assert len(sanity._SEEN) == before + 1
        sanity.machine_load(0.01, run="r")
        assert len(sanity._SEEN) == before + 2 and sanity._SEEN[-1]["run"] == "r"
    finally:
        del sanity._SEEN[before:]


def test_noise_between_identical_configurations():
    f = sanity.noise([1.38, 1.40, 1.41], [4.40, 4.46, 4.52], "c6's sgd", "c7's bn")  # the reviewed reports
    assert f.kind == "noisy machine" and "3.19x apart" in f.message and "c6's sgd" in f.message
    assert "medians are 1.4 s and 4.46 s" in f.message  # epoch times, in seconds, through the one formatter
    assert sanity.noise([1.40, 1.42], [1.50, 1.55], "a", "b") is None  # 1.09x: within the stated factor
    just = sanity.noise([1.0] * 3, [1.5004] * 3, "a", "b")  # review 15: '1.5x apart, above 1.5x'
    assert "(1.5004x apart, above 1.5x)" in just.message
    assert sanity.noise([1.0], [1.6], "a", "b", factor=2.0) is None
    assert sanity.noise([], [1.0], "a", "b") is None and sanity.noise([0.0], [1.0], "a", "b") is None


def test_no_box_for_fewer_than_three_values():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hpml_lab import plots

    fig, ax = plt.subplots()
    assert plots.spread(ax, [[1.4, 1.5], [4.4, 4.5, 4.6]], ["sgd", "adam"]) == "points"
    assert len(ax.collections) == 2 and not ax.lines  # two point sets, no box or whisker lines
    fig2, ax2 = plt.subplots()
    assert plots.spread(ax2, [[1.4, 1.5, 1.6], [4.4, 4.5, 4.6]], ["sgd", "adam"]) == "box" and ax2.lines
    plt.close(fig)
    plt.close(fig2)


def test_every_report_says_busy_and_settings_differ(tmp_path, monkeypatch):
    """notebook.answer adds 'machine busy' when a run it made or showed was busy and 'settings differ'
    whenever its ran-vs-lab table has a row, even when the task's conclusions forgot them (c5-c8 and lab5
    did)."""
    from hpml_lab.report import answer_box, notebook

    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    monkeypatch.setenv("HPML_RENDERING", "1")
    monkeypatch.setattr(sanity, "_SEEN", [])
    cfg = RunConfig(task="c6", batch_size=32)
    notebook.answer(cfg, {"kind": "synthetic"}, [], title="C6")
    assert [f["kind"] for f in answer_box.load("c6")["flags"]] == ["settings differ"]
    sanity.observe({"load1": 5.0, "cores": 2, "steal_pct": 0.0})
    notebook.answer(
        cfg, {"kind": "synthetic"}, [], flags=[sanity.Flag("settings differ", "given")], title="C6"
    )
    rec = answer_box.load("c6")
    assert [f["kind"] for f in rec["flags"]] == ["settings differ", "machine busy"]
    assert rec["ran_vs_lab"] == [{"setting": "batch_size", "ran": "32", "lab": "128"}]
    notebook.answer(
        RunConfig(task="c6"), {"kind": "real"}, [], title="C6"
    )  # the lab's settings: no table, no flag
    assert [f["kind"] for f in answer_box.load("c6")["flags"]] == ["machine busy"]
    # a page that states no time (the questions' counts): no busy flag, however busy the machine was
    notebook.answer(RunConfig(task="questions"), {"kind": "real"}, [], title="Questions")
    assert answer_box.load("questions")["flags"] == []


def test_a_flag_is_a_finding_over_numbers_of_the_record():
    """Flags were f-strings (issue 42): every number a flag shows is now a named Number, formatted by fmt, and
    a flag that types a digit is refused."""
    import pytest

    flags = [
        sanity.diverged([2.3, 5.0, 9.7, 12.1, 15.4], 10, label="adam"),
        sanity.trend([2.31, 3.71, 8.83, 12.0], label="cpu"),
        sanity.too_few(2, "epochs"),
        sanity.busy({"load1": 6.7, "cores": 2, "steal_pct": 25.0, "run": "loader-w0-b128-484b6bb8"}, runs=9),
        sanity.noise([1.38, 1.40, 1.41], [4.40, 4.46, 4.52], "c6's sgd", "c7's bn"),
        sanity.stand_in(RunConfig(model="resnet_tiny")),
        sanity.differ(RunConfig(batch_size=32, lr=0.025, augment=False)),
    ]
    from dataclasses import asdict

    from hpml_lab.report import claims

    for f in flags:
        d = f.as_dict()
        assert d["numbers"] and d["message"] == f.finding.plain(), f.kind
        # every digit in a slot that prints its Number through fmt (the claims check of a flag)
        assert claims.check_flag(d, {n.name: asdict(n) for n in f.numbers()}) == [], f.kind
    busy = flags[3].message
    assert busy.startswith(
        "the machine was busy before run loader-w0-b128-484b6bb8, the busiest of the 9 runs"
    )
    assert flags[3].run == "loader-w0-b128-484b6bb8" and "CPU steal 25%, above 10%" in busy
    assert "augment off (lab on)" in flags[6].message and "lr 0.025 (lab 0.1)" in flags[6].message
    with pytest.raises(ValueError):
        sanity.Flag("machine busy", "load average 6.7 on 2 cores")  # typed by hand: refused


def test_the_stand_in_is_counted_as_the_run_built_it():
    """tinyimagenet's flag named a 10-class model's 78,002 parameters for its 200-class model (91,312)."""
    ten = sanity.stand_in(RunConfig(model="resnet_tiny"))
    tin = sanity.stand_in(RunConfig(model="resnet_tiny", stem="imagenet"), num_classes=200)
    assert "(78,002 parameters, for 10 classes)" in ten.message
    assert "(91,312 parameters, for 200 classes)" in tin.message


def test_a_stand_in_of_two_networks_gives_each_its_own_count():
    """Grader (c7): the flag gave 78,002 parameters for both networks, where the one without BatchNorm has
    77,642: each network's count, with its name, where the counts differ; one count where they agree."""
    cfg = RunConfig(model="resnet_tiny")
    two = sanity.stand_in(cfg, counts={"BatchNorm": 78002, "no BatchNorm": 77642})
    assert two.message.startswith(
        "model resnet_tiny (parameters: 78,002 with BatchNorm and 77,642 with no BatchNorm; for 10 classes)"
    )
    assert {n.value for n in two.numbers()} == {78002, 77642, 10}
    one = sanity.stand_in(cfg, counts={"sgd": 78002, "adam": 78002})
    assert "(78,002 parameters, for 10 classes)" in one.message
    # the page's header counts the model as built: the same Numbers, or the record holds one name twice
    assert one.numbers() == sanity.stand_in(cfg).numbers()


def test_c4s_flags_do_not_invent_a_worker_setting(tmp_path):
    """C4's per-count run_flags said 'num_workers 0 (lab 2)' beside a config of 1: a count's run is not the
    page's settings; only a diverged count is flagged per count."""
    from types import SimpleNamespace

    import pandas as pd

    from hpml_lab import results
    from hpml_lab.studies.c4 import conclusion as c4_conclusion

    items = []
    for n in (0, 1):
        rows = [
            {"epoch": e, "batch": i, "loss": 1.0, "acc": 0.5, "data_s": 0.01, "train_s": 0.1 + 0.01 * n}
            for e in (1, 2)
            for i in range(4)
        ]
        d = tmp_path / f"w{n}"
        results.write_derived(
            d, {"batches": pd.DataFrame(rows)}, {"config": {"num_workers": n}, "run_id": f"w{n}"}
        )
        items.append(SimpleNamespace(run_dir=d, complete=True, status="done"))
    epochs = pd.DataFrame(  # the epochs C4's verdicts compare (its table's)
        [
            {"run_id": f"w{n}", "num_workers": n, "epoch": e, "data_s": 0.04, "train_s": 0.4, "total_s": 0.5}
            for n in (0, 1)
            for e in (1, 2)
        ]
    )
    _, flags = c4_conclusion.conclude(
        RunConfig(task="c4", num_workers=1),
        SimpleNamespace(best=0, items=items, c3_rows=None, epochs=epochs),
    )
    assert not [f for f in flags if "num_workers" in f.message], [f.message for f in flags]


def test_a_share_above_the_whole_peak_is_flagged_once_naming_what_reached_it():
    peak = Number("this device's fp32 peak", 0.054, "TFLOP/s", "measured", n=1)
    shares = [
        Number("epoch 1: share of device peak", 92.0, "%", "measured", n=1),
        Number("epoch 2: share of device peak", 138.0, "%", "measured", n=1),
        Number("epoch 3: share of device peak", 121.0, "%", "measured", n=1),
    ]
    flag = sanity.above_peak(shares, peak)
    assert flag.kind == "MFU above 100%"
    assert flag.message.startswith("epoch 2 and epoch 3 ran at more FLOP/s than this device's measured peak")
    assert "(up to 138% of the measured 0.054 TFLOP/s)" in flag.message and "epoch 1" not in flag.message
    # the flag's numbers are Numbers (slots), and no peak recorded: the share alone
    assert {n.name for n in flag.numbers()} == {"epoch 2: share of device peak", "this device's fp32 peak"}
    alone = sanity.above_peak(shares, None)
    assert "(up to 138%)" in alone.message
    assert sanity.above_peak(shares[:1], peak) is None and sanity.above_peak([], peak) is None


def test_too_few_names_one_sample_in_the_singular():
    assert sanity.too_few(1, "cpu epochs after warm-up").message.startswith("only 1 cpu epoch after warm-up:")
    assert sanity.too_few(1, "passes per loader").message.startswith("only 1 pass per loader:")
    assert sanity.too_few(2, "timed batches per Q1 size").message.startswith(
        "only 2 timed batches per Q1 size:"
    )
    assert sanity.too_few(3, "epochs") is None


def test_a_run_that_did_not_learn_can_be_recorded_beside_an_answer_that_states_chance():
    """The flag's chance loss is its own Number ('did not learn: chance loss'): c1's answer states a 'chance
    loss' of its own (another source), and one record holding both under one name is refused (RecordError)."""
    from types import SimpleNamespace

    import pandas as pd

    from hpml_lab.answers import Record, check
    from hpml_lab.studies.c1 import conclusion as c1_conclusion

    n = 40  # a loss falling from 2.45 to chance: c1's answer states the chance loss it ended at
    b = pd.DataFrame(
        {
            "epoch": [1 + i // 20 for i in range(n)],
            "batch": range(n),
            "loss": [2.45 - 0.004 * i for i in range(n)],
            "acc": [0.1] * n,
        }
    )
    b = b.assign(data_s=0.01, train_s=0.1)
    stuck = {"epoch": 2, "loss": 2.3, "acc": 0.1, "classes": 10}
    e = pd.DataFrame({"epoch": [1, 2], "total_s": [2.0, 1.0], "data_s": 0.1, "train_s": 0.8})
    run = SimpleNamespace(batches=b, epochs=e, meta={"did_not_learn": stuck})
    answers, flags = c1_conclusion.conclude(RunConfig(task="c1"), run)
    assert "did not learn" in {f.kind for f in flags}
    assert "chance loss" in {num.name for a in answers for num in a.numbers}
    check(Record("c1", "C1", answers, [f.as_dict() for f in flags]))  # no name held twice


def test_a_busy_flag_names_the_run_folder_whose_load_it_read(tiny_cfg, monkeypatch):
    """grade2: the flags of questions, memory and dataloading said 'busy before the run (load average 3.64
    ...)' beside an index saying each flag names the run. The load new_meta reads is observed under the run's
    folder (its config's, or the run_id a study gives it), and memory's and dataloading's own flags name the
    run of their meta (tests/studies: test_memory, test_dataloading)."""
    import os

    from hpml_lab import results

    monkeypatch.setattr(sanity, "_SEEN", [])
    monkeypatch.setattr(os, "getloadavg", lambda: (7.3, 7.0, 6.0))
    meta = results.new_meta(tiny_cfg.replace(run_id="resnet18-sgd-b128-b8c4c423"), "cpu")
    sanity.observe(meta["machine"], meta["run_id"])  # the environment table shows the same run
    flag = sanity.busiest_seen()
    assert flag.run == "resnet18-sgd-b128-b8c4c423"
    assert flag.message.startswith("the machine was busy before run resnet18-sgd-b128-b8c4c423 (load average")
    monkeypatch.setattr(sanity, "_SEEN", [])
    results.new_meta(tiny_cfg, "cpu", run_id="study-7de7562e")  # memory's study folder
    assert sanity.busiest_seen().run == "study-7de7562e"
    # a record given its load (a trace's, read before it; a summary's, its busiest run's) reads none now, and
    # its record's run is its own folder (grade12: a summary's reading after the sweep named a phantom folder)
    monkeypatch.setattr(sanity, "_SEEN", [])
    given = {"load1": 1.2, "cores": 2, "steal_pct": 0.0, "run": "loader-w2-b32-1a2b3c4d"}
    meta = results.new_meta(tiny_cfg, "cpu", run_id="loader-summary-b32-5e6f", machine=given)
    assert meta["run_id"] == "loader-summary-b32-5e6f" and meta["machine"] == given and sanity._SEEN == []
    from hpml_lab.report import displays

    displays.environment_table({**meta, "environment": meta["environment"]})
    assert [x["run"] for x in sanity._SEEN] == ["loader-w2-b32-1a2b3c4d"]  # the run the load is of


def test_a_peak_measured_on_a_busy_machine_is_flagged_by_its_own_load():
    """busy_peak: a measured peak whose measurement recorded a busy machine (the load average read before it,
    the CPU steal over it), each beside its line; never a data sheet's peak, an idle measurement or one that
    recorded no load (the run's own load says nothing of it: review36); its Numbers named by precision and
    label, so two such flags on one page stay apart."""
    from hpml_lab.answers import Record, check

    fl = {"precision": "fp32", "peak_tflops": 0.36, "peak_source": "measured on this machine"}
    busy_load = {"load1": 2.54, "cores": 2, "steal_pct": 0.0}
    flag = sanity.busy_peak({**fl, "machine": busy_load})
    assert flag.kind == "peak measured busy"
    assert str(flag.message) == (
        "this device's fp32 peak was measured while the machine was busy (load average 2.54 on 2 usable "
        "cores, above 1 per core, before it): a peak measured at another load gives another share, so each "
        "share of it on this page is uncertain"
    )
    stolen = sanity.busy_peak({**fl, "machine": {"load1": 0.2, "cores": 2, "steal_pct": 25.0}})
    assert "(CPU steal 25%, above 10%, during it)" in str(stolen.message)
    assert [n.name for n in stolen.finding.numbers()][0] == "CPU steal during the fp32 peak's measurement"
    assert sanity.busy_peak({**fl, "machine": {"load1": 0.2, "cores": 2, "steal_pct": 0.0}}) is None
    assert sanity.busy_peak(fl) is None and sanity.busy_peak(None) is None  # no load recorded: nothing said
    sheet = {**fl, "peak_source": "data sheet: H100 SXM", "machine": busy_load}
    assert sanity.busy_peak(sheet) is None  # a data sheet's peak was not measured here at any load
    # two on one page (two precisions, or two devices by label): their Numbers stay apart, the record holds
    bf16 = sanity.busy_peak({**fl, "precision": "bf16", "machine": {"load1": 3.1, "cores": 2}})
    cpu = sanity.busy_peak({**fl, "machine": busy_load}, label="cpu")
    assert str(cpu.message).startswith("cpu: this device's fp32 peak was measured while")
    check(Record("t", "t", [], [f.as_dict() for f in (flag, bf16, cpu)]))
