"""Each report's decisions from canned results: a clear win, a tie, a diverged run, a trend, n = 2.

The sentences a report shows are assembled here from verdicts and flags; these tests pin both."""

from types import SimpleNamespace

import pandas as pd

from hpml_lab.config import RunConfig
from hpml_lab.studies import lab2_answers


def _run(losses, epochs_s=(2.0, 1.0, 1.0, 1.0), per_epoch=None):
    n = len(losses)
    per_epoch = per_epoch or max(1, n // len(epochs_s))
    b = pd.DataFrame(
        {
            "epoch": [1 + i // per_epoch for i in range(n)],
            "batch": range(n),
            "loss": losses,
            "acc": [0.1] * n,
            "data_s": [0.01] * n,
            "train_s": [0.1] * n,
        }
    )
    e = pd.DataFrame(
        {
            "epoch": range(1, len(epochs_s) + 1),
            "total_s": list(epochs_s),
            "data_s": [0.1] * len(epochs_s),
            "train_s": [0.8 * t for t in epochs_s],
        }
    )
    return SimpleNamespace(
        batches=b, epochs=e, meta={"machine": {"load1": 0.1, "cores": 2, "steal_pct": 0.0}}
    )


CFG = RunConfig(task="c1")


def test_c1_learning_run_says_the_loss_fell():
    answers, flags = lab2_answers.c1(CFG, _run([2.3 - 0.03 * i for i in range(40)]))
    assert "Training loss is lower for the last 4 batches than for the first 4 batches" in answers[0].text
    assert answers[0].verdict["loss"]["outcome"] == "better" and flags == []


def test_c1_diverged_run_is_not_presented_as_a_result():
    answers, flags = lab2_answers.c1(CFG, _run([2.3, 5.0, 9.7, 12.1, 15.4, 9.0, 11.0, 14.0, 8.0, 13.0]))
    assert answers[0].text.startswith("Training diverged") and "not a result" in answers[0].text
    assert [f.kind for f in flags] == ["diverged"]


def test_c1_flat_loss_is_a_tie_not_learning():
    answers, _ = lab2_answers.c1(CFG, _run([2.30, 2.31, 2.29, 2.30] * 10))
    assert "did not measurably learn" in answers[0].text and answers[0].verdict["loss"]["outcome"] == "tie"


def test_c2_trend_and_too_few_epochs_are_flagged():
    answers, flags = lab2_answers.c2(CFG.replace(task="c2"), _run([2.0] * 12, epochs_s=(2.31, 3.71, 8.83)))
    kinds = {f.kind for f in flags}
    assert {"no steady state", "too few samples"} <= kinds
    assert "median of the 2 after the first" in answers[0].text
    assert all(n.spread is None for n in answers[0].numbers)  # n = 2: no spread shown


def test_c3_tie_between_worker_counts_is_called_a_tie():
    rows = pd.DataFrame(
        {
            "num_workers": [0] * 4 + [2] * 4 + [4] * 4,
            "seconds": [
                0.2955,
                0.2960,
                0.2950,
                0.2958,
                0.2956,
                0.2961,
                0.2949,
                0.2957,
                0.60,
                0.61,
                0.59,
                0.62,
            ],
        }
    )
    sweep = SimpleNamespace(rows=rows, items=[])
    answers, _ = lab2_answers.c3(RunConfig(task="c3"), sweep)
    assert "cannot be told apart from 2" in answers[0].text and "a tie" in answers[0].text
    assert set(answers[0].verdict["tied"]) == {0, 2}


def test_c3_clear_best():
    rows = pd.DataFrame({"num_workers": [0] * 3 + [2] * 3, "seconds": [0.9, 0.91, 0.92, 0.30, 0.31, 0.29]})
    answers, _ = lab2_answers.c3(RunConfig(task="c3"), SimpleNamespace(rows=rows, items=[]))
    assert answers[0].text.startswith("Best count: 2 workers")


def _q1(step_times: dict[int, list[float]], oom=()) -> pd.DataFrame:
    rows = [
        {
            "per_gpu_batch": b,
            "status": "ok",
            "batches_timed": len(t),
            "epoch_s_excl_io": 10.0,
            "step_times_s": ";".join(map(str, t)),
        }
        for b, t in step_times.items()
    ]
    return pd.DataFrame(rows + [{"per_gpu_batch": b, "status": "OOM"} for b in oom])


# The one way to write a finding (issue 27): hpml_lab/findings.py on hand-built values.
import pytest  # noqa: E402

from hpml_lab.answers import Answer, Number, Record, RecordError, check  # noqa: E402
from hpml_lab.findings import Background, fmt, fmt_value, join, say, stray_digits  # noqa: E402


def N(name, value, unit="s", prov="measured", **kw):
    return Number(name, value, unit, prov, **({"n": 5} if prov == "measured" else {"source": "given"}) | kw)


@pytest.mark.parametrize(
    "value,unit,shown",
    [
        (1.25, "s", "1.25 s"),
        (0.0323, "", "0.0323"),
        (14.24, "%", "14.2%"),
        (0.15, "%", "0.15%"),  # never rounded to '0%'
        (1.314, "x", "1.31x"),
        (3309.4, "images/s", "3,309 images/s"),  # whole from 1,000 up, never '3.31e+03'
        (50000, "", "50,000"),  # an int keeps every digit
        (999.96, "", "1,000"),  # rounds up into the thousands, not '1e+03'
        (0.0000123, "s", "0.0000123 s"),  # never an exponent
        (0.0, "s", "0 s"),
        (-0.5, "", "-0.5"),
        (float("nan"), "s", "n/a"),
    ],
)
def test_fmt_every_branch(value, unit, shown):
    assert fmt(N("x", value, unit)) == shown
    assert fmt_value("adam") == "adam" and fmt_value(True) == "True"


def test_say_binds_numbers_plain_and_html():
    data, train = N("data-loading epoch", 1.25), N("training epoch", 3.5)
    f = say("data loading {data}, training {train} per epoch", data=data, train=train)
    assert f.plain() == "data loading 1.25 s, training 3.5 s per epoch"
    assert f.html() == (
        'data loading <span data-number="data-loading epoch">1.25 s</span>, '
        'training <span data-number="training epoch">3.5 s</span> per epoch'
    )
    assert f.numbers() == [data, train]


def test_say_refuses_typed_digits_specs_and_unbound_slots():
    x = N("x", 1.0)
    for bad in ("loss fell by 2 {x}", "{x:.2f}", "{x!r}", "{x} and {y}"):
        with pytest.raises(ValueError):
            say(bad, x=x)
    with pytest.raises(ValueError):
        say("{x}", x=x, y=x)  # a slot the template does not use
    with pytest.raises(ValueError):
        say("{x} with {label}", x=x, label="2 workers")  # a digit inside a word slot
    with pytest.raises(ValueError):
        say("{x}", x=2.5)  # a bare float is no Number
    assert say("top-1 of ResNet-18 in bf16: {x}", x=x).plain() == "top-1 of ResNet-18 in bf16: 1 s"
    assert stray_digits("top-1 ResNet-18 bf16 L2") == [] and stray_digits("9,999 images") == list("9999")


def test_html_escapes_text_words_and_names():
    x = N("a<b>", 1.0, "s")
    f = say("<b>{w}</b> & {x}", w="<i>", x=x)
    assert f.html() == '&lt;b&gt;&lt;i&gt;&lt;/b&gt; &amp; <span data-number="a&lt;b&gt;">1 s</span>'
    assert f.plain() == "<b><i></b> & 1 s"


def test_nested_findings_and_join_keep_every_number_once():
    a, b = N("a", 1.0), N("b", 2.0)
    inner = say("{a} then {b}", a=a, b=b)
    outer = say("{inner}; again {a}", inner=inner, a=a)
    assert outer.plain() == "1 s then 2 s; again 1 s" and outer.numbers() == [a, b]
    assert '<span data-number="b">2 s</span>' in outer.html()
    assert join([say("x"), say("y"), say("z")], ", ", " and ").plain() == "x, y and z"
    assert say("{f}", f=say("eager is {a}", a=a)).up().plain() == "Eager is 1 s"
    marked = say("{f}", f=say("eager {a}", a=a).marked("v")).up().html()
    assert marked.startswith('<span data-verdict="v">Eager <span data-number="a">')  # the letter, not the tag


def test_background_states_no_number():
    assert Background("Workers time-share the cores.").html() == "Workers time-share the cores."
    with pytest.raises(ValueError):
        Background("On a GPU node 4 workers are needed.")


def test_answer_numbers_come_from_its_findings_and_names_are_unique_per_record():
    a, b = N("epoch", 1.0), N("step", 2.0)
    ans = Answer(
        "Q?", say("epoch {a}", a=a), [say("step {b}, epoch {a}", b=b, a=a)], [Background("General.")]
    )
    assert ans.numbers == [a, b] and ans.text == "epoch 1 s. step 2 s, epoch 1 s."
    d = ans.as_dict()
    assert d["headline"]["html"] == 'epoch <span data-number="epoch">1 s</span>.'
    assert d["background"] == ["General."] and [n["name"] for n in d["numbers"]] == ["epoch", "step"]
    check(Record("c9", "t", [ans]))
    clash = Answer("Q2?", say("epoch {a}", a=N("epoch", 9.0)))
    with pytest.raises(RecordError, match="named 'epoch'"):
        check(Record("c9", "t", [ans, clash]))


# No finding number is formatted outside findings.fmt (issue 27): a grep over the conclusions moved onto findings and
# their notebooks' code cells. A format spec ('{x:.3g}', '{n:,}', '%.2f') in them would print a number the record's
# formatter did not.
FORMAT_SPEC = __import__("re").compile(r":[<>^]?\d*(?:,|,?\.\d+[fgde%]?|[fgde%])\}|%\.\d+[fgde]\b|\.format\(")


def _code_cells(path):
    import json

    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def test_no_number_is_formatted_outside_the_one_formatter():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sources = {
        p.name: p.read_text()
        for p in [
            root / "hpml_lab/studies/lab2_answers.py",
            root / "hpml_lab/studies/questions/questions_answers.py",
        ]
    }
    for nb in [*sorted((root / "notebooks").glob("c[1-8]_*.ipynb")), root / "notebooks/questions.ipynb"]:
        for i, cell in enumerate(_code_cells(nb)):
            sources[f"{nb.name} cell {i}"] = cell
    found = {
        where: line
        for where, text in sources.items()
        for line in text.splitlines()
        if FORMAT_SPEC.search(line) and "settings.tolerance" not in line  # c3's stopping rule: a setting
    }
    assert found == {}
    assert FORMAT_SPEC.search('f"{x:.3g} s"') and FORMAT_SPEC.search('f"{n:,} images"')
