"""The GPU check kit: every CUDA path verified by one command on a lent GPU machine, and a CPU dry run of the same
stages that the test suite runs, so the kit cannot rot while no GPU is lent.

    make gpu-wheels                       # here: the wheels the GPU image lacks, into .whl/ (CPython 3.12)
    make gpu-check STAGE=plan             # the stages, each one device command, with estimates (JSON)
    make gpu-check STAGE=tests            # on the GPU machine: pytest -m cuda (then bench, reports-1, ...)
    make gpu-check DEVICE=cpu STAGE=...   # the dry run: the same stages at the `tiny` size on this CPU
    make gpu-unpack ARCHIVE=DIR|FILE      # here: what came home under $OUT, into reports/gpu/<gpu-name>/

    python -m hpml_lab.report.gpucheck wheels [--dest .whl] [--python-version 3.12]
    python -m hpml_lab.report.gpucheck run --stage NAME[,NAME] --device cuda|cpu [--site DIR --wheels .whl]
    python -m hpml_lab.report.gpucheck plan | unpack PATH

Everything a run produces goes under reports/gpu/<gpu-name>/ (cpu-dry-run/ for the dry run): the rendered reports
and their answer records, the result CSVs, the benchmark JSON, gzipped traces, and manifest.json naming the GPU,
driver, versions, commit and each stage's time and status (a failing stage is recorded and the next one runs).
With $OUT set (the device tool's return folder) each stage packs what it wrote into $OUT/<gpu-name>.<stage>.tar.gz
(under 16 MiB: traces dropped, largest first, until it fits), since nothing else leaves the machine.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import os
import re
import subprocess
import sys
import tarfile
import time
import traceback
from pathlib import Path

from ..cliargs import OneLineParser
from ..config import ConfigError, output_path, project_root
from ..io import atomic_file, atomic_write_json
from . import gpuplan
from .gpuplan import GPU_PYTHON, IMAGE_HAS

# The notebook machinery the GPU image lacks; their dependencies are added by wheel_list().
ROOTS = ["papermill", "nbconvert", "nbformat", "nbclient", "ipykernel", "jupyter-client", "traceinsight"]
# Requirements not followed: Holistic Trace Analysis (traceinsight) lists JupyterLab and pytest, which its analysis
# code never imports (checked in hta/, 0.6.1); carrying JupyterLab would triple the wheels.
SKIP_REQUIRES = {"traceinsight": {"jupyterlab", "pytest"}}
ARCHIVE_LIMIT = 16 * 1024**2  # one file the device tool brings back
TRACE_SUFFIXES = (".json.gz", ".pickle", ".pt.trace.json", "trace.json")
PLATFORMS = [
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_31_x86_64",
    "manylinux_2_34_x86_64",
]
STAGES = tuple(gpuplan.STAGES)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_list(roots=ROOTS, python: str = GPU_PYTHON) -> list[tuple[str, str]]:
    """(name, version) of every package the roots need, as installed here, minus what the GPU image holds.
    Requirements are read from the installed metadata, extras followed (nbconvert needs `bleach[css]`, which
    brings tinycss2); markers that do not apply on Linux with CPython `python` are left out."""
    from packaging.markers import default_environment
    from packaging.requirements import Requirement

    full = python if python.count(".") == 2 else f"{python}.0"
    env = {
        **default_environment(),
        "python_version": ".".join(full.split(".")[:2]),
        "python_full_version": full,
        "sys_platform": "linux",
        "platform_system": "Linux",
        "implementation_name": "cpython",
    }
    seen: dict[str, str] = {}
    done: set[tuple[str, str]] = set()  # (package, extra) whose requirements were followed; "" is the base
    todo: list[tuple[str, str]] = [(r, "") for r in roots]
    while todo:
        name, extra = todo.pop()
        name = _norm(name)
        if (name, extra) in done or name in IMAGE_HAS:
            continue
        done.add((name, extra))
        dist = md.distribution(name)
        seen[name] = dist.version
        for req in dist.requires or []:
            r = Requirement(req)
            if r.marker is None:
                applies = extra == ""
            else:  # a requirement of this extra (or of the base, when its marker names no extra)
                applies = r.marker.evaluate({**env, "extra": extra}) and (
                    extra == "" or not r.marker.evaluate({**env, "extra": ""})
                )
            if applies and _norm(r.name) not in SKIP_REQUIRES.get(name, ()):
                todo += [(r.name, "")] + [(r.name, _norm(x)) for x in r.extras]
    return sorted(seen.items())


def download_wheels(dest: str | os.PathLike = ".whl", log=print, python: str = GPU_PYTHON) -> list[Path]:
    """pip download each wheel for CPython `python` manylinux x86_64 into dest (one version each). The GPU image
    needs 3.12; the kit's CPU test fetches the same list for this host's Python."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for name, version in wheel_list(python=python):
        if list(dest.glob(f"{name.replace('-', '_')}-{version}-*.whl")) or list(
            dest.glob(f"{name}-{version}-*.whl")
        ):
            continue
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            python,
            "--implementation",
            "cp",
            "-d",
            str(dest),
            f"{name}=={version}",
        ]
        for p in PLATFORMS:
            cmd += ["--platform", p]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise ConfigError(
                f"no CPython {python} manylinux wheel of {name}=={version}: "
                f"{(r.stderr.strip().splitlines() or [''])[-1]}"
            )
        log(f"[gpu-wheels] {name}=={version}")
    wheels = sorted(dest.glob("*.whl"))
    total = sum(w.stat().st_size for w in wheels) / 1024**2
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
    """The notebooks name the `hpml-lab` kernel: register one for this Python in a private folder if missing."""
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


def _data(root: Path, device: str, log) -> None:
    from ..data import cifar, tinyimagenet

    if not (root / "cifar-10-batches-py").is_dir():
        log("[gpu-check] writing the synthetic CIFAR-10")
        cifar.synthesize(root)
    if not (root / tinyimagenet.FOLDER).is_dir():
        log("[gpu-check] writing the synthetic Tiny ImageNet")
        kw = {} if device == "cuda" else {"classes": 200, "per_class": 2, "val_per_class": 1, "n_test": 2}
        tinyimagenet.synthesize(root, log=lambda m: None, **kw)


def install(wheels: str | os.PathLike, site: str | os.PathLike, log=print) -> Path:
    """The carried wheels into `site` with pip --target (no index, no dependencies: the GPU machine reaches none),
    then that folder on this process's path, on PYTHONPATH for the kernels it starts, and its share/jupyter (the
    nbconvert templates pip --target puts there) on the Jupyter path. Skipped when already installed (a warm machine)."""
    site = Path(site).resolve()
    files = sorted(Path(wheels).glob("*.whl"))
    if not files:
        raise ConfigError(
            f"no wheels in {wheels}: run `make gpu-wheels` here and carry .whl to the GPU machine"
        )
    stamp = site / ".hpml-wheels"
    names = "\n".join(f.name for f in files)
    if not (stamp.is_file() and stamp.read_text() == names):
        t0 = time.perf_counter()
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-index",
                "--no-deps",
                "--no-compile",
                "--no-cache-dir",
                "--upgrade",
                "--target",
                str(site),
                *map(str, files),
            ],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            raise ConfigError(
                f"pip could not install the carried wheels: {(r.stderr.strip().splitlines() or [''])[-1]}"
            )
        stamp.write_text(names)
        log(f"[gpu-check] installed {len(files)} wheels into {site} in {time.perf_counter() - t0:.0f} s")
    activate(site)
    return site


def activate(site: Path) -> None:
    if str(site) not in sys.path:
        sys.path.insert(0, str(site))
    for var, value in (("PYTHONPATH", site), ("JUPYTER_PATH", site / "share" / "jupyter")):
        old = os.environ.get(var, "")
        if str(value) not in old.split(os.pathsep):
            os.environ[var] = os.pathsep.join([str(value), *([old] if old else [])])
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")


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


def stage_reports(out: Path, device: str, data_root: Path, tasks_: list[str], log) -> dict:
    from . import runner, tasks

    profile = "gpu" if device == "cuda" else "tiny"
    done = {}
    for tid in tasks_:
        params = {"data_root": str(data_root)}
        if "device" in runner.notebook_parameters(runner.notebooks_dir() / tasks.TASKS[tid].notebook):
            params["device"] = device
        try:
            o = runner.run_task(tid, profile, cli_params=params, log=log)
            done[tid] = {
                "status": o.status,
                "seconds": round(o.seconds, 1),
                "error": o.error,
                "html": bool(o.html),
            }
        except Exception as e:  # a task refused before compute (or the runner itself failing): recorded
            done[tid] = {
                "status": "failed",
                "seconds": 0.0,
                "error": f"{type(e).__name__}: {e}",
                "html": False,
            }
            log(f"[gpu-check] {tid}: {done[tid]['error']}")
    runner.write_index(runner.load_outcomes())
    for trace in output_path("results").rglob(
        "trace.json"
    ):  # the reports link gzipped copies (reports/artifacts)
        trace.unlink()
    bad = [t for t, d in done.items() if d["status"] != "ok" or not d["html"]]
    return {"status": "failed" if bad else "ok", "failed": bad, "tasks": done}


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
        except Exception as e:  # one benchmark failing does not stop the others
            recs[name] = {"status": "failed", "error": f"{type(e).__name__}: {e}"}
            bad.append(name)
    return {"status": "failed" if bad else "ok", "failed": bad, "benchmarks": recs}


def _run_stage(stage: str, out: Path, device: str, data_root: Path, tasks_: list[str] | None, log) -> dict:
    if stage == "tests":
        return stage_tests(out, device, log)
    _data(data_root, device, log)
    if stage == "bench":
        return stage_bench(out, device, data_root, log)
    _ensure_kernel()
    return stage_reports(out, device, data_root, tasks_ or gpuplan.STAGES[stage], log)


def run(
    stages=STAGES,
    device: str = "cuda",
    out: str | os.PathLike | None = None,
    tasks_: list[str] | None = None,
    log=print,
    pack_to: str | os.PathLike | None = None,
) -> Path:
    """Run the stages; outputs (HPML_OUTPUT_DIR) and the manifest go under reports/gpu/<gpu-name>/. A stage that
    fails (or raises) is recorded in the manifest with its error, and the next stage runs. With pack_to, each stage
    ends by packing the files it wrote into pack_to/<gpu-name>.<stage>.tar.gz."""
    import torch

    from ..envinfo import environment

    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        raise ConfigError(f"unknown stage {unknown[0]!r}; valid: {', '.join(STAGES)}, all, plan")
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("gpu-check: no CUDA device here; use DEVICE=cpu for the dry run")
    name = gpu_name(device)
    out = Path(out) if out else project_root() / "reports" / "gpu" / name
    out.mkdir(parents=True, exist_ok=True)
    os.environ["HPML_OUTPUT_DIR"] = str(out)
    data_root = project_root() / "data"
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {"stages": {}}
    for stage in stages:
        t0, wall0 = time.perf_counter(), time.time()
        log(f"[gpu-check] stage {stage} on {device}")
        try:
            result = _run_stage(stage, out, device, data_root, tasks_, log)
        except Exception as e:  # recorded; the next stage runs
            result = {
                "status": "failed",
                "error": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc(limit=8),
            }
            log(f"[gpu-check] stage {stage} failed: {result['error']}")
        manifest["stages"][stage] = {
            "seconds": round(time.perf_counter() - t0, 1),
            "status": result["status"],
            "result": result,
        }
        env = environment(torch.device(device))
        manifest.update(
            gpu=(env.get("gpu") or {}).get("name", "none"),
            gpu_dir=name,
            driver=_driver(),
            device=device,
            python=env["python"],
            torch=env["torch"],
            torchvision=env["torchvision"],
            cuda=env["cuda"],
            commit=env["commit"],
            dirty=env["dirty"],
        )
        atomic_write_json(manifest_path, manifest)
        if pack_to:
            pack(out, Path(pack_to) / f"{name}.{stage}.tar.gz", since=wall0, prefix=name, log=log)
    return out


def pack(
    folder: Path, archive: Path, since: float = 0.0, prefix: str = "", limit: int = ARCHIVE_LIMIT, log=print
) -> Path:
    """The files under `folder` modified since `since` (and manifest.json) into one tar.gz at `archive`, each under
    `prefix/`; traces and snapshots are left out, largest first, until the archive fits `limit` bytes."""
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file()
        and not p.is_symlink()
        and (p.stat().st_mtime >= since - 1 or p.name == "manifest.json")
    )
    dropped: list[str] = []
    archive.parent.mkdir(parents=True, exist_ok=True)
    while True:
        with atomic_file(archive) as tmp:
            with tarfile.open(tmp, "w:gz") as tar:
                for f in files:
                    tar.add(f, arcname=str(Path(prefix) / f.relative_to(folder)), recursive=False)
        size = archive.stat().st_size
        traces = sorted(
            (f for f in files if f.name.endswith(TRACE_SUFFIXES) or "snapshot" in f.name),
            key=lambda f: f.stat().st_size,
        )
        if size <= limit or not traces:
            break
        files.remove(traces[-1])
        dropped.append(str(traces[-1].relative_to(folder)))
    if size > limit:
        raise ConfigError(f"{archive.name} is {size / 1024**2:.1f} MiB without traces, over the return limit")
    log(
        f"[gpu-check] packed {len(files)} files, {size / 1024**2:.1f} MiB, into {archive}"
        + (f" (left out to fit: {', '.join(dropped)})" if dropped else "")
    )
    return archive


def unpack(path: str | os.PathLike, dest: str | os.PathLike | None = None, log=print) -> list[Path]:
    """Extract every archive at `path` (a .tar.gz or a folder of them) under dest (reports/gpu/): members must be
    regular files or folders inside dest, else the archive is refused before anything is written."""
    path = Path(path)
    dest = Path(dest) if dest else project_root() / "reports" / "gpu"
    archives = sorted(path.glob("*.tar.gz")) if path.is_dir() else [path]
    if not archives or not all(a.is_file() for a in archives):
        raise ConfigError(f"no archive at {path}")
    root = dest.resolve()
    written = []
    for a in archives:
        try:
            with tarfile.open(a, "r:gz") as tar:
                members = tar.getmembers()
                for m in members:
                    target = (root / m.name).resolve()
                    if not (m.isfile() or m.isdir()) or root not in target.parents or m.name.startswith("/"):
                        raise ConfigError(
                            f"{a.name}: member {m.name!r} is not a plain file inside {dest}; refused"
                        )
                for m in members:
                    if m.isfile():
                        target = root / m.name
                        target.parent.mkdir(parents=True, exist_ok=True)
                        with atomic_file(target) as tmp, tar.extractfile(m) as src:
                            Path(tmp).write_bytes(src.read())
                        written.append(target)
        except (tarfile.TarError, EOFError) as e:
            raise ConfigError(f"{a.name} is not a readable tar.gz archive ({e})") from e
        log(f"[gpu-unpack] {a.name}: {sum(1 for m in members if m.isfile())} files into {dest}")
    return written


def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(prog="python -m hpml_lab.report.gpucheck", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("wheels", help="download the wheels the GPU image lacks")
    w.add_argument("--dest", default=".whl")
    w.add_argument(
        "--python-version", default=GPU_PYTHON, help=f"the Python the wheels are for ({GPU_PYTHON})"
    )
    r = sub.add_parser("run", help="run check stages")
    r.add_argument("--stage", default="plan", help=f"{', '.join(STAGES)}, comma-separated, or all")
    r.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    r.add_argument("--out")
    r.add_argument("--tasks", default="", help="comma-separated task ids (default: the stage's tasks)")
    r.add_argument("--site", help="install the carried wheels here first (pip --target) and use them")
    r.add_argument("--wheels", default=".whl")
    r.add_argument(
        "--pack", default=os.environ.get("OUT") or None, help="pack each stage here (default: $OUT)"
    )
    sub.add_parser("plan", help="print the stages with their estimates (JSON)")
    u = sub.add_parser("unpack", help="extract archives that came home into reports/gpu/")
    u.add_argument("archive")
    u.add_argument("--dest")
    args = p.parse_args(argv)
    try:
        if args.cmd == "wheels":
            if not re.fullmatch(r"3\.\d{1,2}(\.\d{1,2})?", args.python_version):
                raise ConfigError(f"--python-version must look like 3.12.3, not {args.python_version!r}")
            download_wheels(args.dest, python=args.python_version)
        elif args.cmd == "plan" or getattr(args, "stage", "") == "plan":
            print(json.dumps(gpuplan.plan(), indent=1))
        elif args.cmd == "unpack":
            unpack(args.archive, args.dest)
        else:
            stages = STAGES if args.stage == "all" else tuple(s for s in args.stage.split(",") if s)
            bad = [s for s in stages if s not in STAGES]
            if bad:
                raise ConfigError(f"unknown stage {bad[0]!r}; valid: {', '.join(STAGES)}, all, plan")
            if args.site:
                install(args.wheels, args.site)
            out = run(
                stages,
                args.device,
                args.out,
                [t for t in args.tasks.split(",") if t] or None,
                pack_to=args.pack,
            )
            print(f"[gpu-check] done: {out}")
    except ConfigError as e:
        print(f"gpu-check: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
