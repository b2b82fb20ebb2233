"""A run a person can watch (report/watch.py): a line per task as it starts and ends, an estimate of what is
left from earlier runs' times, a heartbeat with the epoch and batch while a task runs, the kernel's warnings
kept out."""

from __future__ import annotations

import json
import time

import pytest

from hpml_lab.report import watch


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_durations_read_as_a_person_says_them():
    assert watch.duration(41.4) == "41 s"
    assert watch.duration(119) == "1 min 59 s"
    assert watch.duration(120) == "2 min"
    assert watch.duration(3780) == "1 h 3 min"
    assert watch.about(43) == "about 45 s"
    assert watch.about(200) == "about 3 min"


def test_lines_per_task_with_times_and_what_is_left(tmp_path):
    times = tmp_path / "durations.json"
    times.write_text(json.dumps({"tiny": {"c1": 30, "c2": 90}, "smoke": {"c3": 999}}))
    lines, clock = [], Clock()
    w = watch.Watch(["c1", "c2", "c3"], "tiny", lines.append, times, heartbeat_s=0, clock=clock)
    # c3 has no tiny time: the estimate says so instead of guessing
    assert lines[0].startswith("3 tasks (tiny profile), about 2 min left (from earlier runs), plus c3")
    streams = w.start("c1", "C1: training")
    assert lines[-1] == "[1/3] c1 C1: training ..."
    streams.err.write("UserWarning: This DataLoader will create 4 worker processes\n  warnings.warn(\n")
    clock.t += 119
    w.end("c1", "ok", 119.2, target="reports/c1.html")
    assert lines[-1] == (
        "[1/3] c1 ... ok in 1 min 59 s -> reports/c1.html; 2 line(s) on stderr kept in its executed "
        "notebook; about 6 min left (from earlier runs, at this run's pace: 4.0x), plus c3 (no time "
        "recorded yet)"
    )
    assert not any("DataLoader" in line for line in lines)  # the warning itself is not printed
    assert json.loads(times.read_text()) == {"tiny": {"c1": 119.2, "c2": 90}, "smoke": {"c3": 999}}
    w.start("c2", "C2")
    w.end("c2", "failed", 5, error="ZeroDivisionError: x")
    assert lines[-1].startswith("[2/3] c2 ... failed in 5 s (ZeroDivisionError: x)")
    assert json.loads(times.read_text())["tiny"]["c2"] == 90  # a failed run's time is no estimate


def test_the_estimate_reads_the_outcomes_earlier_runs_left(tmp_path):
    for tid, profile, seconds in (("c1", "tiny", 100), ("c2", "smoke", 50), ("c3", "tiny", 80)):
        outcome = {"task": tid, "profile": profile, "status": "ok", "seconds": seconds}
        (tmp_path / f"{tid}.json").write_text(json.dumps(outcome))
    (tmp_path / "c4.json").write_text("{not json")
    (tmp_path / "durations.json").write_text(json.dumps({"tiny": {"c3": 40}}))
    w = watch.Watch(["c1"], "tiny", [].append, tmp_path / "durations.json", heartbeat_s=0)
    assert w.recorded == {"c1": 100.0, "c3": 40.0}


def test_smoke_estimate_falls_back_to_the_measured_figures(tmp_path):
    lines = []
    watch.Watch(["c1", "c7"], "smoke", lines.append, tmp_path / "none.json", heartbeat_s=0)
    assert lines[0].startswith(
        "2 tasks (smoke profile), about 50 s left (from a fresh clone on 2 idle cores)"
    )


def test_heartbeat_states_the_epoch_and_batch_from_the_progress_lines(tmp_path):
    lines, clock = [], Clock()
    w = watch.Watch(["c1"], "tiny", lines.append, None, heartbeat_s=0, clock=clock)
    streams = w.start("c1", "C1")
    clock.t += 5
    assert (
        w.heartbeat() == "    c1 running 5 s: starting (the kernel, its imports and data; no output yet); "
        "no estimate yet (no earlier tiny run recorded a time)"
    )
    streams.out.write("loading data\n")
    assert "no progress line yet (1 line(s) of output)" in w.heartbeat()
    streams.out.write("[sweep 2/5] c1/resnet_tiny-x: running\n[c1] epoch 1/2 batch 2")  # a line in two writes
    streams.out.write("0/97 loss 2.3 acc 10.0% 44 img/s\n")
    clock.t += 40
    assert w.heartbeat().startswith("    c1 running 45 s: run 2 of 5, epoch 1/2, batch 20/97;")


def test_progress_on_stderr_is_read_too_and_a_stopped_watch_beats_no_more():
    lines, clock = [], Clock()
    w = watch.Watch(["speed"], "tiny", lines.append, None, heartbeat_s=0, clock=clock)
    streams = w.start("speed", "Speed ladder")
    streams.err.write("[speed] warm-up 1/4 done\n")
    assert ": warm-up 1/4 done;" in w.heartbeat()
    streams.err.write("[speed] round 3/4 done\n")
    assert ": round 3/4 done;" in w.heartbeat()
    beating = watch.Watch(["c1"], "tiny", lines.append, None, heartbeat_s=0.05)
    beating.start("c1", "C1")
    beating.stop()  # what run_task does when its task ends by an exception
    said = len(lines)
    time.sleep(0.2)
    assert len(lines) == said and beating._thread is None


def test_the_heartbeat_thread_is_never_silent_longer_than_its_interval():
    lines = []
    w = watch.Watch(["c1", "c2"], "tiny", lines.append, None, heartbeat_s=0.2)
    streams = w.start("c1", "C1")
    streams.out.write("[c1] epoch 2/2 batch 3/4 loss 1 acc 1% 1 img/s\n")
    time.sleep(0.75)
    w.end("c1", "ok", 0.75)
    beats = [line for line in lines if line.startswith("    c1 running")]
    assert len(beats) >= 2, lines
    assert all("epoch 2/2, batch 3/4" in b for b in beats)
    n = len(lines)
    time.sleep(0.4)
    assert len(lines) == n  # the heartbeat stops with the task


def test_a_sweeps_log_says_how_each_run_ended(tmp_path):
    """Each '[sweep i/n] ...: running' line is followed by its end ('done in ... s'); five runs, five of
    each."""
    from hpml_lab import results
    from hpml_lab.config import RunConfig
    from hpml_lab.sweeps import run_sweep

    def run_one(cfg):
        results.write_meta(cfg.run_dir(), {"status": "complete", "config": cfg.to_dict()})

    cfgs = [RunConfig(task="sw", results_dir=str(tmp_path), model="resnet_tiny", seed=s) for s in range(5)]
    lines = []
    run_sweep(cfgs, run_one, log=lines.append)
    assert [line.split(": ")[1].split(" in ")[0] for line in lines] == ["running", "done"] * 5


def test_run_task_prints_the_watch_lines_and_keeps_the_kernels_output_out(
    cifar_root, tmp_path, monkeypatch, capsys
):
    """The runner's hook: papermill gets the watch's streams, so a kernel's warnings and log lines are not
    printed (papermill keeps them in the executed notebook), and the task's start and end lines are."""
    import nbformat
    import papermill

    from hpml_lab.report import runner

    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path / "out"))

    def fake_execute(source, target, stdout_file=None, stderr_file=None, **kw):
        stdout_file.write("[c7] epoch 1/1 batch 1/2 loss 2.3 acc 10.0% 5 img/s\n")
        stderr_file.write("UserWarning: This DataLoader will create 8 worker processes in total.\n")
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# C7")]), target)

    monkeypatch.setattr(papermill, "execute_notebook", fake_execute)
    outcome = runner.run_task("c7", "tiny", cli_params={"data_root": str(cifar_root)})
    out, err = capsys.readouterr()
    assert outcome.status == "ok"
    assert "DataLoader" not in out + err and "img/s" not in out + err
    lines = out.strip().splitlines()
    assert lines[0].startswith("[1/1] c7 ") and "tiny profile" in lines[0]
    assert (
        lines[-1].startswith("[1/1] c7 ... ok in ")
        and "1 line(s) on stderr kept in its executed notebook" in lines[-1]
    )
    times = json.loads((tmp_path / "out" / "reports" / "executed" / "durations.json").read_text())
    assert set(times["tiny"]) == {"c7"}


def test_what_is_left_is_said_at_this_runs_pace_when_it_is_far_from_the_figures():
    lines, clock = [], Clock()
    w = watch.Watch(["c1", "c2", "c3"], "smoke", lines.append, None, heartbeat_s=0, clock=clock)
    expected = {t: w.expected(t)[0] for t in ("c2", "c3")}
    w.start("c1", "C1")
    w.end("c1", "ok", 5 * w.expected("c1")[0])  # a busy machine: five times the measured figure
    assert w.pace() == pytest.approx(5.0)
    assert lines[-1].endswith(
        f"{watch.about(5 * (expected['c2'] + expected['c3']))} left "
        "(from a fresh clone on 2 idle cores, at this run's pace: 5.0x)"
    )
    steady = watch.Watch(["c1", "c2"], "smoke", lines.append, None, heartbeat_s=0, clock=clock)
    steady.start("c1", "C1")
    steady.end("c1", "ok", steady.expected("c1")[0])
    assert steady.pace() == pytest.approx(1.0) and lines[-1].endswith("at this run's pace: 1.0x)")


# The estimate from this run's own pace (issue 45): a fake clock, progress lines as the training loop prints
# them.


def test_the_running_task_is_projected_from_its_own_progress_and_so_is_the_rest():
    """c1 starts (10 s of kernel and imports), says batch 0 of 20, its first batch 5 s later (the loader's
    workers started), then batch 11 twenty seconds after that: a quarter of its training in 20 s since its
    first batch, so 58 s more at its own pace; before any task has ended, that projection (93 s where the
    figure said 41 s) is this run's pace for c2 and c3 too."""
    lines, clock = [], Clock()
    w = watch.Watch(["c1", "c2", "c3"], "smoke", lines.append, None, heartbeat_s=0, clock=clock)
    rest = w.expected("c2")[0] + w.expected("c3")[0]
    streams = w.start("c1", "C1")
    clock.t += 10
    streams.out.write("[c1] epoch 1/2 batch 0/20 starting\n")
    clock.t += 5
    streams.out.write("[c1] epoch 1/2 batch 1/20 loss 2.3 acc 10.0% 6 img/s\n")
    assert w.running_left() is None  # the start-up is not its pace: one batch is no pace yet
    clock.t += 20
    streams.out.write("[c1] epoch 1/2 batch 11/20 loss 2.3 acc 10.0% 16 img/s\n")
    assert w.done_share() == pytest.approx(11 / 40)
    assert w.running_left() == pytest.approx(58.0)
    pace = (35 + 58) / w.expected("c1")[0]
    assert w.pace() == pytest.approx(pace)
    beat = w.heartbeat()
    assert beat.startswith("    c1 running 35 s: epoch 1/2, batch 11/20; ")
    assert beat.endswith(
        f"{watch.about(58 + rest * pace)} left (c1 {watch.about(58)} more at its own pace; from a fresh "
        f"clone on 2 idle cores, at this run's pace: {pace:.1f}x)"
    )
    # no line for 40 s: the task is slower than it was, and what is left grows with it, never shrinks to a
    # guess
    clock.t += 40
    assert w.running_left() == pytest.approx(29 / 40 * 60 / 0.25)
    alone = watch.Watch(["c1"], "smoke", lines.append, None, heartbeat_s=0, clock=clock)  # `hpml-lab run c1`
    streams = alone.start("c1", "C1")
    streams.out.write("[c1] epoch 1/1 batch 1/4 loss 1 acc 1% 1 img/s\n")
    clock.t += 10
    streams.out.write("[c1] epoch 1/1 batch 2/4 loss 1 acc 1% 1 img/s\n")
    assert alone.heartbeat().endswith("batch 2/4; about 20 s left (at its own pace so far)")


def test_a_task_past_its_figure_without_progress_lines_is_never_given_a_passed_figure():
    lines, clock = [], Clock()
    w = watch.Watch(["c1", "c2"], "smoke", lines.append, None, heartbeat_s=0, clock=clock)
    w.start("c1", "C1")
    clock.t += 200  # the figure says 41 s
    beat = w.heartbeat()
    assert "c1 has run past its figure (about 40 s), no progress line to go by" in beat, beat
    assert f"{watch.about(w.expected('c2')[0])} left" in beat  # c2 still has its figure
    clock.t += 30
    assert "about 5 s" not in w.heartbeat()


def test_sweeps_and_rounds_say_how_much_of_the_task_is_done_and_a_second_run_without_one_says_nothing():
    clock = Clock()
    w = watch.Watch(["c3"], "smoke", [].append, None, heartbeat_s=0, clock=clock)
    streams = w.start("c3", "C3")
    streams.out.write("[sweep 2/4] c3/w4: running\n")
    assert w.done_share() == pytest.approx(0.25)  # run 2 begun, nothing of it done
    streams.out.write("[c3] epoch 1/2 batch 5/10 loss 1 acc 1% 1 img/s\n")
    assert w.done_share() == pytest.approx((1 + 0.25) / 4)
    streams.out.write("[c3] epoch 1 done: loss 1\n")
    assert w.done_share() == pytest.approx((1 + 0.5) / 4)
    speed = watch.Watch(["speed"], "smoke", [].append, None, heartbeat_s=0, clock=clock)
    streams = speed.start("speed", "Speed")
    streams.err.write("[speed] warm-up 1/2 done\n[speed] round 3/4 done\n")
    assert speed.done_share() == pytest.approx(0.75)
    c7 = watch.Watch(["c7"], "smoke", [].append, None, heartbeat_s=0, clock=clock)
    streams = c7.start("c7", "C7")
    streams.out.write("[c7] epoch 1/1 batch 0/4 starting\n[c7] epoch 1/1 batch 1/4 loss 1 acc 1% 1 img/s\n")
    clock.t += 5
    streams.out.write("[c7] epoch 1/1 batch 4/4 loss 1 acc 1% 1 img/s\n")
    assert c7.running_left() == pytest.approx(0.0)
    streams.out.write("[c7] epoch 1/1 batch 0/4 starting\n")  # a second run that no sweep count announced
    assert c7.done_share() is None and c7.running_left() is None


def test_the_pace_is_this_runs_over_its_last_tasks_and_a_steady_slowdown_is_estimated_exactly():
    """A machine three times slower than the figures: after the first task the rest is estimated at 3x, which
    is what it takes. Then the load drops: the pace follows the last PACE_WINDOW tasks, not the whole run."""
    ids = ["c1", "c2", "c3", "c4", "c5", "c6"]
    lines, clock = [], Clock()
    w = watch.Watch(ids, "smoke", lines.append, None, heartbeat_s=0, clock=clock)
    figure = {t: w.expected(t)[0] for t in ids}
    w.start("c1", "C1")
    w.end("c1", "ok", 3 * figure["c1"])
    real_rest = sum(3 * figure[t] for t in ids[1:])
    assert lines[-1].endswith(
        f"{watch.about(real_rest)} left (from a fresh clone on 2 idle cores, at this run's pace: 3.0x)"
    )
    for t in ids[1:4]:
        w.start(t, t)
        w.end(t, "ok", figure[t])  # idle again
    assert w.pace() == pytest.approx(1.0)  # c2-c4, not c1's 3x
    assert lines[-1].endswith(
        f"{watch.about(figure['c5'] + figure['c6'])} left (from a fresh clone on 2 idle cores, at this run's "
        f"pace: 1.0x)"
    )


def test_the_training_log_says_the_epoch_and_batch_at_once_and_never_waits_long(monkeypatch, capsys):
    """Log mode: a line as each epoch starts (batch 0), after its first batch, every log_every batches, at its
    last, and whenever LOG_S seconds passed without one (a fake clock: batches of 4 s on a busy machine)."""
    import torch

    from hpml_lab import progress
    from hpml_lab.config import RunConfig

    now = [100.0]
    monkeypatch.setattr(progress.time, "perf_counter", lambda: now[0])
    cfg = RunConfig(task="c1", epochs=2, log_every=20, progress="log")
    bar = progress.Progress("log", cfg, total=40, epoch=1)
    losses, corrects, sizes = [], [], []
    for i in range(1, 41):
        now[0] += 4.0
        losses.append(torch.tensor(2.0))
        corrects.append(torch.tensor(3))
        sizes.append(32)
        bar.update(i, losses, corrects, sizes)
    said = [line.split(" loss")[0].split(" starting")[0] for line in capsys.readouterr().out.splitlines()]
    batches = [int(line.split("batch ")[1].split("/")[0]) for line in said]
    assert said[0] == "[c1] epoch 1/2 batch 0/40" and batches[1] == 1
    assert batches[-1] == 40 and 20 in batches
    assert max(b - a for a, b in zip(batches, batches[1:])) * 4.0 <= progress.Progress.LOG_S + 4.0


def test_a_long_step_says_what_is_left_at_its_own_pace_and_is_never_silent_long():
    """ticker.py (data synth, the checks before a report, the bundle): each part done is said with what is
    left at the step's pace so far (a fake clock), and the heartbeat speaks whenever `every` seconds passed in
    silence."""
    from hpml_lab import ticker

    lines, clock = [], Clock()
    t = ticker.Ticker("data synth cifar10", say=lines.append, clock=clock)
    clock.t += 4
    t.done(1, 6, "training batch 1 of 5 written")
    clock.t += 8
    t.done(3, 6, "training batch 3 of 5 written")
    assert lines == [
        "data synth cifar10: training batch 1 of 5 written (1 of 6, 4 s; about 20 s left)",
        "data synth cifar10: training batch 3 of 5 written (3 of 6, 12 s; about 10 s left)",
    ]
    clock.t += 30
    assert t.beat() == "data synth cifar10: still at it after 42 s (3 of 6 done)"
    said = []
    with ticker.ticking("checking", every=0.2, say=said.append):
        time.sleep(0.75)
    assert len(said) >= 2 and all(s.startswith("checking: still at it after ") for s in said), said
    n = len(said)
    time.sleep(0.4)
    assert len(said) == n  # the heartbeat ends with the step


def test_before_anything_is_measured_a_busy_machine_is_said_beside_the_idle_figures(monkeypatch):
    import os

    monkeypatch.setattr(os, "getloadavg", lambda: (6.5, 5.0, 4.0))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    lines = []
    watch.Watch(["c1", "c2"], "smoke", lines.append, None, heartbeat_s=0)
    assert (
        "(from a fresh clone on 2 idle cores) (an idle machine's figures; this one is busy now, load 6.5 on "
        "2 cores: likely longer); a line every" in lines[0]
    )
    monkeypatch.setattr(os, "getloadavg", lambda: (1.5, 1.0, 1.0))
    watch.Watch(["c1", "c2"], "smoke", lines.append, None, heartbeat_s=0)
    assert "busy" not in lines[-1]
