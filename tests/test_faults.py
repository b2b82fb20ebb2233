"""Faults as students and cluster users meet them: nothing lost, nothing half-written, one clear line.

Grouped by class: lost data (a rerun never destroys a complete run; SIGTERM and SIGKILL mid-sweep), output paths
checked before compute."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from hpml_lab import io, results
from hpml_lab.config import ConfigError, RunConfig
from hpml_lab.training import train


@pytest.fixture
def cfg(cifar_root, tmp_path):
    return RunConfig(
        task="faults",
        data_root=str(cifar_root),
        results_dir=str(tmp_path / "results"),
        model="resnet_tiny",
        epochs=2,
        max_batches=2,
        batch_size=8,
        num_workers=0,
        progress="none",
    )


class Boom(RuntimeError):
    pass


class BreaksAfter:
    """The lab's loader, failing after `n` batches (a disk that goes away mid-run)."""

    def __init__(self, cfg, n):
        import torch

        from hpml_lab.data import build_loader

        self.inner, self.n = build_loader(cfg, torch.device("cpu")), n

    def __len__(self):
        return len(self.inner)

    def __iter__(self):
        for i, batch in enumerate(self.inner):
            if i == self.n:
                raise Boom("disk gone")
            yield batch


def _cli(cfg, *extra):
    return [
        sys.executable,
        "-m",
        "hpml_lab",
        "--task",
        cfg.task,
        "--data-root",
        cfg.data_root,
        "--results-dir",
        cfg.results_dir,
        "--model",
        cfg.model,
        "--batch-size",
        "8",
        "--num-workers",
        "0",
        "--progress",
        "none",
        *extra,
    ]


def test_failed_rerun_keeps_the_complete_run(cfg):
    done = train(cfg)
    before = {p.name: p.read_bytes() for p in done.run_dir.iterdir()}

    with pytest.raises(Boom):
        train(cfg, loader=BreaksAfter(cfg, 1))
    assert {p.name: p.read_bytes() for p in done.run_dir.iterdir()} == before  # untouched
    assert results.read_run(done.run_dir).status == "complete"
    attempts = [p for p in done.run_dir.parent.iterdir() if p.name.startswith(".")]
    assert len(attempts) == 1 and json.loads((attempts[0] / "meta.json").read_text())["status"] == "failed"
    assert [r.path for r in results.load_runs(cfg.task, cfg.results_dir)] == [done.run_dir]  # attempts hidden


def test_first_failed_run_is_shown_failed(cfg):
    with pytest.raises(Boom):
        train(cfg, loader=BreaksAfter(cfg, 0))
    assert results.read_run(cfg.run_dir()).status == "failed"


def _process_tree(pid: int) -> list[int]:
    """pid and its descendants, children first (the order the Slurm script's stop_step signals them in)."""
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [q for c in children for q in _process_tree(int(c))] + [pid]


@pytest.mark.parametrize("workers", [0, 2], ids=["main-process", "tree-with-loader-workers"])
def test_sigterm_marks_the_run_interrupted_and_keeps_finished_epochs(cfg, workers):
    # With workers, SIGTERM goes to the whole process tree, as Slurm sends it at a time limit: a DataLoader worker
    # killed by it used to make the run 'failed' ("worker ... is killed by signal: Terminated")
    extra = ["--num-workers", str(workers), "--persistent-workers", "true"] if workers else []
    p = subprocess.Popen(
        _cli(cfg, "--epochs", "5000", "--max-batches", "2", *extra), stderr=subprocess.PIPE, text=True
    )
    run_dir = cfg.replace(epochs=5000, num_workers=workers, persistent_workers=bool(workers)).run_dir()
    deadline = time.time() + 120
    while time.time() < deadline:  # wait until the first epoch is on disk (in the attempt folder)
        if list(run_dir.parent.glob(f".{run_dir.name}.attempt-*/epochs.csv")):
            break
        time.sleep(0.2)
    tree = _process_tree(p.pid)
    assert len(tree) == 1 + workers
    for pid in tree:
        os.kill(pid, signal.SIGTERM)
    err = p.communicate(timeout=120)[1]
    assert p.returncode == 143 and "interrupted" in err and "Traceback" not in err
    meta = results.read_run(run_dir).meta  # nothing complete before: the interrupted run is the one shown
    assert meta["status"] == "interrupted" and meta["epochs_done"] >= 1
    assert (run_dir / "epochs.csv").read_text().count("\n") == meta["epochs_done"] + 1


def test_sigterm_while_an_epoch_is_written_arrives_after_its_files_agree(cfg, monkeypatch):
    # the window CI once hit: SIGTERM between epochs.csv and meta.json left 2 epochs in meta and 3 in the CSV

    from hpml_lab import training

    write_csv = training.atomic_write_csv

    def write_then_signal(path, rows, columns):
        write_csv(path, rows, columns)
        if path.name == "epochs.csv" and len(rows) == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(training, "atomic_write_csv", write_then_signal)
    handler = signal.getsignal(signal.SIGTERM)
    with pytest.raises(results.Interrupted):
        train(cfg.replace(epochs=5))
    run = results.read_run(cfg.replace(epochs=5).run_dir())
    assert run.status == "interrupted" and run.meta["epochs_done"] == 2
    assert (run.path / "epochs.csv").read_text().count("\n") == 3
    assert signal.getsignal(signal.SIGTERM) is handler  # the handlers are back


def test_a_signal_as_the_run_lands_leaves_it_complete_and_the_cli_says_so(cfg, monkeypatch, capsys):
    from hpml_lab.__main__ import main

    write = results.write_meta

    def write_then_signal(folder, meta):
        write(folder, meta)
        if meta.get("status") == "complete":
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(results, "write_meta", write_then_signal)
    code = main(
        [
            "--task",
            cfg.task,
            "--data-root",
            cfg.data_root,
            "--results-dir",
            cfg.results_dir,
            "--model",
            cfg.model,
            "--batch-size",
            "8",
            "--num-workers",
            "0",
            "--progress",
            "none",
            "--epochs",
            "2",
            "--max-batches",
            "2",
        ]
    )
    run = results.read_run(cfg.run_dir())
    assert code == 143 and run.status == "complete" and run.meta["epochs_done"] == 2
    err = capsys.readouterr().err
    assert (
        f"{run.path} has status 'complete' (the signal came as it landed)" in err
        and "'interrupted'" not in err
    )


def test_an_error_a_held_signal_lands_on_is_the_one_recorded(cfg, monkeypatch):
    from hpml_lab import training

    write_csv = training.atomic_write_csv

    def signal_then_fail(path, rows, columns):
        if path.name == "epochs.csv" and len(rows) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # held: it arrives as the error below leaves the block
            raise OSError(28, "No space left on device")
        write_csv(path, rows, columns)

    monkeypatch.setattr(training, "atomic_write_csv", signal_then_fail)
    with pytest.raises(results.Interrupted) as caught:
        train(cfg.replace(epochs=3))
    run = results.read_run(cfg.replace(epochs=3).run_dir())
    assert run.status == "failed" and run.meta["error"].startswith(
        "OSError: [Errno 28] No space left on device"
    )
    assert "then Interrupted: signal SIGTERM" in run.meta["error"]
    assert caught.value.run_outcome == (run.path, "failed")


def test_signals_deferred_delivers_to_the_handler_in_place_before():
    seen = []
    with pytest.raises(results.Interrupted), results.sigterm_interrupts():
        with io.signals_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            seen.append("block ran to its end")
        seen.append("not reached")
    assert seen == ["block ran to its end"]


def test_sigkill_mid_rerun_leaves_the_complete_run(cfg):
    done = train(cfg.replace(run_id="fixed"))
    before = (done.run_dir / "batches.csv").read_bytes()
    # a rerun into the same folder (same run_id), long enough to be killed mid-way
    p = subprocess.Popen(
        _cli(cfg, "--run-id", "fixed", "--epochs", "5000", "--max-batches", "2"), stderr=subprocess.DEVNULL
    )
    time.sleep(4)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=60)
    assert (
        results.read_run(done.run_dir).status == "complete"
        and (done.run_dir / "batches.csv").read_bytes() == before
    )


def _under_a_file(d):
    (d / "f.txt").write_text("x")
    return d / "f.txt" / "m.pt"


@pytest.mark.parametrize(
    "make, message", [(lambda d: d, "is a folder"), (_under_a_file, "is a file, not a folder")]
)
def test_save_model_path_is_checked_before_any_compute(cfg, tmp_path, make, message):
    target = make(tmp_path)
    t0 = time.time()
    with pytest.raises(ConfigError, match=message):
        train(cfg, save_model=target)
    assert time.time() - t0 < 5 and not cfg.run_dir().exists()


@pytest.mark.slow
def test_sigterm_during_a_task_updates_the_index_and_exits_143(cifar_root, tmp_path):
    env = {**__import__("os").environ, "HPML_OUTPUT_DIR": str(tmp_path)}
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hpml_lab.report.cli",
            "run",
            "c1",
            "--profile",
            "tiny",
            "-p",
            f"data_root={cifar_root}",
            "-p",
            "epochs=5000",
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    # papermill writes the notebook it runs to a hidden per-process file (report/guards.py), landed when it ends
    running = f".c1.running-{p.pid}.ipynb"
    executed = tmp_path / "reports" / "executed" / running
    deadline = time.time() + 120
    while time.time() < deadline and not (executed.exists() and "epoch 1 done" in executed.read_text()):
        time.sleep(0.5)
    assert time.time() < deadline, (
        "the run never reached epoch 1's end"
    )  # else SIGTERM would test nothing in training
    p.send_signal(signal.SIGTERM)
    err = p.communicate(timeout=120)[1]
    # (the kernel, shut down mid-cell, logs its own complaints to stderr around ours: look for our line)
    assert p.returncode == 143 and any(line.startswith("hpml-lab: interrupted") for line in err.splitlines())
    outcome = json.loads((tmp_path / "reports" / "executed" / "c1.json").read_text())
    assert outcome["status"] == "interrupted"
    assert "interrupted" in (tmp_path / "reports" / "index.html").read_text()


SWEEP = """
import sys
from hpml_lab.config import RunConfig
from hpml_lab.sweeps import run_sweep
from hpml_lab.training import train
base = RunConfig(task="sweep", data_root=sys.argv[1], results_dir=sys.argv[2], model="resnet_tiny", epochs=2,
                 max_batches=3, batch_size=8, num_workers=0, progress="none")
run_sweep([base.replace(lr=lr) for lr in (0.01, 0.02, 0.03, 0.04)], train, log=None)
"""


@pytest.mark.slow
def test_a_sweep_killed_at_random_points_ends_equal_to_an_uninterrupted_one(cifar_root, tmp_path):
    import random

    import pandas as pd

    def sweep(results_dir, kill_after=None, sig=signal.SIGKILL):
        p = subprocess.Popen(
            [sys.executable, "-c", SWEEP, str(cifar_root), str(results_dir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if kill_after is not None:
            time.sleep(kill_after)
            p.send_signal(sig)
        p.wait(timeout=300)

    def finished(results_dir):
        out = {}
        for r in results.load_runs("sweep", results_dir):
            out[r.meta["config"]["lr"]] = r.table("batches")[["epoch", "batch", "loss", "acc"]]
        return out

    clean, broken = tmp_path / "clean", tmp_path / "broken"
    sweep(clean)
    rng = random.Random(0)
    for k in range(
        4
    ):  # kill at random points, alternating SIGKILL and SIGTERM; what was complete stays complete
        before = {lr: t.copy() for lr, t in finished(broken).items()}
        sweep(broken, kill_after=rng.uniform(2.0, 6.0), sig=signal.SIGKILL if k % 2 == 0 else signal.SIGTERM)
        after = finished(broken)
        for lr, table in before.items():
            pd.testing.assert_frame_equal(after[lr], table)
    sweep(broken)  # resume to the end
    want, got = finished(clean), finished(broken)
    assert sorted(got) == sorted(want) == [0.01, 0.02, 0.03, 0.04]
    for lr in want:
        pd.testing.assert_frame_equal(got[lr], want[lr])  # the same numbers as a run never interrupted
