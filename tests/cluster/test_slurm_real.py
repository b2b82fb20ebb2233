"""The cluster path for real: scripts written by `hpml-lab slurm` submitted with `sbatch` to a Slurm 22.05
running on this host (tests/slurm_local.py: munged, slurmctld, two slurmd daemons as nodes n1 and n2).

Marked `slurm`; skipped with the reason where Slurm is not installed or the tests do not run as root
(`.ci/run` installs Debian's slurm-wlm and munge in CI). Each job trains the tiny ResNet on CPU with gloo.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from slurm_local import LocalSlurm, apptainer_stand_in, free_port, unavailable

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.slurm,
    pytest.mark.slow,
    pytest.mark.skipif(bool(unavailable()), reason=unavailable() or "-"),
]

# The training step's settings, and a single process's at the same global batch: DDP must give its weights.
TINY = [
    "--model",
    "resnet_tiny",
    "--epochs",
    "2",
    "--max-batches",
    "2",
    "--num-workers",
    "0",
    "--norm",
    "none",
    "--device",
    "cpu",
    "--augment",
    "false",
    "--shuffle",
    "false",
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalSlurm(tmp_path_factory.mktemp("slurm"))
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def reference(cifar_root, tmp_path_factory):
    """One process at batch 32 (the global batch of 2 ranks at 16), no Slurm: its final weights."""
    work = tmp_path_factory.mktemp("reference")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "hpml_lab",
            *TINY,
            "--batch-size",
            "32",
            "--task",
            "ref",
            "--data-root",
            str(cifar_root),
            "--progress",
            "none",
            "--save-model",
            "one.pt",
        ],
        cwd=work,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return torch.load(work / "one.pt")


def _job_env() -> dict[str, str]:
    # sbatch passes the submitting environment on (--export=ALL): the job uses this interpreter and checkout
    return {
        "HPML_PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT),
        "RDZV_PORT": str(free_port()),
        "HPML_DIST_TIMEOUT_S": "120",
    }


def _write_script(work: Path, *args: str) -> Path:
    """`hpml-lab slurm ARGS` run in `work` from a user's shell: the job works (and writes) there."""
    script = work / "job.sbatch"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HPML_")}
    r = subprocess.run(
        [sys.executable, "-m", "hpml_lab.report.cli", "slurm", *args, "-o", str(script)],
        cwd=work,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert f"cd {work}" in script.read_text()
    return script


def _assert_same_weights(path: Path, reference: dict) -> None:
    got = torch.load(path)
    assert got.keys() == reference.keys()
    for k in reference:
        torch.testing.assert_close(got[k], reference[k], rtol=1e-4, atol=1e-5, msg=lambda m: f"{k}: {m}")


def _runs(work: Path, task: str) -> list[dict]:
    from hpml_lab import results

    return [r.meta for r in results.load_runs(task, work / "results", status=None)]


def _ddp_job(
    cluster,
    cifar_root,
    tmp_path,
    reference,
    *shape: str,
    world: int,
    report: bool = True,
    env: dict | None = None,
    task: str = "c1",
    job_env: dict | None = None,
):
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    script = _write_script(
        work,
        task,
        "--gpus",
        "0",
        *shape,
        *([] if report else ["--no-report"]),
        "--profile",
        "tiny",
        "--time",
        "00:10",
        "-p",
        f"data_root={cifar_root}",
        "--train",
        "norm=none",
        "--train",
        "augment=false",
        "--train",
        "shuffle=false",
        "--save-model",
        "ddp.pt",
    )
    job = cluster.submit(
        script, work, env={**(_job_env() if job_env is None else job_env), **(env or {})}, timeout_s=400
    )
    assert (job.returncode, job.state) == (0, "COMPLETED"), job.output[-6000:] + cluster.logs()[-3000:]
    # The torchrun step: `world` ranks over the allocation, weights equal to one process at the same global
    # batch.
    _assert_same_weights(work / "ddp.pt", reference)
    ddp = [m for m in _runs(work, task) if m["run_id"].startswith(f"ddp{world}-")]
    assert len(ddp) == 1 and ddp[0]["status"] == "complete"
    assert ddp[0]["distributed"]["world_size"] == world and ddp[0]["distributed"]["launcher"] == "torchrun"
    assert ddp[0]["distributed"]["backend"] == "gloo" and ddp[0]["distributed"]["global_batch"] == 32
    if not report:
        assert not (work / "reports").exists()
        return job
    # The notebook step ran in the batch step (SLURM_PROCID=0, SLURM_NTASKS=world) as one process, not a rank.
    one = [m for m in _runs(work, task) if not m["run_id"].startswith("ddp")]
    assert one and all(m["status"] == "complete" and m["distributed"]["world_size"] == 1 for m in one)
    outcome = json.loads((work / "reports" / "executed" / f"{task}.json").read_text())
    assert outcome["status"] == "ok", outcome
    assert (work / "reports" / f"{task}.html").stat().st_size > 10_000
    assert f"report: reports/{task}.html" in job.output
    return job


# Batches per epoch of each C6 run in the time-limit test (2 epochs; tiny's 2 batches would make a run shorter
# than the warning's way to the step). It was every batch for 3 epochs (63 batches of 16: 15-20 s a run at
# load 8, 3 of the test's minutes); 32 steps are a few seconds a run, and the stop must only reach the step
# before the four runs after the first are done (with 12 a run, the first job stopped with 1 of 5 complete at
# load 7; 16 for margin).
SWEEP_BATCHES = 16


def test_time_limit_stops_cleanly_and_a_resubmitted_job_resumes(cluster, cifar_root, tmp_path):
    """A 4-minute limit with the warning (USR1 to the batch shell) 60 s before it, which Slurm would send
    about 3 minutes in (its documentation allows up to a minute early; 19 to 20 s early seen here). The test
    sends the same signal the same way (`scancel --batch --signal=USR1`) once the first run of the C6
    notebook's sweep of five is complete, so the stop always falls inside the sweep, on a fast machine or a
    loaded one. The job stops cleanly; submitted again (with more time) it skips the complete training run,
    reuses exactly the sweep runs the first job completed, and finishes."""
    work = tmp_path / "work"
    work.mkdir()
    script = _write_script(
        work,
        "c6",
        "--gpus",
        "0",
        "--ntasks-per-node",
        "2",
        "--profile",
        "tiny",
        "--time",
        "00:04",
        "--signal-lead",
        "60",
        "-p",
        f"data_root={cifar_root}",
        "-p",
        "epochs=2",
        "-p",
        f"max_batches={SWEEP_BATCHES}",
    )
    sent, started = [], time.monotonic()

    def warn_after_the_first_sweep_run(job_id):
        if not sent and any(
            m["status"] == "complete" for m in _runs(work, "c6") if not m["run_id"].startswith("ddp")
        ):
            cluster.signal_batch(job_id, "USR1")
            sent.append(time.monotonic() - started)

    first = cluster.submit(
        script, work, env=_job_env(), timeout_s=300, while_running=warn_after_the_first_sweep_run
    )
    assert first.state == "FAILED" and first.returncode != 0, (
        first.state,
        first.output[-4000:],
    )  # not TIMEOUT
    assert sent and "SIGUSR1, the time limit is near" in first.output
    # stopped promptly on the warning, wherever the warning fell: at load average 20 the first sweep run was
    # complete only 140 s in and the job stopped at 153 s, past an absolute bound of 150 s but 13 s after USR1
    assert first.seconds < sent[0] + 60, (first.seconds, sent)
    runs = _runs(work, "c6")
    statuses = [m["status"] for m in runs]
    assert set(statuses) <= {"complete", "interrupted"}, (
        statuses
    )  # nothing left "running", nothing half-written
    assert [m["status"] for m in runs if m["run_id"].startswith("ddp")] == ["complete"]  # the training step
    done_first = sorted(
        m["run_id"] for m in runs if m["status"] == "complete" and not m["run_id"].startswith("ddp")
    )
    assert 1 <= len(done_first) < 5, done_first  # the warning came while the sweep ran
    outcome = json.loads((work / "reports" / "executed" / "c6.json").read_text())
    assert outcome["status"] == "interrupted", outcome

    second = cluster.submit(script, work, "--time=10", env=_job_env(), timeout_s=400)
    assert (second.returncode, second.state) == (0, "COMPLETED"), second.output[-4000:]
    assert "complete already: " in second.output  # the training step went straight on (--if-missing)
    # the sweep's lines are kept in the executed notebook, not printed in the job's log (report/watch.py)
    kept = "".join(
        "".join(o.get("text", ""))
        for c in json.loads((work / "reports" / "executed" / "c6.ipynb").read_text())["cells"]
        for o in c.get("outputs", [])
        if o.get("output_type") == "stream"
    )
    reused = sorted(
        line.split("] ")[1].split(":")[0].split("/")[1]
        for line in kept.splitlines()
        if "complete from an earlier run, skipped" in line
    )
    assert reused == done_first  # resumed where it stopped: what was complete is reused, nothing else
    runs = _runs(work, "c6")
    assert len(runs) == 6 and all(m["status"] == "complete" for m in runs)
    assert json.loads((work / "reports" / "executed" / "c6.json").read_text())["status"] == "ok"
    print(
        f"time limit: the first job stopped after {first.seconds:.0f} s (the test's USR1 sent {sent[0]:.0f} "
        f"s in) with the training run and {len(done_first)} of 5 sweep runs complete; the second reused "
        f"them and finished in {second.seconds:.0f} s"
    )


def _stand_in(tmp_path: Path) -> dict[str, str]:
    """A stand-in `apptainer` first on PATH (tests/slurm_local.py); it logs each call's arguments to
    CT_LOG."""
    return apptainer_stand_in(tmp_path, sys.executable)


def test_a_job_across_two_nodes_in_a_container(cluster, cifar_root, tmp_path, reference):
    """Two slurmd daemons on this host are two nodes: srun starts the container command once per node (n1,
    n2), not once per task of the allocation, and torchrun inside each starts 2 ranks, c10d rendezvous on the
    first node's NodeAddr: 4 ranks at batch 8 give one process's weights at 32. The notebook step is left out
    (--no-report): the one-node container job runs it. (One job for what were two: the plain job across two
    nodes ran the same srun and torchrun lines without the container prefix, which tests/cluster/test_slurm.py
    checks in the script.)"""
    work = tmp_path / "work"
    work.mkdir()
    (work / "lab.sif").write_text("a stand-in image")
    env = _stand_in(tmp_path)
    shape = ("--container", "lab.sif", "--nodes", "2", "--ntasks-per-node", "2", "-p", "batch_size=8")
    job = _ddp_job(cluster, cifar_root, tmp_path, reference, *shape, world=4, report=False, env=env)
    assert "rendezvous on n1 (127.0.0.1:" in job.output
    calls = [json.loads(line)["args"] for line in Path(env["CT_LOG"]).read_text().splitlines()]
    torchruns = [c for c in calls if c[3:5] == ["-m", "torch.distributed.run"]]
    assert len(calls) == 3 and len(torchruns) == 2, calls  # the dataset check, one torchrun per node
    assert all(c[:3] == ["exec", f"{work}/lab.sif", sys.executable] for c in calls), calls
    print(
        f"{cluster.version}: c1 in a stand-in container, 2 nodes x 2 ranks, job {job.id} took "
        f"{job.seconds:.0f} s"
    )


def test_c2_runs_with_the_python_of_an_overlay_hpml_lab_prepared(cluster, cifar_root, tmp_path, reference):
    """The cluster as it is, end to end: `hpml-lab overlay` writes the script that fills an overlay (a folder
    stands in for the ext3 image, which cannot be made here); run through the stand-in `apptainer` it makes
    the environment at /ext3/env with the image's python3 (this interpreter's), installs hpml-lab with its
    pins (uv, from make setup's cache, offline) and registers the `hpml-lab` kernel there. Then `hpml-lab
    slurm c2 --container lab.sif --overlay overlay.ext3:ro --python /ext3/env/bin/python --mem 32G --account
    X` (on CPU nodes: --gpus 0 --ntasks-per-node 2) runs under the real Slurm with no HPML_PYTHON or
    PYTHONPATH: the dataset check, the torchrun step (2 ranks, --standalone, the weights of one process at the
    same global batch) and the notebook step (one process, not a rank) each go through the container command
    with that Python, and the job completes with its report. Apptainer itself, ext3 images and --nv on GPUs
    are not run here."""
    uv = Path(sys.executable).parent / "uv"
    if not uv.is_file():
        pytest.skip(
            "the overlay is filled with uv from make setup's cache (INSTALLER=uv); this venv has no uv"
        )
    work = tmp_path / "work"
    work.mkdir()
    (work / "lab.sif").write_text("a stand-in image")
    env = _stand_in(tmp_path)
    bin_dir = Path(env["PATH"].split(":")[0])
    (bin_dir / "python3").symlink_to(
        sys._base_executable
    )  # the image's python3: this one, so uv's cache fits
    (bin_dir / "uv").symlink_to(uv)
    env = {**env, "UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never"}
    user = {k: v for k, v in os.environ.items() if not k.startswith(("HPML_", "PYTHONPATH"))}
    made = subprocess.run(
        [sys.executable, "-m", "hpml_lab.report.cli", "overlay", "--container", "lab.sif"]
        + ["--overlay", "overlay.ext3", "-o", "overlay.sh"],
        cwd=work,
        env={**user, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    filled = subprocess.run(
        ["bash", "overlay.sh"], cwd=work, env={**user, **env}, capture_output=True, text=True, timeout=300
    )
    assert filled.returncode == 0, filled.stdout[-3000:] + filled.stderr[-3000:]
    assert "overlay: ready: hpml-lab" in filled.stdout
    python = work / "overlay.ext3" / "upper" / "ext3" / "env" / "bin" / "python"
    kernels = subprocess.run(
        [str(python), "-m", "jupyter", "kernelspec", "list", "--json"], capture_output=True, text=True
    )
    spec = json.loads(kernels.stdout)["kernelspecs"]["hpml-lab"]
    assert spec["resource_dir"].startswith(str(work / "overlay.ext3"))  # the env's own, not one under $HOME

    job = _ddp_job(
        cluster,
        cifar_root,
        tmp_path,
        reference,
        *("--container", "lab.sif", "--overlay", "overlay.ext3:ro", "--python", "/ext3/env/bin/python"),
        *("--mem", "32G", "--account", "X", "--ntasks-per-node", "2"),
        world=2,
        env=env,
        task="c2",
        job_env={k: v for k, v in _job_env().items() if k not in ("HPML_PYTHON", "PYTHONPATH")},
    )
    text = (work / "job.sbatch").read_text()
    assert "#SBATCH --mem=32G" in text and "#SBATCH --account=X" in text
    assert "#SBATCH --ntasks-per-node=2" in text and "--gres" not in text
    assert "PY=/ext3/env/bin/python " in text and "HPML_PYTHON" not in text
    calls = [json.loads(line)["args"] for line in Path(env["CT_LOG"]).read_text().splitlines()]
    calls = [c for c in calls if c[0] == "exec" and "/ext3/env/bin/python" in c]  # the job's, not the fill's
    head = ["exec", "--overlay", f"{work}/overlay.ext3:ro", f"{work}/lab.sif", "/ext3/env/bin/python"]
    assert len(calls) == 3 and all(c[:5] == head for c in calls), calls
    assert calls[0][5] == "-c" and "check_dataset" in calls[0][6]
    assert calls[1][5:8] == ["-m", "torch.distributed.run", "--standalone"]
    assert calls[2][5:9] == ["-m", "hpml_lab.report.cli", "run", "c2"]
    assert "container: apptainer exec --overlay" in job.output
    print(
        f"{cluster.version}: c2 in a stand-in container with the Python of an overlay hpml-lab filled, 1 "
        f"node x 2 ranks, job {job.id} took {job.seconds:.0f} s"
    )
