"""The speed ladder (hpml_lab/studies/speed): each rung's configuration, the interleaved timing, the
conclusions on hand-built results, and the notebook rendered once at the tiny profile."""

import json
import time
from types import SimpleNamespace

import pandas as pd
import pytest
import study_checks  # the tests' page check, tests/study_checks.py
import torch

from hpml_lab import RunConfig, flops
from hpml_lab.answers import Record
from hpml_lab.config import ConfigError
from hpml_lab.findings import fmt_value, stray_digits
from hpml_lab.studies import speed
from hpml_lab.studies.speed import conclusion
from hpml_lab.studies.speed import study as ladder
from hpml_lab.verdict import compare

CPU = torch.device("cpu")


@pytest.fixture
def base(cifar_root, tmp_path):
    return RunConfig(
        task="speed",
        data_root=str(cifar_root),
        results_dir=str(tmp_path / "results"),
        model="resnet_tiny",
        batch_size=16,
        num_workers=2,
        lr=0.05,
        device="cpu",
    )


# ------------------------------------------------------------------ the rungs
def test_each_rung_adds_one_change_to_the_one_before(base):
    rungs = ladder.plan(base, speed.Settings(compile_rung="off", batch_factor=4), CPU)
    assert [r.name for r in rungs] == list(ladder.RUNGS)
    pil, tensor, cl, bf16, comp, graphs, big, bigger = (r.cfg for r in rungs)
    assert (pil.loader, pil.num_workers, pil.persistent_workers, pil.precision) == ("pil", 2, True, "fp32")
    assert (tensor.loader, tensor.num_workers, tensor.channels_last) == ("tensor", 0, False)
    assert cl.channels_last and cl.loader == "tensor" and cl.precision == "fp32"
    assert bf16.precision == "bf16" and bf16.channels_last and not bf16.compile
    assert comp.compile and rungs[4].skipped.startswith("not run at this profile")
    # the grader's item: "an inductor build of the step takes minutes on a CPU", while c8 built it in 32 s
    assert "minute" not in rungs[4].skipped and "compile_rung is off here" in rungs[4].skipped
    assert "minute" not in conclusion.WHY["compile"]
    assert not stray_digits(rungs[4].skipped)  # the answer box states the reason itself, not "the table says"
    # CUDA graphs are a GPU's: on a CPU the rung is kept, and says so
    assert graphs.compile and graphs.compile_mode == "reduce-overhead"
    assert rungs[5].skipped == "CUDA graphs need a CUDA GPU: not run on a CPU" and not stray_digits(
        rungs[5].skipped
    )
    # the compile rungs did not run: the larger batches build on bf16, the last rung that ran
    assert (big.batch_size, big.lr, big.compile, big.precision) == (64, pytest.approx(0.2), False, "bf16")
    assert (bigger.batch_size, bigger.lr, bigger.precision) == (128, pytest.approx(0.4), "bf16")
    assert [bool(r.skipped) for r in rungs] == [False, False, False, False, True, True, False, False]


def test_on_a_gpu_the_cuda_graphs_rung_builds_on_the_compiled_step(base, monkeypatch):
    monkeypatch.setattr(ladder, "compile_available", lambda backend, device: "")
    monkeypatch.setattr(ladder, "_precision_refused", lambda cfg, device: "")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    rungs = {r.name: r for r in ladder.plan(base, speed.Settings(), torch.device("cuda"))}
    assert not rungs["cuda_graphs"].skipped and rungs["cuda_graphs"].cfg.compile_mode == "reduce-overhead"
    assert rungs["compile"].cfg.compile_mode == "default"  # the compile rung: inductor without graphs
    big = rungs["bigger_batch"].cfg  # the lab's 128 times 8: the batch 1024 on a GPU
    assert (big.batch_size, big.compile, big.compile_mode) == (16 * 8, True, "reduce-overhead")
    args, why = ladder.reference_args(big, torch.device("cuda"), speed.Settings())
    assert why == "" and args[args.index("--mode") + 1] == "reduce-overhead"
    assert args[args.index("--batch") + 1] == "128" and args[args.index("--epochs") + 1] == "4"
    assert args[args.index("--widths") + 1] == "8,16,32,64" and args[args.index("--blocks") + 1] == "1,1,1,1"


def test_compile_rung_that_cannot_build_here_says_why_and_the_next_builds_on(base, monkeypatch):
    monkeypatch.setattr(ladder, "compile_available", lambda backend, device: "no C++ compiler here")
    rungs = {r.name: r for r in ladder.plan(base, speed.Settings(compile_rung="on"), CPU)}
    assert rungs["compile"].skipped == "no C++ compiler here"
    assert not rungs["big_batch"].cfg.compile
    monkeypatch.setattr(ladder, "compile_available", lambda backend, device: "")
    rungs = {r.name: r for r in ladder.plan(base, speed.Settings(compile_rung="on"), CPU)}
    assert not rungs["compile"].skipped and rungs["big_batch"].cfg.compile
    assert rungs["cuda_graphs"].skipped and rungs["big_batch"].cfg.compile_mode == "default"


def test_fp16_with_a_scaler_stands_in_for_bf16_on_a_gpu_without_it(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert ladder.low_precision(torch.device("cuda")) == "fp16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert ladder.low_precision(torch.device("cuda")) == "bf16"
    assert ladder.low_precision(CPU) == "bf16"  # the CPU runs bf16 autocast (slowly without bf16 units)


def test_a_precision_torch_refuses_is_a_rung_not_run(base, monkeypatch):
    def refuse(cfg, device):
        raise ConfigError("precision=bf16 is not supported on cpu")

    monkeypatch.setattr(ladder, "check_precision", refuse)
    rungs = {r.name: r for r in ladder.plan(base, speed.Settings(compile_rung="off"), CPU)}
    assert "not supported" in rungs["bf16"].skipped
    assert rungs["big_batch"].cfg.precision == "fp32"


def test_a_batch_larger_than_the_dataset_is_not_run(base):
    rungs = ladder.plan(base.replace(subset=40), speed.Settings(compile_rung="off", batch_factor=4), CPU)
    assert rungs[-1].skipped == "the batch is larger than the training set, so no full batch exists"
    assert rungs[-2].skipped == rungs[-1].skipped
    from hpml_lab.findings import stray_digits

    assert not any(stray_digits(r.change + " " + r.skipped) for r in rungs)  # no number outside a finding


def test_settings_are_checked():
    with pytest.raises(ConfigError, match="compile_rung"):
        speed.Settings(compile_rung="maybe")
    with pytest.raises(ConfigError, match="batch_factor"):
        speed.Settings(batch_factor=1)
    assert speed.Settings().repeats == 5


def test_the_task_registers_itself_with_a_tiny_profile_that_leaves_compile_out():
    from hpml_lab.report import tasks

    task = tasks.get("speed")
    assert task.notebook == "speed.ipynb" and task.settings is speed.Settings
    assert task.profile("tiny")["compile_rung"] == "off" and task.profile("gpu")["compile_rung"] == "on"
    for name in ("tiny", "smoke", "full", "gpu"):  # every key a profile sets is a parameter of the notebook
        assert set(task.profile(name)) <= set(RunConfig.field_names()) | set(speed.Settings.field_names())


def test_the_packages_names_from_its_modules_stay_what_they_name_on_every_use():
    """speed's conclude, chart and the ladder's names are imported at first use (registering the task imports
    no torch). A module of the package named like one of them (chart.py, as it was) would replace that name
    with the module as soon as it is imported, and the notebook's `speed.chart(result)` would fail."""
    import importlib
    import inspect

    for name, module in speed.LATER.items():
        importlib.import_module(
            f"hpml_lab.studies.speed.{module}"
        )  # what a notebook or a docstring may import
        assert name != module and getattr(speed, name) is getattr(speed, name), name
        assert getattr(speed, name) is getattr(
            importlib.import_module(f"hpml_lab.studies.speed.{module}"), name
        )
    assert inspect.isfunction(speed.chart) and inspect.isfunction(speed.conclude)


# ------------------------------------------------------------------ the timing
class FakeTrainer:
    """A trainer whose step takes a set time per rung (by batch size), recording the order of the calls."""

    calls: list = []

    def __init__(self, cfg, device):
        self.cfg = cfg
        self.loader = SimpleNamespace(
            prefetch_factor=2 if cfg.num_workers else None, num_workers=cfg.num_workers
        )
        self.delay = {"pil": 0.02, "tensor": 0.005}.get(cfg.loader, 0.005)
        self.fetched = 0

    def next_batch(self):
        self.fetched += 1
        return torch.zeros(self.cfg.batch_size, 1), torch.zeros(self.cfg.batch_size)

    def warm_last(self):
        """The loader here gives whole batches only: no partial last batch to meet."""

    def step(self, x, y):
        FakeTrainer.calls.append(
            (self.cfg.loader, self.cfg.channels_last, self.cfg.precision, self.cfg.batch_size)
        )
        time.sleep(self.delay)

    def epoch(self):
        """A whole epoch: 3 steps of the batch (their calls recorded apart, as epochs)."""
        FakeTrainer.epochs.append(self.cfg.batch_size)
        time.sleep(3 * self.delay)
        return 3 * self.cfg.batch_size

    def close(self):
        pass


def test_rungs_take_turns_warm_up_left_out_and_prefetched_batches_drained(base, monkeypatch):
    peaks = {"fp32": 2.0, "bf16": 8.0}
    order = []  # the peaks asked for and the trainers built, in turn
    monkeypatch.setattr(
        flops,
        "peak",
        lambda device, precision, store=None: (
            order.append(precision)
            or flops.Peak(peaks[precision], precision, "test", True, "now", {"load1": peaks[precision]})
        ),
    )
    FakeTrainer.calls, FakeTrainer.epochs = [], []
    made = {}

    def make(cfg, device):
        order.append("trainer")
        made[cfg.loader, cfg.channels_last, cfg.precision, cfg.batch_size] = t = FakeTrainer(cfg, device)
        return t

    rungs = ladder.plan(base, speed.Settings(compile_rung="off"), CPU)
    s = speed.Settings(repeats=3, warmup=1, steps=2, compile_rung="off", epoch_repeats=2, reference="off")
    res = ladder.measure(rungs, s, CPU, log=lambda m: None, trainer=make)
    active = [r for r in rungs if not r.skipped]
    # every peak the rungs are held to is asked for (so measured, where none is kept) before any trainer is
    # built: not after the ladder has loaded the machine (grade23: bf16 measured at 0.873 then 1.41)
    assert {"fp32", "bf16"} <= set(order[: order.index("trainer")])
    keys = [(r.cfg.loader, r.cfg.channels_last, r.cfg.precision, r.cfg.batch_size) for r in active]
    # 4 rounds (1 warm-up + 3 timed), each rung 2 steps a round, the starting rung rotated each round
    firsts = [FakeTrainer.calls[i * 2 * len(active)] for i in range(4)]
    assert firsts == [keys[0], keys[1], keys[2], keys[3]]
    assert len(FakeTrainer.calls) == 4 * 2 * len(active)
    assert {k: len(v) for k, v in res.samples.items()} == {r.name: 3 for r in active}  # warm-up not a sample
    # the worker-fed rung: 2 x 2 prefetched batches drained before each of its 4 runs, then its 2 steps
    assert made[keys[0]].fetched == 4 * (4 + 2) and made[keys[1]].fetched == 4 * 2
    t = res.table.set_index("rung")
    assert t.loc["compile", "status"] == "not run" and pd.isna(t.loc["compile", "images_per_s"])
    assert 0.2 * 16 / 0.02 < t.loc["pil", "images_per_s"] <= 16 / 0.02  # a sleep of 20 ms a step, or longer
    assert t.loc["tensor", "images_per_s"] > t.loc["pil", "images_per_s"]
    per_image = res.meta["flops_per_image"]
    row = t.loc["bf16"]
    assert row["peak_tflops"] == 8.0 and row["ideal_images_per_s"] == pytest.approx(8e12 / per_image)
    assert row["mfu"] == pytest.approx(row["images_per_s"] * per_image / 8e12)
    assert t.loc["pil", "peak_precision"] == "fp32" and t.loc["big_batch", "batch_size"] == 64
    assert res.meta["sampling"] == "interleaved" and "left out" in res.meta["warmup_note"]
    # each peak's load when it was measured, by precision: what the 'peak measured busy' flag reads
    assert res.meta["peak_loads"] == {"fp32": {"load1": 2.0}, "bf16": {"load1": 8.0}}
    # then whole epochs, each rung twice, the rungs taking turns (the second round starts at the second rung)
    assert FakeTrainer.epochs == [k[3] for k in keys] + [k[3] for k in keys[1:] + keys[:1]]
    assert {k: len(v) for k, v in res.epochs.items()} == {r.name: 2 for r in active}
    assert t.loc["pil", "epoch_s"] >= 3 * 0.02 and t.loc["pil", "epoch_images"] == 3 * 16
    assert t.loc["pil", "epochs_timed"] == 2 and pd.isna(t.loc["pil", "epoch_iqr_s"])  # no spread from 2
    assert t.loc["bf16", "epoch_mfu"] == pytest.approx(3 * 16 * per_image / t.loc["bf16", "epoch_s"] / 8e12)
    assert len(res.meta["load_epochs"]) == 2
    ref = t.loc[ladder.REFERENCE]  # the outside reference's row, after the rungs, says why it did not run
    assert list(t.index)[-1] == ladder.REFERENCE and ref["status"] == "not run"
    assert ref["reason"] == "not run at this profile (reference is off here)"


def test_the_warm_up_note_names_only_what_this_ladder_warmed_up(base, monkeypatch):
    """Grader: the note named cuDNN's autotuning and the torch.compile build on a CPU ladder that compiled
    nothing."""
    cpu = ladder.warmup_note(ladder.plan(base, speed.Settings(compile_rung="off"), CPU), CPU)
    assert cpu == (
        "The untimed warm-up rounds are left out of every number: they hold the DataLoader workers' start "
        "and the allocator's growth."
    )
    assert not stray_digits(cpu)
    no_workers = ladder.plan(base.replace(num_workers=0), speed.Settings(compile_rung="off"), CPU)
    assert "workers" not in ladder.warmup_note(no_workers, CPU)
    monkeypatch.setattr(ladder, "compile_available", lambda backend, device: "")
    monkeypatch.setattr(ladder, "_precision_refused", lambda cfg, device: "")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    gpu = torch.device("cuda")
    said = ladder.warmup_note(ladder.plan(base, speed.Settings(), gpu), gpu)
    assert "cuDNN's autotuning, the torch.compile build and the CUDA graphs' recording" in said


def test_a_measured_low_precision_peak_below_fp32_gives_way_to_fp32(base, monkeypatch):
    # a CPU without bf16 units: its bf16 matrix products crawl, so the fp32 rate bounds the bf16 rung
    rates = {"fp32": 0.1, "bf16": 0.001}
    monkeypatch.setattr(
        flops,
        "peak",
        lambda device, precision, store=None: flops.Peak(rates[precision], precision, "measured here", True),
    )
    pk = ladder.peak_for(base.replace(precision="bf16"), CPU)
    assert (pk.tflops, pk.precision) == (0.1, "fp32") and "fp32 bounds bf16" in pk.source
    rates["bf16"] = 0.5  # faster units for it: its own peak
    assert ladder.peak_for(base.replace(precision="bf16"), CPU).precision == "bf16"
    sheet = flops.Peak(0.001, "bf16", "data sheet", False)  # a data sheet's figure is kept as it is
    monkeypatch.setattr(flops, "peak", lambda device, precision, store=None: sheet)
    assert ladder.peak_for(base.replace(precision="bf16"), CPU) is sheet


# ------------------------------------------------------------------ the conclusions, on hand-built results
def _ladder(
    rates: dict[str, list[float] | None],
    reason: str = "not run at this profile (compile_rung is off)",
    epochs: dict[str, list[float]] | None = None,
):
    """A hand-built ladder: `rates` (images/s per round) per rung, None for a rung not run; `epochs` (seconds
    of whole epochs) per rung, and for the reference's row (REFERENCE), which is 'not run' unless given."""
    epochs = epochs or {}
    rows, samples = [], {}
    for i, name in enumerate((*ladder.RUNGS, ladder.REFERENCE)):
        r = rates.get(name)
        if name == ladder.REFERENCE:
            r = [50_000 / e for e in epochs[name]] if name in epochs else None
        row = {c: float("nan") for c in ladder.COLUMNS}
        row.update(
            rung=name,
            label="plain script (reference)" if name == ladder.REFERENCE else f"L{i}",
            change=f"change {chr(65 + i)}",
            batch_size={"big_batch": 64, "bigger_batch": 128}.get(name, 16),
            num_workers=2 if name == "pil" else 0,
            peak_precision="fp32",
            peak_source="measured",
        )
        if r is None:
            why = "the reference script failed: exit status 1" if name == ladder.REFERENCE else reason
            row.update(status="not run", reason=why)
        else:
            if name != ladder.REFERENCE:
                samples[name] = r
            med = float(pd.Series(r).median())
            q1, q3 = (float(x) for x in pd.Series(r).quantile([0.25, 0.75]))
            row.update(status="measured", reason="", images_per_s=med, images_per_s_q1=q1, images_per_s_q3=q3)
            row.update(
                step_s=16 / med, step_iqr_s=16 / q1 - 16 / q3, mfu=med / 1000, ideal_images_per_s=1000.0
            )
        if name in epochs:
            e = pd.Series(epochs[name])
            row.update(
                epochs_timed=len(e),
                epoch_s=float(e.median()),
                epoch_iqr_s=float(e.quantile(0.75) - e.quantile(0.25)),
                epoch_images=50_000,
                epoch_mfu=0.1,
            )
        rows.append(row)
    meta = {"device": "cpu", "repeats": 5, "load_before": None, "load_after": None}
    return ladder.Ladder(pd.DataFrame(rows, columns=ladder.COLUMNS), samples, meta, dict(epochs))


RATES = {
    "pil": [100, 101, 99, 100, 102],
    "tensor": [300, 305, 298, 302, 301],  # faster than pil
    "channels_last": [301, 299, 303, 300, 298],  # a tie with tensor
    "bf16": [150, 149, 151, 152, 150],  # slower than channels_last
    "compile": None,  # not run
    "cuda_graphs": None,  # not run (a CPU)
    "big_batch": [400, 402, 398, 401, 399],  # compared with bf16, the last rung that ran
    "bigger_batch": None,  # not run
}


def test_each_rung_gets_its_verdict_against_the_rung_before(base):
    answers, flags = speed.conclude(base, _ladder(RATES))
    top, tensor, cl, bf16, comp, graphs, big, bigger, ref, course = answers
    assert course.status == "not answered"  # no record of the course's script: it did not run
    assert tensor.verdict["outcome"] == "better"
    said = tensor.headline.plain()  # the verdict's own words (verdict.py), its ratio and both labels
    assert "3.01x" in said and "L1" in said and "PIL loader with 2 workers" in said
    assert cl.verdict["outcome"] == "tie" and cl.headline.plain().endswith(
        "cannot be told apart on images/s."
    )
    assert bf16.verdict["outcome"] == "worse" and bf16.headline.plain().endswith(": a cost on this CPU.")
    assert (comp.status, comp.missing, comp.verdict) == (
        "not answered",
        "not run at this profile (compile_rung is off)",
        None,
    )
    assert (graphs.status, bigger.status) == ("not answered", "not answered")
    assert big.verdict["label_b"] == "L3"  # against bf16: the compile rungs did not run
    # the grader's item: the batch rung sits on bf16, which the ladder found slower than channels_last: said
    said = big.text  # the headline says the verdict in words; the details what it stands on
    assert "This rung is measured on top of L3 (images/s is higher for L2 than for L3 by 2x (95% CI " in said
    assert "n = 5 and 5)): it does not show what the rung gives on L2." in said
    assert "measured on top of" not in bf16.text + cl.text + tensor.text  # their bases were not found slower
    assert "+ batch 64" in top.headline.plain() and "4x" in top.headline.plain()
    assert (top.verdict["label_a"], top.verdict["label_b"]) == ("+ batch 64", "PIL loader with 2 workers")
    # the reference did not run: said, with the table's reason left to the table (it has a number)
    assert (
        ref.status == "not answered"
        and ref.missing == "a run of this rung (the table says why it did not run)"
    )
    # every rung's why is general background, apart from the findings; the numbers are the findings' own
    assert [bool(a.background) for a in answers] == [True] * 10
    assert "big_batch: images/s" in [n.name for n in top.numbers] and "big_batch: MFU" in [
        n.name for n in top.numbers
    ]
    assert flags == []


def test_each_rung_states_its_whole_epochs_verdict_beside_its_steps(base):
    """grade27b: four rungs tied on their 2-step rounds while their whole epochs, which the table shows, were
    told apart, and only the top answer compared epochs. Each rung with timed epochs leads with the epochs'
    verdict (training time, as the top answer), the steps' beside it, and where the two differ says why they
    need not agree; 'no gain' only where neither has the rung faster (review31)."""
    epochs = {
        "pil": [2.0, 2.1, 2.05],
        "tensor": [1.0, 1.01, 0.99],
        "channels_last": [1.2, 1.22, 1.21],  # its rounds tie with tensor's; its epochs are longer
        "bf16": [1.1, 1.12, 1.11],  # its rounds slower than channels_last's; its epochs shorter
        "big_batch": [0.8, 0.81, 0.79],
    }
    answers, _ = speed.conclude(base, _ladder(RATES, epochs=epochs))
    _, tensor, cl, bf16, *_, big, _, _, _ = answers
    assert cl.verdict["what"] == "whole-epoch time" and cl.verdict["outcome"] == "worse"
    assert (
        cl.verdict["samples_a"] == epochs["channels_last"] and cl.verdict["also"]["steps"]["outcome"] == "tie"
    )
    assert cl.headline.plain() == ("L1 is 1.21x faster than L2 on whole-epoch time: a cost on this CPU.")
    said = [d.plain() for d in cl.details]
    assert said[0].startswith("Over whole epochs, the rungs taking turns round by round: L1 is 1.21x faster")
    assert said[1].startswith("Over the timed rounds of steps: L2 and L1 cannot be told apart on images/s")
    # a tie beside a direction is no conflict: nothing to explain (review32)
    assert not any("point opposite ways" in x for x in said)
    # the epochs have bf16 faster, its steps slower: no 'no gain' under a faster epoch, and the conflict said
    assert bf16.verdict["outcome"] == "better" and bf16.verdict["also"]["steps"]["outcome"] == "worse"
    assert "no gain" not in bf16.text and "The two verdicts point opposite ways: a timed round" in bf16.text
    # both better (tensor over PIL): no word of a difference
    assert tensor.verdict["outcome"] == tensor.verdict["also"]["steps"]["outcome"] == "better"
    assert "point opposite ways" not in tensor.text
    # the note on a rung stacked on a slower one follows the same leading verdict (review32): channels_last
    # lost on epochs, so bf16 is measured on top of it; bf16 won on epochs, so the batch rung is not
    assert "This rung is measured on top of L2 (L1 is 1.21x faster than L2 on whole-epoch time" in bf16.text
    assert "measured on top of" not in big.text
    study_checks.holds(answers, "speed")  # every number of the new sentences a slot of the record
    # epochs too few to decide (two a rung): the steps lead, and no 'differ' beside an undecided verdict
    two = speed.conclude(base, _ladder(RATES, epochs={k: v[:2] for k, v in epochs.items()}))[0]
    assert (
        two[2].verdict["what"] == "images/s"
        and two[2].verdict["also"]["epochs"]["reason"] == "too few samples"
    )
    assert "point opposite ways" not in " ".join(a.text for a in two)
    assert two[3].headline.plain().endswith("a cost on this CPU.")  # bf16's steps slower, epochs undecided
    # a rung without timed epochs states its steps' verdict alone
    plain, _ = speed.conclude(base, _ladder(RATES))
    assert (
        not any("Over whole epochs" in d.plain() for d in plain[2].details) and "also" not in plain[2].verdict
    )


# the rungs' labels as study.plan names them (label() builds the PIL and batch rungs' from their settings)
REAL_LABELS = {
    "tensor": "tensor-resident loader",
    "channels_last": "+ channels_last",
    "bf16": "+ bf16 autocast",
    "compile": "+ torch.compile",
    "cuda_graphs": "+ CUDA graphs",
}


@pytest.mark.parametrize("device", ["cpu", "cuda"], ids=["on-cpu", "on-gpu"])  # a record's device only
def test_every_rung_headline_is_short_with_the_real_labels_whichever_way_it_goes(base, device):
    """review32: a rung's headline on its epochs, with 'this rung does not help on this CPU' after it, ran to
    21 and 22 words with the study's labels, where the tests' 'L0'..'L7' kept it short. Every rung run, each
    way round (faster, slower, a tie) on epochs and on steps, with the labels the study gives."""
    from hpml_lab.report import claims

    ups = [100.0 * 1.3**i for i in range(len(ladder.RUNGS))]
    orders = (ups, ups[::-1], [100.0] * len(ups))
    said = []
    for steps_order in orders:
        for epochs_order in orders:
            wiggle = (0.0, 0.01, -0.01, 0.005, -0.005)
            rates = {k: [r * (1 + d) for d in wiggle] for k, r in zip(ladder.RUNGS, steps_order)}
            epochs = {k: [1e4 / r * (1 + d) for d in wiggle[:3]] for k, r in zip(ladder.RUNGS, epochs_order)}
            res = _ladder(rates, epochs=epochs)
            for rung, text in REAL_LABELS.items():
                res.table.loc[res.table["rung"] == rung, "label"] = text
            res.table["batch_size"] = [16, 16, 16, 16, 16, 16, 1024, 2048, 2048]
            res.meta["device"] = device
            answers, _ = speed.conclude(base, res)
            for a in answers:
                rec = Record("speed", "Speed ladder", [a], [])
                assert claims.headline_problems(rec.as_dict()["answers"][0]) == [], a.headline.plain()
                said.append(a.headline.plain())
    # every kind of headline was made: faster, slower at a cost, and a tie
    assert any("a cost on this" in h for h in said) and any("faster" in h for h in said)
    assert any("cannot be told apart" in h for h in said)


def test_only_the_outside_reference_counts_its_epochs_as_its_samples():
    """review30: a ladder rung without its rounds' samples took its whole epochs' count as the n of its
    rounds' figures; only the outside reference, which has no rounds, is counted by its epochs."""
    res = _ladder(RATES, epochs={ladder.REFERENCE: [0.6, 0.61, 0.59]})
    nums = conclusion.Numbers(res.table, {k: v for k, v in res.samples.items() if k != "tensor"}, res.epochs)
    assert nums.mfu(ladder.REFERENCE).n == 3
    with pytest.raises(KeyError):
        nums.ips("tensor")


def test_a_rung_that_ties_with_the_best_is_named_by_its_verdict(base):
    from hpml_lab.report import claims

    rates = {**RATES, "big_batch": [303, 305, 304, 302, 306]}  # within 2% of L1 and L2
    top = speed.conclude(base, _ladder(rates))[0][0]
    assert "+ batch 64 and L1 cannot be told apart on images/s" in top.text
    # L2's interval lies wholly above no difference, within the least difference of it: apart, perhaps
    # negligibly, and said so (not "cannot be told apart")
    assert (
        "+ batch 64 and L2 differ, perhaps negligibly, on images/s over the timed rounds of steps: the "
        in top.text
    )
    assert claims.check_answer(json.loads(json.dumps(top.as_dict()))) == []


def test_a_baseline_with_the_best_median_claims_no_win_it_cannot_show(base):
    from hpml_lab.report import claims

    # the review's case: the baseline's median is the highest but the tensor loader cannot be told from it
    rates = {"pil": [101, 100, 99, 102, 100], "tensor": [100, 99, 101, 98, 100]}
    top = speed.conclude(base, _ladder(rates))[0][0]
    said = top.text
    assert "cannot be told apart" in said and "most" not in said
    assert (
        top.headline.plain() == "No rung after the baseline added images/s per step that this run can tell."
    )
    assert "No whole epoch of these rungs was timed, so this compares steps, not epochs." in said
    assert claims.check_answer(json.loads(json.dumps(top.as_dict()))) == []
    only = speed.conclude(base, _ladder({"pil": [101, 100, 99, 102, 100]}))[0][0]
    assert (
        only.headline.plain().startswith("Only PIL loader") and "nothing to compare" in only.headline.plain()
    )


EPOCHS = {  # seconds of whole epochs: big_batch's 3x shorter than pil's, while its images/s per step is 4x
    "pil": [9.0, 9.2, 8.8],
    "tensor": [4.0, 4.1, 3.9],
    "channels_last": [4.0, 3.95, 4.05],
    "bf16": [6.0, 6.1, 5.9],
    "big_batch": [3.0, 3.05, 2.95],
}


def test_the_headline_is_the_whole_epochs_ratio_the_epoch_table_gives(base):
    """Grader: the headline said 2.63x from the medians of timed steps while the page's whole epochs gave
    2.1x; the lab asks for training time, so the headline is the ratio of the epoch column."""
    res = _ladder(RATES, epochs=EPOCHS)
    res.meta.update(load_before={"cores": 2}, load_epochs=[1.0, 1.1, 1.0])
    top = speed.conclude(base, res)[0][0]
    t = res.table.set_index("rung")
    ratio = t.loc["pil", "epoch_s"] / t.loc["big_batch", "epoch_s"]
    assert (
        top.headline.plain()
        == f"+ batch 64 is {fmt_value(ratio, 'x')} faster than PIL loader with 2 workers on whole-epoch time."
    )
    assert top.verdict["what"] == "whole-epoch time" and top.verdict["samples_a"] == EPOCHS["big_batch"]
    # the per-step verdict the details state is stored with its samples too, and recomputes from them
    step = top.verdict["also"]["per step"]
    assert step["what"] == "images/s over the timed rounds of steps" and step["outcome"] == "better"
    # every rung ran once a round, but 3 rounds are too few to draw whole (PAIRED_MIN_ROUNDS): drawn apart
    assert step["paired"] is False
    again = compare(
        step["samples_a"], step["samples_b"], lower_is_better=False, interleaved=True, paired=True
    )
    assert (again.outcome, again.ratio, again.ci_low) == (step["outcome"], step["ratio"], step["ci_low"])
    assert step["ratio"] > 1
    # the per-step ratio (4x) only where it says it is per step, beside the epoch's
    said = top.text
    assert "Per step, not per epoch: images/s over the timed rounds of steps is higher for + batch 64" in said
    assert said.index("whole-epoch time") < said.index("Per step")
    # why the two ratios differ, from the record, not a reason that could only push one way (a grader)
    assert "The rates behind the two ratios: + batch 64 ran at " in said
    assert " over its timed rounds and 16,667 images/s over its whole epochs" in said
    assert "loader's start and its last batch" not in said
    assert "+ batch 64: a whole epoch of 50,000 images took 3 s" in said
    study_checks.holds([top], "speed")
    # a baseline whose epoch no later rung beats says so, on epochs
    slow = {**EPOCHS, "pil": [2.0, 2.1, 1.9]}
    top = speed.conclude(base, _ladder(RATES, epochs=slow))[0][0]
    assert (
        top.headline.plain()
        == "No rung after the baseline shortened the whole epoch by what this run can tell."
    )
    study_checks.holds([top], "speed")


def test_the_answer_states_mfu_against_the_devices_one_peak_or_says_it_cannot(base, tmp_path):
    """Grader: the page asks how far training is from the hardware (MFU) and the answer never said it. The
    peak is the device's one peak (flops.peak_number, as every page names it); without one, can't tell."""
    res = _ladder(RATES, epochs=EPOCHS)
    res.table["peak_tflops"] = 0.05
    res.table["peak_source"] = "measured once on this machine (test) and kept in device-peaks.json"
    res.table.loc[res.table["rung"] == "big_batch", "epoch_mfu"] = 0.123
    top = speed.conclude(base, res)[0][0]
    said = top.details[1].plain()
    assert (
        said
        == "Over its whole epoch, + batch 64 used 12.3% of this device's fp32 peak of 0.05 TFLOP/s (its MFU)."
    )
    named = {n.name: n for n in top.numbers}
    assert named["this device's fp32 peak"].provenance == "measured"
    assert named["big_batch: MFU over the epoch"].value == pytest.approx(12.3)
    study_checks.holds([top], "speed")
    # another rung's epoch line names the precision of the peak its MFU is of (a grader read an fp32 rung's
    # share beside a bf16 rung's as of one peak)
    res.table.loc[res.table["rung"] == "pil", "epoch_mfu"] = 0.0702
    lines = [d.plain() for d in speed.conclude(base, res)[0][0].details]
    assert any("(MFU 7.02% of this device's fp32 peak, over the epoch)." in x for x in lines), lines
    res.table["peak_tflops"] = float("nan")  # no peak in the record: no MFU, and said so
    res.table["epoch_mfu"] = float("nan")
    top = speed.conclude(base, res)[0][0]
    assert top.details[1].plain() == (
        "This run can't tell how far + batch 64 is from the hardware: the record holds no fp32 peak of this "
        "device, so no MFU."
    )
    study_checks.holds([top], "speed")


def test_the_conclusions_hold_against_their_own_record(base):
    from hpml_lab.answers import check
    from hpml_lab.report import claims

    answers, flags = speed.conclude(base, _ladder(RATES))
    rec = Record("speed", "Speed ladder", answers, [f.as_dict() for f in flags])
    check(rec)  # every number tagged, one name per number
    data = json.loads(json.dumps(rec.as_dict()))
    assert claims.check_record(data) == []
    assert all(a["headline"]["html"] for a in data["answers"])  # findings, not text with numbers beside it
    html = data["answers"][1]["headline"]["html"]
    assert '<span data-number="tensor vs pil: ratio">3.01x</span>' in html


def test_an_mfu_above_the_measured_peak_is_flagged(base):
    res = _ladder(RATES)
    res.table.loc[res.table["rung"] == "big_batch", "mfu"] = 1.5
    _, flags = speed.conclude(base, res)
    assert [f.kind for f in flags] == ["MFU above 100%"] and "L6 (150%) reached more" in flags[0].message
    # over its whole epochs too (review29: the epochs' share was not read)
    res.table.loc[res.table["rung"] == "big_batch", "mfu"] = 0.5
    res.table.loc[res.table["rung"] == "big_batch", "epoch_mfu"] = 1.2
    _, flags = speed.conclude(base, res)
    (flag,) = [f for f in flags if f.kind == "MFU above 100%"]
    assert "L6 (120%) reached more" in flag.message
    # the rung's own Number, as its answers and the table state it (not one named apart, after its label)
    (share,) = flag.finding.numbers()
    assert share.name == "big_batch: MFU over the epoch" and share.value == pytest.approx(120)
    res.table.loc[res.table["rung"] == "big_batch", ["epoch_mfu", "mfu"]] = [0.5, 1.5]
    _, flags = speed.conclude(base, res)
    (flag,) = [f for f in flags if f.kind == "MFU above 100%"]
    assert [n.name for n in flag.finding.numbers()] == ["big_batch: MFU"]  # the table's column, its name


def test_shares_of_a_peak_measured_busy_are_flagged_as_on_c1_c2_and_c5(base):
    """grade34a: the peak every page divides by was measured at a load of 1.27 per core; c2 said its share was
    uncertain, other pages did not. The ladder's rungs divide by the same kept peaks: a flag per precision
    whose peak was measured busy, none for an idle one, none for a precision a rung passed ('MFU above 100%'
    says more of it); and the page's record holds with two such flags (review36: their loads
    shared a name)."""
    from hpml_lab.answers import Record, check

    res = _ladder(RATES)
    res.table["peak_tflops"] = 0.36
    bf16 = res.table["rung"].isin(["bf16", "big_batch"])
    res.table.loc[bf16, ["peak_precision", "peak_tflops"]] = ["bf16", 0.9]
    res.meta["peak_loads"] = {
        "fp32": {"load1": 2.54, "cores": 2, "steal_pct": 0.0},
        "bf16": {"load1": 3.1, "cores": 2, "steal_pct": 0.0},
    }
    answers, flags = speed.conclude(base, res)
    said = [str(f.message) for f in flags if f.kind == "peak measured busy"]
    assert [m.split(" was measured")[0] for m in said] == [
        "this device's fp32 peak",
        "this device's bf16 peak",
    ]
    check(Record("speed", "t", answers, [f.as_dict() for f in flags]))
    res.meta["peak_loads"]["bf16"]["load1"] = 0.3  # an idle measurement: no flag for its peak
    assert len([f for f in speed.conclude(base, res)[1] if f.kind == "peak measured busy"]) == 1
    res.table.loc[res.table["rung"] == "pil", "mfu"] = 1.5  # an fp32 rung passed its peak
    kinds = [f.kind for f in speed.conclude(base, res)[1]]
    assert "MFU above 100%" in kinds and "peak measured busy" not in kinds
    res.meta["peak_loads"]["bf16"]["load1"] = 3.1  # the bf16 peak, which no rung passed, is still flagged
    flags = [f for f in speed.conclude(base, res)[1] if f.kind == "peak measured busy"]
    assert [str(f.message).split(" was")[0] for f in flags] == ["this device's bf16 peak"]


def test_the_busy_flag_states_the_load_before_the_run_as_the_environment_table_does(base):
    """A fresh page said 'busy before the run (load average 3.48 ...)' beside an environment table whose load
    before the run was 3.33: the flag took the load read after the ladder. It states the load before the run,
    the same Numbers as the environment table; a machine that became busy only while the ladder ran is said
    so, with its busiest reading."""
    from hpml_lab import sanity

    res = _ladder(RATES)
    idle = {"load1": 0.4, "cores": 2, "steal_pct": 0.0}
    res.meta.update(
        run_id="resnet_tiny-sgd-b32-6428e42e", machine=idle, load_after={"load1": 5.0, "cores": 2}
    )
    (flag,) = [f for f in speed.conclude(base, res)[1] if f.kind == "machine busy"]
    assert flag.message.startswith(
        "the machine became busy while the ladder ran (load average 5 on 2 usable cores at its busiest "
        "reading"
    )
    res.meta.update(load_after={"load1": 0.5, "cores": 2}, load_per_round=[0.5, 3.0], load_epochs=[0.6])
    assert (
        "load average 3 on 2"
        in next(f for f in speed.conclude(base, res)[1] if f.kind == "machine busy").message
    )
    res.meta.update(load_per_round=[0.5, 0.7])
    assert "machine busy" not in {f.kind for f in speed.conclude(base, res)[1]}
    busy = {"load1": 3.33, "cores": 2, "steal_pct": 0.0}
    res.meta.update(machine=busy, load_after={"load1": 3.48, "cores": 2})
    (flag,) = [f for f in speed.conclude(base, res)[1] if f.kind == "machine busy"]
    assert flag.message.startswith(
        "the machine was busy before run resnet_tiny-sgd-b32-6428e42e (load average 3.33 on 2 usable cores"
    )
    table = sanity.load_finding(busy, "resnet_tiny-sgd-b32-6428e42e")  # the environment table's load
    said, shown = ({n.name: n.value for n in f.numbers()} for f in (flag, table))
    load = "load average before resnet_tiny-sgd-b32-6428e42e"
    assert said[load] == shown[load] == 3.33 and all(shown[k] == v for k, v in said.items() if k in shown)


def test_too_few_repeats_are_flagged(base):
    res = _ladder({k: (v[:2] if v else v) for k, v in RATES.items()})
    res.meta["repeats"] = 2
    answers, flags = speed.conclude(base, res)
    assert [f.kind for f in flags] == ["too few samples"]
    assert all(a.verdict is None or a.verdict["outcome"] == "tie" for a in answers)


def test_the_chart_keeps_a_place_for_a_rung_not_run():
    fig = speed.chart(_ladder(RATES))
    ax = fig.axes[0]
    labels = [f"L{i}" for i in range(len(ladder.RUNGS))] + ["plain script (reference)"]
    assert [t.get_text() for t in ax.get_xticklabels()] == labels
    assert "not run" in [t.get_text() for t in ax.texts]
    # every panel marks the same rungs (grade34b: the step-time panel left them blank): compile, CUDA graphs,
    # the larger batch and the plain script
    for panel in fig.axes:
        marked = [round(t.get_position()[0]) for t in panel.texts if t.get_text() == "not run"]
        assert marked == [4, 5, 7, 8], panel.get_title()
    assert ax.get_yscale() == "log"
    # _ladder's plain script did not run: no word of its whole epochs in the title or the legend
    legend = " ".join(t.get_text() for lg in fig.legends for t in lg.get_texts())
    assert "plain script" not in ax.get_title() and "plain script" not in legend
    ran = speed.chart(_ladder(RATES, epochs={ladder.REFERENCE: [0.6, 0.61, 0.59]}))
    legend = " ".join(t.get_text() for lg in ran.legends for t in lg.get_texts())
    assert "the plain script's: its\nwhole epochs" in ran.axes[0].get_title()
    assert "the plain script's over its whole epochs" in legend
    # its bar is from whole epochs, not the timed steps of the panel's title: its label says so too
    assert ran.axes[0].get_xticklabels()[-1].get_text() == "plain script (reference, whole epochs)"


def test_the_chart_draws_the_whole_epochs_the_answers_lead_with():
    """grade31b: every rung's answer leads with its whole epochs, and the figure drew only the timed rounds. A
    ladder with timed epochs gets a panel of them: every epoch a dot, its median a bar; none without."""
    epochs = {"pil": [2.0, 2.1, 2.05], "tensor": [1.0, 1.01, 0.99], ladder.REFERENCE: [0.6, 0.61]}
    fig = speed.chart(_ladder(RATES, epochs=epochs))
    assert len(fig.axes) == 3
    ax = fig.axes[2]
    dots = [ln for ln in ax.get_lines() if ln.get_marker() == "o"]
    assert sorted(y for ln in dots for y in ln.get_ydata()) == sorted(sum(epochs.values(), []))
    bars = [ln for ln in ax.get_lines() if ln.get_marker() in ("None", None, "")]
    assert sorted(ln.get_ydata()[0] for ln in bars) == [0.605, 1.0, 2.05]  # each rung's median
    # the plain script's, run after the ladder in its own process, apart; rungs not run marked; a log axis
    (script,) = [ln for ln in dots if "plain script" in ln.get_label()]
    assert list(script.get_ydata()) == epochs[ladder.REFERENCE] and "after the ladder" in script.get_label()
    assert [t.get_text() for t in ax.texts].count("not run") == 3 and ax.get_yscale() == "linear"
    wide = speed.chart(_ladder(RATES, epochs={**epochs, "pil": [9.0, 9.1, 8.9], "tensor": [0.5, 0.51, 0.49]}))
    assert wide.axes[2].get_yscale() == "log"  # a GPU ladder's spread: log, as the throughput's axis
    # its tick labels readable (grade36b: every minor tick named, '0.8' over '0.9', '5' to '10' run together)
    wide.canvas.draw()
    r, ax3 = wide.canvas.get_renderer(), wide.axes[2]
    lo, hi = ax3.get_ylim()
    ticks = [
        t
        for t in ax3.get_yticklabels() + ax3.get_yticklabels(minor=True)
        if t.get_text() and lo <= t.get_position()[1] <= hi
    ]
    boxes = sorted((t.get_window_extent(r) for t in ticks), key=lambda b: b.y0)
    assert len(boxes) >= 2 and all(a.y1 <= b.y0 for a, b in zip(boxes, boxes[1:])), [
        t.get_text() for t in ticks
    ]
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        t.get_text() for t in fig.axes[0].get_xticklabels()
    ]
    from figure_checks import legends_clear_of_data

    legends_clear_of_data(fig)
    assert len(speed.chart(_ladder(RATES)).axes) == 2  # no epochs timed: no such panel


def test_the_charts_mfu_labels_sit_above_the_whiskers_not_on_them():
    """Grader: each rung's MFU was written at the bar's top, over its interquartile whisker and cap."""
    fig = speed.chart(_ladder(RATES))
    ax, table = fig.axes[0], _ladder(RATES).table.reset_index(drop=True)
    r = fig.canvas.get_renderer()
    whiskers = [c for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
    segments = [seg for c in whiskers for coll in c.lines[2] for seg in coll.get_segments() if len(seg) == 2]
    mfu = [
        t for t in ax.texts if t.get_gid() == "mfu"
    ]  # the timed steps' MFU, not the epoch's (the answer's)
    assert mfu and len(mfu) == int((table["status"] == "measured").sum())
    for t in mfu:
        i, _ = t.xy  # the point it stands over (its position is an offset from it)
        box = t.get_window_extent(r)
        assert box.y0 > ax.transData.transform((i, table.loc[int(i), "images_per_s_q3"]))[1]  # above the top
        for seg in segments:  # no whisker passes through a label
            (x0, y0), (x1, y1) = ax.transData.transform(seg)
            assert not (box.x0 <= x0 <= box.x1 and min(y0, y1) <= box.y1 and max(y0, y1) >= box.y0), (
                t.get_text()
            )


def _many_rungs(k: int = 14, mfu: float = 0.79) -> pd.DataFrame:
    """A hand-built ladder table of `k` measured rungs of about the same images/s, each `mfu` of its ideal (so
    the ideal marker sits just above the bar, where the grader found the labels drawn over it)."""
    rows = []
    for i in range(k):
        ips = 1_500.0 + 40 * (i % 3)
        rows.append(
            {
                **{c: float("nan") for c in ladder.COLUMNS},
                "rung": f"r{i}",
                "label": f"PIL loader with {i} workers",  # as long as the ladder's own
                "status": "measured",
                "repeats": 5,
                "images_per_s": ips,
                "images_per_s_q1": ips * 0.95,
                "images_per_s_q3": ips * 1.05,
                "step_s": 0.02,
                "step_min_s": 0.018,
                "step_max_s": 0.03,
                "mfu": mfu,
                "ideal_images_per_s": ips / mfu,
            }
        )
    return pd.DataFrame(rows, columns=ladder.COLUMNS)


@pytest.mark.parametrize("k", [9, 14, 24])
def test_the_charts_mfu_labels_overlap_no_label_marker_or_legend(k):
    """Grader: 'MFU 78.9%MFU 67.4%MFU 3.04%' ran into each other and sat on the red ideal markers. On a
    table of many rungs whose ideal sits just above each bar, no MFU label overlaps another, an ideal marker
    or a whisker; each stands inside the axes; the legend covers no panel."""
    from figure_checks import legends_clear_of_data, overlap
    from matplotlib.transforms import Bbox

    table = _many_rungs(k)
    fig = speed.chart(table)
    ax, r = fig.axes[0], fig.canvas.get_renderer()
    fig.canvas.draw()
    labels = [t for t in ax.texts if t.get_gid() == "mfu"]
    assert [t.get_text() for t in labels] == [fmt_value(79.0, "%")] * k
    boxes = [t.get_window_extent(r) for t in labels]
    for i, a in enumerate(boxes):
        assert all(not overlap(a, b) for b in boxes[i + 1 :]), labels[i].get_text()
        inner = ax.get_window_extent(r)
        assert inner.x0 <= a.x0 and a.x1 <= inner.x1 and inner.y0 <= a.y0 and a.y1 <= inner.y1
    ideal = next(c for c in ax.collections if c.get_label().startswith("ideal"))
    half_w = (ideal.get_sizes()[0] ** 0.5) / 2 * fig.dpi / 72  # the marker's half width, in pixels
    half_h = max(1.0, ideal.get_linewidths()[0] * fig.dpi / 72)
    for x, y in ax.transData.transform(ideal.get_offsets()):
        mark = Bbox.from_extents(x - half_w, y - half_h, x + half_w, y + half_h)
        assert not any(overlap(mark, b) for b in boxes), (x, y)
    for cap in (
        line for c in ax.containers if type(c).__name__ == "ErrorbarContainer" for line in c.lines[1]
    ):
        for x, y in ax.transData.transform(cap.get_xydata()):
            assert not any(b.x0 <= x <= b.x1 and b.y0 <= y <= b.y1 for b in boxes)
    legends_clear_of_data(fig)
    legend = fig.legends[0].get_window_extent(r)
    for panel in fig.axes:  # an axis label clear of the rungs' slanted names, a title clear of the legend
        names = [t.get_window_extent(r) for t in panel.get_xticklabels() if t.get_text()]
        assert not any(overlap(panel.yaxis.label.get_window_extent(r), b) for b in names), panel.get_ylabel()
        assert not overlap(panel.title.get_window_extent(r), legend), panel.get_title()


def test_a_row_with_too_few_samples_shows_no_spread():
    """Grader: the plain script's row showed q1 = q3 and a step IQR of 0 from one epoch. A row with fewer than
    sanity.MIN_SAMPLES samples has no quartiles, IQR, min or max in the record, the table says n/a there with
    a note that says why, and the chart draws no whisker for it."""
    from hpml_lab import sanity

    stats = ladder._stats([2_164.0], [0.118])
    assert stats["images_per_s"] == 2_164.0 and stats["step_s"] == 0.118
    for k in ("images_per_s_q1", "images_per_s_q3", "step_iqr_s", "step_min_s", "step_max_s"):
        assert stats[k] != stats[k], k  # NaN: no spread from one value
    two = ladder._stats([1.0, 2.0], [1.0, 0.5])
    assert two["step_iqr_s"] != two["step_iqr_s"]
    three = ladder._stats([1.0, 2.0, 3.0], [1.0, 0.5, 0.3])
    assert three["images_per_s_q1"] < three["images_per_s_q3"] and three["step_iqr_s"] > 0
    assert sanity.MIN_SAMPLES == 3

    res = _ladder(RATES, epochs={ladder.REFERENCE: [0.6]})
    t = res.table
    ref = t["rung"] == ladder.REFERENCE
    t.loc[ref, ["repeats", "images_per_s_q1", "images_per_s_q3", "step_iqr_s"]] = [
        1,
        float("nan"),
        float("nan"),
        float("nan"),
    ]
    t.loc[t["status"] == "measured", "repeats"] = t.loc[t["status"] == "measured", "repeats"].fillna(5)
    shown = speed.ladder_table(t)
    assert list(shown.loc[ref, ["images_per_s_q1", "images_per_s_q3", "step_iqr_s"]].iloc[0]) == ["n/a"] * 3
    not_run = t["status"] != "measured"
    assert shown.loc[not_run, "images_per_s_q1"].isna().all()  # a rung not run: '-', not n/a
    t.loc[not_run, "peak_precision"] = ""  # as study._row leaves it: a blank cell beside its '-' cells
    assert speed.ladder_table(t).loc[not_run, "peak_precision"].isna().all()
    assert shown.loc[t["rung"] == "pil", "images_per_s_q1"].iloc[0] == pytest.approx(100.0)
    note = speed.spread_note(t)
    assert note.plain() == (
        "n/a in the quartile and IQR columns: plain script (reference) (1 epoch) had fewer than 3 samples, "
        "and fewer give no spread, so none is shown."
    )
    assert not stray_digits(note.template)
    fig = speed.chart(t)  # no whisker on the one sample
    ax = fig.axes[0]
    xs = {
        round(float(seg[0][0]))
        for c in ax.containers
        if type(c).__name__ == "ErrorbarContainer"
        for coll in c.lines[2]
        for seg in coll.get_segments()
    }
    assert int(t.index[ref][0]) not in xs and 0 in xs
    t.loc[ref, "repeats"] = 3
    assert speed.spread_note(t) is None and "n/a" not in set(speed.ladder_table(t)["step_iqr_s"].astype(str))


def test_the_plain_script_is_set_beside_the_rung_it_mirrors(base):
    from hpml_lab.report import claims

    epochs = {
        "pil": [9.0, 9.1, 8.9],
        "tensor": [3.3, 3.4, 3.2],
        "big_batch": [1.0, 1.02, 0.98],  # the fastest whole epoch, though not the most images/s in the rounds
        ladder.REFERENCE: [0.6, 0.61, 0.59],
    }
    res = _ladder(RATES, epochs=epochs)
    res.meta.update(load_before={"cores": 16}, load_epochs=[1.0, 1.0, 1.0], reference={"loads": [1.0, 1.1]})
    answers, _ = speed.conclude(base, res)
    ref = answers[-2]
    assert ref.status == "answered" and ref.verdict["outcome"] == "worse"  # the project's epoch is the slower
    said = ref.headline.plain()
    assert (
        said == "The plain script is 1.67x faster than + batch 64 on epoch time."
    )  # in words, in one breath
    assert (
        "The plain script is 1.67x faster than + batch 64 on epoch time (95% CI" in ref.text
    )  # then the interval
    assert "a whole epoch of 50,000 images took" in ref.text and "plain script (reference)" in ref.text
    # how the two were sampled, said beside the verdict (a grader: other pages say theirs, this one did not)
    assert "The plain script ran in its own process after the ladder's epochs, not interleaved" in ref.text
    rec = Record("speed", "Speed ladder", answers, [])
    assert claims.check_record(json.loads(json.dumps(rec.as_dict()))) == []
    # runs one after the other while the load moved: the verdict cannot tell, and says why
    res.meta["reference"] = {"loads": [30.0, 30.0]}
    assert speed.conclude(base, res)[0][-2].verdict["outcome"] == "tie"
    # the script ran at another rung's settings: that rung is its match, not the fastest epoch
    res.meta["reference"] = {"loads": [1.0, 1.1], "rung": "tensor"}
    ref = speed.conclude(base, res)[0][-2]
    assert ref.verdict["label_a"] == "L1" and "L1: a whole epoch" in ref.text
    res.meta["reference"] = {"loads": [1.0, 1.1], "rung": "compile"}  # its rung has no timed epoch
    assert speed.conclude(base, res)[0][-2].status == "not answered"
    # no rung's epoch timed: nothing to set beside it
    only = _ladder(RATES, epochs={ladder.REFERENCE: [0.6, 0.61, 0.59]})
    assert speed.conclude(base, only)[0][-2].status == "not answered"


LAB2_OUT = """...........................running new python file.............................
Number of trainable parameters :  11173962
-----------------------------------------------
Epoch :  1
Time taken for Epoch :  12.3456 sec
Load Time for epoch :  0.912345 sec with 2 workers  | Train Time :  6.543210 sec
Avg Loss :  1.734  | Avg Accuracy :  35.12 %
Top 1 accuracy is  3 among the individual label accuracies [1. 2.]
-----------------------------------------------
Epoch :  2
Time taken for Epoch :  8.8600 sec
Load Time for epoch :  0.456789 sec with 2 workers  | Train Time :  5.432100 sec
Avg Loss :  1.201  | Avg Accuracy :  56.7 %
Avg Data Load times with `2` workers is `0.684567` sec and Avg Train Times is `5.987655` sec
Avg epoch time is `10.6028` sec
"""


def test_the_course_scripts_epochs_are_read_from_what_it_prints():
    """course.parse reads lab2.py's own lines (its print calls, reproduced above with their spacing): each
    epoch's whole-loop seconds, its summed loading and training, its workers, loss and accuracy; the
    averages at the end are not epochs."""
    from hpml_lab.studies.speed import course

    assert course.parse(LAB2_OUT) == [
        {
            "seconds": 12.3456,
            "load_s": 0.912345,
            "workers": 2,
            "train_s": 6.54321,
            "loss": 1.734,
            "accuracy": 35.12,
        },
        {
            "seconds": 8.86,
            "load_s": 0.456789,
            "workers": 2,
            "train_s": 5.4321,
            "loss": 1.201,
            "accuracy": 56.7,
        },
    ]
    assert course.parse("Traceback (most recent call last):\n  RuntimeError: no CUDA") == []


def test_the_course_script_is_found_where_the_kit_puts_it_and_runs_on_a_gpu_only(tmp_path, monkeypatch):
    """Where the course's code is looked for, in order ($HPML_COURSE_LAB2, the wheels' copy, the shared
    reference beside the project), how it is started (through run_on_synthetic.py on the synthetic data,
    lab2.py's own flags on the real data), and why it does not run: on a CPU, below two epochs, not found.
    Each reason is words the answer box can state (no digits)."""
    from hpml_lab.studies.speed import course

    root = tmp_path / "project"
    wheels, beside, own = (
        root / ".whl" / "course-lab2",
        tmp_path / "shared" / "reference" / "course-lab2",
        tmp_path / "mine",
    )
    monkeypatch.delenv(course.ENV, raising=False)
    assert course.find(root) is None
    for folder in (beside, wheels, own):
        folder.mkdir(parents=True)
        (folder / "lab2.py").write_text("")
        (folder / "run_on_synthetic.py").write_text("")
    assert course.find(root) == wheels.resolve()
    monkeypatch.setenv(course.ENV, str(own))
    assert course.find(root) == own.resolve()
    assert course.places(root) == [own, wheels, root / ".." / "shared" / "reference" / "course-lab2"]
    monkeypatch.delenv(course.ENV)
    (wheels / "lab2.py").unlink()
    assert course.find(root) == beside.resolve()

    data = tmp_path / "data"
    (data / "cifar-10-batches-py").mkdir(parents=True)
    argv, env = course.command(beside, data, 4)
    assert argv[1].endswith("lab2.py") and "--epochs=4" in argv and "--device=cuda" in argv and env == {}
    assert (
        f"--dataset-path={data.resolve()}" in argv
        and "--num-of-workers=2" in argv
        and "--batch-size=128" in argv
    )
    (data / "cifar-10-batches-py" / "SYNTHETIC.json").write_text("{}")
    argv, env = course.command(beside, data, 4)
    assert argv[1].endswith("run_on_synthetic.py")
    assert env == {"ROOT": str(data.resolve()), "W": "2", "E": "4", "B": "128"}

    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert "GPU only" in course.why_not(cpu, beside, 4)
    assert "leaves the course's script out" in course.why_not(cuda, beside, 1)
    assert "not found" in course.why_not(cuda, None, 4)
    assert course.why_not(cuda, beside, 4) == ""
    for why in (
        course.why_not(cpu, beside, 4),
        course.why_not(cuda, beside, 1),
        course.why_not(cuda, None, 4),
    ):
        assert not stray_digits(why)
    info = course.measure(data, cpu, 4, root=root, log=lambda *a: None)  # refused before any process starts
    assert info["status"] == "not run" and "GPU only" in info["why"] and "command" not in info
    assert info["looked_in"][-1].endswith("course-lab2") and info["folder"] == str(beside.resolve())
    # a ladder of another network, data set or a subset has nothing to set beside the course's ResNet-18 on
    # every training image (a review: the smoke profile's resnet_tiny on 2,048 images was compared with it)
    lab = RunConfig(task="speed", model="resnet18")
    assert course.why_not(cuda, beside, 4, lab) == ""
    for other in (
        lab.replace(model="resnet_tiny"),
        lab.replace(subset=2048),
        lab.replace(dataset="tinyimagenet"),
    ):
        why = course.why_not(cuda, beside, 4, other)
        assert "would not compare" in why and not stray_digits(why)
    # the synthetic data needs the folder's run_on_synthetic.py (not in the course's own repository)
    (beside / "run_on_synthetic.py").unlink()
    assert "no run_on_synthetic.py" in course.why_not(cuda, beside, 4, lab, data)
    assert course.why_not(cuda, beside, 4, lab, tmp_path / "real") == ""  # lab2.py's own flags there


def test_the_course_scripts_run_is_killed_when_it_outlasts_its_limit_and_a_failure_is_said(
    tmp_path, monkeypatch
):
    """course.measure's process, with stand-ins for the course's folder (the real lab2.py synchronizes CUDA
    and runs on a GPU only: tests/cuda runs it there): epochs it printed are read, a script that fails or
    prints too few epochs is 'failed' with why, and one that outlasts timeout_s() is killed and said, never
    raised, so the ladder's page stands without it."""
    from hpml_lab.studies.speed import course

    folder, data = tmp_path / "course", tmp_path / "data"
    folder.mkdir()
    (data / "cifar-10-batches-py").mkdir(parents=True)
    (data / "cifar-10-batches-py" / "SYNTHETIC.json").write_text("{}")
    (folder / "lab2.py").write_text("")
    monkeypatch.setenv(course.ENV, str(folder))
    cuda = torch.device("cuda")  # a device type, as the ladder passes it: no CUDA call is made here

    def script(body: str) -> dict:
        (folder / "run_on_synthetic.py").write_text(body)
        return course.measure(data, cuda, 2, root=tmp_path, log=lambda *a: None)

    printed = "import os, sys; print(open(sys.argv[0].replace('run_on_synthetic.py', 'out.txt')).read())"
    (folder / "out.txt").write_text(LAB2_OUT)
    ok = script(printed)
    assert ok["status"] == "measured" and [e["seconds"] for e in ok["epochs"]] == [12.3456, 8.86]
    assert (
        ok["command"].startswith(f"ROOT={data.resolve()} W=2 E=2 B=128 ") and ok["load_after"]["cores"] >= 1
    )
    failed = script("import sys; print('Time taken for Epoch :  1.0 sec'); sys.exit('CUDA error: no device')")
    assert failed["status"] == "failed" and "ended with code 1 after 1 epochs: CUDA error" in failed["why"]
    monkeypatch.setattr(course, "START_S", 1.0)
    monkeypatch.setattr(course, "EPOCH_S", 0.0)
    started = time.monotonic()
    hung = script("import time; print('Time taken for Epoch :  1.0 sec', flush=True); time.sleep(60)")
    assert time.monotonic() - started < 30 and hung["status"] == "failed"
    assert "did not finish within its time limit" in hung["why"] and hung["timeout_s"] == 1.0
    assert [e["seconds"] for e in hung["epochs"]] == [1.0] and not stray_digits(hung["why"])


@pytest.mark.cuda
def test_the_course_script_runs_as_written_on_the_gpu(cifar_root):
    """The course's own lab2.py, found where the kit carries it, run as written for two epochs on the
    suite's synthetic CIFAR-10 (1,000 images: 8 batches of its 128), each epoch read from what it printed."""
    from hpml_lab.studies.speed import course

    if course.find() is None:
        pytest.skip("the course's lab2.py is not at hand (make gpu-wheels copies it beside the wheels)")
    info = course.measure(cifar_root, torch.device("cuda"), 2, log=lambda *a: None)
    assert info["status"] == "measured", info["why"]
    assert len(info["epochs"]) == 2 and all(e["seconds"] > 0 and e["workers"] == 2 for e in info["epochs"])
    assert "run_on_synthetic.py" in info["command"] and info["load_after"]["cores"] >= 1


def test_the_ladders_shortest_epoch_is_set_beside_the_course_scripts(base):
    """The course's script's epochs after its first against the ladder's shortest whole epoch (not the rung
    the plain script mirrors): a verdict on runs one after the other, in words first; too few epochs say
    they cannot tell; a script that did not run says why, in words; a failure's digits stay in meta.json."""
    from hpml_lab.report import claims

    epochs = {"pil": [9.0, 9.1, 8.9], "tensor": [3.3, 3.4, 3.2], "big_batch": [1.0, 1.02, 0.98]}
    res = _ladder(RATES, epochs=epochs)
    course = {
        "status": "measured",
        "why": "",
        "workers": 2,
        "batch_size": 128,
        "epochs": [{"seconds": s} for s in (12.3, 8.9, 8.8, 9.0)],
        "load_before": {"load1": 1.0},
        "load_after": {"load1": 1.1},
    }
    res.meta.update(load_before={"cores": 16}, load_epochs=[1.0, 1.0, 1.0], course=course)
    answers, _ = speed.conclude(base, res)
    c = answers[-1]
    assert c.status == "answered" and c.verdict["outcome"] == "better"
    assert c.verdict["median_b"] == pytest.approx(8.9) and c.verdict["n_b"] == 3  # the first epoch left out
    assert c.headline.plain() == "+ batch 64 is 8.9x faster than the course's lab2.py on epoch time."
    assert "The course's lab2.py, as written: 8.9 s an epoch after its first" in c.text
    assert "a PIL loader with 2 workers, batch 128" in c.text and "+ batch 64: a whole epoch" in c.text
    assert "The course's lab2.py ran in its own process after the ladder's epochs, not interleaved" in c.text
    rec = Record("speed", "Speed ladder", answers, [])
    assert claims.check_record(json.loads(json.dumps(rec.as_dict()))) == []
    course["epochs"] = course["epochs"][:2]  # one epoch after the first: no verdict from it
    assert speed.conclude(base, res)[0][-1].verdict["outcome"] != "better"
    res.meta["course"] = {
        "status": "not run",
        "why": "the course's script synchronizes CUDA after every step, so it runs on a GPU only",
    }
    c = speed.conclude(base, res)[0][-1]
    assert c.status == "not answered" and c.headline.plain() == "The course's lab2.py did not run here."
    assert c.missing.endswith("GPU only")
    res.meta["course"] = {"status": "failed", "why": "the course's lab2.py ended with code 1 after 0 epochs"}
    failed = speed.conclude(base, res)[0][-1]
    assert failed.status == "not answered" and "its entry in the run's meta.json" in failed.missing
    assert failed.headline.plain() == "The course's lab2.py did not complete here."  # it ran, and failed


def test_the_reference_script_runs_here_and_trains_the_labs_network(base, cifar_root):
    """The outside reference end to end on this CPU at a tiny size (its own process, as the ladder runs it),
    and its network: the lab's ResNet-18, parameter for parameter."""
    from hpml_lab import models
    from hpml_lab.studies.speed import reference

    assert models.count_parameters(reference.resnet()) == models.count_parameters(models.build("resnet18"))
    cfg = base.replace(batch_size=32, subset=64, lr=0.05)
    args, why = ladder.reference_args(cfg, CPU, speed.Settings(compile_rung="off", epoch_repeats=1))
    assert why == "" and args[args.index("--mode") + 1] == "eager"
    out = ladder.run_reference(args)
    assert [e["images"] for e in out["epochs"]] == [64, 64] and all(e["seconds"] > 0 for e in out["epochs"])
    assert out["widths"] == "8,16,32,64" and out["precision"] == "fp32"
    x, y = reference.load(cifar_root, CPU, 64)
    xb, yb = next(reference.batches(x, y, 32))
    assert xb.shape == (32, 3, 32, 32) and xb.is_contiguous(memory_format=torch.channels_last)
    assert yb.shape == (32,) and abs(float(xb.mean())) < 1.5  # normalised
    with pytest.raises(RuntimeError, match="the reference script failed"):
        ladder.run_reference([*args, "--data", str(cifar_root / "nowhere")])
    assert "basic blocks" in ladder.reference_args(cfg.replace(model="resnet50"), CPU, speed.Settings())[1]


# ------------------------------------------------------------------ the notebook, once
@pytest.mark.slow
def test_the_notebook_renders_at_tiny(rendered):
    run = rendered("speed")  # the suite's one tiny render of the notebook, shared with tests/notebooks
    assert run.outcome["status"] == "ok", run.outcome["error"]
    html = (run.reports / "speed.html").read_text()
    assert "torch.compile" in html and "not run at this profile" in html
    rec = json.loads((run.reports / "speed.answer.json").read_text())
    # the headline, one per rung after the baseline, the plain script's beside the fastest epoch, and the
    # course's script's, which runs on a GPU only
    assert len(rec["answers"]) == len(ladder.RUNGS) + 2
    course = rec["answers"][-1]
    assert course["status"] == "not answered" and "GPU only" in course["missing"]
    table = pd.read_csv(next((run.out / "results" / "speed").glob("*/ladder.csv")))
    assert list(table["rung"]) == [*ladder.RUNGS, ladder.REFERENCE]
    assert (run.out / "figures" / "speed_ladder.png").is_file()
    # the environment table's config is the baseline rung's, as it ran (grade20: persistent_workers off where
    # the PIL rung ran with them on), and names no field the ladder never reads (grade19: epochs)
    meta = json.loads(next((run.out / "results" / "speed").glob("*/meta.json")).read_text())
    assert meta["config"]["persistent_workers"] is True and meta["config"]["num_workers"] == 1
    assert meta["config"]["device"] == "cpu" and meta["config"]["loader"] == "pil"
    config = dict(rec["tables"]["environment"]["rows"])["config"]
    assert "persistent_workers=✓" in config and "epochs=" not in config


def test_the_step_cap_counts_the_devices_default_at_its_largest():
    """Settings.check_run (no torch at registration) caps steps per rung with steps 0 read as the largest of
    ladder.STEPS; a direct call of run() is checked as the runner checks a notebook's."""
    assert speed.STEPS_DEFAULT_MAX == max(ladder.STEPS.values())
    with pytest.raises(ConfigError, match="training steps per rung"):
        speed.run(RunConfig(task="speed"), speed.Settings(repeats=100, warmup=20, steps=1000))


def test_a_graphed_rung_that_inductor_ran_without_cuda_graphs_is_flagged(base):
    res = _ladder(RATES)
    res.meta["step_ran"] = {"big_batch": {"compile_mode": "reduce-overhead", "cudagraph_skips": 2}}
    flags = speed.conclude(base, res)[1]
    assert [f.kind for f in flags] == ["CUDA graphs skipped"] and "+ batch 64 may have run without" in flags[
        0
    ].message
    res.meta["step_ran"] = {"big_batch": {"compile_mode": "reduce-overhead", "cudagraph_skips": 0}}
    assert speed.conclude(base, res)[1] == []


def test_a_verdict_holds_the_loads_of_its_timed_rounds_only(base):
    """grade24: a per-step verdict held six load readings beside five samples: the reading after the
    untimed warm-up round, which the record keeps first, is no sample's."""
    res = _ladder(RATES)
    res.meta.update(warmup=1, repeats=5, load_before={"cores": 2}, load_per_round=[4.0] + [1.0] * 5)
    step = speed.conclude(base, res)[0][0].verdict  # no whole epochs: the top answer is per step
    assert step["what"] == "images/s over the timed rounds of steps"
    assert list(step["load_a"]) == list(step["load_b"]) == [0.5] * 5
    res.meta.update(load_per_round=[1.0] * 5)  # a record of timed rounds only: read whole
    assert list(speed.conclude(base, res)[0][0].verdict["load_a"]) == [0.5] * 5
