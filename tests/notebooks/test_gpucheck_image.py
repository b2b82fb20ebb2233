"""A rehearsal of the GPU check kit as the GPU machine runs it, on this CPU: a Python holding only the GPU
image's packages (those of notes/gpu-machine.md's list, nothing else of the project's .venv), the kit's wheels
for that Python carried in .whl/ with the commit `make gpu-wheels` records, a copy of the tree without .git,
and every command in a fresh process with the site folder deleted before it, as a bare machine has it; $OUT is
checked for the device tool's limits (file count, size, depth, names) after each command.

Which Python: the GPU image's is 3.12. A 3.12 that can import torch is used where this machine has one
($HPML_GPU_PYTHON, python3.12 on PATH, pyenv's 3.12.x); otherwise the host's Python stands in, and the test
says so (a warning in pytest's summary). On this project's machines pyenv's 3.12.1 has no torch (its CUDA
wheels would take about 4.7 GB): the host's 3.11 stands in there. The wheels for the Python used are fetched
by the kit's own `wheels` code into build/gpu-wheels-cpXY (or $HPML_GPU_WHEEL_CACHE), once.

Kept short (what costs CPU here is each fresh process's imports, the two wheel installs and c1's kernel): the
image's packages are found, not imported, before the commands run; the tiny profile, one lab task (c1; every
notebook's rendering is the notebook tests' job) run by the first command and skipped by the second (it came
home), and the session's synthetic CIFAR-10 (tests/conftest.py) linked in, not written again.
"""

import glob
import importlib.metadata as md
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from unit.test_gpucheck import out_within_limits  # tests/unit/test_gpucheck.py (tests/ is on the path)

from hpml_lab import envinfo
from hpml_lab.config import project_root
from hpml_lab.gpu import unpack, wheels
from hpml_lab.gpu.__main__ import main as kit_main
from hpml_lab.report import gpuplan

ROOT = project_root()


def _python_312() -> Path | None:
    """A Python 3.12 on this machine that can import torch, or None."""
    found = [os.environ.get("HPML_GPU_PYTHON"), shutil.which("python3.12")]
    found += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))
    for py in filter(None, found):
        r = subprocess.run(
            [py, "-c", "import sys, torch; print(sys.version_info[:2] == (3, 12))"],
            capture_output=True,
            text=True,
        )
        if r.returncode == 0 and r.stdout.strip() == "True":
            return Path(py)
    return None


def _image_python(folder: Path) -> Path:
    """A venv of the host's Python without pip or the project's packages; a .pth puts a folder of links to the
    image's packages (those installed here) on it."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder / "venv")], check=True)
    links = folder / "image-site"
    links.mkdir()
    for dist in md.distributions():
        if wheels._norm(dist.metadata["Name"]) not in gpuplan.IMAGE_HAS:
            continue
        base = Path(dist.locate_file(""))
        for top in {Path(f).parts[0] for f in dist.files or [] if not str(f).startswith("..")}:
            if (base / top).exists() and not (links / top).exists():
                (links / top).symlink_to(base / top)
    site = next((folder / "venv" / "lib").glob("python3*/site-packages"))
    (site / "gpu-image.pth").write_text(f"{links}\n")
    return folder / "venv" / "bin" / "python"


def _version(py: Path) -> str:
    return subprocess.run(
        [str(py), "-c", "import platform; print(platform.python_version())"], capture_output=True, text=True
    ).stdout.strip()


def _wheels(version: str) -> Path:
    """The kit's wheels for `version`, downloaded by the `wheels` command's own code (in this process: it only
    downloads what the cache lacks; the commit it records is written into the copied tree below)."""
    major_minor = "".join(version.split(".")[:2])
    cache = Path(os.environ.get("HPML_GPU_WHEEL_CACHE") or ROOT / "build" / f"gpu-wheels-cp{major_minor}")
    wheels.download_wheels(cache, log=lambda *a: None, python=version)
    return cache


def test_wheels_follow_extras_and_take_a_python_version():
    names = dict(wheels.wheel_list(python="3.12.3"))
    assert "tinycss2" in names  # nbconvert needs bleach[css]; bleach's own requirements never name it
    assert "tinycss2" not in dict(wheels.wheel_list(roots=["bleach"]))  # only through the extra
    assert kit_main(["wheels", "--python-version", "three"]) == 2


@pytest.mark.slow
def test_the_kit_runs_command_by_command_as_on_a_bare_gpu_machine(tmp_path, cifar_root):
    py = _python_312()
    if py is None:
        warnings.warn(
            "no Python 3.12 with torch on this machine: the GPU image's Python is rehearsed with the host's "
            f"{sys.version.split()[0]} and the image's packages installed here",
            stacklevel=1,
        )
        py = _image_python(tmp_path)
        bare = subprocess.run(  # found, not imported: the commands below import what they use
            [
                str(py),
                "-c",
                "import importlib.util as u\n"
                "print([m for m in ('torch', 'torchvision', 'pandas', 'matplotlib', 'yaml', 'tqdm', 'pytest',"
                " 'nbconvert', 'papermill', 'ipykernel') if u.find_spec(m) is None])",
            ],
            capture_output=True,
            text=True,
        )
        missing = ["nbconvert", "papermill", "ipykernel"]
        assert bare.returncode == 0 and bare.stdout.strip() == str(missing), bare.stderr  # the image's set
    version = _version(py)
    carried = _wheels(version)
    proj = tmp_path / "proj"  # a copy of the tree as the device tool sends it: no .git, the wheels in .whl
    for name in ("hpml_lab", "notebooks", "tests"):
        shutil.copytree(ROOT / name, proj / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", proj / "pyproject.toml")
    shutil.copytree(carried, proj / ".whl", ignore=shutil.ignore_patterns("provenance.json"))
    wheels.write_provenance(proj / ".whl")  # what `make gpu-wheels` writes
    assert not (proj / ".git").exists()
    (proj / "data").mkdir()  # the session's synthetic CIFAR-10, not written again
    (proj / "data" / "cifar-10-batches-py").symlink_to(cifar_root / "cifar-10-batches-py")
    # a bare machine's environment, and the one OpenMP thread a process of this suite runs with (conftest)
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "OMP_NUM_THREADS")
    base = {k: v for k, v in os.environ.items() if k in keep}

    def command(argv: list[str], out: Path) -> subprocess.CompletedProcess:
        """One device command on a bare machine: fresh HOME and TMPDIR, no site folder, its own $OUT."""
        home, tmp = tmp_path / "home", tmp_path / "tmp"
        for d in (home, tmp):
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir()
        out.mkdir()
        env = {**base, "HOME": str(home), "TMPDIR": str(tmp), "OUT": str(out)}
        return subprocess.run(
            [str(py), "-m", "hpml_lab.gpu", *argv],
            cwd=proj,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )

    plan = command(["plan"], tmp_path / "OUT0")
    lines = [x for x in plan.stdout.splitlines() if x and not x.startswith("#")]
    assert plan.returncode == 0 and 1 <= len(lines) <= 3, plan.stdout + plan.stderr
    assert all(x.startswith("python3 -m hpml_lab.gpu run --part ") for x in lines)

    r1 = command(["run", "--units", "c1", "--device", "cpu"], tmp_path / "OUT1")
    assert r1.returncode == 0, r1.stdout[-3000:] + r1.stderr[-3000:]
    assert "installed 46 wheels" in r1.stdout  # a bare machine: the wheels go in
    files1 = out_within_limits(tmp_path / "OUT1")
    assert [f.name for f in files1] == ["cpu-dry-run.partx.tar.gz"]
    unpack.unpack(tmp_path / "OUT1", proj / "reports" / "gpu", log=lambda *a: None)  # home, then carried

    r2 = command(["run", "--units", "c1", "--device", "cpu"], tmp_path / "OUT2")
    assert r2.returncode == 0, r2.stdout[-3000:] + r2.stderr[-3000:]
    assert "c1: came home already" in r2.stdout and "installed" in r2.stdout
    assert [f.name for f in out_within_limits(tmp_path / "OUT2")] == ["cpu-dry-run.partx.tar.gz"]

    home = tmp_path / "came-home"
    unpack.unpack(tmp_path / "OUT2", home, log=lambda *a: None)
    unpack.unpack(tmp_path / "OUT1", home, log=lambda *a: None)
    folder = home / "cpu-dry-run"
    m = json.loads((folder / "manifest.json").read_text())
    assert {u: r["status"] for u, r in m["units"].items()} == {"c1": "ok"}, m["units"]
    commit = envinfo.git_commit()["commit"]
    assert m["commit"] == commit and m["python"] == version  # provenance without .git, the node's Python
    node = json.loads((folder / "node-partx.json").read_text())
    assert node["commit"] == commit and "make" in node and node["dev_shm"]
    metas = list((folder / "results").rglob("meta.json"))
    assert metas and all(json.loads(p.read_text())["environment"]["commit"] == commit for p in metas)
    assert (folder / "reports" / "c1.html").stat().st_size > 10_000
    assert "<a href='c1.html'>" in (folder / "reports" / "index.html").read_text()


@pytest.mark.slow  # asks the package index for the node's wheels (once: build/gpu-wheels-cp312 keeps them)
def test_make_gpu_wheels_then_the_cpu_rehearsal_runs_in_this_venv(tmp_path, cifar_root):
    """Issue 46, in docs/gpu-node.md's order: `make gpu-wheels` (wheels for the node's Python 3.12), then
    `make gpu-check DEVICE=cpu UNITS=bench` on this Python: it runs in the project's venv and brings the unit
    home (before, pip refused the cp312 wheels on 3.11 and the rehearsal stopped at once). The project's home
    is a folder of the test's with the session's synthetic CIFAR-10 linked in, not written again."""
    make = shutil.which("make") or pytest.skip("make is not installed")
    node_wheels = Path(os.environ.get("HPML_GPU_NODE_WHEELS") or ROOT / "build" / "gpu-wheels-cp312")
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    (home / "data" / "cifar-10-batches-py").symlink_to(cifar_root / "cifar-10-batches-py")
    env = {k: v for k, v in os.environ.items() if k not in ("HPML_OUTPUT_DIR", "HPML_LAB_HOME")}

    def make_(*args, **more):
        return subprocess.run(
            [make, "--no-print-directory", *args, f"WHEELS={node_wheels}"],
            cwd=ROOT,
            env={**env, **more},
            capture_output=True,
            text=True,
            timeout=600,
        )

    got = make_("gpu-wheels")
    assert got.returncode == 0, got.stdout[-2000:] + got.stderr[-2000:]
    assert any(w.name.endswith(".whl") and "-cp312-" in w.name for w in node_wheels.iterdir())
    if sys.version_info[:2] == (3, 12):
        warnings.warn(
            "this Python is the node's 3.12: the wheels would fit; the rehearsal is run anyway", stacklevel=1
        )
    # the project's home (reports/gpu/, data/) is the test's; the commit is this tree's (gpu-wheels recorded
    # it)
    r = make_("gpu-check", "DEVICE=cpu", "UNITS=bench", HPML_LAB_HOME=str(home), OUT=str(tmp_path / "OUT"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "the carried wheels are not installed" in r.stdout and "installed" not in r.stdout.replace(
        "not installed", ""
    )
    m = json.loads((home / "reports" / "gpu" / "cpu-dry-run" / "manifest.json").read_text())
    assert m["units"]["bench"]["status"] == "ok", m["units"]["bench"]
    assert [f.name for f in out_within_limits(tmp_path / "OUT")] == ["cpu-dry-run.partx.tar.gz"]
