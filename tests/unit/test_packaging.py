"""One dependency list (pyproject.toml); environment.yml and the Makefile only point at it."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_environment_yml_installs_the_project_and_lists_no_packages():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    assert "python=3.11" in deps and "pip" in deps
    pip = next(d["pip"] for d in deps if isinstance(d, dict))
    assert pip == ["-c constraints.txt", "-e .[test]"]  # no second list to drift


def test_pyproject_lists_every_dependency_and_constraints_pin_the_pair():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {
        d.split(";")[0].split("=")[0].split(">")[0].split("<")[0].strip().lower()
        for d in meta["dependencies"]
    }
    assert {
        "torch",
        "torchvision",
        "papermill",
        "nbconvert",
        "ipykernel",
        "jupyterlab",
        "matplotlib",
        "pandas",
        "tqdm",
        "kaggle",
        "pyyaml",
    } <= names
    pins = [
        l.strip() for l in (ROOT / "constraints.txt").read_text().splitlines() if l.strip() and l[0] != "#"
    ]
    assert "torch==2.11.0" in pins and "torchvision==0.26.0" in pins


def test_installed_pair_matches_the_pins():
    import torch
    import torchvision

    assert torch.__version__.split("+")[0] == "2.11.0" and torchvision.__version__.split("+")[0] == "0.26.0"


def test_the_recorded_torchvision_version_is_read_without_importing_it(monkeypatch):
    """environment() records torchvision.__version__ (build tag included) without importing torchvision where
    a process has not: its import brings torch._dynamo, seconds of CPU in `hpml-lab run`'s parent."""
    import torchvision

    from hpml_lab import envinfo

    monkeypatch.delitem(sys.modules, "torchvision")  # as in a process that never imported it
    assert envinfo.torchvision_version.__wrapped__() == torchvision.__version__
    assert "torchvision" not in sys.modules
    code = (  # a fresh process: what environment() leaves imported
        "import sys; from hpml_lab import envinfo; print(envinfo.environment('cpu')['torchvision'], "
        "*sorted(m for m in ('torchvision', 'torch._dynamo') if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stdout.split()) == (0, [torchvision.__version__]), r.stderr[-2000:]


def test_ci_calls_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make report" in readme


def test_every_subpackage_is_listed_for_setuptools():

    import runpy

    listed = set(runpy.run_path(str(ROOT / "setup.py"), run_name="packages")["PACKAGES"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "hpml_lab").rglob("__init__.py")}
    assert found <= listed and "hpml_lab.notebooks" in listed and "hpml_lab.studies.speed" in listed
    assert "packages" not in tomllib.loads((ROOT / "pyproject.toml").read_text()).get("tool", {}).get(
        "setuptools", {}
    )


@pytest.mark.slow
def test_a_plain_install_runs_a_task_from_an_empty_folder(tmp_path, cifar_root):
    """pip install . (not editable) into a folder, then hpml-lab run / init / slurm from an empty folder."""
    import shutil

    site, work, src = tmp_path / "site", tmp_path / "work", tmp_path / "src"
    work.mkdir()
    src.mkdir()
    for name in (
        "pyproject.toml",
        "setup.py",  # finds the packages (every task folder)
        "README.md",
        "hpml_lab",
        "notebooks",
    ):  # a copy: the build writes build/ there
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, src / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(src)],
        check=True,
        capture_output=True,
    )
    env = {
        k: v
        for k, v in os.environ.items()  # a user's shell: no variables an earlier run in this process set
        if k not in ("HPML_OUTPUT_DIR", "HPML_LAB_HOME", "HPML_PROGRESS", "HPML_RENDERING")
    }
    env["PYTHONPATH"] = str(site)
    cli = [sys.executable, "-m", "hpml_lab.report.cli"]
    r = subprocess.run(
        [*cli, "run", "c1", "--profile", "tiny", "-p", f"data_root={cifar_root}"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert (work / "reports" / "c1.html").is_file() and (work / "reports" / "c1.answer.json").is_file()
    assert r.stderr == "", r.stderr[
        -2000:
    ]  # no warning from the kernel (it runs over Unix sockets) or anything else
    r = subprocess.run(
        [*cli, "report", "--bundle"], cwd=work, env=env, capture_output=True, text=True, timeout=300
    )  # the hand-in from what reports/ holds
    assert r.returncode == 0, r.stderr[-2000:]
    assert "<section class='task' id='c1'>" in (work / "reports" / "bundle.html").read_text()
    r = subprocess.run([*cli, "init", "mine"], cwd=work, env=env, capture_output=True, text=True)
    assert r.returncode == 0 and (work / "mine" / "notebooks" / "c1_training.ipynb").is_file()
    r = subprocess.run(
        [*cli, "slurm", "c1", "--gpus", "1", "-p", f"data_root={cifar_root}"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    script = work / "slurm" / "c1-1x1.sbatch"
    assert script.is_file() and "hpml_lab.report.cli run c1" in script.read_text()


def test_setup_removes_the_slow_iri_parser_and_notebooks_still_validate():
    """`make setup` uninstalls rfc3987-syntax (the Makefile says why: 2-3 s of CPU in every process that
    imports nbformat) and writes the bytecode of what the lab imports. Where this environment was built by
    `make setup` it is gone; without it jsonschema, nbformat's validation and jupyter-events (JupyterLab's)
    still import and work, in a process that cannot import it."""
    import importlib.util

    make = (ROOT / "Makefile").read_text()
    assert "SLOW_IMPORTS := rfc3987-syntax" in make and "pip uninstall --quiet --yes $(SLOW_IMPORTS)" in make
    # uv's route: no bytecode for all 13,000 files; the two warm-up imports write it for what the lab imports,
    # after the uninstall (else they would import the parser and compile it), and the tests' processes the
    # rest
    assert "uv pip install --python $(BIN)/python --quiet -c constraints.txt" in make
    uninstall = make.index("pip uninstall --quiet --yes $(SLOW_IMPORTS)")
    assert uninstall < make.index("$(WRITE_BYTECODE) $(BIN)/python -c 'import $(WARM_TORCH)'")
    assert "compileall -q -j 0 -x '/(tests?|pip|setuptools)/' $(VENV)/lib" in make  # pip's
    stamp = Path(sys.prefix) / ".hpml-installed"  # `make setup`'s stamp (older setups left it empty)
    if stamp.is_file() and stamp.read_text().startswith("removed: "):
        assert stamp.read_text().split() == ["removed:", "rfc3987-syntax"]
        assert importlib.util.find_spec("rfc3987_syntax") is None
        # and the bytecode is written by setup itself (before its stamp; the tests' processes write bytecode
        # too): no process compiles torch's or papermill's sources again
        for name in ("torch", "nbformat", "matplotlib.pyplot", "papermill", "hpml_lab.training"):
            cache = Path(importlib.util.cache_from_source(importlib.util.find_spec(name).origin))
            assert cache.is_file(), cache
            if name != "hpml_lab.training":  # this checkout's own modules are written again when edited
                assert cache.stat().st_mtime <= stamp.stat().st_mtime, cache
    code = (
        "import sys; sys.modules['rfc3987_syntax'] = None\n"  # as if not installed: its import fails
        "import jsonschema, jupyter_events, nbformat\n"
        "nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('1')])\n"
        "nbformat.validate(nb)\n"
        "nb.cells[0]['execution_count'] = 'one'\n"  # the schema wants an integer or null
        "try:\n"
        "    nbformat.validate(nb)\n"
        "except nbformat.ValidationError:\n"
        "    print('refused')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "refused", r.stderr[-2000:]


def test_setups_long_steps_say_a_line_every_tick(tmp_path):
    """The Makefile's TICK/UNTICK around the install and the bytecode warm-up: a line every TICK_S seconds
    while the step runs (1 s here), none after it, and the step's own exit status kept."""
    extra = tmp_path / "extra.mk"
    extra.write_text(
        "tick-ok:\n\t@$(call TICK,sleeping) sleep 2.5 $(UNTICK)\n"
        "tick-fail:\n\t@$(call TICK,failing) sleep 1.5; false $(UNTICK)\n"
    )
    make = ["make", "--no-print-directory", "-f", str(ROOT / "Makefile"), "-f", str(extra), "TICK_S=1"]
    ok = subprocess.run([*make, "tick-ok"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert ok.returncode == 0 and ok.stdout.splitlines()[:2] == [
        "setup: sleeping (1 s so far)",
        "setup: sleeping (2 s so far)",
    ], ok.stdout
    bad = subprocess.run([*make, "tick-fail"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert bad.returncode != 0 and "setup: failing (1 s so far)" in bad.stdout
    text = (ROOT / "Makefile").read_text()
    assert "$(call TICK,installing the packages" in text and "$(call TICK,writing bytecode)" in text
