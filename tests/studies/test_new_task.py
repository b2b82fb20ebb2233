"""Adding a task is one folder and one notebook (docs/adding-a-task.md): a throwaway task, `probe`, written
into a copy of the package and run through the command line as a student would: `hpml-lab tasks`, `hpml-lab
run --profile tiny`, the claims check over its record and page, the GPU plan and the index. Nothing else in
the copy is edited, and nothing in it changes while it runs."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]

# the task's folder, as docs/adding-a-task.md describes it: TASK in __init__.py, what runs, what it concludes
INIT = '''"""Task probe: how many images two batches of the training set hold, and their mean pixel value.

    hpml-lab run probe --profile tiny        # notebooks/probe.ipynb
"""

from ...protocol import Task, later

TASK = Task(
    "probe",
    "probe.ipynb",
    "Probe: two batches of the training set",
    order=99,
    slurm="--no-train",
    tiny={"batch_size": 8, "max_batches": 2, "subset": 16},
    smoke={"batch_size": 8, "max_batches": 2, "subset": 16},
    gpu_runs=0,
    gpu_extra=(5.0, "two batches read, no training"),
    run=lambda cfg, settings=None: later("hpml_lab.studies.probe.study", "run")(cfg),
    conclude=later("hpml_lab.studies.probe.conclusion", "conclude"),
)
'''
STUDY = '''"""The probe's study: two batches of the lab's training loader, read and counted (no model).

    from hpml_lab.studies.probe import study
    result = study.run(cfg)      # {"images": ..., "mean_pixel": ...}, also in results/probe/<run>/probe.json
"""

from ...data import build_train_loader
from ...device import resolve_device
from ...io import atomic_write_json


def run(cfg) -> dict:
    loader = build_train_loader(cfg.replace(num_workers=0), resolve_device("cpu"))
    images, total = 0, 0.0
    for i, (x, _y) in enumerate(loader):
        if i == cfg.max_batches:
            break
        images, total = images + x.shape[0], total + float(x.mean()) * x.shape[0]
    result = {"images": images, "mean_pixel": total / images}
    cfg.run_dir().mkdir(parents=True, exist_ok=True)
    atomic_write_json(cfg.run_dir() / "probe.json", result)
    return result
'''
CONCLUSION = '''"""What the probe's report concludes: how many images it read, and their mean pixel value.

    from hpml_lab.studies.probe import conclusion
    answers, flags = conclusion.conclude(cfg, result)
"""

from ...answers import Answer, Number
from ...findings import say
from .._conclude import counted


def conclude(cfg, result):
    images = counted("images read", result["images"], source="counted while reading")
    mean = Number("mean pixel value", result["mean_pixel"], "", "measured", n=result["images"])
    head = say("The batches held {images}", images=images)
    details = [say("Their mean pixel value was {m}", m=mean)]
    return [Answer("Probe: what do two batches hold?", head, details)], []
'''
NOTEBOOK_CODE = """from hpml_lab.report import notebook as nb
from hpml_lab.studies.probe import conclusion, study

cfg = nb.config("probe", globals())
info = nb.header(cfg)
result = study.run(cfg)
answers, flags = conclusion.conclude(cfg, result)
nb.answer(cfg, info, answers, flags)"""


def _notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    template = nbformat.read(str(ROOT / "notebooks" / "c1_training.ipynb"), as_version=4)
    nb.metadata = template.metadata  # the project's kernel
    params = nbformat.v4.new_code_cell(
        "# Parameters (papermill overrides these; keep literals only)\n"
        'dataset = "cifar10"\ndata_root = "data"\nbatch_size = 8\nmax_batches = 2\nsubset = 16\nseed = 0'
    )
    params.metadata["tags"] = ["parameters"]
    title = nbformat.v4.new_markdown_cell("# Probe · two batches of the training set\n\nA throwaway task.")
    nb.cells = [title, params, nbformat.v4.new_code_cell(NOTEBOOK_CODE)]
    return nb


def _digest(tree: Path) -> dict[str, str]:
    return {
        str(p.relative_to(tree)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(tree.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.mark.slow  # a notebook rendered in a kernel of its own: about 10 s on 2 cores
def test_a_task_is_one_folder_and_one_notebook(tmp_path, cifar_root):
    home = tmp_path / "home"
    shutil.copytree(ROOT / "hpml_lab", home / "hpml_lab", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "notebooks", home / "notebooks")
    before = _digest(home)
    folder = home / "hpml_lab" / "studies" / "probe"
    folder.mkdir()
    for name, text in (("__init__.py", INIT), ("study.py", STUDY), ("conclusion.py", CONCLUSION)):
        (folder / name).write_text(text)
    nbformat.write(_notebook(), str(home / "notebooks" / "probe.ipynb"))
    added = set(_digest(home)) - set(before)
    assert added == {f"hpml_lab/studies/probe/{n}" for n in ("__init__.py", "study.py", "conclusion.py")} | {
        "notebooks/probe.ipynb"
    }

    # its conclusion is held to what every conclusion is (make test's branch coverage, the typed-numbers scan)
    coverage = pytest.importorskip("coverage.files")
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["coverage"]["run"]["include"]
    assert coverage.GlobMatcher(include).match(str(folder / "conclusion.py"))

    out = tmp_path / "out"
    env = {
        **os.environ,
        "PYTHONPATH": str(home),  # the copy before the installed checkout
        "HPML_LAB_HOME": str(home),
        "HPML_OUTPUT_DIR": str(out),
        "PYTHONDONTWRITEBYTECODE": "1",
    }

    def python(code: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", code, *args],
            cwd=home,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    cli = "import sys; from hpml_lab.report.cli import main; sys.exit(main(sys.argv[1:]))"
    listed = python(cli, "tasks")
    assert listed.returncode == 0, listed.stderr
    assert "probe" in listed.stdout and "probe.ipynb" in listed.stdout

    ran = python(cli, "run", "probe", "--profile", "tiny", "-p", f"data_root={cifar_root}")
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    reports = out / "reports"
    record = json.loads((reports / "probe.answer.json").read_text())
    assert record["task"] == "probe" and record["status"] == "answered"
    assert {n["name"] for n in record["answers"][0]["numbers"]} == {"images read", "mean pixel value"}
    assert list((out / "results" / "probe").glob("*/probe.json"))

    checked = python(
        "import json, sys; from pathlib import Path; from hpml_lab.report import claims\n"
        "reports = Path(sys.argv[1]); rec = json.loads((reports / 'probe.answer.json').read_text())\n"
        "page = (reports / 'probe.html').read_text()\n"
        "print(json.dumps(claims.check_record(rec) + claims.check_page(page, rec)))",
        str(reports),
    )
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout) == []  # every claim of its record and page holds

    planned = python("import json; from hpml_lab.report import gpuplan; print(json.dumps(gpuplan.plan()))")
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    placed = [u for c in plan["commands"] for u in c["units"]] + list(plan["left_out"])
    assert "probe" in placed and "c1" in placed  # placed in a command or named as left out, beside the lab's

    index = (reports / "index.html").read_text()
    assert "probe.html" in index and "Probe: two batches of the training set" in index
    assert _digest(home) == {**before, **{k: v for k, v in _digest(home).items() if k in added}}
