"""Bad input: one line, non-zero exit, nothing written, before any compute."""

import os
import subprocess
import sys

import pytest

from hpml_lab.report import cli


def run_cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "hpml_lab.report.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.mark.parametrize(
    "args, needle",
    [
        (["run", "c9"], "unknown task 'c9'"),
        (["run", "c1", "-p", "batchsize=3"], "unknown parameter 'batchsize'"),
        (["run", "c1", "-p", "epochs=two"], "parameter 'epochs' must be int"),
        (["run", "c1", "-p", "optimizer=lbfgs"], "valid values"),
        (["run", "c2", "-p", "momentum=0.5"], "task c2 does not take parameter 'momentum'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1
    assert not (tmp_path / "reports").exists()


def test_missing_dataset_names_the_command(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    assert cli.main(["run", "c1", "-p", f"data_root={tmp_path / 'nowhere'}"]) == 2
    assert "hpml-lab data synth cifar10 --root" in capsys.readouterr().err


def test_params_file(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    f = tmp_path / "p.yaml"
    f.write_text("epochs: [1, 2]\n")
    assert cli.main(["run", "c1", "-f", str(f)]) == 2
    assert "parameter 'epochs' must be int" in capsys.readouterr().err


def test_tasks_lists_c1_and_c2(capsys):
    assert cli.main(["tasks"]) == 0
    out = capsys.readouterr().out
    assert "c1" in out and "c2_timing.ipynb" in out


def test_synth_if_missing_is_idempotent(tmp_path, capsys):
    args = ["data", "synth", "cifar10", "--root", str(tmp_path), "--n-train", "50", "--n-test", "10"]
    assert cli.main(args) == 0
    assert cli.main(args + ["--if-missing"]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert cli.main(args) == 2  # exists, no --force


def test_console_script_help():
    p = run_cli("--help")
    assert p.returncode == 0 and "hpml-lab" in p.stdout


def test_binary_parameters_file_is_one_line(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_bytes(b"\xff\xfe\x00\x01binary")
    r = run_cli("run", "c1", "-f", str(f))
    assert r.returncode == 2 and "is not UTF-8 text" in r.stderr and r.stderr.count("\n") == 1


def test_file_system_errors_are_one_line(tmp_path):
    a_file = tmp_path / "afile"
    a_file.write_text("x")
    for args in (
        ["data", "synth", "cifar10", "--root", str(a_file)],
        ["slurm", "c1", "--gpus", "1", "-o", str(a_file / "x")],
    ):
        r = run_cli(*args)
        assert r.returncode == 2 and r.stderr.startswith("hpml-lab: error:") and r.stderr.count("\n") == 1, (
            r.stderr
        )
        assert "Traceback" not in r.stderr


def test_a_corrupt_outcome_file_does_not_break_the_index(tmp_path, monkeypatch, capsys):
    from hpml_lab.report import runner

    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    (tmp_path / "reports" / "executed").mkdir(parents=True)
    (tmp_path / "reports" / "executed" / "c1.json").write_text('{"task": "c1", "tit')
    assert runner.load_outcomes() == [] and "ignoring unreadable outcome" in capsys.readouterr().err
    assert runner.write_index([]).is_file()


FRONT = """
import json, os, sys
from hpml_lab.report import cli
seen = []
for argv in json.loads(sys.argv[1]):
    try:
        rc = cli.main(argv)
    except SystemExit as e:  # argparse's --help
        rc = e.code
    seen.append([argv[0], rc, "torch" in sys.modules])
print(json.dumps(seen))
"""


def test_the_command_lines_front_answers_without_importing_torch(tmp_path, cifar_root):
    """help, tasks, init, slurm and the refusals of bad input import no torch (3 s of CPU, more on a login
    node's shared file system): registering a task, the data layer's checks and the model registry do without
    it."""
    import json

    calls = [
        ["--help"],
        ["tasks"],
        ["init", "mine"],
        ["slurm", "c1", "--gpus", "1", "-p", f"data_root={cifar_root}"],
        ["run", "c9"],
        ["run", "c1", "-p", "batchsize=3"],
        ["run", "memory", "-p", "resnets=foo"],
        ["run", "c1", "-p", f"data_root={tmp_path / 'none'}"],
        ["report", "--bundle"],
    ]
    r = subprocess.run(
        [sys.executable, "-c", FRONT, json.dumps(calls)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    seen = json.loads(r.stdout.splitlines()[-1])
    assert [rc for _, rc, _ in seen] == [0, 0, 0, 0, 2, 2, 2, 2, 2], r.stderr[-2000:]
    assert not any(torch for *_, torch in seen), seen
    assert (tmp_path / "slurm" / "c1-1x1.sbatch").is_file() and (tmp_path / "mine" / "notebooks").is_dir()


# The quick start (issue 45): init's command works as printed; data synth says what it does; a task on the
# default data folder writes the missing synthetic data itself, while a folder the user named is refused.


def test_init_prints_a_jupyterlab_command_that_works_as_printed(tmp_path):
    """Not `jupyter lab` (off PATH unless the environment is activated): this environment's Python running
    JupyterLab, absolute, which a shell without the venv on PATH runs."""
    import shlex

    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = "/usr/bin:/bin"  # a shell where the venv is not activated
    r = run_cli("init", str(tmp_path / "mine"), env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].endswith("open them with:") and "not registered" not in r.stdout
    argv = shlex.split(lines[1])
    assert argv[0] == sys.executable and argv[1:3] == ["-m", "jupyterlab"]
    assert argv[3] == f"--notebook-dir={tmp_path / 'mine' / 'notebooks'}"
    version = subprocess.run([*argv[:3], "--version"], env=env, capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.strip()[0].isdigit(), version.stderr


def test_data_synth_says_each_file_as_it_is_written(tmp_path, capsys):
    args = ["data", "synth", "cifar10", "--root", str(tmp_path), "--n-train", "50", "--n-test", "10"]
    assert cli.main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(": ")[1].split(" (")[0] for line in lines[:6]] == [
        *(f"training batch {i} of 5 written" for i in range(1, 6)),
        "testing batch 1 of 1 written",
    ]
    assert lines[0].startswith("data synth cifar10: ") and "(1 of 6, " in lines[0] and "left)" in lines[0]
    assert lines[6].startswith("wrote synthetic CIFAR-10 (50 train + 10 test, seed 0) to ")
    assert cli.main(["data", "synth", "tinyimagenet", "--root", str(tmp_path), "--classes", "2"]) == 0
    out = capsys.readouterr().out
    assert "data synth tinyimagenet: tiny-imagenet-200.zip written (44 images) (1 of 2, " in out
    assert "wrote synthetic Tiny ImageNet (2 classes x 10 train, 2 val each, seed 0) to " in out


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder without data/: where a fresh clone's `hpml-lab run` looks for its default data."""
    monkeypatch.setenv("HPML_LAB_HOME", str(tmp_path))
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    from hpml_lab.report import dataprep

    real = dataprep.synthesize
    # the default data at a small size (the sizes are data synth's options; the path through is the same)
    small = {"cifar10": {"n_train": 50, "n_test": 10}, "tinyimagenet": {"classes": 2}}
    monkeypatch.setattr(dataprep, "synthesize", lambda d, root, say=print: real(d, root, say, **small[d]))
    return tmp_path


def test_a_task_on_the_missing_default_data_writes_the_synthetic_data_first_and_says_so(project):
    from hpml_lab.config import RunConfig
    from hpml_lab.report import dataprep

    said = []
    cfg = RunConfig(task="c1")  # data_root "data": the notebooks' default
    assert dataprep.ready(cfg, given_root=False, say=said.append) == "synthetic"
    assert said[0].startswith("data: no CIFAR-10 in data/ (the default data folder): writing a synthetic one")
    assert "hpml-lab data download cifar10 --root data" in said[0]
    assert (
        said[-1].startswith("wrote synthetic CIFAR-10")
        and (project / "data" / "cifar-10-batches-py").is_dir()
    )
    said.clear()
    assert dataprep.ready(cfg, given_root=False, say=said.append) == "synthetic" and said == []  # made once
    ti = RunConfig(task="tinyimagenet", dataset="tinyimagenet")
    assert dataprep.ready(ti, given_root=False, say=said.append) == "synthetic"
    assert said[0].startswith("data: no Tiny ImageNet in data/")


def test_a_data_root_the_user_named_is_refused_in_one_line_and_nothing_is_written(project, capsys):
    assert cli.main(["run", "c1", "-p", "data_root=data"]) == 2  # named, even as the default's name
    err = capsys.readouterr().err
    assert "CIFAR-10 not found" in err and "hpml-lab data synth cifar10" in err and err.count("\n") == 1
    assert not (project / "data").exists() and not list(project.glob("reports/**/*.*"))
    (project / "data" / "cifar-10-batches-py").mkdir(parents=True)  # there but damaged: said, never replaced
    from hpml_lab.config import RunConfig
    from hpml_lab.data import DatasetError
    from hpml_lab.report import dataprep

    with pytest.raises(DatasetError):
        dataprep.ready(RunConfig(task="c1"), given_root=False, say=print)
    assert list((project / "data" / "cifar-10-batches-py").iterdir()) == []
