"""The GPU check kit on the node: the machine's record and the units a command runs (the CUDA tests, the
benchmarks, a lab task), each returning its record.

    from hpml_lab.gpu import node
    node.record_node(out, 1)                           # node-part1.json: nvidia-smi, /dev/shm, versions
    node.run_unit("c1", out, "cpu", data_root, print)  # {"status": "ok", ...}
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

from ..config import output_path, project_root
from ..io import atomic_write_json
from ..report import gpuplan


def gpu_name(device: str) -> str:
    if device == "cuda":
        import torch

        return re.sub(r"[^A-Za-z0-9_.-]+", "-", torch.cuda.get_device_name(0)).strip("-")
    return "cpu-dry-run"


def _driver() -> str:
    try:
        return (
            subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout.strip()
            or "unknown"
        )
    except (OSError, subprocess.SubprocessError):
        return "none"


def _ensure_kernel() -> None:
    """The notebooks name the `hpml-lab` kernel: register one for this Python in a private folder if
    missing."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:  # one found must start this very Python (a user-wide one may point at another virtualenv)
        if (
            Path(KernelSpecManager().get_kernel_spec("hpml-lab").argv[0]).resolve()
            == Path(sys.executable).resolve()
        ):
            return
    except NoSuchKernel:
        pass
    tag = hashlib.sha1(sys.executable.encode()).hexdigest()[:8]
    prefix = Path(os.environ.get("TMPDIR", "/tmp")) / f"hpml-lab-kernel-{tag}"
    subprocess.run(
        [sys.executable, "-m", "ipykernel", "install", "--prefix", str(prefix), "--name", "hpml-lab"],
        check=True,
        capture_output=True,
    )
    os.environ["JUPYTER_PATH"] = (
        str(prefix / "share" / "jupyter") + os.pathsep + os.environ.get("JUPYTER_PATH", "")
    )


def _data(root: Path, device: str, sets: list[str], log) -> None:
    """The synthetic data sets `sets` under root, written once (a later unit finds them)."""
    from ..data import cifar, tinyimagenet

    if "cifar10" in sets and not (root / "cifar-10-batches-py").is_dir():
        log("[gpu-check] writing the synthetic CIFAR-10")
        cifar.synthesize(root)
    if "tinyimagenet" in sets and not (root / tinyimagenet.FOLDER).is_dir():
        log("[gpu-check] writing the synthetic Tiny ImageNet")
        kw = {} if device == "cuda" else {"classes": 200, "per_class": 2, "val_per_class": 1, "n_test": 2}
        tinyimagenet.synthesize(root, log=lambda m: None, **kw)


def record_node(out: Path, part: int | str) -> dict:
    """What the machine is, before anything runs: nvidia-smi, /dev/shm's size, Python, torch and CUDA
    versions, whether make, gcc and Python.h exist (torch.compile's Triton needs the last two); into
    node-part<N>.json."""
    import platform
    import shutil
    import sysconfig

    import torch

    from ..envinfo import git_commit

    def cmd(*argv: str) -> str:
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            return (r.stdout + r.stderr).strip()
        except (OSError, subprocess.SubprocessError) as e:
            return f"not run: {type(e).__name__}: {e}"

    try:
        st = os.statvfs("/dev/shm")
        shm = {
            "total_mib": round(st.f_blocks * st.f_frsize / 2**20),
            "free_mib": round(st.f_bavail * st.f_frsize / 2**20),
        }
    except OSError as e:
        shm = {"error": str(e)}
    include = Path(sysconfig.get_paths().get("include", ""))
    rec = {
        "part": part,
        "nvidia_smi": cmd("nvidia-smi"),
        "dev_shm": shm,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "make": shutil.which("make"),
        "gcc": shutil.which("gcc") or shutil.which("cc"),
        "python_h": (include / "Python.h").is_file(),
        "cpu_cores": os.cpu_count(),
        **git_commit(),
    }
    atomic_write_json(out / f"node-part{part}.json", rec)
    return {"status": "ok", "make": rec["make"], "dev_shm": shm, "python": rec["python"], "cuda": rec["cuda"]}


def stage_tests(out: Path, device: str, log) -> dict:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "cuda",
            "-q",
            "-p",
            "no:cacheprovider",
            "--durations=10",
            str(project_root() / "tests"),
        ],
        capture_output=True,
        text=True,
    )
    (out / "tests.txt").write_text(r.stdout + r.stderr)
    last = (r.stdout.strip().splitlines() or [""])[-1]
    log(f"[gpu-check] tests: {last}")
    # 0: passed; 5: none collected (no CUDA test selected); anything else is a failure, recorded, not raised
    status = "ok" if r.returncode in (0, 5) else "failed"
    return {"status": status, "summary": last, "exit": r.returncode}


def stage_task(out: Path, device: str, data_root: Path, tid: str, log) -> dict:
    """One lab task at the gpu profile (tiny on the CPU dry run); its traces are left to the gzipped
    copies."""
    from ..report import runner, tasks

    profile = "gpu" if device == "cuda" else "tiny"
    params = {"data_root": str(data_root)}
    if "device" in runner.notebook_parameters(runner.notebooks_dir() / tasks.TASKS[tid].notebook):
        params["device"] = device
    o = runner.run_task(tid, profile, cli_params=params, log=log)
    for trace in output_path("results").rglob("trace.json"):  # the reports link gzipped copies
        trace.unlink()
    ok = o.status == "ok" and bool(o.html)
    return {"status": "ok" if ok else "failed", "error": o.error, "html": bool(o.html)}


def stage_bench(out: Path, device: str, data_root: Path, log) -> dict:
    from ..studies import bench

    opts = {"data_root": str(data_root), "device": device, "repeats": gpuplan.BENCH_REPEATS}
    if device == "cpu":  # the dry run: every benchmark once, at the smallest size
        opts.update(
            model="resnet_tiny",
            batch_size=8,
            repeats=1,
            warmup=0,
            steps=1,
            pil_batches=1,
            tensor_batches=2,
            num_workers=0,
        )
    recs, bad = {}, []
    for name in bench.NAMES:
        try:
            rec = bench.run(name, **opts)
            recs[name] = {"status": rec["status"], "ratio": rec.get("ratio"), "seconds": rec["seconds"]}
            if rec.get(
                "ratio_note"
            ):  # why there is no ratio (one repeat on the dry run, a share within noise)
                recs[name]["ratio_note"] = rec["ratio_note"]
        except Exception as e:  # one benchmark failing does not stop the others
            recs[name] = {"status": "failed", "error": f"{type(e).__name__}: {e}"}
            bad.append(name)
        # after each benchmark: a unit cut off keeps the benchmarks it finished
        atomic_write_json(out / "bench.json", recs)
    return {"status": "failed" if bad else "ok", "failed": bad, "benchmarks": recs}


def run_unit(unit: str, out: Path, device: str, data_root: Path, log) -> dict:
    """One unit of the plan: `tests`, `bench` or a lab task id. Returns its record ({"status": ..., ...})."""
    if unit == "tests":
        return stage_tests(out, device, log)
    _data(data_root, device, gpuplan.data_needed(unit), log)
    if unit == "bench":
        return stage_bench(out, device, data_root, log)
    _ensure_kernel()
    return stage_task(out, device, data_root, unit, log)
