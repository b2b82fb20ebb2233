"""Notebook hygiene, and each task's notebook executed once through papermill with tiny parameters."""

import json
from pathlib import Path

import nbformat
import pytest

from hpml_lab.report import answer_box, claims, runner, tasks

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_every_task_has_a_notebook_and_every_notebook_a_task():
    assert sorted(p.name for p in NOTEBOOKS) == sorted(t.notebook for t in tasks.TASKS.values())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_hygiene(path):
    nb = nbformat.read(str(path), as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged parameters"
    for line in tagged[0].source.splitlines():  # literals only: name = literal, or comments
        if line.strip() and not line.lstrip().startswith("#"):
            name, value = (x.strip() for x in line.split("=", 1))
            __import__("ast").literal_eval(value)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), "stored without outputs"
    assert nb.metadata.kernelspec.name == runner.KERNEL and nb.metadata.language_info.name == "python"
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")


# Tasks whose claims the check may still find wrong at the tiny profile, with the text each problem holds.
# Empty: every report's claims hold (report/claims.py). Strict both ways: any other problem fails, and so does
# an entry whose claims now hold.
PENDING_CLAIMS: dict[str, tuple[str, ...]] = {}


@pytest.fixture
def outdir(tmp_path, monkeypatch):
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("task_id", list(tasks.TASKS))
def test_notebook_executes_and_renders(task_id, rendered):
    """The task's run at the tiny profile (conftest's `rendered`, made once per test run): its page, figures,
    executed notebook and answer record."""
    run = rendered(task_id)
    dataset = run.params.get("dataset", "cifar10")
    outdir = run.out
    assert run.outcome["status"] == "ok", run.outcome["error"]
    # a page says what its numbers were computed on: the synthetic set, or (the questions) no dataset at all
    reads = tasks.TASKS[task_id].reads_data
    assert run.outcome["profile"] == "tiny"
    assert run.outcome["dataset"] == (f"{dataset} (synthetic)" if reads else "none read")
    html = (outdir / "reports" / f"{task_id}.html").read_text()
    assert ("Synthetic data" if reads else "No dataset read") in html and "data:image/png;base64" in html
    assert reads or "computed on a synthetic" not in html
    assert "<table" in html and "torchvision" in html  # a table and the environment section
    assert "nb.config(" not in html  # code hidden
    assert (outdir / "reports" / "executed" / f"{task_id}.ipynb").is_file()
    assert list((outdir / "figures").glob(f"{task_id}_*.png"))
    record = json.loads((outdir / "reports" / "executed" / f"{task_id}.json").read_text())
    assert record["dataset"] == (f"{dataset} (synthetic)" if reads else "none read")
    # the answer record: statuses known, every number tagged, the box first on the page with a link back
    rec = json.loads((outdir / "reports" / f"{task_id}.answer.json").read_text())
    assert rec["task"] == task_id and rec["status"] in answer_box.STATUSES and rec["answers"]
    assert rec["synthetic_data"] is reads  # the index and the bundle name the reports computed on it
    assert rec["profile"] == "tiny" and rec["demonstration"] is True  # as the page's top says, in the record
    for a in rec["answers"]:
        assert a["text"].strip() and "\n" not in a["text"].strip()
        assert all(n["provenance"] in answer_box.PROVENANCE for n in a["numbers"])
    problems = claims.check_record(rec)  # every sentence holds against its own record (report/claims.py)
    pending = PENDING_CLAIMS.get(task_id, ())
    assert [p for p in problems if not any(k in p for k in pending)] == []
    assert not pending or problems, f"{task_id}'s claims hold now: remove it from PENDING_CLAIMS"
    # the whole page against its record: flags, tables, captions, figure labels and the sentences of its
    # body (report/claims.py check_page): every number on it is one the record holds
    assert claims.check_page(html, rec) == []
    body = html[html.index("<body") :]  # (the page style holds images of its own)
    assert body.index("hpml-answer") < body.index("data:image/png;base64") and "index.html" in body
    assert f"<title>hpml-lab {tasks.TASKS[task_id].title}" in html
    # its top, above the introduction: machine, data and profile, and (tiny) that it is a demonstration
    assert "<b>profile:</b> tiny (a demonstration)" in html
    assert ("<b>data:</b> synthetic " if reads else "<b>data:</b> none read") in html
    assert (
        body.index("hpml-context") < body.index("A demonstration, not an answer") < body.index("hpml-answer")
    )
    # the kernel's environment was the task's alone: the caller's is as it was after the run
    assert run.env_kept


@pytest.mark.slow
@pytest.mark.parametrize("task_id", list(tasks.TASKS))
def test_every_headline_is_read_in_one_breath(task_id, rendered):
    """Each answer's headline is the verdict in words first: at most claims.HEADLINE_WORDS words and
    claims.HEADLINE_NUMBERS number; its statistics are in the details (the shared tiny render)."""
    run = rendered(task_id)
    assert run.outcome["status"] == "ok", run.outcome["error"]
    rec = json.loads((run.reports / f"{task_id}.answer.json").read_text())
    numbers = claims.record_numbers(rec)
    assert [p for a in rec["answers"] for p in claims.headline_problems(a, numbers)] == []


@pytest.mark.slow
def test_failed_notebook_is_kept_and_shown_failed(cifar_root, outdir, tmp_path, monkeypatch):
    # Bad parameters are refused before a kernel starts (guards.preflight), so the failure is made inside the
    # kernel: a copy of c1 with a cell that raises right after its parameters (papermill injects the run's
    # parameters after the tagged cell, so they run first; the training that would follow is not needed).
    nb = nbformat.read(str(runner.notebooks_dir() / "c1_training.ipynb"), as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell("raise RuntimeError('the notebook fails here')"))
    folder = tmp_path / "notebooks"
    folder.mkdir()
    nbformat.write(nb, str(folder / "c1_training.ipynb"))
    monkeypatch.setattr(runner, "notebooks_dir", lambda: folder)
    outcome = runner.run_task("c1", "tiny", cli_params={"data_root": str(cifar_root)}, log=lambda *a: None)
    assert outcome.status == "failed" and "the notebook fails here" in outcome.error
    executed = nbformat.read(str(outdir / "reports" / "executed" / "c1.ipynb"), as_version=4)
    assert any(o.get("output_type") == "error" for c in executed.cells for o in c.get("outputs", []))
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and injected[0].execution_count  # the run's parameters ran before the failing cell
    assert (outdir / "reports" / "c1.html").is_file()
    index = runner.write_index(runner.load_outcomes()).read_text()
    assert "failed" in index and "c1.html" in index


@pytest.mark.slow
def test_bundle_holds_every_task_answer_first(rendered, outdir):
    """The hand-in made from every task's rendered report (conftest's `rendered`, copied: it is shared)."""
    import shutil

    from hpml_lab.report import bundle, pages

    runs = [rendered(t) for t in runner.lab_order(tasks.TASKS)]
    for run in runs:
        assert run.outcome["status"] == "ok", run.outcome["error"]
        shutil.copytree(run.reports, outdir / "reports", dirs_exist_ok=True)
    page = bundle.write_bundle(outdir / "reports", log=lambda *a: None).read_text()
    for run in runs:
        rec = json.loads((outdir / "reports" / f"{run.task}.answer.json").read_text())
        first, _ = pages.headline(rec["answers"][0], "html")  # the headline as the box shows it
        section = f"<section class='task' id='{run.task}'>"
        assert first and page.count(section) == 1 and page.index(first) < page.index(section)
    assert page.count("data:image/png;base64") >= len(runs) and "Not in this bundle" not in page
    pdf = outdir / "reports" / "bundle.pdf"
    if bundle.chromium():  # the same, printed by Chromium (CI installs it): a real PDF of several pages
        data = pdf.read_bytes()
        assert data[:5] == b"%PDF-" and data.count(b"/Type /Page") - data.count(b"/Type /Pages") >= 2
        assert not list((outdir / "reports").glob(".bundle.pdf.*"))  # no partial file left behind
    else:
        assert not pdf.exists()


@pytest.mark.slow
def test_plain_papermill_with_a_misspelt_parameter_is_refused(cifar_root, tmp_path):
    import papermill
    from papermill.exceptions import PapermillExecutionError

    with pytest.raises(PapermillExecutionError, match="unknown parameter 'batchsize' for task c1"):
        papermill.execute_notebook(
            str(runner.notebooks_dir() / "c1_training.ipynb"),
            str(tmp_path / "out.ipynb"),
            parameters={"batchsize": 64, "data_root": str(cifar_root)},
            kernel_name=runner.KERNEL,
            progress_bar=False,
            cwd=str(tmp_path),
        )


def test_injected_names_come_only_from_papermills_cell():
    from hpml_lab.report import notebook as nb

    hist = [
        "",
        "# Parameters (papermill overrides these; keep literals only)\nepochs = 5\n",
        "# Parameters\nbatchsize = 64\nepochs = 2\n",
    ]
    assert nb.injected_names({"In": hist}) == ["batchsize", "epochs"]
    assert nb.injected_names({"In": hist[:2]}) == [] and nb.injected_names({}) == []


@pytest.mark.slow
def test_plain_papermill_gets_log_lines_not_widgets_or_warnings(cifar_root, tmp_path):
    """`papermill notebooks/c1_training.ipynb out.ipynb -k hpml-lab ...` started by hand (not by hpml-lab, so
    no HPML_PROGRESS): the kernel sees papermill as its parent and prints log lines; no widget, no
    TqdmWarning."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("HPML_")}
    out = tmp_path / "out.ipynb"
    r = subprocess.run(
        [
            str(Path(sys.executable).parent / "papermill"),
            str(runner.notebooks_dir() / "c1_training.ipynb"),
            str(out),
            "-k",
            runner.KERNEL,
            "--cwd",
            str(tmp_path),
            "-p",
            "data_root",
            str(cifar_root),
            "-p",
            "model",
            "resnet_tiny",
            "-p",
            "epochs",
            "1",
            "-p",
            "max_batches",
            "2",
            "-p",
            "batch_size",
            "8",
            "-p",
            "num_workers",
            "0",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    nb = nbformat.read(str(out), as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "epoch 1 done" in text
    assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)
    assert "TqdmWarning" not in text + r.stderr and "IProgress" not in text + r.stderr
