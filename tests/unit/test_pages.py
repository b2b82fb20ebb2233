"""Pages for a grader (issue 31): the answer box after the title in the page's own type, each answer's
headline first, the index's headlines with its context said once and a busy banner, notices once per bundle,
booleans as marks, tables aligned. Their look in a real browser: tests/browser/test_pages_browser.py."""

from __future__ import annotations

import nbformat
import pandas as pd
import pytest

from hpml_lab.findings import say
from hpml_lab.protocol import reads_only
from hpml_lab.report import answer_box, bundle, guards, notebook, pages, runner, tasks


@pytest.fixture
def reports(tmp_path, monkeypatch):
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path / "out"))
    return tmp_path / "out" / "reports"


EPOCH_HTML = (
    'The median epoch takes <span data-number="epoch">1.25 s</span>.'  # the headline as the box shows it
)


def _record(tid, busy=True):
    flags = [{"kind": "machine busy", "message": "the machine was busy (load average 3.0 on 2 usable cores)"}]
    flags.append({"kind": "stand-in model", "message": "model resnet_tiny stands in for the lab's resnet18"})
    flags.append({"kind": "diverged", "message": f"{tid}: the loss rose"})
    return answer_box.Record(
        tid,
        tasks.TASKS[tid].title,
        [
            answer_box.Answer(
                "What is the epoch time?",
                say("The median epoch takes {e}", e=answer_box.Number("epoch", 1.25, "s", "measured", n=3)),
                [say("The first epoch was longer (warm-up)")],
            )
        ],
        flags=flags if busy else flags[1:],
        synthetic_data=True,
        stand_in_model="resnet_tiny",
    )


def _rendered(reports, tid, **kw):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(f"# {tid} title line\n\nWhat the task asks, a long paragraph."),
        nbformat.v4.new_code_cell("1", outputs=[nbformat.v4.new_output("stream", text="[c1] epoch 1/1\n")]),
    ]
    (reports / "executed").mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(reports / "executed" / f"{tid}.ipynb"))
    answer_box.write(_record(tid, **kw))
    return reports / "executed" / f"{tid}.ipynb"


def test_booleans_are_marks_and_only_numbers_are_right_aligned():
    import numpy as np

    assert notebook.number_text(True) == "✓" and notebook.number_text(np.bool_(False)) == "✗"
    assert notebook.number_text(1234.0) == "1,234"
    df = pd.DataFrame({"num_workers": [0, 2], "best": [True, False], "how": ["plain", "ckpt"]})
    page = notebook.table(df).to_html()
    assert "True" not in page and "False" not in page and "✓" in page and "✗" in page
    # the numbers' column (workers, col0) is right-aligned, the text and the marks are not
    assert "#T_" in page and "_row0_col0, " in page and "text-align: right" in page
    assert "_col1" not in page.split("</style>")[0] and "_col2" not in page.split("</style>")[0]


def test_the_environment_table_is_left_aligned():
    meta = {
        "environment": {
            "cpu": "x",
            "cpu_cores": 2,
            "gpu": None,
            "python": "3.11",
            "torch": "2",
            "torchvision": "0",
            "cuda": None,
            "commit": "abc",
            "dirty": False,
            "hostname": "h",
        },
        "device": "cpu",
        "dataset": {"name": "cifar10", "kind": "synthetic"},
        "seed": 0,
        "started_at": "now",
        "run_id": "r",
        "config": {"epochs": 1, "augment": True, "amp": False},
    }
    page = notebook.environment_table(meta).to_html()
    assert "text-align: left" in page.split("</style>")[0] and "right" not in page
    assert "augment=✓, amp=✗" in page and "True" not in page and "False" not in page
    assert "epochs=1" in page
    # a field its task never reads is not named as a setting of the run (grade19: speed's epochs=5)
    speed = notebook.environment_table({**meta, "config": {**meta["config"], "task": "speed"}}).to_html()
    assert "epochs=" not in speed and "augment=✓, amp=✗" in speed
    assert "cifar10 (synthetic)" in page  # the data the run read
    counts = notebook.environment_table(
        {**meta, "config": {**meta["config"], "task": "questions", "model": "resnet18", "seed": 0}}
    ).to_html()
    assert "none read (the study opens no image)" in counts and "cifar10 (synthetic)" not in counts
    config = counts.split("config</th>", 1)[1].split("</td>", 1)[0].rsplit(">", 1)[1]  # what the counts read
    assert "model=" in config and "seed=" in config and "epochs=" not in config and "augment" not in config
    # a loader study builds no model: its row names none (grade23: dataloading's 'model=resnet18, lr=0.1')
    trained = {"model": "resnet18", "lr": 0.1, "optimizer": "sgd", "precision": "fp32", "batch_size": 16}
    for task, keeps in (("c3", "augment=✓"), ("dataloading", "epochs=1")):
        row = notebook.environment_table({**meta, "config": {**meta["config"], **trained, "task": task}})
        config = row.to_html().split("config</th>", 1)[1].split("</td>", 1)[0]
        assert keeps in config and "batch_size=16" in config, (task, config)
        assert not any(f"{k}=" in config for k in ("model", "lr", "optimizer", "precision")), (task, config)
    with pytest.raises(ValueError, match="not RunConfig fields: \\['modle'\\]"):  # a misspelt read
        reads_only("model", "modle")


def test_the_headline_is_the_records_own_else_its_first_sentence():
    a = {"text": "C3 cannot tell 0 from 2 workers (ratio 1.1x). Each count ran 3 epochs. More here."}
    assert pages.headline(a) == (
        "C3 cannot tell 0 from 2 workers (ratio 1.1x).",
        "Each count ran 3 epochs. More here.",
    )
    assert pages.headline({"text": "0.0951 s per epoch; 13.4% waiting."}) == (
        "0.0951 s per epoch; 13.4% waiting.",
        "",
    )
    own = {
        "text": "x. y.",
        "headline": {"plain": "2 workers are 1.4x faster"},
        "details": [{"plain": "d1"}, "d2"],
    }
    assert pages.headline(own) == ("2 workers are 1.4x faster", "d1 d2")


def test_the_report_page_has_the_box_after_the_title_in_the_pages_type(reports):
    executed = _rendered(reports, "c1")
    target = reports / "c1.html"
    runner._render_html(executed, target, tasks.get("c1"), guards.read_record("c1")[0])
    page = target.read_text()
    title, box, asks = (
        page.index("c1 title line<"),
        page.replace('"', "'").index("class='hpml-answer'"),
        page.index("What the task"),
    )
    assert title < box < asks  # title, then the answer, then the notebook
    assert page.index("</head>") > page.index(".hpml-answer{")  # styled; its type is the page's prose's
    head, details = page.index(EPOCH_HTML), page.index("The first epoch was longer")
    assert "class='hpml-headline'>The median epoch" in page.replace('"', "'") and head < details
    assert "training log" not in page or "<details>" in page


def test_a_notebook_without_a_title_gets_the_box_first():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("no title here")]
    out = pages.box_after_title(nb, "<div>box</div>")
    assert out.cells[0].outputs[0]["data"]["text/html"] == "<div>box</div>" and len(out.cells) == 2


def test_the_bundle_says_shared_notices_once(reports, monkeypatch):
    monkeypatch.setattr(bundle, "chromium", lambda: None)
    for tid in ("c1", "c2", "c3"):
        _rendered(reports, tid)
    page = bundle.write_bundle(reports, log=lambda *_: None).read_text()
    answers_part = page.split("<section")[0]
    assert answers_part.count("Synthetic data") == 1 and "(every report)" in answers_part
    assert "timings reflect the real pipeline; losses" in answers_part  # no task timed on loaded batches
    said = bundle.shared_notices({t: {"synthetic_data": True} for t in ("c2", "memory")})
    assert (
        "timings reflect the real pipeline (c2); memory's timings are of steps on batches already loaded; "
        "losses" in said
    )
    alone = bundle.shared_notices({"memory": {"synthetic_data": True}})  # review24: no pipeline to reflect
    assert "pipeline" not in alone and "memory's timings are of steps on batches already loaded" in alone
    assert answers_part.count("Stand-in model") == 1 and answers_part.count("Busy machine") == 1
    assert answers_part.count("Every number is tagged") == 1
    assert answers_part.count("<b>diverged</b>") == 3  # a report's own flag stays in its box
    assert "<b>machine busy</b>" not in answers_part and "<b>stand-in model</b>" not in answers_part
    # a single report's page keeps them: it is read alone
    alone = answer_box.box_html(answer_box.load("c1"))
    assert "synthetic data" in alone and "<b>machine busy</b>" in alone and "Every number is tagged" in alone


def _outcome(tid, hardware="CPU: x (2 cores)", dataset="cifar10 (synthetic)", profile="tiny"):
    return runner.Outcome(
        tid, tasks.TASKS[tid].title, "ok", 119.0, profile, {}, hardware, dataset, f"{tid}.html", ""
    )


def test_the_index_shows_headlines_and_its_context_once(reports):
    for tid in ("c1", "c2", "c3"):
        _rendered(reports, tid, busy=tid != "c3")
    page = runner.write_index([_outcome(t) for t in ("c1", "c2", "c3")]).read_text()
    assert page.count("CPU: x (2 cores)") == 1 and page.count("cifar10 (synthetic)") == 1
    assert (
        "<b>profile:</b> tiny" in page and "<th>hardware</th>" not in page and "<th>profile</th>" not in page
    )
    assert page.count("The median epoch takes 1.25 s.") == 3 and "The first epoch was longer" not in page
    assert "1 min 59 s" in page
    assert (
        "Busy machine." in page
        and "2 of 3 reports (c1, c2) read a run made on a busy machine" in page  # the list by its count
    )
    # a busy report need not compare times (c5 compares none): the banner says so only of those that do
    assert "where a report compares times, its verdicts say where a comparison cannot tell" in page
    # rows that differ say it per row, in a column of their own
    mixed = runner.write_index([_outcome("c1"), _outcome("c2", profile="smoke"), _outcome("c3")]).read_text()
    assert (
        "<th>profile</th>" in mixed and "<b>profile:</b> tiny" in mixed and "<th>hardware</th>" not in mixed
    )
    assert mixed.count("<td>smoke</td>") == 1 and "<td>tiny</td>" not in mixed  # only the row that differs
    for tid in ("c1", "c2", "c3"):
        _rendered(reports, tid, busy=True)
    assert (
        "Every report read a run made on a busy machine" in runner.write_index([_outcome("c1")]).read_text()
    )


def test_the_index_names_no_report_computed_on_data_it_never_read(reports):
    """grade20: the questions page said it was "computed on a synthetic cifar10" where its study opens no
    image; the index names the reports computed on synthetic data, the questions not among them."""
    for tid in ("c1", "c2", "questions"):
        _rendered(reports, tid)
    page = runner.write_index([_outcome(t) for t in ("c1", "c2", "questions")]).read_text()
    notice = page.split("<b>synthetic data</b>", 1)[1].split("</p>", 1)[0]
    assert "These reports were computed on" in page and notice.endswith(": c1, c2.")


def test_a_findings_record_shows_its_own_headline_tagged_and_its_background_apart(reports):
    from hpml_lab.answers import Answer, Number, Record
    from hpml_lab.findings import Background, say

    ratio = Number("speedup", 1.4, "x", "measured", n=5)
    epoch = Number("epoch", 2.5, "s", "measured", n=5)
    answer_box.write(
        Record(
            "c3",
            tasks.TASKS["c3"].title,
            [
                Answer(
                    "Which worker count is best?",
                    say("more workers are {r} faster than none.", r=ratio),
                    [say("An epoch took {e}. It had warm-up.", e=epoch)],
                    [Background("More workers usually hide loading behind compute.")],
                )
            ],
        )
    )
    rec = answer_box.load("c3")
    box = answer_box.box_html(rec)
    head = box.split("class='hpml-headline'>")[1].split("</p>")[0]
    assert 'data-number="speedup"' in head and "faster than none." in head and "warm-up" not in head
    assert (
        "It had warm-up." in box.split("class='hpml-details'>")[1]
    )  # the details: a finding of two sentences
    assert "In general (not a finding of this run):</i> More workers usually" in box
    page = runner.write_index([_outcome("c3")]).read_text()
    assert "more workers are 1.4x faster than none." in page and "It had warm-up" not in page


def test_a_log_printed_line_by_line_is_folded_as_one():
    outs = [
        nbformat.v4.new_output("stream", name="stdout", text=f"[c1] epoch {i}/5 done\n") for i in range(1, 6)
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("train()", outputs=outs)])
    folded = answer_box.fold_logs(nb).cells[0].outputs
    assert len(folded) == 1 and "training log (5 lines)" in folded[0]["data"]["text/html"]


def test_a_stored_finding_shows_its_number_slots_and_nothing_else_as_markup():
    from hpml_lab.report import pages

    stored = (
        '<span data-verdict="v">A &lt;b&gt; is <span data-number="a: ratio">1.5x</span> faster</span>'
        "<script>alert(1)</script><img src=x onerror=alert(2)>"
    )
    shown = pages.finding_html(stored)
    assert '<span data-number="a: ratio">1.5x</span>' in shown and '<span data-verdict="v">' in shown
    assert "<script>" not in shown and "<img" not in shown and "&lt;script&gt;" in shown
    assert "A &lt;b&gt; is" in shown  # text that was escaped stays escaped, once
    head, _ = pages.headline({"headline": {"plain": "x", "html": stored}, "details": []}, "html")
    assert head == shown


# The top of every page, and demonstrations never offered as answers (issues 45 and 42)


def test_the_page_says_machine_data_and_profile_above_the_introduction_and_a_demonstration_says_so(reports):
    executed = _rendered(reports, "c1")
    target = reports / "c1.html"
    top = pages.top_html("c1", "CPU: Xeon (2 cores)", "synthetic CIFAR-10", "smoke")
    runner._render_html(
        executed, target, tasks.get("c1"), guards.read_record("c1")[0], top, demonstration=True
    )
    page = target.read_text().replace('"', "'")
    assert "(demonstration)</span></h2>" in page and "(answered)</span></h2>" not in page
    # nor is any of its answers tagged answered: what the run gave is shown, not an answer to the lab
    assert "[answered]" not in page and "[shown]" in page
    title, context = (
        page.index("c1 title line<"),
        page.index("<b>Machine:</b> <span data-id"),
    )
    assert page.index("CPU: Xeon (2 cores)</span>") > context
    banner = page.index("A demonstration, not an answer to the lab's questions</b>")
    box, asks = page.index("class='hpml-answer'"), page.index("What the task")
    assert title < context < banner < box < asks
    assert "<b>data:</b> synthetic CIFAR-10" in page and "<b>profile:</b> smoke (a demonstration)" in page
    assert "hpml-lab run c1 --profile full</code> on the real data" in page
    full = pages.top_html("c1", "GPU: H100", "real CIFAR-10", "full")
    assert "<b>profile:</b> full</p>" in full and "demonstration" not in full
    assert "demonstration" in pages.top_html("c2", "m", "d", "tiny") and pages.demonstration("tiny")
    assert "--profile full</code> on the real data, on a GPU." in page.replace("'", '"')
    # a study that reads no data and states no time (the questions, grade21) is sent to neither
    counts = pages.top_html("questions", "m", "none read", "smoke", reads_data=False, times=False)
    assert "<b>data:</b> none read" in counts and "--profile full</code>." in counts
    assert "real data" not in counts and "GPU" not in counts


def _write_outcomes(reports, outcomes):
    import json
    from dataclasses import asdict

    for o in outcomes:
        (reports / "executed" / f"{o.task}.json").write_text(json.dumps(asdict(o)))
    return outcomes


def test_a_demonstration_is_never_marked_answered_nor_its_bundle_offered_as_the_hand_in(reports, monkeypatch):
    monkeypatch.setattr(bundle, "chromium", lambda: None)
    for tid in ("c1", "c2"):
        _rendered(reports, tid)
    demo = _write_outcomes(reports, [_outcome("c1", profile="smoke"), _outcome("c2", profile="tiny")])

    def statuses(page):
        return [row.split('font-weight:bold">')[1].split("<")[0] for row in page.split("<tr>")[2:]]

    page = runner.write_index(demo).read_text()
    assert statuses(page) == ["demonstration", "demonstration"]
    assert "Nothing here to hand in." in page and "<b>Hand-in:</b>" not in page
    made = bundle.write_bundle(reports, log=lambda *_: None).read_text()
    assert "A demonstration, not a hand-in.</b> Every report here ran at a demonstration profile" in made
    assert "(demonstration)</li>" in made and "(answered)</li>" not in made
    assert "(demonstration)</span></h2>" in made and "(answered)</span></h2>" not in made
    page = runner.write_index(demo).read_text()
    assert 'href="bundle.html">bundle.html</a> only shows what a hand-in looks like' in page
    assert "<b>Hand-in:</b>" not in page
    # runs at the lab's settings are answers, and their bundle is the hand-in; one demonstration among them is
    # named
    full = _write_outcomes(reports, [_outcome("c1", profile="full"), _outcome("c2", profile="full")])
    page = runner.write_index(full).read_text()
    assert statuses(page) == ["answered", "answered"] and '<b>Hand-in:</b> <a href="bundle.html">' in page
    assert "Nothing here to hand in" not in page and "Demonstrations, not answers" not in page
    assert (
        "A demonstration, not a hand-in" not in bundle.write_bundle(reports, log=lambda *_: None).read_text()
    )
    mixed = _write_outcomes(reports, [_outcome("c1", profile="full"), _outcome("c2", profile="smoke")])
    page = runner.write_index(mixed).read_text()
    assert "<b>Demonstrations, not answers:</b> c2 ran at a demonstration profile" in page
    assert statuses(page) == ["answered", "demonstration"]
    assert "1 of its 2 reports (c2 (smoke))" in bundle.write_bundle(reports, log=lambda *_: None).read_text()


def test_a_notebook_opened_on_a_cpu_says_how_long_its_settings_take_and_how_to_pick_smoke_or_tiny(
    monkeypatch,
):
    """Opened in JupyterLab (no parameters injected, not rendered by hpml-lab) on a machine without CUDA: the
    first output says how long the lab's settings take here, from a step measured now (2 s here, a fake
    figure), and the smoke and tiny values to put in the parameters cell; settings that are already short say
    only their time."""
    import torch

    from hpml_lab import device
    from hpml_lab.config import RunConfig

    monkeypatch.setattr(device, "resolve_device", lambda name: torch.device("cpu"))  # also on a CUDA machine
    lab = notebook.cpu_time_notice(RunConfig(task="c1"), measure=lambda cfg: 2.0)
    assert lab.startswith(
        "**On this CPU these settings take about 1 h 10 min of training**: 1 run(s) of 5 epoch(s) x 391 "
        "batches of 128, at 2 s a step of resnet18 (measured here just now)."
    )
    assert "**smoke** profile's (`epochs = 2`, `batch_size = 32`, `max_batches = 20`" in lab
    assert "**tiny** profile's (`model = 'resnet_tiny'`" in lab and "`hpml-lab run c1 --profile smoke`" in lab
    short = notebook.cpu_time_notice(RunConfig(task="c1", epochs=1, max_batches=3), measure=lambda cfg: 2.0)
    assert short.endswith("(measured here just now).") and "profile" not in short
    assert "not one training loop (reads the other tasks' results)" in notebook.cpu_time_notice(
        RunConfig(task="questions"), measure=lambda cfg: 2.0
    )
    # the measurement itself: a real step of the tiny model, in seconds
    assert 0 < notebook.step_seconds(RunConfig(task="c1", model="resnet_tiny", batch_size=8)) < 30
    # shown by config() when opened by hand, never when papermill injected parameters or hpml-lab renders
    shown = []
    monkeypatch.setattr(notebook, "display", shown.append)
    monkeypatch.setattr(notebook, "cpu_time_notice", lambda cfg: "NOTICE")
    monkeypatch.delenv("HPML_RENDERING", raising=False)
    notebook.config("c1", {"In": ["# Parameters (papermill overrides these)\nepochs = 5\n"], "epochs": 5})
    assert [str(getattr(s, "data", s)) for s in shown] == ["NOTICE"]
    notebook.config("c1", {"In": ["# Parameters\nepochs = 2\n"], "epochs": 2})  # injected by papermill
    monkeypatch.setenv("HPML_RENDERING", "1")
    notebook.config("c1", {"epochs": 5})
    assert len(shown) == 1


def test_the_tasks_line_says_a_run_that_is_no_result():
    """A task that ran through but whose run diverged or did not learn says so on its line (issue 41): its
    numbers are not a result. Diverged first, where a record flags both."""
    rec = {
        "flags": [
            {"kind": "did not learn", "message": "after epoch 2 its loss 2.3 is still at chance"},
            {"kind": "machine busy", "message": "load 6.7"},
        ]
    }
    assert runner._not_a_result(rec) == "did not learn: after epoch 2 its loss 2.3 is still at chance"
    rec["flags"].append({"kind": "diverged", "message": "the loss became NaN"})
    assert runner._not_a_result(rec) == "diverged: the loss became NaN"
    assert runner._not_a_result({"flags": [{"kind": "machine busy", "message": "x"}]}) == ""
    # report34: the line cut the flag at 200 characters, "... the run did not learn, so its loss"; the asides
    # (the rule, a mean's count) go instead, whole, and the line says the page has them in full
    long = (
        "0 workers: after epoch 2 its loss 2.63 and top-1 13.5% are still at chance (loss at or above 2.19, "
        "within 5% of the chance loss ln(10) = 2.3; top-1 at or below 15%): the run did not learn, so its "
        "losses and accuracies say nothing about the setting it ran"
    )
    assert runner._not_a_result({"flags": [{"kind": "did not learn", "message": long}]}) == (
        "did not learn: 0 workers: after epoch 2 its loss 2.63 and top-1 13.5% are still at chance: the run "
        "did not learn, so its losses and accuracies say nothing about the setting it ran; in full on the "
        "page"
    )
    ended = "the loss at the end (2.6, mean of the last 3 batches (of 15)) is above chance level ln(10) = 2.3"
    assert runner._not_a_result({"flags": [{"kind": "diverged", "message": ended}]}) == (
        "diverged: the loss at the end is above chance level ln(10) = 2.3; in full on the page"
    )
    assert runner._without_asides("a (b (c") == "a"
    # grade35a: c6's line named one of its three settings that did not learn; the others are counted
    three = {
        "flags": [{"kind": "did not learn", "message": f"{o}: stuck"} for o in ("sgd", "adam", "adagrad")]
    }
    assert (
        runner._not_a_result(three)
        == "did not learn: sgd: stuck; 2 more runs flagged the same; in full on the page"
    )
    two = {"flags": three["flags"][:2]}
    assert (
        runner._not_a_result(two)
        == "did not learn: sgd: stuck; 1 more run flagged the same; in full on the page"
    )
    assert runner._not_a_result(None) == "" and runner._not_a_result({"flags": "damaged"}) == ""
    assert runner._not_a_result({"flags": 1}) == ""  # a damaged record's flags are no flags (review36)


def test_a_resumed_sweeps_reused_count_is_a_slot_of_the_record(monkeypatch):
    """The reused note typed its count outside a number slot ('2 configuration(s) were ...'): the claims check
    refused it on a rerun's page. It is a counted Number, held in the record, and its noun agrees."""
    import types

    from IPython import display as ipd

    from hpml_lab.report import page_record
    from hpml_lab.report.claims import _check_html

    shown = []
    monkeypatch.setattr(ipd, "display", shown.append)
    page_record.new_page()
    done, kept = types.SimpleNamespace(status="skipped"), types.SimpleNamespace(status="ok")
    page_record.reused_note([done, done, kept])
    page_record.reused_note([done])
    page_record.reused_note([kept])
    assert len(shown) == 2
    two, one = (s.data for s in shown)
    held = page_record._PAGE["shown"]
    assert held["configurations reused from an earlier run"]["value"] == 2
    assert held["configurations reused from an earlier run (sweep 2)"]["value"] == 1
    assert _check_html(one, held, "") == []
    assert _check_html(two, held, "") == [] and "2</span> configurations were complete" in two
    assert "1</span> configuration was complete from an earlier run and was reused" in one


def test_the_answer_pointer_shows_only_in_a_section_that_would_stand_empty(monkeypatch, tmp_path):
    """A grader found 'The answer is at the top of this page' under memory's and lab5's Environment heading:
    the call that writes the answer sat in the environment cell. The pointer is shown on a rendered page only
    where asked; every notebook whose answer call shares a section with other content turns it off."""
    from pathlib import Path

    from IPython import display as ipd

    shown = []
    monkeypatch.setattr(ipd, "display", shown.append)
    monkeypatch.setattr(answer_box, "write", lambda rec: tmp_path / "x.answer.json")
    monkeypatch.setenv("HPML_RENDERING", "1")
    answer_box.show(answer_box.Record.__new__(answer_box.Record), pointer=False)
    assert shown == []
    answer_box.show(answer_box.Record.__new__(answer_box.Record))
    assert "The answer is at the top of this page" in shown[0].data

    for path in sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb")):
        cells = nbformat.read(str(path), as_version=4).cells
        head, sections = "", {}
        for c in cells:
            if c.cell_type == "markdown" and c.source.lstrip().startswith("#"):
                head = c.source.lstrip().splitlines()[0]
            sections.setdefault(head, []).append(c)
        for head, cs in sections.items():
            asks = [c for c in cs if c.cell_type == "code" and "nb.answer(" in c.source]
            for c in asks:
                alone = "Environment" not in head and "environment_table" not in c.source
                assert alone or "pointer=False" in c.source, f"{path.name}: {head!r} shows the pointer"


def test_a_headline_its_first_detail_restates_is_said_once_in_the_body(monkeypatch):
    """A grader read 'At 50 ms: threads is 6.63x faster than the baseline on time per pass.' twice in a row on
    the dataloading page: the headline, then the first detail (the same verdict with its interval)."""
    from IPython import display as ipd

    from hpml_lab.answers import Answer, Number
    from hpml_lab.report import page_record

    shown = []
    monkeypatch.setattr(ipd, "display", shown.append)
    page_record.new_page()
    r = Number("ratio", 6.63, "x", "measured", n=3)
    a = Answer(
        "Q",
        say("Threads is {r} the baseline's pace", r=r),
        [say("Threads is {r} the baseline's pace (and its interval)", r=r), say("Another detail")],
    )
    b = Answer("Q2", say("Another headline"), [say("A detail that says something else")])
    page_record.said(a, b)
    body = shown[0].data
    assert body.count("the baseline&#x27;s pace") + body.count("the baseline's pace") == 1
    assert "Another headline" in body and "A detail that says something else" in body


# The index's commit and busy note say what each report's record holds (grade2's index items)


def _runs(*commits, reused=False):
    return [
        {"run": f"run-{i}", "commit": c, "dirty": False, "started_at": f"2026-11-27T19:3{i}:00+00:00",
         "reused": reused}
        for i, c in enumerate(commits)
    ]  # fmt: skip


def _with_runs(tid, runs, busy_run=None):
    rec = _record(tid, busy=busy_run is not None)
    if busy_run:
        rec.flags[0] = {**rec.flags[0], "run": busy_run}
    rec.runs = runs
    answer_box.write(rec)


def test_the_index_names_a_reports_commit_where_its_runs_were_made_at_another(reports):
    """grade2: 'commit 33dbf8c889' above the table (the index's own tree) where 12 reports and lab5's Q1 runs
    were made at 88fe982cac, and no row named its own although the line said 'a row names its own'."""
    old, new = "88fe982cac69104de2beb4ab22b7e44ce4602e2c", "33dbf8c889d5264625f943c4a58e0fd8bd5e9376"
    _with_runs("c1", _runs(old, old))
    _with_runs("c2", _runs(old))
    _with_runs("c3", _runs(new))
    _with_runs("c4", _runs(old, new))  # a report that read runs of two commits
    _with_runs("c5", [])  # a record that names no runs
    page = runner.write_index([_outcome(t) for t in ("c1", "c2", "c3", "c4", "c5")]).read_text()
    context = page.split('class="hpml-context">')[1].split("</p>")[0]
    assert "commit of the reports' runs <code>88fe982cac</code>" in context and new[:10] not in context
    assert "a row names its own where it differs" in context and "<th>commit of its runs</th>" in page
    row = {t: page.split(f">{t}</a>")[1].split("</tr>")[0] for t in ("c1", "c2", "c3", "c4", "c5")}
    assert "<td></td>" in row["c1"] and "<td></td>" in row["c2"]  # the commit above the table
    assert "<td>33dbf8c889</td>" in row["c3"]
    assert "<td>88fe982cac and 33dbf8c889 (its runs were made at 2 commits)</td>" in row["c4"]
    assert "<td>not recorded</td>" in row["c5"]
    # every report's runs of one commit: said once, no column
    for tid in ("c1", "c2"):
        _with_runs(tid, _runs(new))
    same = runner.write_index([_outcome(t) for t in ("c1", "c2")]).read_text()
    assert "commit of the reports' runs <code>33dbf8c889</code>" in same and "commit of its runs" not in same
    assert "a row names its own" not in same


def test_the_index_says_a_busy_flag_names_its_run_only_where_every_flag_does(reports):
    """grade2: 'each report's flag names the run' where questions', memory's and dataloading's said only
    'before the run'."""
    _with_runs("c1", _runs("a" * 40), busy_run="q1-b16-1c84ba55")
    _with_runs("c2", _runs("a" * 40), busy_run="study-7de7562e")
    named = runner.write_index([_outcome(t) for t in ("c1", "c2")]).read_text()
    assert "each report's flag names the run and says how busy" in named
    _with_runs("c2", _runs("a" * 40), busy_run="")
    unnamed = runner.write_index([_outcome(t) for t in ("c1", "c2")]).read_text()
    assert "names the run" not in unnamed and "each report's flag says how busy" in unnamed


def test_a_page_names_its_runs_commits_and_the_runs_an_earlier_render_made(tmp_path, monkeypatch):
    """grade2's lab5: Q1's runs reused from an earlier render at another commit, the page and the environment
    table stating one commit. A resumed sweep notes the runs it reuses, a new run notes itself; the record
    lists each run with its commit and whether an earlier render made it, and the environment table names
    each by commit where they differ."""
    from hpml_lab import results
    from hpml_lab.config import RunConfig
    from hpml_lab.report import page_record
    from hpml_lab.sweeps import run_sweep

    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path / "out"))
    env = {"cpu": "x", "cpu_cores": 2, "gpu": None, "python": "3.11", "torch": "2", "torchvision": "0",
           "cuda": None, "hostname": "h"}  # fmt: skip

    def made_at(commit, started):
        def run_one(cfg):
            meta = {
                "run_id": cfg.run_dir().name,
                "status": "complete",
                "config": cfg.to_dict(),
                "environment": {**env, "commit": commit, "dirty": False},
                "started_at": started,
            }
            cfg.run_dir().mkdir(parents=True)
            results.write_meta(cfg.run_dir(), meta)
            results.note_run(meta)  # as new_meta does for a run made here

        return run_one

    cfgs = [RunConfig(task="sw", results_dir=str(tmp_path / "results"), batch_size=b) for b in (16, 32)]
    page_record.new_page()
    run_sweep(cfgs[:1], made_at("88fe982cac69", "2000-01-01T00:00:00+00:00"), log=None)  # an earlier render
    page_record.new_page()  # this render: the first run is reused, the second made now
    run_sweep(cfgs, made_at("33dbf8c88912", results.now()), log=None)
    got = {r["run"]: r for r in page_record.page_runs()}
    assert {k: (v["commit"][:10], v["reused"]) for k, v in got.items()} == {
        cfgs[0].run_dir().name: ("88fe982cac", True),
        cfgs[1].run_dir().name: ("33dbf8c889", False),
    }
    meta = results.read_run(cfgs[1].run_dir()).meta
    meta |= {"device": "cpu", "dataset": {"name": "cifar10", "kind": "synthetic"}, "seed": 0}
    page = notebook.environment_table(meta).to_html()
    row = page.split("runs of this report, by commit")[1].split("</tr>")[0]
    assert (
        f"commit 88fe982cac, made by an earlier render: {cfgs[0].run_dir().name} (started "
        "2000-01-01T00:00:00+00:00); commit 33dbf8c889: " + cfgs[1].run_dir().name in row
    )
    # one commit, all made now: no such row
    page_record.new_page()
    meta["started_at"] = results.now()  # made by this render
    assert "runs of this report" not in notebook.environment_table(meta).to_html()
