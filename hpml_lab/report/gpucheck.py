"""The GPU check kit: every CUDA path verified on a GPU machine without internet, in commands that each fit a short
job, with every finished result brought home; and a CPU dry run of the same code that the tests run.

    make gpu-wheels     # here: the wheels the GPU image lacks into .whl/ (CPython 3.12), and .whl/provenance.json
                        # (this tree's commit and whether it is dirty: .git does not travel)
    python3 -m hpml_lab.report.gpucheck plan           # the commands to run (at most 2), with estimates; --json: basis
    python3 -m hpml_lab.report.gpucheck run --part N --limit S   # on the GPU machine, from the tree's root (no make)
    python3 -m hpml_lab.report.gpucheck run --units c1,bench --device cpu    # the dry run of some units here
    python3 -m hpml_lab.report.gpucheck unpack DIR     # here: every archive that came home, merged

A command installs the carried wheels privately (pip --target, no index), records the machine (node-part<N>.json:
nvidia-smi, /dev/shm, versions, make, gcc, Python.h), then runs its units one by one: the CUDA tests, the
benchmarks, the lab tasks. Outputs go under reports/gpu/<gpu-name>/; after every unit the folder's new files are
packed into $OUT/<gpu-name>.part<N>.tar.gz (rewritten; where one archive would pass 16 MiB, also
<gpu-name>.part<N>-2.tar.gz and on, within $OUT's 8 files; traces only where room is left; anything that fits none
is named in the manifest's `left_out_of_archive`), so a command killed at its limit brings home every unit it
finished. A unit whose `ok` came home is skipped (`--rerun a,b`: run them again). A command learns what came home
only from reports/gpu/<gpu-name>/manifest.json in the tree it carries: unpack the archives into the tree before
sending the next command. After its own units, every command goes on down the check's other units that did not come
home, in priority order, each only if its estimate fits the time left of its `--limit`; at the limit it stops itself
as a job's time limit would (SIGTERM: the unit it cut off is recorded as interrupted, the rest packed). `unpack`
merges any number of archives, in any order and in any number of calls, into one manifest.json and one
reports/index.html per GPU, each unit's pages from the record the manifest keeps.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import math
import os
import re
import signal
import subprocess
import sys
import tarfile
import threading
import time
import traceback
from pathlib import Path

from ..cliargs import OneLineParser
from ..config import ConfigError, output_path, project_root
from ..io import atomic_file, atomic_write_json, signals_deferred
from ..results import sigterm_interrupts
from . import gpuplan
from .gpuplan import GPU_PYTHON, IMAGE_HAS

# The notebook machinery the GPU image lacks; their dependencies are added by wheel_list().
ROOTS = ["papermill", "nbconvert", "nbformat", "nbclient", "ipykernel", "jupyter-client", "traceinsight"]
# Requirements not followed: Holistic Trace Analysis (traceinsight) lists JupyterLab and pytest, which its analysis
# code never imports (checked in hta/, 0.6.1); carrying JupyterLab would triple the wheels.
SKIP_REQUIRES = {"traceinsight": {"jupyterlab", "pytest"}}
ARCHIVE_LIMIT = 16 * 1024**2  # one file the device tool brings back
ARCHIVE_FILES = 8  # files it brings back from $OUT
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
    """pip download the wheels for CPython `python` manylinux x86_64 into dest (one version each). The GPU image
    needs 3.12; the kit's CPU test fetches the same list for this host's Python. One pip process fetches all that
    dest lacks (a pip process per wheel cost 39 s of CPU for the 46, nearly all of it pip starting); where it
    fails, each is asked for alone, to name the one without a wheel."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    wanted = [
        (name, version)
        for name, version in wheel_list(python=python)
        if not list(dest.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
        and not list(dest.glob(f"{name}-{version}-*.whl"))
    ]
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps"]
    cmd += ["--only-binary=:all:", "--python-version", python, "--implementation", "cp", "-d", str(dest)]
    for p in PLATFORMS:
        cmd += ["--platform", p]
    if wanted and subprocess.run([*cmd, *(f"{n}=={v}" for n, v in wanted)], capture_output=True).returncode:
        for name, version in wanted:
            r = subprocess.run([*cmd, f"{name}=={version}"], capture_output=True, text=True)
            if r.returncode != 0:
                raise ConfigError(
                    f"no CPython {python} manylinux wheel of {name}=={version}: "
                    f"{(r.stderr.strip().splitlines() or [''])[-1]}"
                )
    for name, version in wanted:
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


MACHINERY = ("papermill", "nbconvert", "ipykernel")  # what a lab task's run needs beyond the image's packages


def machinery_here() -> bool:
    """Whether the notebook machinery imports in this Python already (found, not imported)."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in MACHINERY)


def _wheel_pythons(files: list[Path]) -> dict[str, str]:
    """{a wheel's file name: the CPython it is built for ('3.12')} for each wheel that does not install on this
    Python: a cpXY tag of another version (cpXY-abi3: one newer than this), from the name's python tag."""
    here = sys.version_info[:2]
    wrong = {}
    for f in files:
        parts = f.name[: -len(".whl")].split("-")
        if len(parts) < 5:
            continue
        pytags, abi = parts[-3].split("."), parts[-2]
        versions = [(int(t[2]), int(t[3:])) for t in pytags if re.fullmatch(r"cp\d\d+", t)]
        if not versions:  # py3, py2.py3: any Python
            continue
        fits = any(v <= here if abi == "abi3" else v == here for v in versions)
        if not fits:
            wrong[f.name] = ".".join(map(str, min(versions)))
    return wrong


def install(wheels: str | os.PathLike, site: str | os.PathLike, log=print) -> Path:
    """The carried wheels into `site` with pip --target (no index, no dependencies: the GPU machine reaches none),
    then that folder on this process's path, on PYTHONPATH for the kernels it starts, and its share/jupyter (the
    nbconvert templates pip --target puts there) on the Jupyter path. Skipped when already installed (a warm machine).
    Wheels built for another Python are refused in one line that names it, before pip runs."""
    site = Path(site).resolve()
    files = sorted(Path(wheels).glob("*.whl"))
    if not files:
        raise ConfigError(
            f"no wheels in {wheels}: run `make gpu-wheels` here and carry .whl to the GPU machine"
        )
    wrong = _wheel_pythons(files)
    if wrong:
        name, built = next(iter(sorted(wrong.items())))
        here = ".".join(map(str, sys.version_info[:2]))
        raise ConfigError(
            f"the wheels in {wheels} are built for CPython {built} ({name} and {len(wrong) - 1} more), not this "
            f"Python {here}: run the command with Python {built} (the GPU node's python3), or rehearse here on "
            f"the CPU in the project's venv (make gpu-check DEVICE=cpu), or fetch wheels for this Python "
            f"(python3 -m hpml_lab.report.gpucheck wheels --python-version {here} --dest DIR, then --wheels DIR)"
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


def record_node(out: Path, part: int | str) -> dict:
    """What the machine is, before anything runs: nvidia-smi, /dev/shm's size, Python, torch and CUDA versions,
    whether make, gcc and Python.h exist (torch.compile's Triton needs the last two); into node-part<N>.json."""
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
    """One lab task at the gpu profile (tiny on the CPU dry run); its traces are left to the gzipped copies."""
    from . import runner, tasks

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


def _units_of(part: int | None, units: list[str] | None) -> tuple[list[str], list[str]]:
    """(this command's own units, those to run after them while its --limit allows: every other unit of the check,
    in priority order). Which of them came home is the caller's to check, in the manifest the tree carries: a
    command that never started, or was cut off before a unit, left no `ok` for it there, so any later command
    picks it up, and a command whose own units came home goes on down the list. `units` (--units): those alone."""
    if units:
        return list(units), []
    cmds, _ = gpuplan.parts()
    if not part or not 1 <= part <= len(cmds):
        raise ConfigError(f"--part must be 1 to {len(cmds)} (python3 -m hpml_lab.report.gpucheck plan)")
    own = list(cmds[part - 1])
    return own, [u for u in gpuplan.units() if u not in own]


LOCK_FILE = re.compile(r"\.[\w.-]+\.lock")
KIT_FILES = ("manifest.json", "reports/index.html")  # the kit's own, rewritten by every command


def _stamps(folder: Path) -> dict[str, tuple[int, int]]:
    """{path under folder: (mtime ns, size)} of every plain file but the kit's own."""
    return {
        rel: (st.st_mtime_ns, st.st_size)
        for p in folder.rglob("*")
        if p.is_file()
        and not p.is_symlink()
        and (rel := p.relative_to(folder).as_posix()) not in KIT_FILES
        and not rel.startswith("node-part")
        and not LOCK_FILE.fullmatch(p.name)
        and (st := p.stat())
    }


def run(
    part: int | None = None,
    device: str = "cuda",
    out: str | os.PathLike | None = None,
    units: list[str] | None = None,
    log=print,
    pack_to: str | os.PathLike | None = None,
    limit: float | None = None,
    rerun: list[str] | tuple[str, ...] = (),
    started: float | None = None,
) -> Path:
    """One command of the check: the node record, then `rerun`'s units (each after the unit whose results it reads,
    where that has not come home), then each unit of plan part `part` (or `units`) that has not already come home
    (status ok in the manifest the tree carried), then the check's other units not home while `limit` (seconds from
    `started`, default now; for a part, the plan's) allows; at `limit` a SIGTERM stops it, and that is recorded.
    Outputs (HPML_OUTPUT_DIR) and manifest.json go under reports/gpu/<gpu-name>/; with pack_to ($OUT), that folder's
    new files are packed into pack_to/<gpu-name>.part<N>.tar.gz after every unit, so a command killed at its limit
    still brings home every unit it finished."""
    import torch

    from ..envinfo import environment

    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("gpu-check: no CUDA device here; use --device cpu for the dry run")
    t_start, wall0 = (time.monotonic() if started is None else started), time.time()
    name = gpu_name(device)
    out = Path(out) if out else project_root() / "reports" / "gpu" / name
    out.mkdir(parents=True, exist_ok=True)
    os.environ["HPML_OUTPUT_DIR"] = str(out)
    root = str(project_root())  # the kernels papermill starts import hpml_lab from the tree
    if root not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    data_root = project_root() / "data"
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    manifest.setdefault("units", {})
    manifest.setdefault("commands", {})
    own, others = _units_of(part, units)  # others: the check's other units, in priority order
    label = part if part else "x"
    key = f"part{label}@{wall0:.3f}"
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
    if limit is None and part and not units:
        limit = gpuplan.run_limit(part)
    command = manifest["commands"][key] = {"part": part, "started_at": wall0, "limit_s": limit, "units": {}}
    archive = Path(pack_to) / f"{name}.part{label}.tar.gz" if pack_to else None

    def save() -> None:
        command["seconds"] = round(time.monotonic() - t_start, 1)
        command["packed_at"] = manifest["packed_at"] = time.time()
        atomic_write_json(manifest_path, manifest)
        if archive:
            try:
                left = pack(out, archive, since=wall0, prefix=name, log=log)[1]
                if left != command.get("left_out_of_archive", []):  # said in what comes home, packed again
                    command["left_out_of_archive"] = left
                    atomic_write_json(manifest_path, manifest)
                    pack(out, archive, since=wall0, prefix=name, log=log)
            except (
                ConfigError
            ) as e:  # no room in $OUT: the archives before this unit stay; the next unit runs
                command["pack_error"] = str(e)
                log(f"[gpu-check] not packed: {e}")

    # a job's time limit (SIGTERM, SIGHUP) or Ctrl-C: the unit it cut off is recorded and packed, then it is raised
    stop: KeyboardInterrupt | None = None
    # at `limit` (counted from `started`: the command's start, the wheels' install included) the command stops itself
    # as a job's time limit would, so the unit it cuts off is recorded
    watchdog = None
    if limit:
        watchdog = threading.Timer(
            max(0.0, limit - (time.monotonic() - t_start)), os.kill, (os.getpid(), signal.SIGTERM)
        )
        watchdog.daemon = True
        watchdog.start()
    try:
        with sigterm_interrupts():
            command["node"] = record_node(out, label)
            save()
            budget = limit if limit else float("inf")
            together = {} if units else gpuplan.together()  # --units: the units named, as named
            home = {u for u, r in manifest["units"].items() if r.get("status") == "ok" and u not in rerun}
            # --rerun first, each after the unit whose results it reads where that has not come home
            first: list[str] = []
            order = gpuplan.units()  # priority order; a unit the check does not know goes last
            for u in sorted(set(rerun), key=lambda u: order.index(u) if u in order else len(order)):
                if together.get(u) and together[u] not in home and together[u] not in first:
                    first.append(together[u])
                first.append(u)
            mine = first + [u for u in own if u not in first]  # run whatever the time: asked for by name
            queue = mine + [u for u in others if u not in mine]
            todo = [u for u in queue if u not in home]
            log(
                f"[gpu-check] came home before this command (ok in {manifest_path}):"
                f" {', '.join(sorted(home)) or 'nothing'};"
                f" to run: {', '.join(u for u in mine if u not in home) or 'nothing'} of its own"
                + (
                    f", then as time allows: {', '.join(u for u in todo if u not in mine)}"
                    if set(todo) - set(mine)
                    else ""
                )
            )
            for unit in queue:
                try:
                    if unit in home:
                        log(f"[gpu-check] {unit}: came home already (ok in the manifest), skipped")
                        command["units"][unit] = "skipped: came home"
                        continue
                    if (
                        unit not in mine
                        and time.monotonic() - t_start + gpuplan.unit_estimate(unit)[0] > budget
                    ):
                        command["units"][unit] = "deferred: would not fit this command"
                        continue
                    # a unit that reads another's results runs after it (C4 after C3)
                    before_it = together.get(unit)
                    if before_it and before_it not in home and command["units"].get(before_it) != "ok":
                        command["units"][unit] = f"deferred: runs after {before_it}, which has not come home"
                        continue
                    log(f"[gpu-check] {unit} on {device}")
                    t0, before = time.monotonic(), _stamps(out)
                    try:
                        result = run_unit(unit, out, device, data_root, log)
                    except KeyboardInterrupt as e:  # results.Interrupted or Ctrl-C: cut off, not failed
                        stop = e
                        result = {"status": "interrupted", "error": str(e) or "Ctrl-C"}
                        log(
                            f"[gpu-check] {unit} cut off after {time.monotonic() - t0:.0f} s: {result['error']}"
                        )
                    except Exception as e:  # recorded; the next unit runs
                        result = {
                            "status": "failed",
                            "error": f"{type(e).__name__}: {e}",
                            "traceback": traceback.format_exc(limit=8),
                        }
                        log(f"[gpu-check] {unit} failed: {result['error']}")
                    with signals_deferred():  # a signal waits until the record and its archive are written
                        manifest["units"][unit] = {
                            **result,
                            "seconds": round(time.monotonic() - t0, 1),
                            "part": command["part"],
                            "finished_at": time.time(),
                            # what this unit wrote: unpack keeps these files from the record it keeps, so pages
                            # and manifest agree
                            "files": sorted(f for f, stamp in _stamps(out).items() if before.get(f) != stamp),
                        }
                        command["units"][unit] = result["status"]
                        save()
                except KeyboardInterrupt as e:  # between units, or held during the record and raised after it
                    stop = stop or e
                if stop is not None:
                    for rest in [u for u in queue if u not in command["units"]]:
                        command["units"][rest] = "not started: the command was stopped"
                    break
            try:
                with signals_deferred():
                    save()  # what was skipped, deferred or not started after the last unit
            except KeyboardInterrupt as e:
                stop = stop or e
    finally:
        if watchdog:
            watchdog.cancel()
    if stop is not None:
        raise stop
    return out


def _gz_size(f: Path) -> int:
    """About what `f` adds to a tar.gz: its gzip size and a tar header's 1 KiB."""
    import zlib

    z, n = zlib.compressobj(6, zlib.DEFLATED, 31), 1024
    with open(f, "rb") as fh:
        while chunk := fh.read(1 << 20):
            n += len(z.compress(chunk))
    return n + len(z.flush())


def _is_trace(f: Path) -> bool:
    return f.name.endswith(TRACE_SUFFIXES) or "snapshot" in f.name


def _bins(
    files: list[Path], size: dict[Path, int], cap: float, most: int
) -> tuple[list[list[Path]], list[Path]]:
    """(files per archive, files left out): the others first, largest first, into the first archive with room
    (a new one while fewer than `most`), then traces and snapshots, smallest first, only where room is left."""
    bins: list[list[Path]] = []
    loads: list[int] = []
    dropped: list[Path] = []
    others = sorted((f for f in files if not _is_trace(f)), key=lambda f: -size[f])
    traces = sorted((f for f in files if _is_trace(f)), key=lambda f: size[f])
    for f in others + traces:
        k = next((i for i, load in enumerate(loads) if load + size[f] <= cap), None)
        if k is None and not _is_trace(f) and len(bins) < most and size[f] <= cap:
            bins.append([])
            loads.append(0)
            k = len(bins) - 1
        if k is None:
            dropped.append(f)
        else:
            bins[k].append(f)
            loads[k] += size[f]
    return bins or [[]], dropped


def pack(
    folder: Path,
    archive: Path,
    since: float = 0.0,
    prefix: str = "",
    limit: int | None = None,
    most: int | None = None,
    log=print,
) -> tuple[list[Path], list[str]]:
    """The files under `folder` modified since `since` into tar.gz archives at `archive` (and, where one would
    exceed `limit` bytes, default ARCHIVE_LIMIT, `<name>-2.tar.gz` and on, at most `most` of them: by default as
    many as the device tool's 8 files leave in `archive`'s folder), each file under `prefix/`, each archive with
    manifest.json, each written whole and atomically (a kill while they are written leaves the previous ones).
    Traces and snapshots go only where room is left; what fits in none is left out and named. The per-command
    reports/index.html is left out: unpack writes one index of everything that came home. Returns (the archives,
    what was left out)."""
    limit = limit or ARCHIVE_LIMIT
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file()
        and not p.is_symlink()
        and p.relative_to(folder).as_posix() != "reports/index.html"
        and not LOCK_FILE.fullmatch(p.name)  # a run's flock (guards.task_lock): a process's, not a result
        and (p.stat().st_mtime >= since - 1 or p.name == "manifest.json")
    )
    head = [f for f in files if f.relative_to(folder).as_posix() == "manifest.json"]
    rest = [f for f in files if f not in head]
    parent = archive.parent
    parent.mkdir(parents=True, exist_ok=True)
    base = archive.name.removesuffix(".tar.gz")
    ours = re.compile(re.escape(base) + r"(-\d+)?\.tar\.gz(\.tmp)?")
    if most is None:  # the device tool's file count, less what else is in $OUT
        most = ARCHIVE_FILES - sum(1 for p in parent.iterdir() if p.is_file() and not ours.fullmatch(p.name))
    if most < 1:
        raise ConfigError(f"{parent} already holds {ARCHIVE_FILES} files: no room for {archive.name}")
    name = [archive] + [archive.with_name(f"{base}-{k}.tar.gz") for k in range(2, most + 1)]
    bins, dropped, size, cap = [rest], [], None, float(limit)
    for _ in range(30):
        tmps = []
        for k, b in enumerate(bins):
            tmps.append(name[k].with_name(name[k].name + ".tmp"))
            with tarfile.open(tmps[-1], "w:gz") as tar:
                for f in head + b:
                    tar.add(f, arcname=str(Path(prefix) / f.relative_to(folder)), recursive=False)
        sizes = [t.stat().st_size for t in tmps]
        if max(sizes) <= limit:
            break
        for t in tmps:
            t.unlink()
        if size is None:  # more than one archive holds, or something must go: plan by each file's gzip size
            size = {f: _gz_size(f) for f in rest}
            cap = limit - sum(_gz_size(f) for f in head)
        else:  # the estimate was short: plan again with less room
            cap *= 0.9
        bins, dropped = _bins(rest, size, cap, most)
    else:
        raise ConfigError(f"{archive.name}: nothing fits {limit} bytes, not even the manifest")
    for t in tmps:
        with open(t, "rb") as fh:
            os.fsync(fh.fileno())
    for k, t in enumerate(tmps):
        os.replace(t, name[k])
    for stale in name[len(tmps) :]:
        stale.unlink(missing_ok=True)
    left = [f.relative_to(folder).as_posix() for f in dropped]
    log(
        f"[gpu-check] packed {sum(map(len, bins))} files, {sum(sizes) / 1024**2:.1f} MiB, into "
        + ", ".join(str(n) for n in name[: len(tmps)])
        + (f" (left out to fit: {', '.join(left)})" if left else "")
    )
    return name[: len(tmps)], left


def _read_archive(a: Path, root: Path) -> tuple[dict, list[tarfile.TarInfo]]:
    """(the archive's manifest, its members), every member checked to be a plain file or folder inside root."""
    try:
        with tarfile.open(a, "r:gz") as tar:
            members = tar.getmembers()
            for m in members:
                target = (root / m.name).resolve()
                if not (m.isfile() or m.isdir()) or root not in target.parents or m.name.startswith("/"):
                    raise ConfigError(
                        f"{a.name}: member {m.name!r} is not a plain file inside {root}; refused"
                    )
            found = [m for m in members if m.isfile() and Path(m.name).parts[1:] == ("manifest.json",)]
            manifest = json.load(tar.extractfile(found[0])) if found else {}
    except (tarfile.TarError, EOFError, json.JSONDecodeError) as e:
        raise ConfigError(f"{a.name} is not a readable tar.gz archive ({e})") from e
    return manifest, members


def merge_manifests(manifests: list[dict]) -> dict:
    """One manifest from every command's (in any order): each unit's record is its best one (ok before not ok, then
    the latest finished), the machine's facts are the latest command's, and every stage (plan part) lists each of
    its units with its status, `not run` where nothing came home."""
    ordered = sorted(manifests, key=lambda m: (m.get("packed_at", 0), json.dumps(m, sort_keys=True)))
    merged: dict = {}
    for m in ordered:
        merged.update({k: v for k, v in m.items() if k not in ("units", "commands", "stages")})
    commands = {k: v for m in ordered for k, v in m.get("commands", {}).items()}
    units: dict = {}
    for m in ordered:
        for u, r in m.get("units", {}).items():
            old = units.get(u)
            if old is None or (r.get("status") == "ok", r.get("finished_at", 0)) >= (
                old.get("status") == "ok",
                old.get("finished_at", 0),
            ):
                units[u] = r
    cmds, left = gpuplan.parts()
    stages = {}
    for i, us in enumerate(cmds, 1):
        st = {u: units.get(u, {}).get("status", "not run") for u in us}
        whole = (
            "ok"
            if all(v == "ok" for v in st.values())
            else "not run"
            if all(v == "not run" for v in st.values())
            else "incomplete"
        )
        stages[f"part{i}"] = {"command": gpuplan.command_line(i), "status": whole, "units": st}
    # every unit of the check has a row: what the plan left out runs when a command has time to spare
    if left:
        st = {u: units.get(u, {}).get("status", "not run") for u in left}
        ran = any(v != "not run" for v in st.values())
        stages["not planned"] = {
            "command": "any command whose own units end early",
            "status": "ok" if all(v == "ok" for v in st.values()) else "incomplete" if ran else "not run",
            "units": st,
        }
    extra = sorted(set(units) - {u for us in cmds for u in us} - set(left))  # units the check no longer has
    if extra:
        stages["other"] = {
            "command": "--units",
            "status": "ran",
            "units": {u: units[u]["status"] for u in extra},
        }
    merged.update(
        stages=stages,
        units=dict(sorted(units.items())),
        commands=dict(sorted(commands.items())),
        left_out_of_plan=left,
    )
    merged.pop("packed_at", None)
    return merged


def write_gpu_index(folder: Path, manifest: dict) -> Path:
    """reports/index.html under a GPU's folder: every stage and unit with its status, linking every report that
    came home (the report pages link back to it)."""
    import html

    def link(unit: str) -> str:
        for rel, href in (
            (f"reports/{unit}.html", f"{unit}.html"),
            ("tests.txt" if unit == "tests" else "", "../tests.txt"),
            ("bench.json" if unit == "bench" else "", "../bench.json"),
        ):
            if rel and (folder / rel).is_file():
                return f"<a href='{html.escape(href)}'>{html.escape(unit)}</a>"
        return html.escape(unit)

    rows = []
    for sname, st in manifest.get("stages", {}).items():
        for u, status in st["units"].items():
            secs = manifest["units"].get(u, {}).get("seconds", "")
            rows.append(
                f"<tr><td>{html.escape(sname)}</td><td>{link(u)}</td><td>{html.escape(str(status))}</td>"
                f"<td>{html.escape(str(secs))}</td></tr>"
            )
    nodes = sorted(p.name for p in folder.glob("node-part*.json"))
    body = (
        f"<h1>GPU check: {html.escape(str(manifest.get('gpu', '?')))}</h1>"
        f"<p>commit {html.escape(str(manifest.get('commit')))} (dirty: {html.escape(str(manifest.get('dirty')))}),"
        f" torch {html.escape(str(manifest.get('torch')))}, CUDA {html.escape(str(manifest.get('cuda')))},"
        f" driver {html.escape(str(manifest.get('driver')))}</p>"
        "<table><tr><th>stage</th><th>unit</th><th>status</th><th>seconds</th></tr>"
        + "".join(rows)
        + "</table>"
        "<p>machine records: "
        + ", ".join(f"<a href='../{html.escape(n)}'>{html.escape(n)}</a>" for n in nodes)
        + " &middot; <a href='../manifest.json'>manifest.json</a></p>"
    )
    path = folder / "reports" / "index.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as tmp:
        Path(tmp).write_text(f"<!doctype html><meta charset='utf-8'><title>GPU check</title>{body}\n")
    return path


def unpack(path: str | os.PathLike, dest: str | os.PathLike | None = None, log=print) -> list[Path]:
    """Every archive at `path` (a .tar.gz or a folder of them, any number, in any order, from any GPU) into
    dest/<gpu-name>/ (dest: reports/gpu/), merged with what earlier calls unpacked there: one manifest.json (each
    unit's record the best one: ok before not ok, then the latest finished) and one reports/index.html per GPU.
    A unit's files (those its record lists) are written only from the archive whose record the manifest keeps, and
    the files of a record it no longer keeps are removed, so the pages always show the result the manifest lists,
    whatever order the archives come in, in one call or many. Other files (the machine records): the newest
    command's. Every member must be a plain file or folder inside dest, else the archive is refused before anything
    of it is written."""
    path = Path(path)
    dest = Path(dest) if dest else project_root() / "reports" / "gpu"
    archives = sorted(path.glob("*.tar.gz")) if path.is_dir() else [path]
    if not archives or not all(a.is_file() for a in archives):
        raise ConfigError(f"no archive at {path}")
    root = dest.resolve()
    read = [(a, *_read_archive(a, root)) for a in archives]
    read.sort(key=lambda r: (r[1].get("packed_at", 0), r[0].name))
    gpus = {Path(m.name).parts[0] for _a, _m, members in read for m in members if m.isfile()}
    before = {
        g: json.loads((root / g / "manifest.json").read_text())
        for g in gpus
        if (root / g / "manifest.json").is_file()
    }
    merged = {}
    for g in gpus:
        ms = [
            m
            for _a, m, members in read
            if m and any(Path(x.name).parts[0] == g for x in members if x.isfile())
        ]
        if ms:
            merged[g] = merge_manifests([*ms, *([before[g]] if g in before else [])])
            merged[g]["packed_at"] = max(m.get("packed_at", 0) for m in [*ms, before.get(g, {})])
    written: list[Path] = []
    for a, manifest, _members in read:
        owner = {}  # file -> the unit whose record lists it (the latest finished, where two do)
        for u, r in sorted(manifest.get("units", {}).items(), key=lambda x: x[1].get("finished_at", 0)):
            owner.update({f: u for f in r.get("files", [])})
        n = 0
        with tarfile.open(a, "r:gz") as tar:
            for m in tar.getmembers():
                parts = Path(m.name).parts
                if not m.isfile() or parts[1:] == ("manifest.json",):
                    continue
                rel, target = Path(*parts[1:]).as_posix(), root / m.name
                unit = owner.get(rel)
                if unit is not None:
                    keep = manifest["units"][unit] == merged.get(parts[0], {}).get("units", {}).get(unit)
                else:  # not a unit's: the newest command's copy
                    keep = not target.exists() or manifest.get("packed_at", 0) >= before.get(
                        parts[0], {}
                    ).get("packed_at", 0)
                if not keep:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with atomic_file(target) as tmp, tar.extractfile(m) as src:
                    Path(tmp).write_bytes(src.read())
                written.append(target)
                n += 1
        log(f"[gpu-unpack] {a.name}: {n} files into {dest}")
    for gpu, m in merged.items():
        for u, old in before.get(gpu, {}).get("units", {}).items():  # a record no longer kept: its files go
            new = m["units"].get(u, {})
            for f in set(old.get("files", [])) - set(new.get("files", [])) if new != old else ():
                stale = root / gpu / f
                if stale.is_file() and stale not in written:
                    stale.unlink()
                    log(f"[gpu-unpack] {gpu}/{f}: removed, its unit's kept result is a newer one")
        atomic_write_json(root / gpu / "manifest.json", m)
        write_gpu_index(root / gpu, m)
    return written


def write_provenance(dest: str | os.PathLike) -> Path:
    """dest/provenance.json: the commit of this tree and whether it is dirty, for records made where .git does not
    travel (envinfo reads it through HPML_PROVENANCE when git cannot say)."""
    from ..envinfo import git_commit

    rec = {**git_commit(), "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if rec["commit"] == "unknown":
        raise ConfigError("gpu-wheels: this tree has no git commit to record (run it in a git checkout)")
    path = Path(dest) / "provenance.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, rec)
    return path


def use_provenance(wheels: str | os.PathLike) -> None:
    """Point envinfo (and the kernels this process starts) at the carried provenance.json, if there is one."""
    from .. import envinfo

    path = Path(wheels) / "provenance.json"
    if path.is_file():
        os.environ["HPML_PROVENANCE"] = str(path.resolve())
        envinfo.git_commit.cache_clear()


def main(argv: list[str] | None = None) -> int:
    import tempfile

    p = OneLineParser(prog="python3 -m hpml_lab.report.gpucheck", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser(
        "wheels", help="download the wheels the GPU image lacks; record the commit beside them"
    )
    w.add_argument("--dest", default=".whl")
    w.add_argument(
        "--python-version", default=GPU_PYTHON, help=f"the Python the wheels are for ({GPU_PYTHON})"
    )
    r = sub.add_parser("run", help="run one command of the plan (--part N) or the units named (--units)")
    r.add_argument(
        "--part", type=int, help="the plan's command number (python3 -m hpml_lab.report.gpucheck plan)"
    )
    r.add_argument("--units", default="", help="comma-separated units instead: tests, bench, task ids")
    r.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    r.add_argument("--out")
    r.add_argument(
        "--site", default=os.path.join(tempfile.gettempdir(), "hpml-site"), help="where the wheels go"
    )
    r.add_argument("--wheels", default=".whl")
    r.add_argument("--pack", default=os.environ.get("OUT") or None, help="pack after each unit here ($OUT)")
    r.add_argument(
        "--limit",
        type=float,
        help="seconds this command may run (the plan's for --part): then it stops as at a job's time limit",
    )
    r.add_argument("--rerun", default="", help="comma-separated units to run again though they came home")
    pl = sub.add_parser("plan", help="print the commands of the check with their estimates")
    pl.add_argument("--json", action="store_true", help="the whole plan with every figure's basis, as JSON")
    u = sub.add_parser("unpack", help="merge archives that came home into reports/gpu/<gpu-name>/")
    u.add_argument("archive")
    u.add_argument("--dest")
    args = p.parse_args(argv)
    try:
        if args.cmd == "wheels":
            if not re.fullmatch(r"3\.\d{1,2}(\.\d{1,2})?", args.python_version):
                raise ConfigError(f"--python-version must look like 3.12.3, not {args.python_version!r}")
            download_wheels(args.dest, python=args.python_version)
            print(f"[gpu-wheels] provenance: {write_provenance(args.dest)}")
        elif args.cmd == "plan":
            print(json.dumps(gpuplan.plan(), indent=1) if args.json else gpuplan.text())
        elif args.cmd == "unpack":
            unpack(args.archive, args.dest)
        else:
            # --limit counts from here: the wheels' install is the command's time too
            started = time.monotonic()
            units = [t for t in args.units.split(",") if t] or None
            if not units and not args.part:
                raise ConfigError("say --part N (see the plan) or --units a,b")
            if units and args.part:
                raise ConfigError("say --part N (see the plan) or --units a,b, not both")
            if args.limit is not None and not (args.limit > 0 and math.isfinite(args.limit)):
                raise ConfigError(f"--limit must be a positive number of seconds, not {args.limit:g}")
            rerun = [t for t in args.rerun.split(",") if t]
            unknown = sorted(set(rerun) - set(gpuplan.units()))
            if unknown:
                raise ConfigError(
                    f"--rerun: no unit {', '.join(unknown)} (units: {', '.join(gpuplan.units())})"
                )
            # the CPU rehearsal uses the environment it runs in where the notebook machinery imports (the
            # project's venv): the carried wheels are the node's, built for its Python, maybe not this one's
            if args.device == "cpu" and machinery_here():
                print(
                    "[gpu-check] the notebook machinery imports here: the carried wheels are not installed"
                    " (a CPU rehearsal runs in this environment)"
                )
            elif Path(args.wheels).is_dir() and any(Path(args.wheels).glob("*.whl")):
                install(args.wheels, args.site)
            elif not machinery_here():
                raise ConfigError(
                    f"no wheels in {args.wheels} and no {', '.join(MACHINERY)} here: carry .whl (make gpu-wheels)"
                )
            use_provenance(args.wheels)
            out = run(
                args.part,
                args.device,
                args.out,
                units,
                pack_to=args.pack,
                limit=args.limit,
                rerun=rerun,
                started=started,
            )
            print(f"[gpu-check] done: {out}")
    except ConfigError as e:
        print(f"gpu-check: error: {e}", file=sys.stderr)
        return 2
    # the unit it cut off is in the manifest as "interrupted", packed with the rest
    except KeyboardInterrupt as e:
        signum = getattr(e, "signum", signal.SIGINT)
        print(
            f"gpu-check: stopped by {signal.Signals(signum).name}: the units finished before it are in the manifest"
            f" and packed{f' in {args.pack}' if getattr(args, 'pack', None) else ''}; run the command again to go on",
            file=sys.stderr,
        )
        return 128 + int(signum)
    return 0


if __name__ == "__main__":
    sys.exit(main())
