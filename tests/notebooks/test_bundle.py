"""The hand-in from reports already rendered: nothing re-run, missing reports named, the missing PDF
explained, trace links that still open when the reports folder is handed in elsewhere."""

import shutil
import time
from pathlib import Path

import nbformat
import pytest

from hpml_lab.findings import say
from hpml_lab.report import answer_box, bundle, cli, runner, tasks
from hpml_lab.studies import registry


EPOCH = answer_box.Number("epoch", 1.25, "s", "measured", n=3)


def _rendered(reports, tid, link=""):
    """What `hpml-lab run TID` leaves in reports/: the executed notebook and the answer record."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_markdown_cell(f"# {tid}\n\nA figure's trace: {link}")
    nb.cells.append(cell)
    (reports / "executed").mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(reports / "executed" / f"{tid}.ipynb"))
    answer_box.write(
        answer_box.Record(
            tid,
            tasks.TASKS[tid].title,
            [
                answer_box.Answer(
                    "What is the epoch time?",
                    say("the median epoch takes {e}.", e=EPOCH),
                )
            ],
        )
    )


@pytest.fixture
def reports(tmp_path, monkeypatch):
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path / "out"))
    return tmp_path / "out" / "reports"


def test_bundle_from_rendered_reports_runs_nothing_and_names_what_is_missing(reports, capsys, monkeypatch):
    _rendered(reports, "c1")
    _rendered(reports, "c3")
    monkeypatch.setattr(bundle, "chromium", lambda: None)
    t0 = time.perf_counter()
    assert cli.main(["report", "--bundle"]) == 0
    took = time.perf_counter() - t0
    out = capsys.readouterr().out
    missing = [t for t in runner.lab_order(tasks.TASKS) if t not in ("c1", "c3")]
    assert f"bundle: missing {', '.join(missing)}" in out
    assert bundle.NO_PDF in out and out.count("no PDF made") == 1
    page = (reports / "bundle.html").read_text()
    assert "<section class='task' id='c1'>" in page and "<section class='task' id='c3'>" in page
    assert (
        'the median epoch takes <span data-number="epoch">1.25 s</span>.' in page
        and f"Not in this bundle (not rendered or damaged): {missing[0]}" in page
    )
    assert not (reports.parent / "results").exists() and took < 30  # nothing ran: no results folder, seconds
    assert not (reports / "bundle.pdf").exists()
    assert 'href="bundle.html"' in (reports / "index.html").read_text()  # the index links the hand-in


def test_lab_order_and_the_index_says_what_was_reused(reports):
    # each TASK's order; an id no task has (c10) last
    assert runner.lab_order(["c1", "c2", "memory", "c3", "c10", "questions", "lab5"]) == [
        "c1",
        "c2",
        "c3",
        "questions",
        "memory",
        "lab5",
        "c10",
    ]
    for tid in ("memory", "c3", "questions", "c1"):
        _rendered(reports, tid)
    rec = answer_box.load("c3")
    answer_box.write(
        answer_box.Record(
            **{
                **{k: rec[k] for k in ("task", "title", "flags")},
                "answers": [answer_box.Answer("Which worker count?", say("a tie."))],
                "reused": 4,
            }
        )
    )
    outcomes = [
        runner.Outcome(
            t, tasks.TASKS[t].title, "ok", 1.0, "full", {}, "cpu", "cifar10 (synthetic)", f"{t}.html", ""
        )
        for t in ("memory", "c3", "questions", "c1")
    ]
    page = runner.write_index(outcomes).read_text()
    at = [page.index(f'href="{t}.html"') for t in ("c1", "c3", "questions", "memory")]
    assert at == sorted(at)  # the lab's order, not the order the tasks ran in
    assert "4 runs reused from an earlier run" in page and page.count("reused from an earlier run") == 1
    assert "not made yet: <code>hpml-lab report --bundle</code>" in page
    for o in outcomes:  # demonstrations (tiny): no hand-in is offered, made or not
        o.profile = "tiny"
    assert "Nothing here to hand in." in runner.write_index(outcomes).read_text()


def test_nothing_rendered_is_one_line_and_status_2(reports, capsys):
    assert cli.main(["report", "--bundle"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "nothing to bundle" in err


def test_trace_links_still_open_when_the_folder_is_handed_in(reports, tmp_path):
    (reports / "artifacts").mkdir(parents=True)
    (reports / "artifacts" / "c4-run1-trace.json.gz").write_bytes(b"\x1f\x8b")
    _rendered(reports, "c4", link="[c4-run1-trace.json.gz](artifacts/c4-run1-trace.json.gz)")
    bundle.write_bundle(reports, log=lambda *a: None)
    handed_in = shutil.copytree(reports, tmp_path / "handed-in")
    shutil.rmtree(reports)
    page = (handed_in / "bundle.html").read_text()
    assert 'href="artifacts/c4-run1-trace.json.gz"' in page
    assert (handed_in / "artifacts" / "c4-run1-trace.json.gz").is_file()
    assert str(tmp_path) not in page  # no absolute path of this machine


def test_figures_say_what_they_show_and_name_a_stand_in_model(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    from hpml_lab.report import notebook

    assert notebook.stand_in_label("resnet_tiny") == "model resnet_tiny, a stand-in for the lab's resnet18"
    assert notebook.stand_in_label("resnet18") == "" and notebook.stand_in_label("resnet18_adjusted") == ""
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4], label="sgd")
    ax.plot([1, 2], [3, 5], label="adam")
    ax.legend()
    ax.set(title="training loss", xlabel="step", ylabel="loss")
    assert (
        notebook.alt_text(fig, "c6_curves")
        == "Figure c6_curves: training loss: loss against step (sgd, adam)."
    )
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    monkeypatch.setitem(notebook._RUN, "model", "resnet_tiny")
    notebook.save_figure(fig, "c6_curves")
    assert fig._suptitle.get_text() == "(model resnet_tiny, a stand-in for the lab's resnet18)"
    assert Image.open(tmp_path / "figures" / "c6_curves.png").size[0] > 100
    notebook.save_figure(fig, "c6_curves")  # saved twice: named once
    assert fig._suptitle.get_text().count("stand-in") == 1
    plt.close(fig)


def test_reports_name_no_folder_of_the_machine(tmp_path, monkeypatch):
    import os
    from pathlib import Path

    from hpml_lab.config import project_root
    from hpml_lab.report import notebook

    assert notebook.shown_path(project_root() / "data") == "data"
    assert notebook.shown_path("data") == "data"
    assert notebook.shown_path(Path(os.path.expanduser("~")) / "lab" / "data").startswith("~/")
    monkeypatch.chdir(
        "/"
    )  # no checkout above: the project root is the current folder, here the filesystem's root
    monkeypatch.delenv("HPML_LAB_HOME", raising=False)
    monkeypatch.delenv("HPML_OUTPUT_DIR", raising=False)
    assert notebook.shown_path(tmp_path / "x" / "data") == ".../x/data"
    notice = notebook.data_notice(
        {"kind": "synthetic", "name": "cifar10", "root": str(tmp_path / "x" / "data")}
    )
    assert str(tmp_path) not in notice
    assert "Timings reflect the real pipeline; losses" in notice
    # memory times steps on batches already loaded (grade23: 'reflect the real pipeline' on its page)
    steps = notebook.data_notice({"kind": "synthetic", "name": "cifar10", "root": "d"}, fixed_batch=True)
    assert "pipeline" not in steps and "steps on batches already loaded, which the data's content" in steps
    assert "Timings" not in notebook.data_notice({"kind": "synthetic", "name": "cifar10", "root": "d"}, False)
    assert registry()["memory"].fixed_batch and not registry()["c2"].fixed_batch


def test_headers_and_values_for_a_reader():
    assert answer_box.readable("per_gpu_batch") == "per-GPU batch"
    assert answer_box.readable("epoch_s_excl_io") == "epoch excl. I/O (s)"
    assert (
        answer_box.readable("num_workers") == "workers" and answer_box.readable("batch_size") == "batch size"
    )
    assert answer_box.readable("data_pct") == "data (%)" and answer_box.readable("epochs") == "epochs"
    assert answer_box.percent(0.1422) == "14.2%" and answer_box.percent(14.22, of_one=False) == "14.2%"


def test_training_logs_are_folded_away():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("train()")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="".join(f"step {i}\n" for i in range(40))),
        nbformat.v4.new_output("stream", name="stdout", text="done\n"),  # the same log, printed on
    ]
    result = nbformat.v4.new_code_cell("print(best)")
    result.outputs = [nbformat.v4.new_output("stream", name="stdout", text="best: 2 workers\n")]
    nb.cells += [cell, result]
    folded = bundle.fold_logs(nb).cells
    out = folded[0].outputs
    assert len(out) == 1 and out[0]["output_type"] == "display_data"
    assert out[0]["data"]["text/html"].startswith(
        "<details data-log><summary>training log (41 lines)</summary><pre>step 0"
    )
    assert "done" in out[0]["data"]["text/html"]  # a log ends in its 'done', inside the fold
    assert folded[1].outputs[0]["text"] == "best: 2 workers\n"  # one line is a result, not a log


def test_one_settings_table_per_page():
    rec = answer_box.Record(
        "c5",
        "C5",
        [answer_box.Answer("q", say("a tie."))],
        flags=[{"kind": "settings differ", "message": "settings differ from the lab's: batch_size 32"}],
        ran_vs_lab=[{"setting": "batch_size", "ran": "32", "lab": "128"}],
    )
    box = answer_box.box_html(rec.as_dict())
    assert (
        "<table" not in box
        and "<b>settings differ</b>: settings differ from the lab&#x27;s: batch_size 32" in box
    )


def test_scrub_paths_takes_this_machines_folders_out(tmp_path, monkeypatch):
    import os

    from hpml_lab.config import project_root

    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    text = (
        f"File {project_root() / 'hpml_lab' / 'training.py'}, line 3; {tmp_path / 'results' / 'c1'}; "
        f"{os.path.expanduser('~')}/lab/x.py"
    )
    assert answer_box.scrub_paths(text) == "File hpml_lab/training.py, line 3; results/c1; ~/lab/x.py"
    import tempfile

    tmp = Path(tempfile.gettempdir()).resolve()
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(project_root() / "out-elsewhere"))
    assert answer_box.scrub_paths(f"data_root={tmp / 'cifar0'}") == "data_root=$TMPDIR/cifar0"
    figure = f"data:image/png;base64,AAAA{tmp}/BBBB"  # a figure's bytes are left whole
    assert answer_box.scrub_paths(figure) == figure
