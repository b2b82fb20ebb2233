"""Answer records: no number without provenance, statuses with what is missing, one-line answers."""

import json

import pytest

from hpml_lab.findings import say
from hpml_lab.report import answer_box
from hpml_lab.report.answer_box import Answer, Number, Record, RecordError


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)


def _rec(*nums, status="answered", missing=""):
    details = [say("{x}", x=n) for n in nums]
    return Record(
        "c9", "C9: test", [Answer("Q?", say("A is faster"), details, status=status, missing=missing)]
    )


def test_every_number_needs_a_provenance_tag():
    with pytest.raises(RecordError, match="provenance 'guessed'"):
        answer_box.write(_rec(Number("t", 1.0, "s", "guessed")))
    with pytest.raises(RecordError, match="does not say its source"):
        answer_box.write(_rec(Number("4 GPUs", 5.0, "s", "predicted")))
    with pytest.raises(RecordError, match="is nan"):
        answer_box.write(_rec(Number("t", float("nan"), "s", "measured")))
    # an exact count or a setting has no n, but says how it was counted or which setting it is
    with pytest.raises(RecordError, match="counted number 'parameters' does not say its source"):
        answer_box.write(_rec(Number("parameters", 78002, "values", "counted")))
    answer_box.write(
        _rec(
            Number("parameters", 78002, "values", "counted", source="counted in resnet_tiny"),
            Number("latency", 50.0, "ms", "setting", source="the task's latency"),
        )
    )


def test_partial_must_say_what_is_missing_and_answers_are_one_line():
    with pytest.raises(RecordError, match="does not say what is missing"):
        answer_box.write(_rec(status="partial"))
    with pytest.raises(RecordError, match="not one line"):
        answer_box.write(Record("c9", "t", [Answer("Q?", say("two\nlines"))]))


def test_written_record_round_trips_with_status_and_summary():
    p = answer_box.write(
        Record(
            "c9",
            "C9",
            [
                Answer(
                    "Q1?",
                    say("compiled is {r} faster", r=Number("speedup", 1.3, "x", "measured", n=5)),
                    [say("{step}", step=Number("step", 17.3, "ms", "measured", n=5, spread=0.4))],
                ),
                Answer(
                    "Q2?",
                    say(
                        "four GPUs predicted {r}",
                        r=Number("4 GPUs", 3.7, "x", "predicted", source="ring model"),
                    ),
                    status="partial",
                    missing="needs four GPUs",
                ),
            ],
        )
    )
    data = json.loads(p.read_text())
    assert p.name == "c9.answer.json" and data["status"] == "partial"
    assert data["summary"] == "compiled is 1.3x faster (+1 more answer)"
    box = answer_box.box_html(answer_box.load("c9"))
    assert (
        "[measured; n = 5, IQR 0.4]" in box and "[predicted: ring model]" in box and "needs four GPUs" in box
    )


def test_no_spread_is_shown_for_fewer_than_three_samples():
    assert "IQR" not in Number("epoch", 2.0, "s", "measured", n=2, spread=0.5).text()


def test_tables_and_the_load_average_are_shown_for_a_reader():
    import pandas as pd

    from hpml_lab.report import notebook

    df = pd.DataFrame(
        {"per_gpu_batch": [8, 16], "epoch_s_excl_io": [3842.8769, 80.54], "data_share": [0.142, None]}
    )
    html = notebook.table(df, percent=("data_share",)).to_html()
    for shown in ("per-GPU batch", "epoch excl. I/O (s)", "3,843", "80.5", "14.2%", ">-<"):
        assert shown in html, shown
    assert "per_gpu_batch" not in html and "3842.8769" not in html
    assert [
        answer_box.readable(x) for x in ("images_per_s", "epoch_s_incl_io", "busbw_GBps", "images_per_s_q1")
    ] == [
        "images/s",
        "epoch incl. I/O (s)",
        "busbw (GB/s)",
        "images/s q1",  # the speed ladder's quartile read 'images per q1 (s)'
    ]  # lab5's tables said 'images per (s)', 'incl I/O
    assert [notebook.number_text(x) for x in (50000, 0.0323, 3309.2, float("nan"), "sgd")] == [
        "50,000",
        "0.0323",
        "3,309",
        "-",
        "sgd",
    ]
    from hpml_lab.report.displays import _load_text

    text = _load_text({"load1": 4.123456789, "cores": 2, "steal_pct": 0.0})
    assert text == "load average 4.12 on 2 usable cores, CPU steal 0%"
    assert _load_text({"cores": 2}).startswith("load average not recorded")


def test_an_answer_written_as_text_is_refused():
    """Issue 44: Answer(question, text, status, numbers) built a 'legacy' answer whose numbers stood beside
    its text, outside any slot; a headline is a Finding now, and a text is refused where it is written."""
    with pytest.raises(TypeError, match="headline is a Finding"):
        Answer("Q?", "compiled is 1.3x faster", "answered", [Number("step", 17.3, "ms", "measured", n=5)])


def test_an_answer_lists_a_number_its_headline_and_details_both_state_once():
    """A verdict used in both the headline and a detail listed its ratio twice under "its numbers" (two equal
    Numbers, not one object)."""
    from hpml_lab.answers import Answer, Number
    from hpml_lab.findings import say

    a = Answer(
        "Q",
        say("A is {r} B", r=Number("ratio", 1.55, "x", "measured", n=3)),
        [say("A is {r} B, and more", r=Number("ratio", 1.55, "x", "measured", n=3))],
    )
    assert [n.name for n in a.numbers] == ["ratio"]
