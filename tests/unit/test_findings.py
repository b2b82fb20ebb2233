"""The one way to write a finding (issue 27): hpml_lab/findings.py on hand-built values: the formatter,
templates and their slots, html, nested findings, background, and an answer's numbers. What each study
concludes from canned results is tests/studies/test_conclusions.py; the grep for numbers typed into prose is
tests/studies/test_typed_numbers.py."""

from dataclasses import replace

import pytest

from hpml_lab.answers import Answer, Number, Record, RecordError, check
from hpml_lab.findings import Background, beside, fmt, fmt_in, fmt_value, join, say, stray_digits


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


def test_a_number_set_beside_a_limit_shows_the_digits_that_put_it_on_its_side():
    """grade14: c8 said 'load per core up to 1, above 1' of 1.0012 on the busy line 1.0: rounded to 3
    digits the value showed the limit itself. beside() adds digits (up to MOST_DIGITS) only where rounding
    hides the side, and the answer box's tagged text and the claims check's fmt() show the same digits."""
    load = N("load", 1.001220703125, "")
    assert fmt(load) == "1" and fmt(beside(load, 1.0)) == "1.001" and beside(load, 1.0).digits == 4
    assert "load: 1.001 [" in beside(load, 1.0).text()
    assert fmt(beside(N("load", 2.00244140625, ""), 2.0)) == "2.002"  # 2 cores, 1 per core
    assert fmt(beside(N("load", 0.99951171875, ""), 1.0)) == "0.9995"  # below the line shows it too
    assert fmt(beside(N("steal", 10.004, "%"), 10.0)) == "10.004%"
    assert fmt(beside(N("load", 1024.3, ""), 1024.0)) == "1,024.3"  # from 1,000 up too (review 15)
    # grade18: 1.327 below a prediction of 4/3, shown 1.33x: as shown, the two read the same
    assert fmt(beside(N("high", 1.3269567, "x"), 4 / 3)) == "1.327x"
    assert fmt(beside(N("loss", 2.1878, ""), 0.95 * 2.302585)) == "2.188"  # the limit shows as 2.19
    assert fmt(N("load", 1024.3, "")) == "1,024" and fmt_value(1024.0, "", 6) == "1,024"
    for same in (
        N("load", 1.5, ""),
        N("load", 1.0, ""),
        N("cores", 2, ""),
    ):  # shown apart already, equal, whole
        assert beside(same, 1.0) is same
    assert fmt_value(2 / 3, "x", 5) == "0.66667x" and fmt_value(1234.5678, "", 6) == "1,234.57"
    # fewer than 3 digits asked where the whole part has more: rounded to them and whole, never an exponent
    # (c8's break-even beside a wide interval: 'about 6,700 steps', not '6,670' nor '6.7e+03')
    assert fmt_value(6669.6, "steps", 2) == "6,700 steps" and fmt_value(665.2, "", 2) == "670"
    assert fmt_value(95.5, "x", 2) == "96x" and fmt_value(1.2345, "", 2) == "1.2"
    assert (
        fmt_value(99.6, "steps", 2) == "100 steps" and fmt_value(9.96, "", 2) == "10"
    )  # rounded, then whole
    # a limit that is no number (a diverged run's NaN loss, set beside another's limit) leaves it as it is
    limit = N("limit", 2.18746, "")
    assert beside(limit, float("nan")) is limit and beside(limit, N("nan", float("nan"), "")) is limit
    # a limit given as a Number is read at its own digits: 2.188 beside 2.18746 shown as 2.187
    assert fmt(beside(N("loss", 2.1878, ""), replace(limit, digits=4))) == "2.19"


def test_a_name_with_values_writes_them_as_the_formatter_does():
    """Issue 44: a Number's name or source held counts typed by Python's str ('global batch 8192') where the
    table beside it said 8,192; fmt_in puts each value in through fmt_value, numpy's numbers too."""
    import numpy as np

    assert fmt_in("global batch {gb}: loss", gb=8192) == "global batch 8,192: loss"
    assert fmt_in("{n} workers x {b}", n=np.int64(4), b=np.float64(2048.0)) == "4 workers x 2,048"
    assert fmt_in("threads at {lat} ms", lat=2.5) == "threads at 2.5 ms" and fmt_in("{x}", x=1 / 3) == "0.333"
    assert fmt_in("{model}: step, {on}", model="resnet18", on=True) == "resnet18: step, True"


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
