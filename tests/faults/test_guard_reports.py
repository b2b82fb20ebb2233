"""What protects the reports folder (issue 30): the index and the bundle read every file under reports/ as
possibly damaged or planted; a value never becomes live HTML; a link is never written through; a killed run's
set-aside folder never deletes a report it did not set aside; an external tool that hangs is stopped."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from hpml_lab.findings import say
from hpml_lab.report import answer_box, bundle, cli, guards, runner, tasks


def _rendered(reports: Path, tid: str) -> None:
    """What `hpml-lab run TID` leaves: executed notebook, answer record, page and outcome."""
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell(f"# {tid}\n\nits report"))
    (reports / "executed").mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(reports / "executed" / f"{tid}.ipynb"))
    answer_box.write(
        answer_box.Record(
            tid,
            tasks.TASKS[tid].title,
            [
                answer_box.Answer(
                    "What is the epoch time?",
                    say(
                        "the median epoch takes {e}.",
                        e=answer_box.Number("epoch", 1.25, "s", "measured", n=3),
                    ),
                )
            ],
        )
    )
    (reports / f"{tid}.html").write_text(f"<p>{tid} page</p>")
    (reports / "executed" / f"{tid}.json").write_text(json.dumps(_outcome(tid)))


def _outcome(tid: str, **over) -> dict:
    return {
        "task": tid,
        "title": tasks.TASKS[tid].title,
        "status": "ok",
        "seconds": 1.5,
        "profile": "tiny",
        "parameters": {},
        "hardware": "cpu",
        "dataset": "cifar10 (synthetic)",
        "html": f"{tid}.html",
        "executed": f"reports/executed/{tid}.ipynb",
        "error": "",
        "finished_at": "2026-01-01T00:00:00+00:00",
        **over,
    }


def _files(reports: Path, tid: str) -> dict:
    return {p: p.read_bytes() for p in guards._report_files(tid)}


@pytest.fixture
def out(tmp_path, monkeypatch):
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path / "out"))
    return tmp_path / "out"


@pytest.fixture
def reports(tmp_path, monkeypatch):
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path / "out"))
    monkeypatch.setattr(bundle, "chromium", lambda: None)
    return tmp_path / "out" / "reports"


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# ---- lost: set-aside folders that are not what a killed rerun left
def test_an_empty_planted_set_aside_folder_deletes_nothing(reports, capsys):
    """Issue 30: an empty reports/.c1.previous-<ended pid> made `report --bundle` delete c1's four files."""
    _rendered(reports, "c1")
    before = _files(reports, "c1")
    time.sleep(0.02)
    (reports / f".c1.previous-{_dead_pid()}").mkdir()
    assert cli.main(["report", "--bundle"]) == 0
    assert _files(reports, "c1") == before
    assert "<section class='task' id='c1'>" in (reports / "bundle.html").read_text()


def test_a_killed_concurrent_run_never_deletes_the_survivors_finished_report(reports):
    """Issue 30: two runs of c1 at once, the second killed -9 while its notebook ran: the first's own index
    update deleted all four c1 files while putting back the killed run's empty set-aside folder."""
    (reports / f".c1.previous-{_dead_pid()}").mkdir(parents=True)  # the killed run's (nothing to set aside)
    time.sleep(0.02)
    _rendered(reports, "c1")  # the survivor ends: its report is whole and newer than that folder
    before = _files(reports, "c1")
    runner.write_index(runner.load_outcomes())
    assert _files(reports, "c1") == before
    assert not list(reports.glob(".c1.previous-*"))


def test_a_second_run_of_the_same_task_in_one_reports_folder_is_refused(reports, cifar_root, capsys):
    """The cause of the case above: two runs of one task setting each other's report files aside. The second
    is refused in one line while the first holds the task's lock (an flock: it ends with its process)."""
    _rendered(reports, "c1")
    before = _files(reports, "c1")
    with guards.task_lock("c1"):
        assert cli.main(["run", "c1", "--profile", "tiny", "-p", f"data_root={cifar_root}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "task c1 is already running" in err, err
    assert _files(reports, "c1") == before
    with guards.task_lock("c1"):  # released: the next run takes it
        pass


# ---- lost: never written through a planted link
def test_index_html_as_a_link_is_refused_and_what_it_names_is_untouched(reports, tmp_path, capsys):
    _rendered(reports, "c1")
    victim = tmp_path / "victim.html"
    victim.write_text("someone's file")
    (reports / "index.html").symlink_to(victim)
    assert cli.main(["report", "--bundle"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{reports / 'index.html'} is a link" in err, err
    assert victim.read_text() == "someone's file" and (reports / "index.html").is_symlink()


def test_an_atomic_write_refuses_a_link_unless_the_user_named_the_file(tmp_path):
    from hpml_lab.io import PlantedFile, atomic_write_text

    (tmp_path / "real.txt").write_text("old")
    (tmp_path / "link.txt").symlink_to(tmp_path / "real.txt")
    with pytest.raises(PlantedFile, match="is a link"):
        atomic_write_text(tmp_path / "link.txt", "new")
    assert (tmp_path / "real.txt").read_text() == "old"
    atomic_write_text(tmp_path / "link.txt", "new", follow_links=True)  # -o, --save-model: the user's link
    assert (tmp_path / "link.txt").is_symlink() and (tmp_path / "real.txt").read_text() == "new"


# ---- live HTML from values
HOSTILE = "<img src=x onerror=alert(1)>"


def test_index_escapes_every_value_and_links_only_pages_inside_reports(reports, capsys):
    """Issue 30: a planted outcome's profile appeared raw in index.html, and an html of javascript:... became
    a clickable link."""
    _rendered(reports, "c1")
    _rendered(reports, "c3")
    (reports / "executed" / "c1.json").write_text(
        json.dumps(_outcome("c1", profile=HOSTILE, html="javascript:alert(1)", hardware=HOSTILE))
    )
    (reports / "executed" / "c3.json").write_text(json.dumps(_outcome("c3", html="../../etc/x.html")))
    page = runner.write_index(runner.load_outcomes()).read_text()
    assert HOSTILE not in page and "&lt;img src=x" in page
    assert "javascript:" not in page and "../../etc" not in page
    assert page.count("<a href=") == page.count('<a href="bundle.html"') + page.count('<a href="c')


def test_an_answer_status_is_escaped_or_refused_on_the_index(reports, capsys):
    _rendered(reports, "c1")
    rec = json.loads(answer_box.path_for("c1").read_text())
    answer_box.path_for("c1").write_text(json.dumps({**rec, "status": HOSTILE}))
    page = runner.write_index(runner.load_outcomes()).read_text()
    assert HOSTILE not in page
    err = capsys.readouterr().err
    assert "c1.answer.json has a status that is not one of" in err and err.count("\n") == 1, err


def test_the_environment_table_escapes_a_hostile_data_folder_name():
    """Issue 30: a data folder named '<img src=x onerror=alert(1)>' landed unescaped in the environment
    table's config row (a pandas Styler) of c1, c2, c6, c7 and in the bundle."""
    from hpml_lab.envinfo import environment
    from hpml_lab.report import notebook

    meta = {
        "environment": environment(),
        "device": "cpu",
        "dataset": {"name": "cifar10", "kind": HOSTILE},
        "seed": 0,
        "started_at": "now",
        "run_id": HOSTILE,
        "machine": None,
        "config": {"data_root": f"/tmp/{HOSTILE}", "epochs": 1},
    }
    page = notebook.environment_table(meta).to_html()
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_a_report_table_escapes_text_cells():
    import pandas as pd

    from hpml_lab.report import notebook

    page = notebook.table(pd.DataFrame({"setting": [HOSTILE], "x": [1.5]})).to_html()
    assert "<img" not in page and "&lt;img" in page


# ---- damaged report files: one line naming the file, that report bundled as missing, the others still in
def _deep(p: Path) -> None:
    p.write_text("[" * 100_000 + "]" * 100_000)


def _huge(p: Path) -> None:
    with open(p, "wb") as f:  # sparse: 300 MB that take no disk
        f.truncate(300 << 20)


DAMAGE = {
    "record without answers": ("answer", lambda p: p.write_text('{"status": "answered", "summary": "x"}')),
    "record a bare string": ("answer", lambda p: p.write_text('"answered"')),
    "record with an unknown status": ("answer", None),
    "record 100,000 arrays deep": ("answer", _deep),
    "record of 300 MB": ("answer", _huge),
    "record a FIFO": ("answer", lambda p: (p.unlink(), os.mkfifo(p))),
    "notebook cut short": ("notebook", lambda p: p.write_bytes(p.read_bytes()[:40])),
    "notebook {}": ("notebook", lambda p: p.write_text("{}")),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_report_file_is_one_line_and_bundled_as_missing(case, reports, capsys):
    _rendered(reports, "c1")
    _rendered(reports, "c3")
    kind, damage = DAMAGE[case]
    p = answer_box.path_for("c1") if kind == "answer" else reports / "executed" / "c1.ipynb"
    if damage is None:
        rec = json.loads(p.read_text())
        rec["answers"][0]["status"] = "great"
        p.write_text(json.dumps(rec))
    else:
        damage(p)
    t0 = time.monotonic()
    assert cli.main(["report", "--bundle"]) == 0
    assert time.monotonic() - t0 < 60
    out, err = capsys.readouterr()
    said = [
        line for line in out.splitlines() + err.splitlines() if "c1.answer.json" in line or "c1.ipynb" in line
    ]
    assert said and "bundled as missing" in said[0] and "Traceback" not in out + err, out + err
    page = (reports / "bundle.html").read_text()
    assert "<section class='task' id='c3'>" in page and "<section class='task' id='c1'>" not in page
    assert "c1" in page.split("Not in this bundle")[1][:200]


@pytest.mark.parametrize(
    "outcome",
    [{"seconds": "x"}, {"status": "weird"}, {"parameters": "p"}, "bare string", None],
    ids=["seconds x", "unknown status", "parameters a string", "bare string", "deep"],
)
def test_a_damaged_outcome_is_one_line_and_the_index_still_made(outcome, reports, capsys):
    _rendered(reports, "c1")
    _rendered(reports, "c3")
    p = reports / "executed" / "c1.json"
    if outcome is None:
        _deep(p)
    elif isinstance(outcome, str):
        p.write_text(json.dumps(outcome))
    else:
        p.write_text(json.dumps(_outcome("c1", **outcome)))
    page = runner.write_index(runner.load_outcomes()).read_text()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "warning: ignoring" in err and "c1.json" in err, err
    assert 'href="c3.html"' in page and 'href="c1.html"' not in page


# ---- hangs: an external tool gets a time limit and a clear line
def test_a_pdf_print_that_hangs_is_stopped_with_one_line(reports, tmp_path, monkeypatch, capsys):
    """Issue 30: the bundle's Chromium print blocked 311 s on an injected alert() and then made no PDF."""
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\nexec sleep 60\n")
    fake.chmod(0o755)
    monkeypatch.setattr(bundle, "chromium", lambda: str(fake))
    monkeypatch.setattr(bundle, "PDF_SECONDS", 2)
    page = reports / "bundle.html"
    reports.mkdir(parents=True)
    page.write_text("<p>x</p>")
    t0 = time.monotonic()
    assert bundle.to_pdf(page) is None
    assert time.monotonic() - t0 < 20
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "within 2 s" in out, out
    assert not page.with_suffix(".pdf").exists() and not list(reports.glob(".*.part"))


# ==== moved from test_hostile_more.py (issue 22's second pass)
# ---- a full disk mid-notebook: no cut-short executed notebook, no broken report, the task ends failed
def _limited(limit):
    """For a subprocess: files can grow to `limit` bytes, then a write fails with EFBIG (RLIMIT_FSIZE, SIGXFSZ
    ignored). This is the real write path failing as on a full disk (ENOSPC) without root or a small mount."""
    import resource
    import signal

    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


# The environment a process under _limited needs: no bytecode written. Python writes a module's .pyc with one
# unchecked write(), so at the limit it put a cut-short file in place (30,000 bytes of executing.py's, for
# IPython's tracebacks), and every later process that imported the module failed with "marshal data too
# short".
NO_BYTECODE = {"PYTHONDONTWRITEBYTECODE": "1"}


def _run_c1_under_a_size_limit(data_root, env) -> subprocess.CompletedProcess:
    """`hpml-lab run c1 --profile tiny` in a process whose files may grow to 30,000 bytes: its notebook is
    cut short as on a full disk."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "hpml_lab.report.cli",
            "run",
            "c1",
            "--profile",
            "tiny",
            "-p",
            f"data_root={data_root}",
        ],
        preexec_fn=_limited(30_000),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.mark.slow
def test_a_full_disk_while_the_notebook_is_written_keeps_nothing_cut_short(cifar_root, out):

    env = {
        **os.environ,
        **NO_BYTECODE,
        "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    }
    r = _run_c1_under_a_size_limit(cifar_root, env)
    assert r.returncode == 1, r.stderr[-2000:]
    executed = out / "reports" / "executed"
    rec = json.loads((executed / "c1.json").read_text())
    assert (
        rec["status"] == "failed"
        and f"executed notebook {executed / 'c1.ipynb'} could not be written" in rec["error"]
    )
    # no cut-short notebook, no hidden partial (the task's lock file stays: an flock ends with its process)
    assert sorted(p.name for p in executed.iterdir()) == [".c1.lock", "c1.json"]
    assert not (out / "reports" / "c1.html").exists()
    metas = [json.loads(p.read_text()) for p in (out / "results").rglob("meta.json")]
    assert metas and all(m["status"] != "running" for m in metas)


@pytest.mark.slow
def test_a_full_disk_during_a_rerun_keeps_the_complete_report(rendered, tmp_path):
    """Issue 43: a full disk while `hpml-lab run c1` reran deleted the complete report it was to replace
    (page, answer record, executed notebook and the set-aside copy). The first run is the suite's shared tiny
    render of c1, copied; the rerun's files may grow to 30,000 bytes, so its notebook is cut short."""
    import shutil

    first = rendered("c1")
    assert first.outcome["status"] == "ok", first.outcome["error"]
    shutil.copytree(first.out, tmp_path / "out", symlinks=True)
    reports = tmp_path / "out" / "reports"
    names = ["c1.html", "c1.answer.json", "executed/c1.ipynb", "executed/c1.json"]
    before = {reports / n: (reports / n).read_bytes() for n in names}
    env = {**os.environ, **NO_BYTECODE, "HPML_OUTPUT_DIR": str(tmp_path / "out"), "TMPDIR": str(tmp_path)}
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = _run_c1_under_a_size_limit(first.params["data_root"], env)
    assert r.returncode == 1, r.stderr[-2000:]
    assert "could not be written whole" in r.stdout + r.stderr and "is kept" in r.stdout + r.stderr
    assert {p: p.read_bytes() for p in before} == before
    assert json.loads((reports / "executed" / "c1.json").read_text())["status"] == "ok"
    assert not [p for p in reports.rglob(".c1.*") if p.name != ".c1.lock"]


def test_a_cut_short_notebook_is_not_landed(tmp_path):
    from hpml_lab.report import guards

    partial, executed = tmp_path / ".c1.running-1.ipynb", tmp_path / "c1.ipynb"
    executed.write_text("previous")
    partial.write_text('{\n "cells": [\n  {\n   "cell_type": "m')
    assert "could not be written whole" in guards.whole_notebook(partial, executed)
    assert not partial.exists() and executed.read_text() == "previous"
    assert guards.whole_notebook(partial, executed) == ""  # nothing written at all: nothing to land


def test_a_killed_runs_partial_notebook_is_removed(out):
    import subprocess

    from hpml_lab.report import guards

    dead = subprocess.Popen(["true"])
    dead.wait()
    folder = out / "reports" / "executed"
    folder.mkdir(parents=True)
    (folder / f".c1.running-{dead.pid}.ipynb").write_text("{")
    (folder / f".c2.running-{os.getpid()}.ipynb").write_text("{")  # a live run's: kept
    guards.recover_reports()
    assert [p.name for p in folder.iterdir()] == [f".c2.running-{os.getpid()}.ipynb"]


def test_an_outcome_that_cannot_be_written_puts_the_previous_report_back(out, monkeypatch):
    import errno

    from hpml_lab import io
    from hpml_lab.config import ConfigError
    from hpml_lab.report import guards

    reports = out / "reports"
    (reports / "executed").mkdir(parents=True)
    (reports / "c1.html").write_text("old page")
    (reports / "executed" / "c1.json").write_text('{"old": 1}')
    aside = guards.set_aside("c1")
    (reports / "c1.html").write_text("new page")

    def full(path, obj):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(io, "atomic_write_json", full)
    with pytest.raises(ConfigError) as err:
        guards.write_outcome(reports / "executed" / "c1.json", {"task": "c1", "status": "ok"}, aside)
    assert "No space left on device" in str(err.value) and str(reports / "executed" / "c1.json") in str(
        err.value
    )
    assert (reports / "c1.html").read_text() == "old page" and not aside.exists()
    assert (reports / "executed" / "c1.json").read_text() == '{"old": 1}'


# ==== issue 43: a rerun never costs the report it replaces
def _fake_run(monkeypatch, ends: str):
    """papermill.execute_notebook replaced (no kernel): the notebook's run `ends` 'ok' (a whole notebook and
    its answer record, written where a kernel of the runner's writes them), 'failed' (a cell's error after a
    whole notebook), 'cut' (the disk filled while the notebook was written: a cut-short file) or 'killed' (the
    process dies, as with -9, while its notebook runs: nothing after it runs)."""
    import nbformat
    import papermill

    def execute(src, dst, **kw):
        if ends == "cut":
            Path(dst).write_text('{\n "cells": [\n  {\n   "cell_type": "m')
            raise OSError(28, "No space left on device", dst)
        nb = nbformat.v4.new_notebook()
        nb.cells.append(nbformat.v4.new_markdown_cell(f"# c1\n\nthis run ({ends})"))
        nbformat.write(nb, dst)
        if ends == "killed":
            raise SystemExit("killed")  # stands in for -9: no outcome, no page, nothing moved
        if ends == "ok":
            answer_box.write(
                answer_box.Record(
                    "c1",
                    tasks.TASKS["c1"].title,
                    [
                        answer_box.Answer(
                            "What is the epoch time?",
                            say(
                                "the median epoch takes {e}.",
                                e=answer_box.Number("epoch", 2.5, "s", "measured", n=3),
                            ),
                        )
                    ],
                )
            )
        if ends == "failed":
            raise RuntimeError("a cell failed")
        if ends == "interrupted":  # Ctrl-C, or SIGTERM at a job's time limit, after the notebook was written
            raise KeyboardInterrupt

    monkeypatch.setattr(papermill, "execute_notebook", execute)


@pytest.mark.parametrize("ends", ["failed", "interrupted", "cut", "killed"])
def test_a_rerun_that_does_not_end_ok_leaves_the_complete_report_in_place(
    reports, cifar_root, monkeypatch, ends
):
    """The issue's cases: a full disk during a rerun lost c1.html, c1.answer.json, executed/c1.ipynb and the
    set-aside copy; a killed rerun left the report only in .c1.previous-<pid> (the index linked a missing page
    and the bundle found nothing). Now the report in place is never moved until the new one is complete; an
    interrupted rerun (Ctrl-C, a job's time limit) keeps it too."""
    _rendered(reports, "c1")
    before = _files(reports, "c1")
    _fake_run(monkeypatch, ends)
    params = {"data_root": str(cifar_root)}
    if ends == "killed":
        with pytest.raises(SystemExit):
            runner.run_task("c1", "tiny", cli_params=params, log=lambda m: None)
        dead, me = str(_dead_pid()), str(os.getpid())
        for p in list(
            reports.rglob(f".c1.running-{me}*")
        ):  # what it staged, as a process that is gone left it
            p.rename(p.with_name(p.name.replace(me, dead)))
        assert list(reports.rglob(f".c1.running-{dead}*"))
    elif ends == "interrupted":
        with pytest.raises(KeyboardInterrupt):
            runner.run_task("c1", "tiny", cli_params=params, log=lambda m: None)
    else:
        o = runner.run_task("c1", "tiny", cli_params=params, log=lambda m: None)
        assert o.status == "failed"
    assert _files(reports, "c1") == before
    runner.write_index(runner.load_outcomes())
    assert '<a href="c1.html">c1</a>' in (reports / "index.html").read_text()
    assert (
        cli.main(["report", "--bundle"]) == 0
        and 'the median epoch takes <span data-number="epoch">1.25 s</span>'
        in (reports / "bundle.html").read_text()
    )
    rerun = guards.rerun_files("c1")
    assert rerun["page"].is_file() == rerun["notebook"].is_file() == (ends in ("failed", "interrupted"))
    if ends == "killed":  # what the killed run staged is gone once a command has read the reports
        assert not [p for p in reports.rglob(".c1.running-*")]


def test_a_rerun_that_ends_ok_replaces_the_report_as_one_set(reports, cifar_root, monkeypatch):
    _rendered(reports, "c1")
    before = _files(reports, "c1")
    _fake_run(monkeypatch, "failed")
    runner.run_task("c1", "tiny", cli_params={"data_root": str(cifar_root)}, log=lambda m: None)
    assert guards.rerun_files("c1")["page"].is_file()
    _fake_run(monkeypatch, "ok")
    o = runner.run_task("c1", "tiny", cli_params={"data_root": str(cifar_root)}, log=lambda m: None)
    assert o.status == "ok" and o.html == "c1.html"
    after = _files(reports, "c1")
    assert all(after[p] != before[p] for p in after)  # all four replaced
    assert "2.5 s" in (reports / "c1.html").read_text() and "1.25 s" not in (reports / "c1.html").read_text()
    assert not any(p.exists() for p in guards.rerun_files("c1").values())  # of the report it replaced
    assert not [p for p in reports.rglob("*") if p.name.startswith(".c1.")] or [
        p.name for p in reports.rglob("*") if p.name.startswith(".c1.")
    ] == [".c1.lock"]


def test_a_first_run_that_fails_shows_its_failure(reports, cifar_root, monkeypatch):
    """No complete report to keep: the failed run's own report is the one in place, as before."""
    _fake_run(monkeypatch, "failed")
    o = runner.run_task("c1", "tiny", cli_params={"data_root": str(cifar_root)}, log=lambda m: None)
    assert o.status == "failed" and (reports / "c1.html").is_file()
    assert json.loads((reports / "executed" / "c1.json").read_text())["status"] == "failed"
    assert not any(p.exists() for p in guards.rerun_files("c1").values())


def test_a_run_killed_while_it_replaced_the_report_is_put_back_by_the_bundle(reports):
    """Killed between setting the report aside and writing the new outcome: the next command that reads the
    reports, `report --bundle` as well as a run or the index, puts the previous report back whole."""
    _rendered(reports, "c1")
    before = _files(reports, "c1")
    dead = _dead_pid()
    aside = reports / f".c1.previous-{dead}"
    aside.mkdir()
    for i, p in enumerate(guards._report_files("c1")):
        os.replace(p, aside / f"{i}-{p.name}")
    time.sleep(0.02)
    (reports / "c1.html").write_text("<p>the killed run's page, moved in</p>")
    assert cli.main(["report", "--bundle"]) == 0
    assert _files(reports, "c1") == before and not aside.exists()
    assert "<section class='task' id='c1'>" in (reports / "bundle.html").read_text()
