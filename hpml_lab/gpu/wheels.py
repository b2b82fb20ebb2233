"""The GPU check kit's wheels: what the node's image lacks (the notebook machinery), fetched here for the
node's Python, installed there privately, and the commit of the tree recorded beside them (.git does not
travel).

    make gpu-wheels                         # python3 -m hpml_lab.gpu wheels --dest .whl
    from hpml_lab.gpu import wheels
    wheels.install(".whl", site)            # on the node: pip --target, no index
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from ..config import ConfigError
from ..io import atomic_write_json
from ..report.gpuplan import GPU_PYTHON, IMAGE_HAS

# The notebook machinery the GPU image lacks; their dependencies are added by wheel_list().
ROOTS = ["papermill", "nbconvert", "nbformat", "nbclient", "ipykernel", "jupyter-client", "traceinsight"]


# Requirements not followed: Holistic Trace Analysis (traceinsight) lists JupyterLab and pytest, which its
# analysis code never imports (checked in hta/, 0.6.1); carrying JupyterLab would triple the wheels.
SKIP_REQUIRES = {"traceinsight": {"jupyterlab", "pytest"}}


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
    """pip download the wheels for CPython `python` manylinux x86_64 into dest (one version each). The GPU
    image needs 3.12; the kit's CPU test fetches the same list for this host's Python. One pip process fetches
    all that dest lacks (a pip process per wheel cost 39 s of CPU for the 46, nearly all of it pip starting);
    where it fails, each is asked for alone, to name the one without a wheel."""
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


MACHINERY = ("papermill", "nbconvert", "ipykernel")  # what a lab task's run needs beyond the image's packages


def machinery_here() -> bool:
    """Whether the notebook machinery imports in this Python already (found, not imported)."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in MACHINERY)


def _wheel_pythons(files: list[Path]) -> dict[str, str]:
    """{a wheel's file name: the CPython it is built for ('3.12')} for each wheel that does not install on
    this Python: a cpXY tag of another version (cpXY-abi3: one newer than this), from the name's python
    tag."""
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
    """The carried wheels into `site` with pip --target (no index, no dependencies: the GPU machine reaches
    none), then that folder on this process's path, on PYTHONPATH for the kernels it starts, and its
    share/jupyter (the nbconvert templates pip --target puts there) on the Jupyter path. Skipped when already
    installed (a warm machine). Wheels built for another Python are refused in one line that names it, before
    pip runs."""
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
            f"the wheels in {wheels} are built for CPython {built} ({name} and {len(wrong) - 1} more), not "
            f"this Python {here}: run the command with Python {built} (the GPU node's python3), or rehearse "
            f"here on the CPU in the project's venv (make gpu-check DEVICE=cpu), or fetch wheels for this "
            f"Python (python3 -m hpml_lab.gpu wheels --python-version {here} --dest DIR, then --wheels DIR)"
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


def write_provenance(dest: str | os.PathLike) -> Path:
    """dest/provenance.json: the commit of this tree and whether it is dirty, for records made where .git does
    not travel (envinfo reads it through HPML_PROVENANCE when git cannot say)."""
    from ..envinfo import code_root, git_commit, tree_digest

    rec = {
        **git_commit(),
        "tree": tree_digest(code_root()),  # the node checks that the code it was sent is this code
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if rec["commit"] == "unknown":
        raise ConfigError("gpu-wheels: this tree has no git commit to record (run it in a git checkout)")
    path = Path(dest) / "provenance.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, rec)
    return path


COURSE = "course-lab2"  # the course's own Lab 2 code beside the wheels (the speed ladder's course.py)


def copy_course(dest: str | os.PathLike, log=print) -> Path | None:
    """The course's Lab 2 code (lab2.py and the files beside it; not part of this project) copied to
    dest/course-lab2, so that it travels to the GPU machine with the wheels and the speed ladder runs it there
    as written; None, said in one line, where it is not at hand here."""
    import shutil
    import tempfile

    from ..studies.speed import course

    target = (Path(dest) / COURSE).resolve()
    source = next(
        (f for f in course.places() if (f / "lab2.py").is_file() and f.resolve() != target),
        None,
    )
    if source is None:
        log(
            "[gpu-wheels] the course's lab2.py is not at hand (looked in "
            + ", ".join(str(f) for f in course.places())
            + "): the speed page will say it did not run"
        )
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{COURSE}-", dir=target.parent))
    try:
        for f in sorted(source.iterdir()):
            if f.is_file():
                shutil.copy2(f, tmp / f.name)
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"[gpu-wheels] the course's lab2.py: {source} -> {target}")
    return target


def use_course(wheels: str | os.PathLike) -> None:
    """Point the speed ladder at the course's code carried beside the wheels, if it is there."""
    from ..studies.speed import course

    folder = Path(wheels) / COURSE
    if (folder / "lab2.py").is_file():
        os.environ[course.ENV] = str(folder.resolve())


def use_provenance(wheels: str | os.PathLike) -> None:
    """Point envinfo (and the kernels this process starts) at the carried provenance.json, if there is one.
    Where git cannot name this tree's commit (a GPU machine), a provenance.json written for other code (a
    .whl kept from an earlier commit) is refused in one line before any unit runs: its commit would stand
    beside every result."""
    import json

    from .. import envinfo

    path = Path(wheels) / "provenance.json"
    if path.is_file():
        os.environ["HPML_PROVENANCE"] = str(path.resolve())
        envinfo.git_commit.cache_clear()
        if envinfo.git_commit()["commit"] != "unknown":
            return  # git names it (a rehearsal in a checkout), or the record holds for this tree
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise ConfigError(f"{path}: not a provenance record ({e}): run make gpu-wheels again") from None
        why = envinfo.provenance_problem(rec)
        if why:
            raise ConfigError(
                f"{path} does not hold for this tree: {why}; run make gpu-wheels again and carry .whl"
            )
