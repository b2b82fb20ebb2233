"""The GPU check kit: every CUDA path verified by one command on a lent GPU machine, and a CPU dry run of the same
stages that the test suite runs, so the kit cannot rot while no GPU is lent.

    make gpu-wheels                       # here: the wheels the GPU image lacks, into .whl/ (CPython 3.12)
    make gpu-check STAGE=tests            # on the GPU machine: pytest -m cuda
    make gpu-check STAGE=reports          # every task at the `gpu` profile, rendered with answers
    make gpu-check STAGE=bench            # hpml-lab bench all on CUDA
    make gpu-check DEVICE=cpu             # the dry run: the same stages at the `tiny` size on this CPU

    python -m hpml_lab.report.gpucheck wheels [--dest .whl]
    python -m hpml_lab.report.gpucheck run --stage tests|reports|bench|all --device cuda|cpu [--out DIR]

Everything a run produces goes under reports/gpu/<gpu-name>/ (cpu-dry-run/ for the dry run): the rendered reports
and their answer records, the result CSVs, the benchmark JSON, gzipped traces, and manifest.json naming the GPU,
driver, versions, commit and how long each stage took.
"""
from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from ..config import ConfigError, output_path, project_root
from ..io import atomic_write_json

# The notebook machinery the GPU image lacks; their dependencies are added by wheel_list().
ROOTS = ["papermill", "nbconvert", "nbformat", "nbclient", "ipykernel", "jupyter-client", "traceinsight"]
# Requirements not followed: Holistic Trace Analysis (traceinsight) lists JupyterLab and pytest, which its analysis
# code never imports (checked in hta/, 0.6.1); carrying JupyterLab would triple the wheels.
SKIP_REQUIRES = {"traceinsight": {"jupyterlab", "pytest"}}
# Packages the GPU image already holds (the device tool's KINDS.md, read 2026-11-17): never carried.
IMAGE_HAS = set("""absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch
build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cycler cython einops filelock
fonttools frozenlist fsspec h11 httpcore httpx idna imageio iniconfig jinja2 joblib kiwisolver markdown markdown-it-py
markupsafe matplotlib mdurl mpmath msgpack multidict networkx ninja numpy packaging pandas pathspec pillow pip pluggy
prometheus-client propcache protobuf psutil pygments pyparsing pytest python-dateutil pyyaml regex requests rich
setuptools six sympy tabulate threadpoolctl tqdm triton typer typing-extensions urllib3 wheel wrapt yarl zipp torch
torchvision tzdata pytz""".split())
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64", "manylinux_2_24_x86_64", "manylinux_2_31_x86_64", "manylinux_2_34_x86_64"]
STAGES = ("tests", "reports", "bench")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_list(roots=ROOTS) -> list[tuple[str, str]]:
    """(name, version) of every package the roots need, as installed here, minus what the GPU image holds.
    Requirements are read from the installed metadata; extras and markers that do not apply on Linux with
    CPython 3.12 are left out."""
    from packaging.markers import default_environment
    from packaging.requirements import Requirement

    env = {**default_environment(), "python_version": "3.12", "python_full_version": "3.12.3",
           "sys_platform": "linux", "platform_system": "Linux", "extra": ""}
    seen: dict[str, str] = {}
    todo = list(roots)
    while todo:
        name = _norm(todo.pop())
        if name in seen or name in IMAGE_HAS:
            continue
        dist = md.distribution(name)
        seen[name] = dist.version
        for req in dist.requires or []:
            r = Requirement(req)
            if (r.marker is None or r.marker.evaluate(env)) and _norm(r.name) not in SKIP_REQUIRES.get(name, ()):
                todo.append(r.name)
    return sorted(seen.items())


def download_wheels(dest: str | os.PathLike = ".whl", log=print) -> list[Path]:
    """pip download each wheel for CPython 3.12 manylinux x86_64 into dest (one version each)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for name, version in wheel_list():
        if list(dest.glob(f"{name.replace('-', '_')}-{version}-*.whl")) or list(dest.glob(f"{name}-{version}-*.whl")):
            continue
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
               "--python-version", "3.12", "--implementation", "cp", "-d", str(dest), f"{name}=={version}"]
        for p in PLATFORMS:
            cmd += ["--platform", p]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise ConfigError(f"no CPython 3.12 manylinux wheel of {name}=={version}: "
                              f"{(r.stderr.strip().splitlines() or [''])[-1]}")
        log(f"[gpu-wheels] {name}=={version}")
    wheels = sorted(dest.glob("*.whl"))
    total = sum(w.stat().st_size for w in wheels) / 1024 ** 2
    log(f"[gpu-wheels] {len(wheels)} wheels, {total:.1f} MiB in {dest}")
    if total > 64:
        raise ConfigError(f"the wheels take {total:.0f} MiB, over the 64 MiB a device call can carry")
    return wheels


def gpu_name(device: str) -> str:
    if device == "cuda":
        import torch

        return re.sub(r"[^A-Za-z0-9_.-]+", "-", torch.cuda.get_device_name(0)).strip("-")
    return "cpu-dry-run"


def _driver() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "none"


def _ensure_kernel() -> None:
    """The notebooks name the `hpml-lab` kernel: register one for this Python in a private folder if missing."""
    from jupyter_client.kernelspec import KernelSpecManager

    if "hpml-lab" in KernelSpecManager().find_kernel_specs():
        return
    prefix = Path(os.environ.get("TMPDIR", "/tmp")) / "hpml-lab-kernel"
    subprocess.run([sys.executable, "-m", "ipykernel", "install", "--prefix", str(prefix), "--name", "hpml-lab"],
                   check=True, capture_output=True)
    os.environ["JUPYTER_PATH"] = str(prefix / "share" / "jupyter") + os.pathsep + os.environ.get("JUPYTER_PATH", "")


def _data(root: Path, device: str, log) -> None:
    from ..data import cifar, tinyimagenet

    if not (root / "cifar-10-batches-py").is_dir():
        log("[gpu-check] writing the synthetic CIFAR-10")
        cifar.synthesize(root)
    if not (root / tinyimagenet.FOLDER).is_dir():
        log("[gpu-check] writing the synthetic Tiny ImageNet")
        kw = {} if device == "cuda" else {"classes": 200, "per_class": 2, "val_per_class": 1, "n_test": 2}
        tinyimagenet.synthesize(root, log=lambda m: None, **kw)


def stage_tests(out: Path, device: str, log) -> dict:
    r = subprocess.run([sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider",
                        "--durations=10", str(project_root() / "tests")], capture_output=True, text=True)
    (out / "tests.txt").write_text(r.stdout + r.stderr)
    last = (r.stdout.strip().splitlines() or [""])[-1]
    log(f"[gpu-check] tests: {last}")
    if device == "cuda" and r.returncode not in (0,):
        raise RuntimeError(f"CUDA tests failed: {last} (see {out / 'tests.txt'})")
    return {"summary": last, "exit": r.returncode}


def stage_reports(out: Path, device: str, data_root: Path, tasks_: list[str], log) -> dict:
    from . import runner, tasks

    profile = "gpu" if device == "cuda" else "tiny"
    done = {}
    for tid in tasks_ or list(tasks.TASKS):
        params = {"data_root": str(data_root)}
        if "device" in runner.notebook_parameters(runner.notebooks_dir() / tasks.TASKS[tid].notebook):
            params["device"] = device
        o = runner.run_task(tid, profile, cli_params=params, log=log)
        done[tid] = {"status": o.status, "seconds": round(o.seconds, 1), "error": o.error}
    runner.write_index(runner.load_outcomes())
    for trace in output_path("results").rglob("trace.json"):  # the reports link gzipped copies (reports/artifacts)
        trace.unlink()
    return done


def stage_bench(out: Path, device: str, data_root: Path, log) -> dict:
    from ..studies import bench

    opts = {"data_root": str(data_root), "device": device}
    if device == "cpu":  # the dry run: every benchmark once, at the smallest size
        opts.update(model="resnet_tiny", batch_size=8, repeats=1, warmup=0, steps=1, pil_batches=1, tensor_batches=2,
                    num_workers=0)
    recs = {}
    for name in bench.NAMES:
        rec = bench.run(name, **opts)
        recs[name] = {"status": rec["status"], "ratio": rec.get("ratio"), "seconds": rec["seconds"]}
    return recs


def run(stages=STAGES, device: str = "cuda", out: str | os.PathLike | None = None, tasks_: list[str] | None = None,
        log=print) -> Path:
    """Run the stages; outputs (HPML_OUTPUT_DIR) and the manifest go under reports/gpu/<gpu-name>/."""
    import torch

    from ..envinfo import environment

    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("gpu-check: no CUDA device here; use DEVICE=cpu for the dry run")
    out = Path(out) if out else project_root() / "reports" / "gpu" / gpu_name(device)
    out.mkdir(parents=True, exist_ok=True)
    os.environ["HPML_OUTPUT_DIR"] = str(out)
    data_root = project_root() / "data"
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {"stages": {}}
    _data(data_root, device, log)
    _ensure_kernel()
    for stage in stages:
        t0 = time.perf_counter()
        log(f"[gpu-check] stage {stage} on {device}")
        if stage == "tests":
            result = stage_tests(out, device, log)
        elif stage == "reports":
            result = stage_reports(out, device, data_root, tasks_ or [], log)
        elif stage == "bench":
            result = stage_bench(out, device, data_root, log)
        else:
            raise ConfigError(f"unknown stage {stage!r}; valid: {', '.join(STAGES)}, all")
        manifest["stages"][stage] = {"seconds": round(time.perf_counter() - t0, 1), "result": result}
        env = environment(torch.device(device))
        manifest.update(gpu=(env.get("gpu") or {}).get("name", "none"), driver=_driver(), device=device,
                        python=env["python"], torch=env["torch"], torchvision=env["torchvision"], cuda=env["cuda"],
                        commit=env["commit"], dirty=env["dirty"])
        atomic_write_json(manifest_path, manifest)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hpml_lab.report.gpucheck", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("wheels", help="download the wheels the GPU image lacks")
    w.add_argument("--dest", default=".whl")
    r = sub.add_parser("run", help="run check stages")
    r.add_argument("--stage", default="all")
    r.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    r.add_argument("--out")
    r.add_argument("--tasks", default="", help="comma-separated task ids (default: every task)")
    args = p.parse_args(argv)
    try:
        if args.cmd == "wheels":
            download_wheels(args.dest)
        else:
            stages = STAGES if args.stage == "all" else tuple(args.stage.split(","))
            out = run(stages, args.device, args.out, [t for t in args.tasks.split(",") if t])
            print(f"[gpu-check] done: {out}")
    except ConfigError as e:
        print(f"gpu-check: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
