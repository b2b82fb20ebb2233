"""Verdicts from canned samples: a clear win, a clear loss, a tie, too few samples, best-of with ties."""

import math

import pytest

from hpml_lab.findings import Ident
from hpml_lab.verdict import PAIRED_MIN_ROUNDS, best, compare, sample_record, target_met

FAST = [1.00, 1.02, 0.99, 1.01, 1.03, 0.98]
SLOW = [1.50, 1.52, 1.49, 1.55, 1.48, 1.51]
NOISY = [1.00, 1.40, 0.80, 1.20, 0.95, 1.30]


def test_clear_win_and_its_sentence():
    v = compare(FAST, SLOW, "compiled", "eager", what="time per step")
    assert v.outcome == "better" and v.winner == "compiled"
    assert v.ratio == pytest.approx(1.505 / 1.005, rel=1e-3) and 1 < v.ci_low <= v.ratio <= v.ci_high
    said = v.finding("step").plain()  # the one way a verdict is said: a finding over its record's numbers
    assert said.startswith("compiled is 1.5x faster than eager on time per step (95% CI ")
    assert said.endswith("n = 6 and 6)")


def test_clear_loss_names_the_other_side():
    v = compare(SLOW, FAST, "eager", "compiled", what="time per step")
    assert v.outcome == "worse" and v.winner == "compiled"
    assert v.finding("step").plain().startswith("compiled is 1.5x faster than eager")


def test_tie_is_called_a_tie():
    v = compare(FAST, [x * 1.005 for x in FAST], "A", "B")
    assert v.outcome == "tie" and v.winner is None
    assert "cannot be told apart" in v.finding("t").plain()
    w = compare(NOISY, [x * 1.1 for x in NOISY], "A", "B")
    assert w.outcome == "tie" and w.ci_low < 1 < w.ci_high  # a 10% gap inside this much noise


def test_two_samples_are_too_few():
    v = compare([0.2955, 0.2950], [0.2956, 0.2960], "0 workers", "2 workers")
    assert v.outcome == "tie" and v.reason == "too few samples" and math.isnan(v.ci_low)
    said = v.finding("t", Ident("0 workers"), Ident("2 workers")).plain()
    assert "too few samples" in said and "n = 2 and 2" in said
    # undecided: no evidence of a tie (C3/C4 say so rather than "a tie"); a measured tie is decided
    assert v.undecided and not compare(FAST, [x * 1.005 for x in FAST], "A", "B").undecided
    assert not compare([0.0] * 3, [0.0] * 3, "A", "B").undecided  # enough samples, non-finite ratio


def test_higher_is_better_words():
    v = compare([0.9, 0.91, 0.92], [0.5, 0.52, 0.51], "BN", "no BN", lower_is_better=False, what="top-1")
    assert v.outcome == "better" and "top-1 is higher for BN than for no BN" in v.finding("t").plain()


def test_deterministic_and_recomputable():
    a, b = compare(NOISY, SLOW, "A", "B"), compare(NOISY, SLOW, "A", "B")
    assert a == b
    rec = sample_record(a, NOISY, SLOW)
    assert rec["samples_a"] == NOISY and rec["outcome"] == a.outcome


def test_best_reports_ties_with_the_best():
    b = best({0: FAST, 2: [x * 1.001 for x in FAST], 4: SLOW})
    assert b.label == 0 and set(b.tied) == {0, 2} and b.verdicts[4].outcome == "better"
    clear = best({0: FAST, 4: SLOW})
    assert clear.tied == (0,) and clear.verdicts[4].outcome == "better"


def test_a_target_is_met_only_when_the_interval_clears_it():
    noisy = compare(NOISY, [x * 1.01 for x in NOISY], "plain", "instrumented")
    assert target_met(noisy, 1.02, at_least=False) is None  # the 2% target cannot be resolved by this noise
    tight = compare([1.0, 1.001, 0.999, 1.0], [1.005, 1.006, 1.004, 1.005], "plain", "instrumented")
    assert target_met(tight, 1.02, at_least=False) is True
    big = compare(FAST, SLOW, "tensor", "PIL")  # tensor 1.5x faster: ratio 1.5
    assert target_met(big, 10.0) is False and target_met(big, 1.2) is True
    assert target_met(compare([1, 2], [3, 4]), 1.0) is None  # too few samples


# How the samples were taken (issue 27): a verdict knows its design.
def test_interleaved_samples_keep_their_direction():
    v = compare(FAST, SLOW, "compiled", "eager", interleaved=True)
    assert v.outcome == "better" and v.interleaved is True


def test_sequential_runs_on_a_steady_recorded_load_keep_their_direction():
    v = compare(FAST, SLOW, "compiled", "eager", interleaved=False, load_a=[0.5, 0.6], load_b=[0.7, 0.8])
    assert v.outcome == "better" and v.reason == ""


def test_sequential_runs_on_a_busy_machine_cannot_tell():
    """C4 said '0 workers is 1.71x faster than 1 worker on compute per step (n = 3 and 3)' from runs made one
    after the other at load 6.8 on 2 cores: a steady load that high is other work taking turns with one side
    only."""
    v = compare(
        FAST, SLOW, "no workers", "one worker", interleaved=False, load_a=[3.4, 3.4], load_b=[3.4, 3.5]
    )
    assert v.outcome == "tie" and v.reason == "busy machine" and v.winner is None
    text = v.finding("c4 compute").plain()
    assert (
        "one after the other, not interleaved, on a busy machine (load per core up to 3.5, above 1)" in text
    )
    assert "faster" not in text and "ratio 1.5x" in text
    # grade14: c8's loads per core 1.0012 were said 'up to 1, above 1'
    just = compare(FAST, SLOW, "a", "b", interleaved=False, load_a=[1.001220703125], load_b=[1.001220703125])
    assert just.reason == "busy machine"
    assert "(load per core up to 1.001, above 1)" in just.finding("c8 step").plain()
    # the interval alone clears the least difference: what a sentence about the numbers themselves rests on
    assert v.statistical == "better" and compare(SLOW, FAST, "a", "b").statistical == "worse"
    assert compare(FAST, FAST, "a", "b").statistical == "tie"
    assert compare(FAST[:2], SLOW[:2], "a", "b").statistical == "tie"  # too few samples: no interval
    # the same samples interleaved (or in rounds) on that machine keep their direction: both sides shared the
    # load
    both = compare(FAST, SLOW, "no workers", "one worker", interleaved=True, load_a=[3.4], load_b=[3.4])
    assert both.outcome == "better" and both.reason == ""
    # a loss does not feel the load: back to back on a busy machine, it keeps its direction
    loss = compare(
        FAST,
        SLOW,
        "last",
        "first",
        what="median training loss",
        interleaved=False,
        load_a=[3.4],
        load_b=[3.4],
    )
    assert loss.outcome == "better"
    # a rate is made of times: images/s back to back on a busy machine cannot tell either (said higher/lower)
    rate = compare(
        SLOW,
        FAST,
        "a",
        "b",
        what="images/s",
        lower_is_better=False,
        interleaved=False,
        load_a=[3.4],
        load_b=[3.4],
    )
    assert rate.outcome == "tie" and rate.reason == "busy machine" and "faster" not in rate.words()
    # the busy threshold is the busy flag's, so the page's flag and its verdicts agree on what busy is
    from hpml_lab import sanity, verdict

    assert verdict.BUSY_LOAD == sanity.BUSY_LOAD_PER_CORE
    assert compare(FAST, SLOW, interleaved=False, load_a=[0.9], load_b=[1.0]).outcome == "better"


def test_sequential_runs_while_the_load_moved_cannot_tell():
    v = compare(FAST, SLOW, "compiled", "eager", interleaved=False, load_a=[0.4, 0.5], load_b=[2.0, 2.6])
    assert v.outcome == "tie" and v.reason == "load moved"
    text = v.finding("c8 step").plain()
    assert "cannot be told apart" in text and "between 0.4 and 2.6, more than the 0.5" in text
    assert "faster" not in text


def test_sequential_runs_without_a_recorded_load_cannot_tell():
    v = compare(FAST, SLOW, "compiled", "eager", interleaved=False)
    assert v.outcome == "tie" and v.reason == "load not recorded"
    assert "was not recorded" in v.finding("x").plain()


def test_a_difference_within_the_twin_noise_cannot_tell():
    v = compare(FAST, SLOW, "compiled", "eager", interleaved=True, noise=1.91)
    assert v.outcome == "tie" and v.reason == "within twin noise"
    assert "within the 1.91x by which twin configurations" in v.finding("x").plain()
    # the same samples beyond a smaller noise keep the direction, in either order
    assert compare(FAST, SLOW, interleaved=True, noise=1.1).outcome == "better"
    assert compare(SLOW, FAST, interleaved=True, noise=1.1).outcome == "worse"
    assert compare(SLOW, FAST, interleaved=True, noise=1.6).reason == "within twin noise"


def test_the_finding_states_the_records_numbers_and_marks_the_verdict():
    v = compare(SLOW, FAST, "eager", "compiled", what="time per step")  # A loses: the ratio is stated flipped
    f = v.finding("c8 step")
    by_name = {n.name: n for n in f.numbers()}
    assert by_name["c8 step: ratio"].value == pytest.approx(1 / v.ratio)
    assert by_name["c8 step: interval low"].value == pytest.approx(1 / v.ci_high)
    assert f.plain().startswith("compiled is 1.5x faster than eager on time per step (95% CI ")
    html = f.html()
    assert (
        html.startswith('<span data-verdict="c8 step">')
        and '<span data-number="c8 step: ratio">1.5x</span>' in html
    )
    few = compare([1.0, 1.1], [2.0, 2.1], "a", "b").finding("few")
    assert "too few samples (n = 2 and 2; at least 3 each" in few.plain()
    assert all(math.isfinite(n.value) for n in few.numbers())  # no nan ratio enters the record


def test_labels_with_digits_are_findings_of_their_own():
    from hpml_lab.answers import Number
    from hpml_lab.findings import say

    v = compare(FAST, SLOW, "0 workers", "2 workers")
    with pytest.raises(ValueError):
        v.finding("w")  # '0 workers' would type a digit
    w0, w2 = (Number(f"workers {i}", i, "", "setting", source="sweep") for i in (0, 2))
    f = v.finding("w", say("{w} workers", w=w0), say("{w} workers", w=w2))
    assert f.plain().startswith("0 workers is 1.5x faster than 2 workers")


def test_a_tie_whose_interval_misses_one_says_it_did_not_clear_the_least_difference():
    """A grader read 'cannot be told apart (ratio 0.36x, 95% CI 0.227x to 0.984x)' as a contradiction: the
    interval excludes 1. The tie's reason is that it does not clear the least difference; the sentence says
    so."""
    from hpml_lab.verdict import compare

    v = compare([1.0, 1.0, 1.0, 1.0, 1.01], [1.03, 1.03, 1.03, 1.03, 1.04], "A", "B", min_effect=0.05)
    assert v.outcome == "tie" and v.reason.startswith("difference under")
    text = v.finding("x").plain()
    assert "comes within 5% of no difference" in text and v.as_dict()["min_effect"] == 0.05
    # the samples are apart (the interval lies above 1): the words do not deny it, nor the far end (grade38b)
    assert text.startswith("A and B differ, perhaps negligibly, on time: the interval comes within 5%"), text
    assert v.short("x").plain() == "A and B differ, perhaps negligibly, on time"
    # no bound on the difference: an interval whose far end lies far beyond the least difference (review39:
    # "may differ only negligibly" of 1.01x to 1.5x, its median 1.45x, read as "at most negligibly")
    wide = compare([1.0, 1.0, 1.0, 1.0], [1.01, 1.45, 1.5, 1.45], "A", "B")
    assert wide.reason == "difference under 2%" and wide.ratio > 1.4
    assert wide.short("w").plain() == "A and B differ, perhaps negligibly, on time"
    # ... only where the design lets the samples show a side at all: runs one after the other on a busy
    # machine, or a difference within twin noise, are the tie their design makes (review39: "may differ only
    # negligibly" of such runs claimed they differ)
    a, b = [1.0, 1.0, 1.0, 1.0, 1.01], [1.03, 1.03, 1.03, 1.03, 1.04]
    busy = compare(a, b, "A", "B", min_effect=0.05, interleaved=False, load_a=[2.0], load_b=[2.0])
    assert busy.reason == "busy machine" and busy.short("b").plain() == "A and B cannot be told apart on time"
    assert compare(a, b, "A", "B", min_effect=0.05, noise=1.1).reason == "within twin noise"
    calm = compare(a, b, "A", "B", min_effect=0.05, interleaved=False, load_a=[0.2], load_b=[0.3])
    assert calm.reason == "difference under 5%"
    plain_tie = compare([1.0, 1.2, 0.8, 1.0], [1.0, 1.2, 0.8, 1.1], "A", "B")
    assert plain_tie.reason == "interval includes no difference"
    assert "comes within" not in plain_tie.finding("y").plain()
    assert plain_tie.short("y").plain() == "A and B cannot be told apart on time"
    assert plain_tie.finding("y").plain().startswith("A and B cannot be told apart on time (ratio")
    # grade15: an end that rounds to the least difference (or to no difference) shows the digits that put it
    # on its side
    from dataclasses import replace

    near = replace(v, ratio=1.03, ci_low=1.0178, ci_high=1.05, reason="difference under 2%", min_effect=0.02)
    assert "CI 1.018x to 1.05x" in near.finding("c3").plain()
    holds = replace(plain_tie, ratio=0.956, ci_low=0.931, ci_high=1.003)
    assert "CI 0.931x to 1.003x" in holds.finding("speed").plain()
    # held against a prediction too (grade18: memory's 1.327 below 4/3 printed 1.33x, the prediction's own)
    held = replace(v, ratio=1.23, ci_low=1.12, ci_high=1.3269567, min_effect=0.02)
    assert "CI 1.12x to 1.33x" in held.finding("m").plain()
    assert "CI 1.12x to 1.327x" in replace(held, limits=(4 / 3,)).finding("m").plain()
    # grade20: an end of 1.33044, below 4/3, beside the prediction shown as 1.33x read above it at any digits
    # of its own; the ends are read against the prediction at the digits the page shows it at
    close = replace(held, ci_high=1.33044, limits=(4 / 3,))
    assert "CI 1.12x to 1.3304x" in close.finding("m").plain()  # true, and misread beside '1.33x'
    assert "CI 1.12x to 1.33x" in replace(close, limit_digits=4).finding("m").plain()  # beside '1.333x'
    above = replace(close, ci_high=1.33349, limit_digits=4)  # above 4/3, rounds to its '1.333'
    assert "CI 1.12x to 1.3335x" in above.finding("m").plain()


def test_the_short_form_says_the_verdict_in_words_with_its_ratio_alone():
    """A headline's verdict (issue 42): the winner and the ratio, or that the two cannot be told apart; the
    interval and counts stay in finding(). Each branch, on hand-built samples; its numbers are finding()'s
    own."""
    win = compare(FAST, SLOW, "compiled", "eager", what="time per step")
    assert win.short("s").plain() == "compiled is 1.5x faster than eager on time per step"
    assert compare(SLOW, FAST, "eager", "compiled", what="time per step").short("s").plain() == (
        "compiled is 1.5x faster than eager on time per step"
    )
    top1 = compare([0.9, 0.91, 0.92], [0.5, 0.52, 0.51], "BN", "no BN", lower_is_better=False, what="top-1")
    assert top1.short("t").plain() == "BN has 1.78x the top-1 of no BN"
    loss = compare(FAST, SLOW, "the end", "the start", what="median training loss")
    assert loss.short("l").plain() == "the end has a lower median training loss than the start (1.5x)"
    tie = compare(FAST, [x * 1.005 for x in FAST], "A", "B", what="time per step")
    assert tie.short("x").plain() == "A and B cannot be told apart on time per step"
    few = compare([1.0, 1.1], [2.0, 2.1], "a", "b", what="time per step")
    assert few.short("f").plain() == "too few samples to compare a and b on time per step"
    busy = compare(FAST, SLOW, "a", "b", what="time per step", interleaved=False, load_a=[3.0], load_b=[3.0])
    assert busy.short("b").plain() == "a and b cannot be told apart on time per step"
    # marked as the verdict's statement, its ratio the same Number as the full finding's
    assert win.short("s").html().startswith('<span data-verdict="s">')
    assert [n.name for n in win.short("s").numbers()] == ["s: ratio"]
    assert win.short("s").numbers()[0] == win.finding("s").numbers()[0]


def test_paired_rounds_keep_each_rounds_two_samples_together():
    """grade23b: memory's networks took turns in rounds while the machine slowed from round to round; drawn
    apart, the rounds' drift widened the interval over no difference, though B was 7% quicker in
    every round. Paired, each round's two samples are drawn together: the drift cancels, the ratio stays
    the ratio of medians."""
    a = [0.0150, 0.0160, 0.0170, 0.0180, 0.0190, 0.0200, 0.0210]  # slower each round
    b = [x * 0.93 * (1 + e) for x, e in zip(a, (0.003, -0.002, 0.001, -0.003, 0.002, 0.0, -0.001))]
    apart = compare(b, a, "B", "A", interleaved=True)
    paired = compare(b, a, "B", "A", interleaved=True, paired=True)
    assert apart.outcome == "tie" and apart.ci_low < 1 < apart.ci_high and not apart.paired
    assert paired.outcome == "better" and 1.02 < paired.ci_low <= paired.ratio <= paired.ci_high < 1.08
    assert paired.ratio == apart.ratio and paired.paired and paired.as_dict()["paired"] is True
    assert "over whole rounds" in paired.numbers("p")["low"].source
    assert "over whole rounds" not in apart.numbers("p")["low"].source
    # a round with a non-finite side is left out on both sides; rounds must come in pairs
    held = compare([*b, float("nan")], [*a, 0.03], "B", "A", interleaved=True, paired=True)
    assert (held.n_a, held.n_b, held.ci_low, held.ci_high) == (7, 7, paired.ci_low, paired.ci_high)
    with pytest.raises(ValueError, match="one of each per round: 7 and 6"):
        compare(b, a[:6], paired=True)
    # under PAIRED_MIN_ROUNDS rounds, whole rounds drawn cover far less than 95% (review24: 73% at 3 rounds in
    # a simulation of drifting rounds with no difference): each side is drawn apart, and the record says so
    five = compare(b[:5], a[:5], "B", "A", interleaved=True, paired=True)
    assert PAIRED_MIN_ROUNDS == 6 and not five.paired
    assert (five.ci_low, five.ci_high) == pytest.approx(
        (compare(b[:5], a[:5], interleaved=True).ci_low, compare(b[:5], a[:5], interleaved=True).ci_high)
    )
    assert compare(b[:6], a[:6], interleaved=True, paired=True).paired
    # drawn apart, a round with one side missing keeps the other side's sample, as an unpaired comparison
    # does: the record's paired false recomputes as it reads (review29)
    gap = compare([*b[:4], float("nan")], a[:5], interleaved=True, paired=True)
    again = compare([*b[:4], float("nan")], a[:5], interleaved=True, paired=gap.paired)
    assert (gap.n_a, gap.n_b) == (4, 5) and (gap.ci_low, gap.ci_high) == (again.ci_low, again.ci_high)
