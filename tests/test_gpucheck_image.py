"""The GPU check kit on the GPU machine's own package set, on this CPU: a fresh Python that holds only the image's
packages (those of notes/gpu-machine.md's list installed here, linked in, nothing else of the project's .venv), the
kit's wheels fetched by its own `wheels` command for this host's Python and installed by its own `pip --target`
step, then every stage with DEVICE=cpu at the tiny size, packed as for $OUT and unpacked as `make gpu-unpack` does.

The wheels are cached in build/gpu-wheels-cpXY (or $HPML_GPU_WHEEL_CACHE) and reused; the first run downloads them
(about 24 MiB from the package index).
"""

import importlib.metadata as md
import json
import os
import platform
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from hpml_lab.config import project_root
from hpml_lab.report import gpucheck, gpuplan

ROOT = project_root()
PY = platform.python_version()  # the full version: pip checks Requires-Python such as >=3.11.5 against it


def _image_python(folder: Path) -> Path:
    """A venv without pip or the project's packages; a .pth puts a folder of links to the image's packages on it."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder / "venv")], check=True)
    links = folder / "image-site"
    links.mkdir()
    for dist in md.distributions():
        if gpucheck._norm(dist.metadata["Name"]) not in gpuplan.IMAGE_HAS:
            continue
        base = Path(dist.locate_file(""))
        for top in {Path(f).parts[0] for f in dist.files or [] if not str(f).startswith("..")}:
            if (base / top).exists() and not (links / top).exists():
                (links / top).symlink_to(base / top)
    site = next((folder / "venv" / "lib").glob("python3*/site-packages"))
    (site / "gpu-image.pth").write_text(f"{links}\n")
    return folder / "venv" / "bin" / "python"


@pytest.fixture(scope="module")
def wheels():
    cache = Path(
        os.environ.get("HPML_GPU_WHEEL_CACHE")
        or ROOT / "build" / f"gpu-wheels-cp{sys.version_info.major}{sys.version_info.minor}"
    )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "hpml_lab.report.gpucheck",
            "wheels",
            "--dest",
            str(cache),
            "--python-version",
            PY,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 0, r.stderr
    return cache


def test_wheels_follow_extras_and_take_a_python_version():
    names = dict(gpucheck.wheel_list(python=PY))
    assert "tinycss2" in names  # nbconvert needs bleach[css]; bleach's own requirements never name it
    assert "tinycss2" not in dict(gpucheck.wheel_list(roots=["bleach"]))  # only through the extra
    assert gpucheck.main(["wheels", "--python-version", "three"]) == 2


@pytest.mark.slow
def test_every_stage_runs_on_the_image_package_set(tmp_path, wheels, cifar_root):
    py = _image_python(tmp_path)
    bare = subprocess.run(
        [
            str(py),
            "-c",
            "import torch, pandas, matplotlib, yaml, tqdm, pytest\n"
            "try:\n import nbconvert\nexcept ImportError: print('no nbconvert')",
        ],
        capture_output=True,
        text=True,
    )
    assert bare.returncode == 0 and bare.stdout.strip() == "no nbconvert", (
        bare.stderr
    )  # the image, not the .venv
    proj = tmp_path / "proj"  # a scratch checkout: the code linked, its own data and outputs
    proj.mkdir()
    for name in ("hpml_lab", "notebooks", "tests", "pyproject.toml"):
        (proj / name).symlink_to(ROOT / name)
    (proj / "data").mkdir()
    (proj / "data" / "cifar-10-batches-py").symlink_to(cifar_root / "cifar-10-batches-py")
    out = tmp_path / "OUT"  # the device tool's return folder
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "HPML_", "VIRTUAL_ENV"))}
    env.update(PYTHONPATH=str(proj), HPML_LAB_HOME=str(proj), OUT=str(out), TMPDIR=str(tmp_path))
    r = subprocess.run(
        [
            str(py),
            "-m",
            "hpml_lab.report.gpucheck",
            "run",
            "--site",
            str(tmp_path / "site"),
            "--wheels",
            str(wheels),
            "--stage",
            "all",
            "--device",
            "cpu",
        ],
        cwd=proj,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    result = proj / "reports" / "gpu" / "cpu-dry-run"
    manifest = json.loads((result / "manifest.json").read_text())
    assert sorted(manifest["stages"]) == sorted(gpuplan.STAGES)
    failed = {s: v["result"] for s, v in manifest["stages"].items() if v["status"] != "ok"}
    assert not failed, json.dumps(failed, indent=1)[:3000]
    every = [t for s in gpuplan.STAGES.values() for t in s]
    assert sorted(every) == sorted(__import__("hpml_lab.report.tasks", fromlist=["TASKS"]).TASKS)
    for task in every:  # every task rendered, with its answer record
        assert (result / "reports" / f"{task}.html").stat().st_size > 10_000, task
    archives = sorted(out.iterdir())  # one archive per stage, each within the return limits
    assert [a.name for a in archives] == sorted(f"cpu-dry-run.{s}.tar.gz" for s in gpuplan.STAGES)
    assert all(a.stat().st_size <= gpucheck.ARCHIVE_LIMIT for a in archives)
    home = tmp_path / "home"
    gpucheck.unpack(out, home, log=lambda *a: None)
    for task in every:
        assert (home / "cpu-dry-run" / "reports" / f"{task}.html").is_file()
    assert json.loads((home / "cpu-dry-run" / "manifest.json").read_text())["device"] == "cpu"


def test_pack_drops_traces_to_fit_and_unpack_refuses_escapes(tmp_path):
    src = tmp_path / "src"
    (src / "reports").mkdir(parents=True)
    (src / "reports" / "c1.html").write_text("<html>c1</html>")
    (src / "manifest.json").write_text("{}")
    (src / "trace.json.gz").write_bytes(os.urandom(300_000))  # incompressible
    a = gpucheck.pack(
        src, tmp_path / "o" / "x.tests.tar.gz", prefix="H100", limit=200_000, log=lambda *a: None
    )
    with tarfile.open(a) as tar:
        assert sorted(tar.getnames()) == ["H100/manifest.json", "H100/reports/c1.html"]
    gpucheck.unpack(a, tmp_path / "home", log=lambda *a: None)
    assert (tmp_path / "home" / "H100" / "reports" / "c1.html").read_text() == "<html>c1</html>"
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as tar:
        tar.add(src / "manifest.json", arcname="../escaped.json")
    with pytest.raises(gpucheck.ConfigError, match="refused"):
        gpucheck.unpack(evil, tmp_path / "home2", log=lambda *a: None)
    assert not (tmp_path / "escaped.json").exists() and not (tmp_path / "home2").exists()
    assert gpucheck.main(["unpack", str(tmp_path / "missing")]) == 2


def test_plan_fits_the_lease_with_a_basis_for_every_stage(capsys):
    assert gpucheck.main(["plan"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in plan["stages"]] == list(gpuplan.STAGES)
    assert all(
        s["estimate_s"] < 540 and s["basis"] and s["command"] == f"make gpu-check STAGE={s['name']}"
        for s in plan["stages"]
    )
    assert plan["total_s"] < 1500 and plan["total_s"] > sum(s["estimate_s"] for s in plan["stages"])


def test_a_failing_stage_is_recorded_and_the_next_one_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(
        gpucheck, "project_root", lambda: tmp_path
    )  # no data there: every benchmark and task fails
    monkeypatch.setattr(gpucheck, "_data", lambda root, device, log: None)
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))  # run() points it at its folder; restored afterwards
    out = gpucheck.run(
        ("bench", "reports-2"),
        "cpu",
        tmp_path / "gpu" / "x",
        ["c8"],
        log=lambda *a: None,
        pack_to=tmp_path / "OUT",
    )
    stages = json.loads((out / "manifest.json").read_text())["stages"]
    assert {s: v["status"] for s, v in stages.items()} == {"bench": "failed", "reports-2": "failed"}
    assert stages["bench"]["result"]["failed"] == list(
        __import__("hpml_lab.studies.bench", fromlist=["N"]).NAMES
    )
    assert (
        stages["reports-2"]["result"]["failed"] == ["c8"]
        and "data" in stages["reports-2"]["result"]["tasks"]["c8"]["error"].lower()
    )
    assert sorted(p.name for p in (tmp_path / "OUT").iterdir()) == [
        "cpu-dry-run.bench.tar.gz",
        "cpu-dry-run.reports-2.tar.gz",
    ]
