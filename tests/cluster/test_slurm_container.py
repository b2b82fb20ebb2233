"""`hpml-lab slurm ... --container IMAGE [--overlay FILE:ro] [--bind SRC:DST]`: every step of the job runs
inside `apptainer exec` (or `singularity exec`). Apptainer is not installed here, so the scripts are run by
bash with a stand-in container command on PATH that records its arguments: the exact command lines, the checks
before the first step, and hostile paths (spaces, quotes, `$(...)`) reaching the container command intact.
tests/cluster/test_slurm_real.py runs such a job under a real Slurm."""

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from hpml_lab.config import ConfigError
from hpml_lab.report import cli, slurm

HOSTILE = 'my lab\'s "dir" $(touch PWNED) `touch PWNED2`'


def _stand_in(folder: Path, name: str = "apptainer") -> Path:
    """A container command that appends its arguments (NUL-separated, one line per call) to $CT_LOG and runs
    nothing: the steps' own commands are not needed to check the command lines."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f'#!/bin/bash\n{{ printf "%s\\0" "{name}" "$@"; printf "\\n"; }} >> "$CT_LOG"\n')
    path.chmod(0o755)
    return path


def _calls(log: Path) -> list[list[str]]:
    if not log.exists():
        return []
    return [line.split("\0")[:-1] for line in log.read_text().split("\n") if line]


def _run(script: Path, bin_dir: Path, log: Path) -> subprocess.CompletedProcess:
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "CT_LOG": str(log),
        "HOME": os.environ.get("HOME", "/tmp"),
        "SLURM_JOB_NODELIST": "n1,n2",
        "SLURM_NNODES": "2",
        "SLURM_JOB_ID": "7",
    }
    return subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=60)


def test_every_step_runs_inside_the_container_with_the_exact_flags(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lab.sif").write_text("image")
    (tmp_path / "overlay.ext3").write_text("overlay")
    out = tmp_path / "job.sbatch"
    args = ["slurm", "c2", "--container", "lab.sif", "--overlay", "overlay.ext3:ro", "-o", str(out)]
    assert cli.main([*args, "--bind", "/scratch:/data:ro", "--gpus", "2"]) == 0
    subprocess.run(["bash", "-n", str(out)], check=True)
    text = out.read_text()
    prefix = ["exec", "--nv", "--overlay", f"{tmp_path}/overlay.ext3:ro", "--bind", "/scratch:/data:ro"]
    assert f'IN=("$CONTAINER_CMD" {shlex.join([*prefix, str(tmp_path / "lab.sif")])})' in text
    assert 'step "${IN[@]}" "$PY" -m torch.distributed.run --standalone --nproc-per-node=2' in text
    assert 'step "${IN[@]}" "$PY" -m hpml_lab.report.cli run c2 --profile full' in text
    assert '"${IN[@]}" "$PY" -c ' in text  # the dataset check too
    assert 'PY="${HPML_PYTHON:-python3}"' in text  # the image's interpreter, not the host's .venv
    # /scratch is a bind source that must exist: the check refuses the job before any step
    log = tmp_path / "calls"
    r = _run(out, _stand_in(tmp_path / "bin").parent, log)
    assert r.returncode == 2 and "/scratch does not exist" in r.stderr and "no step was started" in r.stderr
    assert _calls(log) == []


def test_cpu_nodes_leave_out_nv_and_srun_starts_one_container_per_node(tmp_path):
    text = slurm.render("c1", gpus=0, nodes=2, ntasks_per_node=2, container=str(tmp_path / "i.sif"))
    assert f'IN=("$CONTAINER_CMD" exec {tmp_path}/i.sif)' in text
    srun = text[text.index("step srun") :].split("\n\n")[0]
    assert '\\\n    "${IN[@]}" "$PY" -m torch.distributed.run --nnodes="$SLURM_NNODES"' in srun
    # without --container nothing changes
    plain = slurm.render("c1", gpus=0, nodes=2, ntasks_per_node=2)
    assert (
        "IN=" not in plain
        and "CONTAINER_CMD" not in plain
        and 'PY="${HPML_PYTHON:-.venv/bin/python}"' in plain
    )


def test_hostile_paths_reach_the_container_command_intact(tmp_path, monkeypatch):
    """A folder named with spaces, quotes, `$(...)` and backticks: bash -n passes, the stand-in receives each
    path as one argument, byte for byte, and nothing in the names is executed."""
    work = tmp_path / HOSTILE
    work.mkdir()
    monkeypatch.chdir(work)
    for name in ("lab image.sif", "over'lay.ext3"):
        (work / name).write_text("x")
    data = work / "da ta"
    data.mkdir()
    out = slurm.write(
        "c1",
        out=str(work / "job.sbatch"),
        gpus=0,
        nodes=2,
        container="lab image.sif",
        overlay="over'lay.ext3:ro",
        binds=[f"{data}:/data"],
        params={"data_root": "/data"},
        workdir=str(work),
    )
    subprocess.run(["bash", "-n", str(out)], check=True)
    log = tmp_path / "calls"
    bin_dir = _stand_in(tmp_path / "bin").parent
    (bin_dir / "srun").write_text('#!/bin/bash\nwhile [[ "$1" == --* ]]; do shift; done\nexec "$@"\n')
    (bin_dir / "scontrol").write_text("#!/bin/bash\necho n1\n")
    for f in ("srun", "scontrol"):
        (bin_dir / f).chmod(0o755)
    r = _run(out, bin_dir, log)
    assert r.returncode == 0, r.stderr
    head = ["apptainer", "exec", "--overlay", f"{work}/over'lay.ext3:ro", "--bind", f"{data}:/data"]
    head.append(f"{work}/lab image.sif")
    calls = _calls(log)
    assert len(calls) == 3  # the dataset check, the torchrun step (through srun), the notebook step
    assert all(c[: len(head)] == head for c in calls), calls
    assert calls[0][len(head) : len(head) + 2] == ["python3", "-c"]
    assert calls[1][len(head) : len(head) + 4] == ["python3", "-m", "torch.distributed.run", "--nnodes=2"]
    assert calls[2][len(head) :] == [
        "python3",
        "-m",
        "hpml_lab.report.cli",
        "run",
        "c1",
        "--profile",
        "full",
    ] + [
        "-p",
        "data_root=/data",
        "-p",
        "device=cpu",
    ]
    assert not list(tmp_path.rglob("PWNED*"))
    assert "container: apptainer exec" in r.stdout


def test_singularity_is_used_where_apptainer_is_missing_and_a_missing_image_stops_the_job(tmp_path):
    (tmp_path / "lab.sif").write_text("x")
    script = tmp_path / "job.sbatch"
    script.write_text(slurm.render("c1", gpus=1, container=str(tmp_path / "lab.sif"), workdir=str(tmp_path)))
    log = tmp_path / "calls"
    r = _run(script, _stand_in(tmp_path / "bin", "singularity").parent, log)
    assert r.returncode == 0, r.stderr
    assert [c[:3] for c in _calls(log)] == [["singularity", "exec", "--nv"]] * 3

    (tmp_path / "lab.sif").unlink()
    log.unlink()
    r = _run(script, tmp_path / "bin", log)
    assert r.returncode == 2 and f"{tmp_path}/lab.sif does not exist" in r.stderr and _calls(log) == []

    r = _run(script, tmp_path / "empty", log)  # neither command on PATH
    assert r.returncode == 2 and "neither apptainer nor singularity" in r.stderr and _calls(log) == []


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"overlay": "o.ext3"}, "go with --container"),
        ({"binds": ["/a:/b"]}, "go with --container"),
        ({"container": "docker://pytorch/pytorch"}, "must be a file on the cluster"),
        ({"container": ""}, "needs a file path"),
        ({"container": "a\nb.sif"}, "control characters"),
        ({"container": "i.sif", "overlay": "a,b.ext3:ro"}, "cannot take a file name"),
        ({"container": "i.sif", "binds": ["/a,/b"]}, "SRC\\[:DST"),
        ({"container": "i.sif", "binds": ["/a:data"]}, "absolute path inside the container"),
        ({"container": "i.sif", "binds": ["/a:/b:rx"]}, "ro or rw"),
        ({"container": "i.sif", "binds": [":/b"]}, "SRC\\[:DST"),
    ],
)
def test_bad_container_options_are_one_line(kw, match):
    with pytest.raises(ConfigError, match=match):
        slurm.render("c1", **kw)


def test_writing_the_job_notes_files_this_machine_lacks(tmp_path, monkeypatch, capsys):
    """Written on a login node for another node: a missing image is a note (the job checks it), not an
    error."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lab.sif").write_text("x")
    out = str(tmp_path / "j.sbatch")
    assert cli.main(["slurm", "c1", "--container", "lab.sif", "--overlay", "gone.ext3:ro", "-o", out]) == 0
    printed = capsys.readouterr().out
    assert f"note: {tmp_path}/gone.ext3 is not on this machine" in printed and "lab.sif is not" not in printed


# `hpml-lab overlay`: the script that puts hpml-lab's environment into an overlay. Its full run (an
# environment made, packages installed, the kernel registered, then a job run with that Python under a real
# Slurm) is tests/cluster/test_slurm_real.py::test_c2_runs_with_the_python_of_an_overlay_hpml_lab_prepared.


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"size": "15GB"}, "--size takes a whole number of M or G"),
        ({"size": "0G"}, "--size takes"),
        ({"cuda": "12.6"}, "--cuda takes a PyTorch build tag"),
        ({"cuda": "cu126", "index": "https://x/y"}, "give one"),
        ({"index": "ftp://mirror/simple"}, "--torch-index takes a package index"),
        ({"index": "https://x/a b"}, "--torch-index takes"),
        ({"overlay": "o.ext3:ro"}, "without :ro or :rw"),
        ({"env": "ext3/env"}, "--env is a folder inside the container"),
        ({"env": "/ext3/my env"}, "--env is a folder"),
        ({"base_python": "bin/python"}, "path inside the container"),
        ({"container": "docker://x"}, "must be a file on the cluster"),
        ({"checkout": "/"}, "has no constraints.txt"),
    ],
)
def test_bad_overlay_options_are_one_line(kw, match):
    from hpml_lab.report import overlay

    with pytest.raises(ConfigError, match=match):
        overlay.render(**{"container": "lab.sif", "overlay": "o.ext3", **kw})


def test_the_overlay_script_makes_the_overlay_then_installs_inside_it(tmp_path, monkeypatch, capsys):
    """The script's command lines, with a stand-in container command that records them and runs nothing:
    `overlay create` for a missing overlay (its size in MiB), then one `exec` with the overlay writable that
    runs the install with the environment's folder, this checkout, torch's index (--cuda) and no base Python.
    An overlay that exists is not made again; a missing image or no container command stops it before any
    step."""
    from hpml_lab.report import overlay

    monkeypatch.chdir(tmp_path)
    (tmp_path / "lab.sif").write_text("image")
    assert cli.main(["overlay", "--container", "lab.sif", "--overlay", "ov.ext3", "--cuda", "cu126"]) == 0
    script = tmp_path / "slurm" / "overlay.sh"
    assert f"bash {script}" in capsys.readouterr().out
    subprocess.run(["bash", "-n", str(script)], check=True)
    log = tmp_path / "calls"
    bin_dir = _stand_in(tmp_path / "bin").parent

    def _calls(log):  # one call per record: its arguments hold newlines (the install script)
        return [c.split("\0") for c in log.read_text().split("\0\n") if c] if log.exists() else []

    r = _run(script, bin_dir, log)
    assert r.returncode == 0, r.stderr
    calls = _calls(log)
    assert calls[0] == ["apptainer", "overlay", "create", "--size", "15360", f"{tmp_path}/ov.ext3"]
    head = ["apptainer", "exec", "--overlay", f"{tmp_path}/ov.ext3:rw", f"{tmp_path}/lab.sif", "bash", "-c"]
    assert calls[1][:7] == head and len(calls) == 2
    assert calls[1][7] == overlay.INSTALL.strip()
    checkout = str(Path(overlay.__file__).resolve().parents[2])
    url = "https://download.pytorch.org/whl/cu126"
    assert calls[1][8:] == ["hpml-overlay", "/ext3/env", checkout, url, ""]
    (tmp_path / "ov.ext3").write_text("an overlay copied from the cluster's ready-made ones")
    log.unlink()
    assert _run(script, bin_dir, log).returncode == 0 and [c[1] for c in _calls(log)] == ["exec"]
    (tmp_path / "lab.sif").unlink()
    log.unlink()
    r = _run(script, bin_dir, log)
    assert (
        r.returncode == 2 and "the image" in r.stderr and "does not exist" in r.stderr and _calls(log) == []
    )
    r = _run(script, tmp_path / "nothing", log)
    assert r.returncode == 2 and "neither apptainer nor singularity" in r.stderr


def test_the_overlay_install_refuses_a_python_older_than_3_11(tmp_path):
    """Inside the container (the stand-in runs the install on this host): a base Python that is not 3.11 or
    newer stops the install in one line, before any environment is made."""
    import sys

    from slurm_local import apptainer_stand_in

    from hpml_lab.report import overlay

    (tmp_path / "lab.sif").write_text("image")
    (tmp_path / "ov").mkdir()
    old = tmp_path / "old-python"
    old.write_text("#!/bin/bash\nexit 1\n")  # what an old Python answers to the version check
    old.chmod(0o755)
    script = tmp_path / "overlay.sh"
    script.write_text(
        overlay.render(str(tmp_path / "lab.sif"), str(tmp_path / "ov"), base_python=str(old), env="/ext3/env")
    )
    env = {**apptainer_stand_in(tmp_path, sys.executable), "HOME": str(tmp_path)}
    r = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2 and f"{old} is not Python 3.11 or newer" in r.stderr, r.stderr
    assert not (tmp_path / "ov" / "upper").exists()
