"""`hpml-lab slurm`: sbatch scripts for one node (torchrun --standalone) and several (srun + torchrun, c10d),
GPU and CPU nodes. What the scripts say; tests/cluster/test_slurm_real.py submits them to a real Slurm."""

import subprocess

import pytest

from hpml_lab.config import ConfigError
from hpml_lab.report import cli, slurm


def _bash_n(path):
    r = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_one_node_script(tmp_path):
    out = tmp_path / "one.sbatch"
    assert (
        cli.main(
            [
                "slurm",
                "c1",
                "--gpus",
                "2",
                "--time",
                "00:30",
                "--partition",
                "gpu",
                "-p",
                "batch_size=512",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    _bash_n(out)
    text = out.read_text()
    assert "#SBATCH --gpus-per-node=2" in text and "#SBATCH --nodes=1" in text
    assert "#SBATCH --time=00:30:00" in text and "#SBATCH --partition=gpu" in text
    assert "torch.distributed.run --standalone --nproc-per-node=2" in text and "srun" not in text
    assert "--batch-size 512" in text and "--task c1" in text
    assert (
        "hpml_lab.report.cli run c1 --profile full -p batch_size=512" in text
    )  # papermill + HTML at the end
    assert "HPML_PROGRESS=log" in text and "check_dataset" in text


def test_multi_node_script(tmp_path):
    path = slurm.write("c1", out=str(tmp_path / "multi.sbatch"), gpus=4, nodes=2, time="1-02:00")
    _bash_n(path)
    text = path.read_text()
    assert "#SBATCH --nodes=2" in text and "#SBATCH --ntasks-per-node=1" in text
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1' in text
    assert "srun --nodes=" in text and "--rdzv-backend=c10d" in text
    assert '--rdzv-endpoint="$HEAD_ADDR:$RDZV_PORT"' in text and "--nproc-per-node=4" in text
    assert "--standalone" not in text
    # the training step comes before the notebook
    assert text.index("-m hpml_lab") < text.index("hpml_lab.report.cli run c1")


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"time": "90 minutes"}, "--time"),
        ({"gpus": -1}, "--gpus"),
        ({"partition": "a b"}, "--partition"),
        ({"params": {"batch_sise": "3"}}, "unknown parameter"),
        ({"params": {"epochs": "x"}}, "epochs"),
        ({"gpus": 2, "ntasks_per_node": 2}, "--ntasks-per-node is for CPU jobs"),
        ({"gpus": 0, "ntasks_per_node": 0}, "--ntasks-per-node must be at least 1"),
        ({"gpus": 0, "params": {"device": "cuda"}}, "--gpus 0 asks for CPU nodes"),
        ({"time": "00:02", "signal_lead_s": 120}, "--signal-lead"),
        ({"signal_lead_s": 0}, "--signal-lead"),
        ({"train_params": {"lodaer": "tensor"}}, "unknown parameter 'lodaer'"),
        ({"train_params": {"loader": "gpu"}}, "loader"),
        ({"train": False, "report": False}, "nothing to run"),
        ({"gpus": 0, "cpus_per_task": 0}, "--cpus-per-task"),
        ({"gpus": 0, "train_params": {"device": "cuda"}}, "--train device=cuda"),
        # issue 22: values written into the script that fail only when the job runs, or blame the wrong option
        ({"train_params": {"task": "../../etc"}}, "--train task=... is not a setting"),
        ({"params": {"task": "c2"}}, "-p task=... is not a setting"),
        ({"time": "0:00"}, "--time must be at least 00:01"),
        ({"time": "00:00:30"}, "--time must be at least 00:01"),
        ({"time": "\u0661\u0662:00"}, "ASCII digits"),
        ({"time": "01:75"}, "below 60"),
        ({"save_model": ""}, "--save-model needs a file path"),
        ({"nodes": 10**9}, "--nodes 1 to 10000"),
        ({"gpus": 10**6}, "--gpus must be 0"),
        ({"train_params": {"batch_size": "1e20"}}, "'batch_size' must be int"),
        ({"train_params": {"run_id": "..x"}}, "plain folder name"),
        # Slurm's own options, each checked when the script is written (sbatch would refuse them at submit
        # time)
        ({"mem": "32GB"}, "--mem takes a size as Slurm reads it"),
        ({"mem": "-1G"}, "--mem takes a size"),
        ({"mem": ""}, "--mem takes a size"),
        ({"account": "my account"}, "--account must be a plain Slurm account name"),
        ({"account": "a,b"}, "--account must be a plain"),
        ({"gres": "gpu:v100:2:1"}, "--gres takes NAME\\[:TYPE\\]\\[:COUNT\\]"),
        ({"gres": "gpu:0"}, "at least one"),
        ({"gres": "gpu:2", "gpus": 4}, "asks for 2 GPU\\(s\\) per node but --gpus says 4"),
        ({"gres": "mps:100"}, "names no GPU"),
        ({"python": ""}, "--python needs an interpreter"),
        ({"python": "py\nthon"}, "--python needs an interpreter"),
        ({"python": "env/bin/python", "container": "i.sif"}, "path inside the container"),
    ],
)
def test_bad_input_is_one_line(kw, match):
    with pytest.raises(ConfigError, match=match):
        slurm.render("c1", **kw)


def test_unknown_task(capsys):
    assert cli.main(["slurm", "nope"]) == 2
    assert "valid tasks" in capsys.readouterr().err


def test_cpu_script_asks_for_tasks_not_gpus(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the script goes to ./slurm/, as for a user
    monkeypatch.delenv("HPML_OUTPUT_DIR", raising=False)
    monkeypatch.delenv("HPML_LAB_HOME", raising=False)
    path = slurm.write("c1", gpus=0, ntasks_per_node=3, nodes=2, cpus_per_task=2, time="00:20")
    assert path == tmp_path / "slurm" / "c1-2x3cpu.sbatch"
    _bash_n(path)
    text = path.read_text()
    assert "#SBATCH --ntasks-per-node=3" in text and "#SBATCH --cpus-per-task=2" in text
    assert "gpus" not in text.split("set -euo")[0] and "--gres" not in text
    assert "--nproc-per-node=3" in text and "--device cpu" in text and "-p device=cpu" in text
    assert "OMP_NUM_THREADS:-2" in text
    # the rendezvous uses the head node's address from Slurm, so node names need not resolve
    assert "NodeAddr=" in text and '--rdzv-endpoint="$HEAD_ADDR:$RDZV_PORT"' in text


def test_time_limit_warning_and_resumable_steps(tmp_path):
    text = slurm.render("c3", gpus=1, time="02:00", signal_lead_s=300)
    assert "#SBATCH --signal=B:USR1@300" in text and "trap stop_step USR1" in text
    assert "#SBATCH --signal=B:USR1@180" in slurm.render("c3", gpus=1, time="02:00")  # the default
    assert "#SBATCH --signal=B:USR1@30" in slurm.render(
        "c3", gpus=1, time="00:02"
    )  # a quarter of a short limit
    # both steps run under `step` (in the background, so the trap acts at once); training skips a complete run
    assert 'step "$PY" -m torch.distributed.run' in text and "--if-missing true" in text
    assert 'step "$PY" -m hpml_lab.report.cli run c3' in text
    # study settings (C3's tolerance, patience, max_workers) go to the notebook, never to the training step
    train_line = text[text.index("-m hpml_lab --task c3") :].splitlines()[0]
    assert "--tolerance" not in train_line and "--max-workers" not in train_line
    no_train = slurm.render("c3", gpus=1, train=False)
    assert "torch.distributed.run" not in no_train and "hpml_lab.report.cli run c3" in no_train
    no_report = slurm.render("c1", gpus=1, report=False, train_params={"loader": "tensor"}, save_model="w.pt")
    assert "hpml_lab.report.cli run" not in no_report
    assert "--loader tensor" in no_report and "--save-model w.pt" in no_report


def test_step_stops_the_running_step_on_the_warning_signal(tmp_path):
    """The script's step functions in bash: SIGUSR1 to the shell sends SIGTERM to the step's whole process
    tree at once (not after it ends), returns the step's own exit status, and no later step starts."""
    import contextlib
    import os
    import signal
    import time

    text = slurm.render("c1", gpus=1)
    functions = text[text.index('STEP_PID=""') : text.index("# 1. The dataset")]
    marker, ready = tmp_path / "second-step-ran", tmp_path / "child-trap-set"
    script = tmp_path / "s.sh"
    script.write_text(
        "set -euo pipefail\n"
        + functions
        + f"""
step bash -c 'trap "echo child got TERM; exit 143" TERM; sleep 60 & touch {ready}; wait'
step touch {marker}
"""
    )
    # its own process group, so that a failed assert below leaves no sleep behind (review36)
    p = subprocess.Popen(
        ["bash", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        # the signal goes once the child has set its trap and started its sleep: on a loaded machine a fixed
        # second was not enough (CI: the child, started late, was killed before its trap and printed
        # nothing; and a sleep started after the step's tree was read outlived its shell and held the output
        # open)
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), "the step's child never started"
        t0 = time.monotonic()
        os.kill(p.pid, signal.SIGUSR1)
        out, err = p.communicate(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    assert time.monotonic() - t0 < 10  # not after the 60 s sleep
    assert p.returncode == 143 and "child got TERM" in out and "time limit is near" in err
    assert not marker.exists()
    # the step's own status comes back, also for a step that ends while the shell handles the signal
    quick = tmp_path / "q.sh"
    quick.write_text("set -uo pipefail\n" + functions + "\nstep bash -c 'exit 7'; echo status=$?\n")
    assert (
        "status=7" in subprocess.run(["bash", str(quick)], capture_output=True, text=True, timeout=30).stdout
    )


def test_notebooks_without_a_device_parameter_still_get_cpu_jobs(tmp_path):
    text = slurm.render("c3", gpus=0, train=False)  # C3's notebook has no device parameter
    assert "hpml_lab.report.cli run c3 --profile full" in text and "device" not in text.split("# 3.")[1]
    assert "--device cpu" in slurm.render("c3", gpus=0)  # the training step runs on CPU all the same


def test_slurms_own_options_are_written_as_sbatch_reads_them(tmp_path, monkeypatch):
    """--mem, --account, --partition, --gres (which replaces --gpus-per-node and gives the GPU count) and
    --python (the interpreter every step runs, written into the script: no HPML_PYTHON to remember)."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "j.sbatch"
    argv = ["slurm", "c2", "--mem", "32g", "--account", "hpml-class", "--partition", "rtx8000"]
    assert cli.main([*argv, "--gres", "gpu:rtx8000:2", "--python", "venv/bin/python", "-o", str(out)]) == 0
    _bash_n(out)
    text = out.read_text()
    for line in ("--mem=32G", "--account=hpml-class", "--partition=rtx8000", "--gres=gpu:rtx8000:2"):
        assert f"#SBATCH {line}\n" in text, line
    assert "--gpus-per-node" not in text and "--nproc-per-node=2" in text  # the count comes from --gres
    assert f"PY={tmp_path}/venv/bin/python " in text and "HPML_PYTHON" not in text  # absolute, from here
    plain = slurm.render("c2")
    assert "#SBATCH --gpus-per-node=1" in plain and "--mem" not in plain and "--account" not in plain
    inside = slurm.render("c2", container=str(tmp_path / "i.sif"), python="/ext3/env/bin/python")
    assert "PY=/ext3/env/bin/python " in inside  # a path inside the container is written as it is
    assert "PY=python3.12 " in slurm.render("c2", python="python3.12")  # a command name: looked up on PATH


def test_a_job_script_edited_by_hand_is_never_overwritten_without_a_word(tmp_path, monkeypatch, capsys):
    """Written again, a script hpml-lab wrote is replaced; one edited since (or one hpml-lab never wrote) is
    refused in one line with nothing written, and --force replaces it, keeping the edited one beside it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HPML_OUTPUT_DIR", raising=False)
    monkeypatch.delenv("HPML_LAB_HOME", raising=False)
    assert cli.main(["slurm", "c1"]) == 0
    path = tmp_path / "slurm" / "c1-1x1.sbatch"
    assert cli.main(["slurm", "c1", "--time", "02:00"]) == 0  # unedited: replaced
    assert "#SBATCH --time=02:00:00" in path.read_text()
    edited = path.read_text().replace("--time=02:00:00", "--time=05:00:00")
    path.write_text(edited)
    capsys.readouterr()
    assert cli.main(["slurm", "c1"]) == 2
    err = capsys.readouterr().err
    assert "was changed since hpml-lab wrote it" in err and "--force" in err and len(err.splitlines()) == 1
    assert path.read_text() == edited and sorted(p.name for p in path.parent.iterdir()) == [path.name]
    assert cli.main(["slurm", "c1", "--force"]) == 0
    assert f"your edited c1-1x1.sbatch is kept as {path}.edited" in capsys.readouterr().out
    assert (path.parent / "c1-1x1.sbatch.edited").read_text() == edited
    assert "#SBATCH --time=01:00:00" in path.read_text()
    (tmp_path / "mine.sbatch").write_text("#!/bin/bash\necho my own job\n")  # a file hpml-lab never wrote
    assert cli.main(["slurm", "c1", "-o", "mine.sbatch"]) == 2
    assert (tmp_path / "mine.sbatch").read_text() == "#!/bin/bash\necho my own job\n"
