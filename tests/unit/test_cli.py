"""Bad input: one line, non-zero exit, nothing written, before any compute."""

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
    """help, tasks, init, slurm and the refusals of bad input import no torch (3 s of CPU, more on a login node's
    shared file system): registering a task, the data layer's checks and the model registry do without it."""
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
