"""Issue 22, the classes left after the first pass: sweeps where every run fails, a full disk mid-notebook,
failed downloads, killed data commands, the atomic write's signal window, argparse errors, and the dataset's
content in a run's identity. Each ends in one line on stderr and exit 2, or in the documented behaviour,
with nothing complete changed."""

import json
import os
import time

import pytest

from hpml_lab.report import cli


@pytest.fixture
def out(tmp_path, monkeypatch):
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path / "out"))
    return tmp_path / "out"


# ---- argparse errors: one line and exit 2, never the usage block
@pytest.mark.parametrize(
    "argv, prog, needle",
    [
        (["run"], "hpml-lab run", "required: task"),
        (["run", "c1", "--profile", "bogus"], "hpml-lab run", "invalid choice: 'bogus'"),
        (["run", "c1", "-p"], "hpml-lab run", "expected one argument"),
        (["data"], "hpml-lab data", "required: action, dataset"),
        (["data", "unpack", "cifar10"], "hpml-lab data", "invalid choice: 'unpack'"),
        (["data", "synth", "cifar10", "--source", "ftp"], "hpml-lab data", "invalid choice: 'ftp'"),
        (["bench"], "hpml-lab bench", "required: NAME"),
        (["bench", "loader", "--repeats", "x"], "hpml-lab bench", "invalid int value: 'x'"),
        (["bench", "loader", "--device", "tpu"], "hpml-lab bench", "invalid choice: 'tpu'"),
        (["slurm", "c1", "--gpus", "1.5"], "hpml-lab slurm", "invalid int value: '1.5'"),
        (["report", "--only"], "hpml-lab report", "expected one argument"),
        ([], "hpml-lab", "required: command"),
        (["bogus"], "hpml-lab", "invalid choice: 'bogus'"),
        (["tasks", "extra"], "hpml-lab", "unrecognized arguments: extra"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_argument_errors_are_one_line(argv, prog, needle, capsys):
    with pytest.raises(SystemExit) as ex:
        cli.main(argv)
    err = capsys.readouterr().err
    assert ex.value.code == 2 and err.count("\n") == 1 and "usage:" not in err, err
    assert err.startswith(f"{prog}: error: ") and needle in err, err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--epochs"], "--epochs: expected one argument"),
        (["--save-model"], "--save-model: expected one argument"),
        (["--if-missing"], "--if-missing: expected one argument"),
    ],
)
def test_training_cli_argument_errors_are_one_line(argv, needle, capsys):
    from hpml_lab.__main__ import main

    with pytest.raises(SystemExit) as ex:
        main(argv)
    err = capsys.readouterr().err
    assert ex.value.code == 2 and err.count("\n") == 1 and "usage:" not in err and needle in err, err


def test_a_newline_in_an_argparse_value_stays_one_line(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "c1", "--profile", "a\nb"])
    assert capsys.readouterr().err.count("\n") == 1


# ---- variants found by hand (issue 22's closing note lists them)
@pytest.mark.parametrize(
    "argv, needle",
    [
        (["data", "synth", "cifar10", "--root", ""], "--root needs a folder, got ''"),
        (
            [
                "data",
                "download",
                "tinyimagenet",
                "--root",
                "R",
                "--url",
                "http://user:secret@127.0.0.1:9/x.zip",
            ],
            "user name or password is refused",
        ),
        (
            ["data", "download", "cifar10", "--root", "R", "--url", "https://:pw@example.org/c.tgz"],
            "user name or password is refused",
        ),
    ],
)
def test_data_option_variants_are_one_line(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "secret" not in err.replace("http://user:secret", ""), (
        err
    )
    assert list(tmp_path.iterdir()) == []  # nothing written into the current folder


@pytest.mark.parametrize(
    "text, needle",
    [
        ("epochs: 1\nepochs: 2\n", "sets 'epochs' twice (line 2)"),
        ("data_root: a\nx:\n  k: 1\n  k: 2\n", "sets 'k' twice (line 4)"),
    ],
)
def test_a_parameter_given_twice_in_a_params_file_is_refused(text, needle, tmp_path, capsys, out):
    (tmp_path / "p.yaml").write_text(text)
    assert cli.main(["run", "c1", "-f", str(tmp_path / "p.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err


def test_a_broken_synthetic_marker_is_one_line(tmp_path, cifar_root):
    import shutil

    from hpml_lab.data import DatasetError, cifar

    shutil.copytree(cifar_root, tmp_path / "d")
    (tmp_path / "d" / cifar.FOLDER / cifar.MARKER).write_text("{bad")
    with pytest.raises(DatasetError, match="not a readable synthetic-data record"):
        cifar.check(tmp_path / "d", verify_md5=True)


def test_a_results_folder_under_a_file_names_the_run_folder_not_the_attempt(tmp_path):
    from hpml_lab import results

    (tmp_path / "f").write_text("x")
    with pytest.raises(OSError) as err:
        with results.RunFolder(tmp_path / "f" / "t" / "run"):
            pass
    assert err.value.filename == str(tmp_path / "f" / "t" / "run") and ".attempt-" not in str(err.value)


@pytest.mark.parametrize(
    "what", ["meta is /dev/zero", "epochs.csv is a FIFO", "meta too big", "answer is a FIFO"]
)
def test_result_files_that_would_block_or_never_end_are_refused(what, tmp_path, monkeypatch):
    """Each read here used to block (a FIFO) or grow without end (/dev/zero); a worker thread bounds the
    wait."""
    import threading

    from hpml_lab import results
    from hpml_lab.report import answer_box

    run = tmp_path / "t" / "r"
    run.mkdir(parents=True)
    meta = {"status": "complete", "epochs_done": 1, "config": {}}
    if what == "meta is /dev/zero":
        (run / "meta.json").symlink_to("/dev/zero")
    elif what == "meta too big":
        (run / "meta.json").write_text(json.dumps({**meta, "pad": "x" * (17 << 20)}))
    else:
        (run / "meta.json").write_text(json.dumps(meta))
        os.mkfifo(run / "epochs.csv")
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path / "out"))
    if what == "answer is a FIFO":
        answer_box.path_for("c1").parent.mkdir(parents=True)
        os.mkfifo(answer_box.path_for("c1"))
    got = {}
    t = threading.Thread(
        target=lambda: got.update(
            complete=results.is_complete(run),
            runs=results.load_runs("t", tmp_path),
            answer=answer_box.load("c1"),
        ),
        daemon=True,
    )
    t.start()
    t.join(30)
    assert not t.is_alive(), f"{what}: still reading after 30 s"
    assert got == {"complete": False, "runs": [], "answer": None}


# ---- a newline in a path or a value stays one line
@pytest.mark.parametrize(
    "argv, needle",
    [
        (["data", "synth", "cifar10", "--root", "a\nb"], "--root 'a\\nb' holds a control character"),
        (
            ["run", "c1", "--profile", "tiny", "-p", "data_root=/nowhere/x\ny"],
            "CIFAR-10 not found in /nowhere/x\\ny",
        ),
    ],
)
def test_a_newline_in_a_path_keeps_the_error_one_line(argv, needle, capsys, out, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err
    assert not (tmp_path / "a\nb").exists()


def test_one_line_escapes_control_characters_only():
    from hpml_lab.cliargs import one_line

    assert one_line("a\nb\tc\x1b[31m é ✓\n") == "a\\nb\\tc\\x1b[31m é ✓"


# ---- an atomic write never renames a file over a link into /dev or /proc (it once replaced /dev/stdout)
def test_an_atomic_write_through_a_link_keeps_the_link(tmp_path):
    from hpml_lab.io import atomic_write_text

    (tmp_path / "real.txt").write_text("old")
    (tmp_path / "link.txt").symlink_to(tmp_path / "real.txt")
    atomic_write_text(tmp_path / "link.txt", "new", follow_links=True)  # a file the user named (-o)
    assert (tmp_path / "link.txt").is_symlink() and (tmp_path / "real.txt").read_text() == "new"


@pytest.mark.parametrize("target", ["/dev/stdout", "/proc/self/fd/1", "/dev/hpml-test-new-file", "linked"])
def test_an_atomic_write_to_a_device_or_kernel_file_is_refused(target, tmp_path):
    from hpml_lab.io import atomic_write_text

    if target == "linked":
        (tmp_path / "l").symlink_to("/dev/stdout")
        target = tmp_path / "l"
    before = os.readlink("/dev/stdout") if os.path.islink("/dev/stdout") else None
    with pytest.raises(OSError, match="device or a kernel file") as err:
        atomic_write_text(target, "x")
    assert err.value.filename == str(target)
    assert (os.readlink("/dev/stdout") if os.path.islink("/dev/stdout") else None) == before
    assert not os.path.exists("/dev/hpml-test-new-file")


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["slurm", "c1", "-o", "/dev/stdout"], "is a device or a kernel file"),
    ],
)
def test_cli_outputs_into_dev_are_one_line(argv, needle, capsys, out):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err


def test_save_model_to_dev_stdout_is_refused_before_training(tmp_path, cifar_root, capsys):
    from hpml_lab.__main__ import main

    assert (
        main(["--data-root", str(cifar_root), "--save-model", "/dev/stdout", "--results-dir", str(tmp_path)])
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--save-model /dev/stdout is a device or a kernel file" in err, err
    assert not any(tmp_path.iterdir())


# ---- issue 30: values that can run only in a range, refused before compute; the cheap checks first
@pytest.mark.parametrize(
    "argv, needle",
    [
        (
            ["run", "memory", "-p", "rev_stages=3,1000000"],
            "'rev_stages' 1000000 is out of range: use 1 to 200",
        ),
        (["run", "memory", "-p", "cpu_threads=1000000000"], "'cpu_threads' 1000000000 is out of range"),
        (["run", "memory", "-p", "budget_gb=1e-300"], "'budget_gb' 1e-300 is out of range"),
        (["run", "c2", "-p", "epochs=1"], "task c2 needs epochs of 2 or more"),
        (["run", "c5", "-p", "epochs=1"], "task c5 needs epochs of 2 or more"),
        (["run", "tinyimagenet", "-p", "dataset=cifar10"], "runs on dataset=tinyimagenet only"),
        # issue 43: warmup=1e9 ran without end ("warm-up 15/1000000003"); the others failed inside the kernel
        (["run", "speed", "-p", "warmup=1000000000"], "'warmup' 1000000000 is out of range: use 0 to 20"),
        (["run", "speed", "-p", "repeats=100000"], "'repeats' 100000 is out of range: use 1 to 100"),
        (["run", "speed", "-p", "steps=10000", "-p", "repeats=50"], "make 510,000 training steps per rung"),
        (["run", "speed", "-p", "batch_factor=100000"], "'batch_factor' 100000 is out of range"),
        (
            ["run", "speed", "-p", "batch_factor=1000"],
            "batch rung's batch 32,000, more than the 2,048 training",
        ),
        (["run", "speed", "-p", "lr=1000", "-p", "batch_factor=1000"], "'batch_factor' 1000 makes the batch"),
        # the last rung trains at twice batch_factor: its learning rate checked too (it failed in the kernel)
        (
            ["run", "speed", "-p", "lr=10", "-p", "batch_factor=64"],
            "makes the last rung's batch 4,096 and its learning rate 1280, which cannot run",
        ),
        # the page says the compile's build is left out of the timing: a warm-up round must hold it
        (
            ["run", "speed", "--profile", "full", "-p", "warmup=0"],
            "'warmup' must be 1 or more while the compile rung runs",
        ),
        (
            ["run", "speed", "-p", "lr=1000", "-p", "batch_factor=64"],
            "its learning rate 64000, which cannot run",
        ),
        (
            ["run", "speed", "--profile", "full", "-p", "batch_factor=512"],
            "more than the 50,000 training images",
        ),
        (["run", "memory", "-p", "warmup=1000000000"], "'warmup' 1000000000 is out of range"),
        (["run", "c3", "-p", "max_workers=1000000000"], "'max_workers' 1000000000 is out of range"),
        (["run", "lab5", "-p", "n_images=1000000000"], "'n_images' 1000000000 is out of range"),
    ],
)
def test_values_that_cannot_run_are_refused_before_compute(argv, needle, capsys, out, tmp_path):
    """rev_stages=1e6 ended in a MemoryError after 86 s in the kernel, cpu_threads=1e9 killed it,
    budget_gb=1e-300 a ZeroDivisionError; c2 and c5 with one epoch described a warm-up epoch as measured;
    cifar10 in the Tiny ImageNet task was a BatchNorm ValueError. Each is one line before the dataset is even
    looked at."""
    t0 = time.monotonic()
    assert cli.main([*argv, "-p", f"data_root={tmp_path / 'no-data-here'}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "not found" not in err, err
    assert time.monotonic() - t0 < 30 and not (out / "reports" / "executed").exists()


def test_save_model_pointing_at_a_folder_is_refused_before_the_dataset_check(tmp_path, capsys):
    from hpml_lab.__main__ import main

    rc = main(
        [
            "--data-root",
            str(tmp_path / "no-data"),
            "--save-model",
            str(tmp_path),
            "--results-dir",
            str(tmp_path),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "is a folder" in err and "CIFAR-10" not in err, err


def test_a_bench_batch_larger_than_the_dataset_is_one_line(tmp_path, capsys):
    """Issue 30: `bench loader --batch-size 600` on 500 images was a StopIteration traceback."""
    from hpml_lab.data import cifar

    cifar.synthesize(tmp_path, n_train=500, n_test=100)
    assert cli.main(["bench", "loader", "--data-root", str(tmp_path), "--batch-size", "600"]) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]  # after the '[bench] loader on cpu' line
    assert "Traceback" not in err and "--batch-size 600 is larger than the 500 training images" in last, err


def test_a_benchmark_asking_for_more_batches_than_an_epoch_has_starts_another_epoch():
    from hpml_lab.studies.bench_measure import _take

    drawn = []

    class OneBatch:
        def __iter__(self):
            drawn.append(1)
            return iter([0])

    _take(OneBatch(), 3)
    assert len(drawn) == 3


def test_a_stall_ratio_over_a_share_within_noise_is_no_ratio_with_its_reason():
    """Issue 30: `bench stall --model revnet38 --batch-size 1` printed a ratio of 5e11 with no caveat (a fast
    stall share of about 1e-12)."""
    from hpml_lab.studies.bench_measure import stall_ratio

    ratio, note = stall_ratio(0.5, 1e-12)
    assert ratio is None and "within timing noise" in note and "50.00%" in note
    assert stall_ratio(0.5, 0.1) == (5.0, "")
    ratio, note = stall_ratio(0.0, 0.2)  # issue 43: a baseline share of none made "ratio 0"
    assert ratio is None and "the baseline's stall share (0.00%) is within timing noise" in note


def test_bench_stall_from_a_single_repeat_says_it_cannot_give_a_ratio(cifar_root, out, capsys):
    """Issue 43: `bench stall` from one repeat printed a bare "ratio 0" (a share clipped at none, no
    spread)."""
    argv = ["bench", "stall", "--data-root", cifar_root, "--model", "resnet_tiny", "--batch-size", "8"]
    argv += ["--repeats", "1", "--warmup", "0", "--steps", "1", "--num-workers", "0", "--device", "cpu"]
    assert cli.main([str(a) for a in argv]) == 0
    captured = capsys.readouterr()
    rec = json.loads(captured.out.strip().splitlines()[-1])
    assert rec["ratio"] is None and rec["ratio_note"].startswith("no ratio: 1 repeat gives no spread")
    said = [line for line in captured.err.splitlines() if line.startswith("[bench] stall: ")]
    assert said and "no ratio: 1 repeat" in said[-1] and "ratio 0" not in said[-1], captured.err


def test_every_number_a_study_takes_is_bounded_before_compute():
    """Issue 43: the pre-run check is shared, so a new task cannot skip it: every study's settings (each
    registered task's and the benchmarks') give a range for every number they take, and a value far outside it
    is one line."""
    import typing
    from dataclasses import fields

    from hpml_lab.config import ConfigError
    from hpml_lab.studies import bench, registry

    classes = {t.settings for t in registry().values() if t.settings} | {bench.Settings}
    assert len(classes) >= 5
    for cls in classes:
        hints = typing.get_type_hints(cls)
        numeric = [
            f.name
            for f in fields(cls)
            if hints[f.name] in (int, float) or typing.get_args(hints[f.name])[:1] in ((int,), (float,))
        ]
        assert numeric, cls
        cls()  # its defaults pass
        for name in numeric:
            huge = 10**9 if typing.get_args(hints[name])[:1] != (float,) and hints[name] is not float else 1e6
            value = (huge,) if typing.get_origin(hints[name]) is tuple else huge
            with pytest.raises(ConfigError):
                cls(**{name: value})


def test_a_study_that_gives_a_number_no_range_is_a_mistake_met_at_once():
    from dataclasses import dataclass

    from hpml_lab.config import StudySettings

    @dataclass(frozen=True)
    class Unbounded(StudySettings):
        rounds: int = 3

    with pytest.raises(TypeError, match="gives no range for rounds"):
        Unbounded()
