"""Issue 22: hostile inputs against runs, results, config and the CLI. Each ends in one line on stderr and
exit status 2 before any kernel starts, or in the documented behaviour, with nothing complete changed.

Pure validation cases call the CLI's main() in process (quick); the few that need a process are marked
slow."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from hpml_lab import io, results
from hpml_lab.config import ConfigError, RunConfig
from hpml_lab.report import cli, guards
from hpml_lab.training import train


def _no_cuda():
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is here: device=cuda would not fail")


def _one_line_exit_2(args, capsys, needle):
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("hpml-lab: error:") and err.count("\n") == 1, err
    assert needle in err, err
    assert len(err) < 600
    return err


@pytest.fixture
def out(tmp_path, monkeypatch):
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path / "out"))
    return tmp_path / "out"


# ---- values that passed the checks and crashed later: refused before any kernel
@pytest.mark.parametrize(
    "args, needle",
    [
        (["run", "c1", "-p", "batch_size=100000000000000000000"], "'batch_size' must be from 1 to"),
        (["run", "c1", "-p", "batch_size=1e20"], "'batch_size' must be int"),
        (["run", "c1", "-p", "epochs=99999999999"], "'epochs' must be from 1 to"),
        (["run", "c1", "-p", "num_workers=100000"], "'num_workers' must be from 0 to"),
        (["run", "c1", "-p", "lr=1e400"], "'lr' must be a finite number"),
        (["run", "memory", "-p", "budget_gb=inf"], "'budget_gb' must be a finite number"),
        (["run", "memory", "-p", "budget_gb=nan"], "'budget_gb' must be a finite number"),
        (["run", "memory", "-p", "checkpoint_segments=1000"], "has 8 residual blocks"),
        (["run", "c1", "-p", "device=cuda"], "no CUDA device is visible"),
        (["run", "c8", "-p", "compile_backend=bogus"], "'compile_backend' is 'bogus'; valid backends"),
        (["report", "--only", ""], "--only needs task ids"),
        (["report", "--only", "c1,,c2"], "--only needs task ids"),
        (["report", "--only", "c1,c1"], "names a task twice"),
        (["run", "c1", "-p", "x" * 5000 + "=1"], "unknown parameter"),
    ],
)
def test_values_that_crashed_later_are_refused_up_front(args, needle, capsys, out, cifar_root):
    if needle == "no CUDA device is visible":
        import torch

        if torch.cuda.is_available():
            pytest.skip("CUDA is here")
    args = args + ["-p", f"data_root={cifar_root}"] if args[0] == "run" else args
    _one_line_exit_2(args, capsys, needle)
    assert not (out / "reports" / "executed").exists() or not any((out / "reports" / "executed").iterdir())


# ---- hangs: a YAML alias bomb is refused at its first alias; what an error prints is capped
def test_yaml_alias_bomb_is_refused_quickly(tmp_path, capsys, out):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    lines += ["data_root: *a8"]
    f = tmp_path / "bomb.yaml"
    f.write_text("\n".join(lines) + "\n")
    t0 = time.perf_counter()
    _one_line_exit_2(["run", "c1", "-f", str(f)], capsys, "aliases and anchors are not allowed")
    assert time.perf_counter() - t0 < 5


@pytest.mark.parametrize(
    "text, needle",
    [
        ("data_root: [" + ", ".join(["1"] * 20000) + "]", "'data_root' must be str, got list [1, 1"),
        ("epochs: " + "[" * 5000 + "]" * 5000, "nested too deeply"),
        ("epochs: " + "[" * 50 + "]" * 50, "must be int"),
        ("x: 1\n" * 10, "sets 'x' twice (line 2)"),  # refused as a duplicate before its name is checked
        ("a" * (2 << 20), "holds at most"),
        (None, "is not a regular file"),
        ("x: !!python/object/apply:os.system [echo pwned]", "is not valid YAML"),
    ],
)
def test_params_file_errors_stay_one_short_line(tmp_path, capsys, out, text, needle):
    f = tmp_path / "p.yaml"
    if text is None:
        f.mkdir()
    else:
        f.write_text(text)
    _one_line_exit_2(["run", "c1", "-f", str(f)], capsys, needle)


# ---- OSError: unwritable or full output folders, one line before compute
def test_output_dir_under_a_file_is_one_line(tmp_path, monkeypatch, capsys, cifar_root):
    a_file = tmp_path / "afile"
    a_file.write_text("x")
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(a_file / "out"))
    err = _one_line_exit_2(["run", "c1", "-p", f"data_root={cifar_root}"], capsys, "is not writable")
    assert str(a_file) in err


def test_a_full_disk_is_refused_before_the_kernel(out, monkeypatch, capsys, cifar_root):
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10 << 30, 10 << 30, 6 << 10))
    err = _one_line_exit_2(
        ["run", "c1", "-p", f"data_root={cifar_root}"], capsys, "MiB free; a run needs at least"
    )
    assert "run again" not in err
    assert not list((out / "reports" / "executed").glob("*.ipynb"))


def test_slurm_output_over_a_device_or_folder_is_refused(out, capsys, tmp_path):
    _one_line_exit_2(
        ["slurm", "c1", "-o", "/dev/null"],
        capsys,
        "is a device or a kernel file, or a link to one; give a plain file name: /dev/null",
    )
    _one_line_exit_2(["slurm", "c1", "-o", str(tmp_path)], capsys, "exists and is not a regular file")
    assert not os.path.isfile("/dev/null")


def test_results_folder_that_is_a_file_is_refused(out, capsys, cifar_root):
    (out / "results").mkdir(parents=True)
    (out / "results" / "c1").write_text("not a folder")
    _one_line_exit_2(["run", "c1", "-p", f"data_root={cifar_root}"], capsys, "results/c1 is not writable")


# ---- python -m hpml_lab: OSError and --save-model before compute
@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--save-model", ""], "--save-model needs a file path"),
        (["--save-model", "{tmp}"], "is a folder"),
        (["--save-model", "/dev/null"], "--save-model /dev/null is a device or a kernel file"),
        (["--results-dir", "{file}/r"], "error:"),
        (["--run-id", "..foo"], "plain folder name"),
        (["--loader", "tensor", "--checkpoint-segments", "1000"], "has 8 residual blocks"),
    ],
)
def test_training_cli_refuses_before_compute(tmp_path, capsys, cifar_root, extra, needle):
    from hpml_lab.__main__ import main

    a_file = tmp_path / "afile"
    a_file.write_text("x")
    extra = [e.format(tmp=tmp_path, file=a_file) for e in extra]
    args = [
        "--data-root",
        str(cifar_root),
        "--results-dir",
        str(tmp_path / "results"),
        "--model",
        "resnet18",
        "--epochs",
        "1",
        "--max-batches",
        "1",
        "--batch-size",
        "4",
        "--num-workers",
        "0",
        "--progress",
        "none",
        *extra,
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "results" / "adhoc").exists() or not any(
        (p / "meta.json").exists() for p in (tmp_path / "results" / "adhoc").iterdir()
    )


# ---- a rerun killed -9: the report's files are replaced together
def test_report_files_of_a_killed_rerun_are_put_back(out, monkeypatch):
    reports = out / "reports"
    (reports / "executed").mkdir(parents=True)
    files = {
        reports / "c1.html": "old page",
        reports / "c1.answer.json": '{"old": 1}',
        reports / "executed" / "c1.ipynb": "old nb",
        reports / "executed" / "c1.json": '{"status": "ok"}',
    }
    for p, text in files.items():
        p.write_text(text)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    monkeypatch.setattr(os, "getpid", lambda: dead.pid)
    guards.set_aside("c1")  # what a rerun does first; then it is killed -9 (its pid is gone)
    monkeypatch.undo()
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(out))
    (reports / "c1.answer.json").write_text('{"half": "written by the killed notebook"}')
    guards.recover_reports()
    assert {p: p.read_text() for p in files} == files
    assert not [p for p in reports.iterdir() if p.name.startswith(".")]


# ---- the compiler pre-check resolves the compiler $CXX names
@pytest.mark.parametrize("cxx", ["/nonexistent/g++", "no-such-compiler-xyz", "{tmp}/not-executable", "{tmp}"])
def test_cxx_naming_no_compiler_fails_the_pre_check(monkeypatch, cxx, tmp_path):
    from hpml_lab import fastpath

    (tmp_path / "not-executable").write_text("#!/bin/sh\n")
    monkeypatch.setenv("CXX", cxx.format(tmp=tmp_path))
    assert "is not an executable file" in fastpath.compile_available("inductor", "cpu")


def test_training_with_compile_and_a_missing_cxx_is_one_line_before_compute(
    tmp_path, capsys, cifar_root, monkeypatch
):
    from hpml_lab.__main__ import main

    monkeypatch.setenv("CXX", "/nonexistent/g++")
    assert (
        main(
            [
                "--data-root",
                str(cifar_root),
                "--results-dir",
                str(tmp_path / "r"),
                "--model",
                "resnet_tiny",
                "--epochs",
                "1",
                "--max-batches",
                "1",
                "--batch-size",
                "4",
                "--num-workers",
                "0",
                "--device",
                "cpu",
                "--progress",
                "none",
                "--compile",
                "true",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "$CXX is '/nonexistent/g++'" in err and err.count("\n") == 1
    assert not list((tmp_path / "r").glob("*/*/meta.json"))


@pytest.mark.parametrize(
    "args, needle",
    [
        (["slurm", "c1", "--train", "task=../../etc"], "--train task=... is not a setting"),
        (["slurm", "c1", "--time", "0:00"], "--time must be at least 00:01"),
        (["slurm", "c1", "--time", "\u0661\u0662:00"], "ASCII digits"),
        (["slurm", "c1", "--save-model", ""], "--save-model needs a file path"),
    ],
)
def test_slurm_values_that_would_fail_in_the_job_are_refused(args, needle, capsys, out):
    _one_line_exit_2(args + ["-o", str(out / "s.sbatch")], capsys, needle)
    assert not (out / "s.sbatch").exists()


@pytest.mark.slow
def test_a_rerun_killed_with_sigkill_leaves_the_previous_report_whole(rendered, tmp_path, monkeypatch):
    """`hpml-lab run c1` twice, the second killed -9 mid-training: the previous page, answer record, executed
    notebook and outcome come back byte for byte (the rerun had deleted c1.answer.json under an ok page), and
    the dead run's /tmp kernel folder is removed by the next run. The first run is the suite's shared tiny
    render of c1 (the same `run_task`), copied: a second full run of c1 would test nothing more."""
    import shutil

    first = rendered("c1")
    assert first.outcome["status"] == "ok", first.outcome["error"]
    shutil.copytree(first.out, tmp_path / "out", symlinks=True)
    env = {**os.environ, "HPML_OUTPUT_DIR": str(tmp_path / "out"), "TMPDIR": str(tmp_path)}
    cmd = [
        sys.executable,
        "-m",
        "hpml_lab.report.cli",
        "run",
        "c1",
        "--profile",
        "tiny",
        "-p",
        f"data_root={first.params['data_root']}",
    ]
    reports = tmp_path / "out" / "reports"
    files = {
        p: p.read_bytes()
        for p in [
            reports / "c1.html",
            reports / "c1.answer.json",
            reports / "executed" / "c1.ipynb",
            reports / "executed" / "c1.json",
        ]
    }
    p = subprocess.Popen(
        cmd + ["-p", "epochs=50"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.time() + 120
    while time.time() < deadline and not list(
        (tmp_path / "out" / "results" / "c1").glob(".*attempt*/meta.json")
    ):
        time.sleep(0.3)
    p.kill()
    p.wait()
    assert list(tmp_path.glob(f"hpml-kernel-{p.pid}-*"))  # what a kill -9 leaves
    r = subprocess.run(cmd + ["-p", "batch_size=0"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2  # refused before a kernel: nothing is touched
    import tempfile

    from hpml_lab.report import kernel, runner

    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path / "out"))
    assert [o.status for o in runner.load_outcomes()] == ["ok"]  # the reader puts the previous report back
    assert {q: q.read_bytes() for q in files} == files
    assert not [q for q in reports.iterdir() if q.name.startswith(".")]
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with kernel.ipc_sockets():  # the next run removes the dead run's kernel folder
        assert not list(tmp_path.glob(f"hpml-kernel-{p.pid}-*"))


# ---- a full disk mid-run: the error names the target, the attempt ends failed, never "running"
def test_enospc_names_the_target_not_the_temporary_file(tmp_path):
    import errno

    from hpml_lab.io import atomic_write_text

    def fill(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    target = tmp_path / "meta.json"
    with pytest.raises(OSError) as err:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(os, "fsync", fill)
            atomic_write_text(target, "x")
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(target)
    assert list(tmp_path.iterdir()) == []  # no temporary file left


def test_a_full_disk_mid_run_ends_the_attempt_failed(tmp_path, monkeypatch):
    import errno

    from hpml_lab import results

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", "somewhere")

    with pytest.raises(OSError):
        with results.RunFolder(tmp_path / "t" / "r") as rf:
            rf.write_meta({"task": "t", "run_id": "r", "status": "running", "environment": {"x": "y" * 500}})
            monkeypatch.setattr(results, "atomic_write_json", full)
            rf.write_meta({"status": "running"})  # the disk fills up as an epoch is written
    meta = json.loads((tmp_path / "t" / "r" / "meta.json").read_text())
    assert meta["status"] == "failed" and "No space left on device" in meta["error"]


def test_a_run_stopped_before_its_record_was_written_is_still_named_by_its_folder(tmp_path):
    """A CI run's real Slurm job got its warning signal between a sweep run's attempt folder and its first
    meta.json: the interrupted record landed without a run_id, and whatever read the task's runs by id
    (load_runs, then m["run_id"]) failed. The record names its folder whatever came before the signal."""
    from hpml_lab import results

    with pytest.raises(results.Interrupted):
        with results.RunFolder(tmp_path / "t" / "r"):
            raise results.Interrupted("signal SIGUSR1")  # before any write_meta
    (run,) = results.load_runs("t", tmp_path, status=None)
    assert run.meta["run_id"] == "r" and run.status == "interrupted"


# ---- issue 30: switching data back and forth restores the kept run instead of piling up .data- copies
def test_switching_data_back_restores_the_kept_run_and_piles_up_no_copies(tmp_path, cifar_root):
    import shutil

    from hpml_lab import results
    from hpml_lab.config import RunConfig
    from hpml_lab.data import dataset_info
    from hpml_lab.sweeps import run_sweep
    from hpml_lab.training import train

    a, b = tmp_path / "a", tmp_path / "b"
    from hpml_lab.data import cifar

    shutil.copytree(cifar_root, a)
    cifar.synthesize(b, n_train=100, n_test=20, seed=1)  # other bytes: another fingerprint
    base = dict(
        task="t",
        results_dir=str(tmp_path / "r"),
        model="resnet_tiny",
        batch_size=16,
        epochs=1,
        max_batches=2,
        num_workers=0,
        device="cpu",
        progress="none",
    )
    # the same folder name for both copies: swap which copy the path names
    data = tmp_path / "data"
    cfg = RunConfig(data_root=str(data), **base)
    data.symlink_to(a)
    first = run_sweep([cfg], train, log=None)[0]
    made_on_a = results.read_run(first.run_dir).meta["started_at"]
    fp_a = dataset_info(cfg)["fingerprint"]
    data.unlink()
    data.symlink_to(b)
    assert run_sweep([cfg], train, log=None)[0].status == "ran"  # other data: a new run, A's kept
    said = []
    for target in (a, b, a):
        from hpml_lab.data import checks as dchecks

        dchecks._FINGERPRINTS.clear()
        data.unlink()
        data.symlink_to(target)
        item = run_sweep([cfg], train, log=said.append)[0]
        assert item.status == "skipped", said  # restored, not computed again
    assert "restored from" in said[-1], said
    meta = results.read_run(first.run_dir).meta
    assert meta["dataset"]["fingerprint"] == fp_a and meta["started_at"] == made_on_a
    kept = sorted(q.name for q in first.run_dir.parent.iterdir() if ".data-" in q.name)
    assert len(kept) == 1, kept  # B's run, once: no pile of copies


# ==== moved from test_hostile_more.py (issue 22's second pass)
# ---- every run of a sweep fails: one line per run, never a KeyError from an empty table
@pytest.mark.parametrize("task, field, n", [("c6", "optimizer", 5), ("c7", "norm", 2)])
def test_a_sweep_where_every_run_fails_says_why_per_run(task, field, n, cifar_root, tmp_path):
    import importlib

    from hpml_lab.sweeps import SweepFailed

    _no_cuda()
    cfg = RunConfig(
        task=task,
        data_root=str(cifar_root),
        results_dir=str(tmp_path / "r"),
        model="resnet_tiny",
        batch_size=8,
        epochs=1,
        max_batches=1,
        num_workers=0,
        device="cuda",
        progress="none",
    )
    with pytest.raises(SweepFailed) as err:
        importlib.import_module(f"hpml_lab.studies.{task}.study").run(cfg, log=None)
    lines = str(err.value).splitlines()
    assert lines[0].startswith(f"every run of {task} failed ({n} of {n})")
    assert len(lines) == n + 1 and all(
        ln.startswith(f"{field}=") and "CUDA is not available" in ln for ln in lines[1:]
    )


@pytest.mark.slow
@pytest.mark.parametrize("task", ["c6", "c7"])
def test_a_report_whose_every_run_fails_renders_and_says_why(task, cifar_root, out, monkeypatch):
    """The kernel reaches the all-failed path (the up-front device check is bypassed so that every run fails
    inside it): the task ends failed with the sweep's own lines, the page renders, no KeyError anywhere."""
    from hpml_lab.report import guards, runner

    _no_cuda()
    monkeypatch.setattr(guards, "preflight", lambda task, cfg: None)
    o = runner.run_task(
        task, "tiny", cli_params={"data_root": str(cifar_root), "device": "cuda"}, log=lambda s: None
    )
    assert o.status == "failed" and o.error.startswith(f"SweepFailed: every run of {task} failed"), o.error
    page = (out / "reports" / f"{task}.html").read_text()
    assert "every run of" in page and "CUDA is not available" in page and "KeyError:" not in page
    rec = json.loads((out / "reports" / "executed" / f"{task}.json").read_text())
    assert rec["status"] == "failed"


# ---- io.atomic_file: a signal right after mkstemp leaves no temporary file
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_right_after_mkstemp_leaves_no_temporary_file(sig, tmp_path, monkeypatch):
    import signal
    import tempfile

    from hpml_lab import io, results

    real = tempfile.mkstemp

    def mkstemp_then_signal(*a, **k):
        made = real(*a, **k)
        os.kill(
            os.getpid(), getattr(signal, sig)
        )  # arrives as mkstemp returns: before the caller records the name
        return made

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp_then_signal)
    with results.sigterm_interrupts(), pytest.raises(KeyboardInterrupt):
        io.atomic_write_text(tmp_path / "x.json", "{}")
    assert list(tmp_path.iterdir()) == []


# ---- SIGHUP (a closed terminal) ends a run like SIGTERM; an attempt whose process was killed says so
@pytest.mark.slow
def test_sighup_ends_a_training_run_interrupted_not_running(tmp_path, cifar_root):
    from cli_process import start

    # epochs of 4 batches: the first ends within a second of the start, and 5,000 outlast the signal
    args = ["--data-root", cifar_root, "--model", "resnet_tiny", "--epochs", 5000, "--batch-size", 8]
    args += ["--max-batches", 4]
    p = start(
        [*args, "--num-workers", 0, "--progress", "none"],
        tmp_path,
        module="hpml_lab",
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not list(tmp_path.rglob("epochs.csv")):
        assert p.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    p.send_signal(signal.SIGHUP)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 128 + signal.SIGHUP and "interrupted (signal SIGHUP)" in err, err
    metas = [json.loads(m.read_text()) for m in tmp_path.rglob("meta.json")]
    assert [m["status"] for m in metas] == ["interrupted"]


def test_an_attempt_left_running_by_a_killed_process_is_marked_failed(tmp_path):
    import subprocess

    from hpml_lab import results

    dead = subprocess.Popen(["true"])
    dead.wait()
    run = tmp_path / "t" / "r"
    stale = tmp_path / "t" / f".r.attempt-{dead.pid}"
    stale.mkdir(parents=True)
    (stale / "meta.json").write_text(json.dumps({"task": "t", "run_id": "r", "status": "running"}))
    live = tmp_path / "t" / f".r.attempt-{os.getppid()}"  # a live process's attempt (made after it started)
    live.mkdir()
    (live / "meta.json").write_text(json.dumps({"task": "t", "run_id": "r", "status": "running"}))
    # another node's attempt in a results/ shared by Slurm nodes: its pid (dead here) says nothing about it
    dead_here = subprocess.Popen(["true"])
    dead_here.wait()
    elsewhere = tmp_path / "t" / f".r.attempt-{dead_here.pid}"
    elsewhere.mkdir()
    (elsewhere / "meta.json").write_text(
        json.dumps({"status": "running", "environment": {"hostname": "node-b"}})
    )
    with results.RunFolder(run) as rf:
        rf.complete({"task": "t", "status": "running", "config": {}})
    meta = json.loads((stale / "meta.json").read_text())
    assert meta["status"] == "failed" and f"process {dead.pid} ended" in meta["error"]
    assert json.loads((live / "meta.json").read_text())["status"] == "running"
    assert json.loads((elsewhere / "meta.json").read_text())["status"] == "running"


# ==== moved from test_faults.py: faults as students and cluster users meet them (a rerun never destroys a
# complete run; SIGTERM and SIGKILL mid-sweep; output paths checked before compute)
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


def _args(cfg, *extra):
    """The `python -m hpml_lab` arguments of a small run of `cfg` (for the CLI in a subprocess or main()
    here)."""
    return [
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


def _cli(cfg, *extra):
    return [sys.executable, "-m", "hpml_lab", *_args(cfg, *extra)]


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
    # With workers, SIGTERM goes to the whole process tree, as Slurm sends it at a time limit: a DataLoader
    # worker killed by it used to make the run 'failed' ("worker ... is killed by signal: Terminated")
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
    code = main(_args(cfg, "--epochs", "2", "--max-batches", "2"))
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


SWEEP_SETTINGS = {
    "task": "sweep",
    "model": "resnet_tiny",
    "epochs": 2,
    "max_batches": 6,  # 12 steps a run: the sweep lasts past a kill's random wait
    "batch_size": 8,
    "num_workers": 0,
    "progress": "none",
}
SWEEP_LRS = (0.01, 0.02, 0.03, 0.04)
SWEEP = f"""
import sys
import torch
from hpml_lab.config import RunConfig
from hpml_lab.sweeps import run_sweep
from hpml_lab.training import train
torch.set_num_threads(1)
base = RunConfig(data_root=sys.argv[1], results_dir=sys.argv[2], **{SWEEP_SETTINGS!r})
run_sweep([base.replace(lr=lr) for lr in {SWEEP_LRS!r}], train, log=None)
"""


@pytest.mark.slow
def test_a_sweep_killed_at_random_points_ends_equal_to_an_uninterrupted_one(cifar_root, tmp_path):
    """A sweep process killed at random points while it trains, then resumed, ends with the numbers of a sweep
    never interrupted (run here, in the test's process, with the same one thread, timing its runs). SIGKILL
    within 1.5 runs of its first run's start, SIGTERM within half a run of a run's end (so inside a later
    run): each waits on what the sweep writes, never a fixed time that could fall while Python imports, and
    each stops the sweep part way."""
    import random

    import pandas as pd

    from hpml_lab.device import torch_threads
    from hpml_lab.sweeps import run_sweep

    def finished(results_dir):
        out = {}
        for r in results.load_runs("sweep", results_dir):
            out[r.meta["config"]["lr"]] = r.table("batches")[["epoch", "batch", "loss", "acc"]]
        return out

    def written(results_dir, since, status):
        """Whether a run of the sweep wrote a meta.json with this status after `since`. The sweep renames and
        removes its attempt folders meanwhile: a folder gone under the walk is read again at the next poll."""
        try:
            metas = list(results_dir.rglob("meta.json"))
        except FileNotFoundError:  # an attempt folder renamed while rglob listed it
            return False
        for meta in metas:
            with contextlib.suppress(OSError, ValueError):
                if meta.stat().st_mtime >= since and json.loads(meta.read_text())["status"] == status:
                    return True
        return False

    def sweep(results_dir, kill=None):
        """Run the sweep; kill = (signal, the status whose meta.json it waits for, then a random wait)."""
        since = time.time()
        p = subprocess.Popen(
            [sys.executable, "-c", SWEEP, str(cifar_root), str(results_dir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if kill is not None:
            sig, status, after = kill
            deadline = time.monotonic() + 240
            while (
                p.poll() is None and not written(results_dir, since, status) and time.monotonic() < deadline
            ):
                time.sleep(0.02)
            time.sleep(after)
            p.send_signal(sig)
        p.wait(timeout=300)
        return p.returncode

    clean, broken = tmp_path / "clean", tmp_path / "broken"
    took = []

    def timed(cfg):
        started = time.monotonic()
        train(cfg)
        took.append(time.monotonic() - started)

    with torch_threads(1):  # as the sweep's process
        base = RunConfig(data_root=str(cifar_root), results_dir=str(clean), **SWEEP_SETTINGS)
        run_sweep([base.replace(lr=lr) for lr in SWEEP_LRS], timed, log=None)
    run_s = min(took[1:])  # one warm run on this machine, now (the first paid this process's one-time costs)
    # The random waits are fractions of a run, not fixed seconds: on a fast machine a wait of up to 1 s let
    # the SIGKILL land after three of the four runs, and the SIGTERM then after the last one (all four
    # complete). Up to 1.5 runs after the first one starts leaves at least two for the second sweep, and up to
    # half a run after one completes lands in the next.
    rng = random.Random(0)
    codes = []
    for kill in (
        (signal.SIGKILL, "running", rng.uniform(0.0, 1.5) * run_s),
        (signal.SIGTERM, "complete", rng.uniform(0.0, 0.5) * run_s),
    ):
        before = {lr: t.copy() for lr, t in finished(broken).items()}
        codes.append(sweep(broken, kill))
        after = finished(broken)
        for lr, table in before.items():  # what was complete stays complete
            pd.testing.assert_frame_equal(after[lr], table)
    assert codes[0] == -signal.SIGKILL and codes[1] != 0, codes  # both stopped it part way
    assert (
        0 < len(finished(broken)) < len(SWEEP_LRS)
    )  # the SIGTERM came after a run was complete, before the last
    assert sweep(broken) == 0  # resume to the end
    want, got = finished(clean), finished(broken)
    assert sorted(got) == sorted(want) == list(SWEEP_LRS)
    for lr in want:
        pd.testing.assert_frame_equal(got[lr], want[lr])  # the same numbers as a run never interrupted


def test_sigterm_while_the_page_renders_arrives_after_the_outcome_is_written(cifar_root, out, monkeypatch):
    """Issue 30: SIGTERM while the page rendered exited 143 with no outcome and an index linking a missing
    page. Now the signal waits until the page and the outcome are written, then arrives as before."""
    import nbformat
    import papermill

    from hpml_lab.report import runner

    def fake_execute(src, dst, **kw):  # the notebook ran through (no kernel here)
        nbformat.write(nbformat.v4.new_notebook(), dst)

    got = []

    def render_then_signal(executed, target, task, *top, **kw):
        os.kill(os.getpid(), signal.SIGTERM)
        target.write_text("<p>page</p>")

    monkeypatch.setattr(papermill, "execute_notebook", fake_execute)
    monkeypatch.setattr(runner, "_render_html", render_then_signal)
    previous = signal.signal(
        signal.SIGTERM,
        lambda s, f: got.append(runner.reports_dir().joinpath("executed", "c1.json").is_file()),
    )
    try:
        runner.run_task("c1", "tiny", cli_params={"data_root": str(cifar_root)}, log=lambda m: None)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert got == [True]  # delivered once, after the outcome was written
    assert (out / "reports" / "c1.html").is_file()


# ---- a NaN loss: the run ends diverged (recorded, flagged, said), not a RecordError
def test_a_nan_loss_ends_the_run_diverged_and_c1_says_so(cfg):
    """lr and weight decay of 1000 turn the loss NaN within a few steps: the run completes, its meta.json
    saying where it diverged; C1's record passes the check (it failed: "number 'mean loss, last batches' is
    nan") and its headline and flag say diverged."""
    from hpml_lab.answers import Record, check
    from hpml_lab.studies.c1 import conclusion

    wild = cfg.replace(task="c1", lr=1000.0, weight_decay=1000.0, epochs=4, max_batches=3)
    run = train(wild)
    meta = results.read_run(run.run_dir).meta
    assert meta["status"] == "complete" and meta["epochs_done"] == 4
    assert meta["diverged"]["step"] == 3 * (meta["diverged"]["epoch"] - 1) + meta["diverged"]["batch"] <= 12
    assert results.is_complete(run.run_dir)  # its epochs.csv agrees with epochs_done: reusable
    answers, flags = conclusion.conclude(wild, results.read_run(run.run_dir))
    check(Record("c1", "C1", answers, [f.as_dict() for f in flags]))
    assert answers[0].headline.plain().startswith("Training diverged: the loss became NaN or infinite")
    assert [f.kind for f in flags].count("diverged") == 1


# ---- a full disk: the kernel keeps no IPython history database (its sqlite traceback stood beside our line)
def test_the_kernel_keeps_no_history_database(tmp_path, monkeypatch):
    """A notebook run with the runner's kernel settings writes no history.sqlite under IPYTHONDIR: there is
    nothing for a full disk to fail (nbclient turns history off only for kernels named python3)."""
    import nbformat
    import papermill

    from hpml_lab.report import kernel, runner

    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1 + 1")])
    nbformat.write(nb, str(tmp_path / "in.ipynb"))
    with kernel.ipc_sockets() as config:
        papermill.execute_notebook(
            str(tmp_path / "in.ipynb"),
            str(tmp_path / "out.ipynb"),
            kernel_name=runner.KERNEL,
            progress_bar=False,
            config=config,
        )
    assert (tmp_path / "ipython").is_dir()  # the kernel used this IPYTHONDIR
    assert not list((tmp_path / "ipython").rglob("history.sqlite*"))


# ---- signals to the `hpml-lab run` process alone (not its group): the kernel, in a session of its own, is
# stopped by the runner, so the run inside it ends interrupted, not "running" until the next attempt
INTERRUPTED_LINE = (
    "hpml-lab: interrupted; completed results are kept, the index says which task stopped (a rerun's stop "
    "keeps the complete report it would have replaced)"
)


def _statuses(results_dir):
    return [json.loads(m.read_text())["status"] for m in results_dir.glob("*/meta.json")]  # hidden ones too


@pytest.mark.slow
@pytest.mark.parametrize(
    "sig, code, when",
    [("SIGINT", 130, "epochs.csv"), ("SIGTERM", 143, "meta.json")],
    ids=["SIGINT-130-after-an-epoch", "SIGTERM-143-in-the-first-epoch"],
)
def test_a_signal_to_the_runs_pid_alone_ends_the_kernels_run_interrupted(
    sig, code, when, cifar_root, tmp_path
):
    """Mid-training (SIGINT once an epoch is written, SIGTERM as soon as the run's meta.json is, inside the
    first epoch): the exit code, one line and no traceback (a ZMQError's once), the outcome and the index say
    interrupted, the run inside the kernel too, and the kernel's socket folder is gone (from the run's
    TMPDIR). Two tests that each ran C1 to send SIGTERM, at those two moments, are these cases now."""
    from cli_process import run_c1, wait_for

    out = tmp_path / "out"
    p = run_c1(cifar_root, out, "epochs=5000", stdout=subprocess.DEVNULL)
    c1 = out / "results" / "c1"
    assert wait_for(lambda: list(c1.glob(f".*.attempt-*/{when}"))), f"no {when} written"
    os.kill(p.pid, getattr(signal, sig))  # the pid alone: SIGINT was ignored, SIGTERM left the run "running"
    err = p.communicate(timeout=120)[1]
    assert p.returncode == code, err[-2000:]
    assert err.strip().splitlines() == [INTERRUPTED_LINE], err[-2000:]
    assert json.loads((out / "reports" / "executed" / "c1.json").read_text())["status"] == "interrupted"
    assert "interrupted" in (out / "reports" / "index.html").read_text()
    statuses = _statuses(c1)
    assert "running" not in statuses and "interrupted" in statuses, statuses
    assert not list(out.glob("hpml-kernel-*"))  # run_c1's TMPDIR is `out`


@pytest.mark.slow
def test_sigterm_while_the_kernel_starts_is_one_line_and_leaves_no_kernel(cifar_root, tmp_path):
    """It printed a 25-line ZMQError: the runner left, removing the socket folder, while its kernel was still
    starting, and the orphaned kernel could not bind its socket (or said "Parent appears to have exited")."""
    from cli_process import kernels_of, run_c1, wait_for

    out = tmp_path / "out"
    p = run_c1(cifar_root, out, "epochs=5000", stdout=subprocess.DEVNULL)
    kernel = wait_for(lambda: kernels_of(p.pid), every=0.02)
    assert kernel, "no kernel started"
    p.send_signal(signal.SIGTERM)
    err = p.communicate(timeout=120)[1]  # an orphaned kernel would hold stderr open and write to it
    assert p.returncode == 143, err[-2000:]
    assert err.strip().splitlines() == [INTERRUPTED_LINE], err[-2000:]
    assert wait_for(lambda: not kernel[0].is_running() or kernel[0].status() == "zombie", timeout=10)
    assert not list(out.glob("hpml-kernel-*"))


@pytest.mark.slow
def test_a_run_whose_loss_turns_nan_ends_ok_and_its_line_says_diverged(cifar_root, tmp_path):
    """`hpml-lab run c1 -p lr=1000 -p weight_decay=1000` ended failed with "RecordError: c1: number 'mean
    loss, last batches' is nan"; now the task is ok, its line and its record say diverged."""
    from cli_process import run_c1

    out = tmp_path / "out"
    p = run_c1(cifar_root, out, "lr=1000", "weight_decay=1000", "epochs=3")
    stdout, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-2000:]
    line = [x for x in stdout.splitlines() if x.startswith("[1/1] c1 ... ")]
    assert len(line) == 1 and " ok in " in line[0] and "(diverged: the loss became NaN" in line[0], stdout
    assert "RecordError" not in stdout + err
    record = json.loads((out / "reports" / "c1.answer.json").read_text())
    assert [f["kind"] for f in record["flags"]].count("diverged") == 1
    assert record["answers"][0]["headline"]["plain"].startswith("Training diverged")


def test_lab5_states_no_nan_loss_for_a_diverged_largest_batch():
    """Lab 5 with lr and weight decay of 1000 failed with "RecordError: lab5: number 'global batch 32: loss'
    is nan"; its Q4 now says the run diverged and states no NaN."""
    from types import SimpleNamespace

    import pandas as pd

    from hpml_lab.answers import Record, check
    from hpml_lab.studies.lab5 import conclusion

    epochs = pd.DataFrame({"epoch": [1, 2], "loss": [2.1, float("nan")], "acc": [0.1, 0.09]})
    batches = pd.DataFrame({"loss": [2.3, 2.2, float("nan"), float("nan")]})
    rec = SimpleNamespace(
        meta={"distributed": {"global_batch": 32}, "config": {"batch_size": 16}},
        table=lambda name: {"epochs": epochs, "batches": batches}[name],
    )
    answer = conclusion.lab5_q4(
        RunConfig(task="lab5"), SimpleNamespace(n_images=1000), SimpleNamespace(runs=[rec])
    )
    check(Record("lab5", "Lab 5", [answer]))
    assert answer.headline.plain().startswith("At global batch 32, training diverged")
    assert "the loss became NaN or infinite" in answer.details[0].plain() and "nan" not in answer.text


def test_memory_states_no_nan_loss_for_a_diverged_network():
    """The memory task's convergence answer stated each network's mean loss over the last fifth: a network
    whose loss became NaN made the record refuse it. It now says that network diverged."""
    from types import SimpleNamespace

    import pandas as pd

    from hpml_lab.answers import Record, check
    from hpml_lab.studies.memory import conclusion

    runs = {
        "resnet_tiny": SimpleNamespace(batches=pd.DataFrame({"loss": [2.3, 1.0, 0.5, 0.4, 0.3]})),
        "revnet38": SimpleNamespace(batches=pd.DataFrame({"loss": [2.3, 9.0] + [float("nan")] * 3})),
    }
    answer, flags = conclusion.convergence_answer(RunConfig(task="memory"), SimpleNamespace(runs=runs))
    check(Record("memory", "Memory", [answer]))
    assert "revnet38 diverged (the loss became NaN or infinite)" in answer.details[0].plain()
    assert [f.kind for f in flags] == ["diverged"]
