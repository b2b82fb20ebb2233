"""Verdicts computed from samples: is A faster than B, slower, or can't we tell?

Every comparison a report states comes from here, never from a sentence written in a notebook.

    from hpml_lab.verdict import compare, best
    v = compare(eager_step_s, compiled_step_s, "eager", "compiled", what="time per step")
    v.outcome          # "better" (A lower), "worse", or "tie"
    v.finding("C8 step").plain()  # "compiled is 1.31x faster than eager on time per step (95% CI ...)"
    best({0: t0, 2: t2, 4: t4})   # the best label, or every label tied with it

The ratio is median(B) / median(A) for lower-is-better samples (times), so > 1 means A is faster. Its
confidence interval is a percentile bootstrap: both samples resampled with replacement (seeded, so a
report renders the same verdict every time), the ratio of medians recomputed `n_boot` times. A verdict
is "better" or "worse" only when the whole interval lies on one side of 1 (beyond `min_effect`, so a
0.5% difference on a noisy machine is a tie); with fewer than three samples on either side it is a tie
("too few samples"), since two values give no spread to judge by. An interval wholly on one side of 1 that
does not clear `min_effect` is a tie whose sentence says the two "differ, perhaps negligibly" (reason
"difference under"), unless the design rules below would not let the samples show a side at all: it is then
the tie those rules make.

Where A and B took turns in rounds, the i-th sample of each from the same round, `paired=True` says so: with
at least PAIRED_MIN_ROUNDS rounds the bootstrap then resamples whole rounds, each round's two samples kept
together, so a round the machine slowed slows both sides of the ratio and its drift widens the interval
far less. With fewer, each side is drawn apart (wider, as before): in simulations of rounds that drifted
with no difference, 3 to 5 whole rounds drawn gave a "95%" interval that held no difference in only about 73%
to 92% of them, and named a winner the more often the noisier the rounds. `Verdict.paired` says which was
done. The point ratio is the same ratio of medians either way.

A verdict knows how its samples were taken: `interleaved=True` (A B A B repeats, so the load hits both alike),
`interleaved=False` (one side's runs after the other's) with the machine's load per core during each side
(`load_a`, `load_b`). Runs one after the other whose load moved by more than `load_margin` (load per core), or
whose load was not recorded, or made on a busy machine (a load per core above `busy_load`, sanity's
threshold), cannot be told apart (for times: a loss or an accuracy does not depend on the load): on a busy
machine other work takes turns with one side's runs and not with the other's, so a back-to-back difference may
be the machine's, however steady its load average looked. Interleaved samples (A B A B, or repeated in rounds)
share whatever load there was, so they keep their direction on a busy machine. Nor can a difference within
`noise`, the ratio by which two twin configurations of this machine differed. `Verdict.finding(name)` states
the comparison as a Finding whose ratio, interval and counts are Numbers of the answer record, named from
`name`; direction words come only from it.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .sanity import BUSY_LOAD_PER_CORE

MIN_SAMPLES = 3
# the rounds a paired verdict needs before it draws whole rounds (fewer: each side apart; module docstring)
PAIRED_MIN_ROUNDS = 6
TIMED = re.compile(r"\b(time|times|per step|per batch|per pass|per epoch|wait|seconds|latency)\b", re.I)
# what the machine's load moves: times, and the rates made of them (images/s, throughput, bandwidth); a loss
# or an accuracy does not feel it. Sequential samples of these are held to the load rules (_design)
LOADED = re.compile(TIMED.pattern + r"|images/s|throughput|per second|bandwidth|\brates?\b", re.I)
LOAD_MARGIN = 0.5  # load per core two sequential sides may differ by and still be compared
# load per core above which back-to-back timings are not compared: the threshold of sanity's 'machine busy'
# flag
BUSY_LOAD = BUSY_LOAD_PER_CORE


# Why a comparison names no direction, by its reason (Verdict.reason starts with the key), after the tie's
# words (Verdict._tie_words: "{a} and {b} cannot be told apart on {what}", or "... differ, perhaps
# negligibly, ..."); each slot is one of Verdict.numbers(). Any other reason: TIE_PLAIN.
TIE_PLAIN = " (ratio {ratio}, {conf} CI {low} to {high}; n = {na} and {nb})"
TIES = {
    "too few samples": ": too few samples (n = {na} and {nb}; at least {min} each are needed for a spread)",
    "load moved": ": their runs were made one after the other while the machine's load per core moved "
    "between {load_lo} and {load_hi}, more than the {margin} such a comparison allows (ratio {ratio}, "
    "{conf} CI {low} to {high}; n = {na} and {nb})",
    "busy machine": ": their runs were made one after the other, not interleaved, on a busy machine (load "
    "per core up to {load_hi}, above {busy}), so other work may have slowed one side and not the other "
    "(ratio {ratio}, {conf} CI {low} to {high}; n = {na} and {nb})",
    "load not recorded": ": their runs were made one after the other and the machine's load during them was "
    "not recorded (ratio {ratio}, {conf} CI {low} to {high}; n = {na} and {nb})",
    "within twin noise": ": the difference (ratio {ratio}, {conf} CI {low} to {high}; n = {na} and {nb}) is "
    "within the {noise} by which twin configurations of this machine differed",
    "difference under": ": the interval comes within {effect} of no difference, the least difference this "
    # one side of 1, not clear of it
    "check counts (ratio {ratio}, {conf} CI {low} to {high}; n = {na} and {nb})",
}


@dataclass(frozen=True)
class Verdict:
    label_a: str
    label_b: str
    outcome: str  # "better": A beats B; "worse": B beats A; "tie": can't tell
    ratio: float  # how many times better A is than B (ratio of medians); nan without data
    ci_low: float
    ci_high: float
    confidence: float
    median_a: float
    median_b: float
    n_a: int
    n_b: int
    lower_is_better: bool
    what: str
    reason: str = ""  # why a tie: "too few samples", "interval includes no difference", "load moved", ...
    interleaved: bool | None = None  # None: how the samples were taken was not said
    load_a: tuple = ()  # the machine's load per core during A's samples (sequential designs)
    load_b: tuple = ()
    load_margin: float = LOAD_MARGIN
    busy_load: float = BUSY_LOAD  # load per core above which back-to-back samples cannot be compared
    noise: float | None = None  # twin-configuration noise (a ratio >= 1) the difference must exceed
    min_effect: float = 0.02  # the least difference (as a fraction) the whole interval must clear
    limits: tuple = ()  # other values its interval is held against (a prediction), as ci_low/ci_high run
    limit_digits: int = 3  # the significant digits the page shows `limits` at (memory's 4/3 as 1.333x)
    # whether the interval drew whole rounds (paired samples, at least PAIRED_MIN_ROUNDS of them)
    paired: bool = False

    @property
    def winner(self) -> str | None:
        return {"better": self.label_a, "worse": self.label_b}.get(self.outcome)

    def words(self) -> tuple[str, str]:
        if not self.lower_is_better:
            return ("higher", "lower")
        return ("faster", "slower") if self.timed else ("lower", "higher")

    @property
    def undecided(self) -> bool:
        """A tie for want of samples (fewer than MIN_SAMPLES on a side): no evidence that the two are alike,
        so a sentence must not call it a tie. (A non-finite ratio with enough samples is also "too few
        samples".)"""
        return self.reason == "too few samples" and min(self.n_a, self.n_b) < MIN_SAMPLES

    @property
    def has_interval(self) -> bool:
        """Whether the verdict has an interval (enough samples on both sides to draw one)."""
        return math.isfinite(self.ci_low) and math.isfinite(self.ci_high)

    @property
    def statistical(self) -> str:
        """The outcome by the interval alone, before the design's rules (runs one after the other, their load,
        twin noise): "better" where its low end clears the least difference, "worse" where its high end
        does on the other side, else "tie". What a sentence about the measured numbers themselves may rest
        on (an excess over what the processes can give, explained by the sequential runs), not a claim that
        one side is faster."""
        if not self.has_interval:
            return "tie"
        if self.ci_low > 1 + self.min_effect:
            return "better"
        return "worse" if self.ci_high < 1 / (1 + self.min_effect) else "tie"

    @property
    def timed(self) -> bool:
        """Whether the samples are times (said faster/slower) rather than another lower-is-better value (a
        loss)."""
        return not self.what or bool(TIMED.search(self.what))

    def numbers(self, name: str) -> dict[str, Any]:
        """The verdict's values as Numbers of the record, named from `name` (the ratio and interval as stated:
        winner over loser)."""
        from .answers import Number
        from .findings import beside

        src = "verdict.compare: ratio of medians, percentile bootstrap interval" + (
            " over whole rounds (each round's two samples kept together)" if self.paired else ""
        )
        flip = self.outcome == "worse"
        r, lo, hi = (
            (1 / self.ratio, 1 / self.ci_high, 1 / self.ci_low)
            if flip
            else (self.ratio, self.ci_low, self.ci_high)
        )
        n = min(self.n_a, self.n_b)
        # an interval's ends beside no difference and the least difference they are judged by show the digits
        # that put them on their side (grade15: a tie 'within 2% of no difference' showed its low end 1.0178
        # as '1.02x'; an interval holding 1 showed its high end 1.003 as '1x')
        edge = 1 + self.min_effect
        # as the stated interval runs, each read at the digits the page shows it at (an end of 1.3304 beside a
        # prediction shown as 1.33 reads above it, whatever its own digits: grade20)
        shown_limits = [
            Number(
                f"{name}: limit",
                1 / x if flip else x,
                "x",
                "setting",
                source="Verdict.limits",
                digits=self.limit_digits,
            )
            for x in self.limits
        ]
        low = Number(f"{name}: interval low", lo, "x", "measured", n=n, source=src)
        high = Number(f"{name}: interval high", hi, "x", "measured", n=n, source=src)
        nums = {
            "ratio": Number(f"{name}: ratio", r, "x", "measured", n=n, source=src),
            "low": beside(low, 1.0, edge if lo >= 1 else 1 / edge, *shown_limits),
            "high": beside(high, 1.0, 1 / edge if hi < 1 else edge, *shown_limits),
            "conf": Number(f"{name}: confidence", round(100 * self.confidence), "%", "setting", source=src),
            "na": Number(
                f"{name}: samples of {self.label_a}", self.n_a, "", "counted", source="samples compared"
            ),
            "nb": Number(
                f"{name}: samples of {self.label_b}", self.n_b, "", "counted", source="samples compared"
            ),
            "min": Number(
                f"{name}: samples needed", MIN_SAMPLES, "", "setting", source="verdict.MIN_SAMPLES"
            ),
        }
        loads = [*self.load_a, *self.load_b]
        if loads:
            lsrc = "the machine's load average per core, read with each run"
            nums["load_lo"] = Number(
                f"{name}: lowest load per core", min(loads), "", "measured", n=len(loads), source=lsrc
            )
            nums["load_hi"] = beside(  # "up to {load_hi}, above {busy}": on its side of the busy line
                Number(
                    f"{name}: highest load per core", max(loads), "", "measured", n=len(loads), source=lsrc
                ),
                self.busy_load,
            )
            nums["margin"] = Number(
                f"{name}: load margin", self.load_margin, "", "setting", source="verdict.LOAD_MARGIN"
            )
            nums["busy"] = Number(
                f"{name}: busy load per core", self.busy_load, "", "setting", source="verdict.BUSY_LOAD"
            )
        nums["effect"] = Number(
            f"{name}: least difference", round(100 * self.min_effect, 3), "%", "setting", source=src
        )
        if self.noise is not None:
            nums["noise"] = Number(
                f"{name}: twin noise",
                self.noise,
                "x",
                "setting",
                source="how far twin configurations of this machine differed",
            )
        return nums

    def finding(self, name: str, label_a=None, label_b=None):
        """The comparison as a Finding over the Numbers of numbers(name); `label_a`/`label_b` (a word or a
        Finding such as say("{w} workers", w=...)) replace the labels where they hold digits."""
        from .findings import say

        a = label_a if label_a is not None else self.label_a
        b = label_b if label_b is not None else self.label_b
        x = self.numbers(name)
        ns = {"na": x["na"], "nb": x["nb"]}
        interval = {"ratio": x["ratio"], "conf": x["conf"], "low": x["low"], "high": x["high"]}
        if self.outcome in ("better", "worse"):
            win, lose = (a, b) if self.outcome == "better" else (b, a)
            up, _ = self.words()
            template = (
                "{win} is {ratio} {up} than {lose} on {what} ({conf} CI {low} to {high}; n = {na} and {nb})"
                if self.timed and self.lower_is_better
                else "{what} is {up} for {win} than for {lose} by {ratio} ({conf} CI {low} to {high}; n = "
                "{na} and {nb})"
            )
            f = say(
                template,
                win=win,
                lose=lose,
                up=up,
                what=self.what,
                **interval,
                **ns,
            )
        else:  # no direction: the sentence says why (TIES), over the numbers its template names
            why = next((t for r, t in TIES.items() if self.reason.startswith(r)), TIE_PLAIN)
            template = self._tie_words() + why
            slots = {"a": a, "b": b, "what": self.what, **x}
            used = {n for _, n, _, _ in string.Formatter().parse(template) if n}
            f = say(template, **{n: slots[n] for n in used})
        return f.marked(name)

    def short(self, name: str, label_a=None, label_b=None):
        """The verdict in words for a headline, read in one breath: the winner and the ratio ('compiled is
        1.31x faster than eager on time per step'), or the tie's words (_tie_words); the interval, the
        counts and why a tie is one are finding(name)'s, for the details. Its numbers are those of
        numbers(name)."""
        from .findings import say

        a = label_a if label_a is not None else self.label_a
        b = label_b if label_b is not None else self.label_b
        if self.outcome in ("better", "worse"):
            win, lose = (a, b) if self.outcome == "better" else (b, a)
            up, _ = self.words()
            template = (
                "{win} is {ratio} {up} than {lose} on {what}"
                if self.timed and self.lower_is_better
                else "{win} has a {up} {what} than {lose} ({ratio})"
                if self.lower_is_better
                else "{win} has {ratio} the {what} of {lose}"
            )
            slots = dict(win=win, lose=lose, up=up, what=self.what, ratio=self.numbers(name)["ratio"])
            used = {n for _, n, _, _ in string.Formatter().parse(template) if n}
            f = say(template, **{n: slots[n] for n in used})
        elif self.undecided:
            f = say("too few samples to compare {a} and {b} on {what}", a=a, b=b, what=self.what)
        else:
            f = say(self._tie_words(), a=a, b=b, what=self.what)
        return f.marked(name)

    def _tie_words(self) -> str:
        """A tie's words before its reason. An interval wholly on one side of no difference that comes within
        the least difference of it separates the two, perhaps by a negligible amount: "cannot be told apart"
        would deny what the samples show (grade35b, grade38b: separated samples called that), and "about
        equal" or "may differ only negligibly" would bound the difference where the interval's far end lies
        well beyond it (grade19: 1.0055x to 1.476x; review39)."""
        if self.reason.startswith("difference under"):
            return "{a} and {b} differ, perhaps negligibly, on {what}"
        if self.undecided:  # no evidence that the two are alike (grade40g: n = 2 against 780 read as a tie)
            return "{a} and {b} cannot be compared on {what}"
        return "{a} and {b} cannot be told apart on {what}"

    def as_dict(self) -> dict[str, Any]:
        """Everything needed to recompute the verdict (the samples are added by compare)."""
        return asdict(self)


def _clean(values: Iterable[float]) -> np.ndarray:
    a = np.asarray([float(v) for v in values], dtype=float)
    return a[np.isfinite(a)]


def compare(
    a: Sequence[float],
    b: Sequence[float],
    label_a: str = "A",
    label_b: str = "B",
    *,
    lower_is_better: bool = True,
    what: str = "time",
    confidence: float = 0.95,
    n_boot: int = 2000,
    min_effect: float = 0.02,
    seed: int = 0,
    interleaved: bool | None = None,
    load_a: Sequence[float] | None = None,
    load_b: Sequence[float] | None = None,
    load_margin: float = LOAD_MARGIN,
    busy_load: float = BUSY_LOAD,
    noise: float | None = None,
    paired: bool = False,
) -> Verdict:
    """Compare two samples (e.g. per-step seconds from interleaved repeats). See the module docstring.
    `paired`: a[i] and b[i] were taken in the same round (as many on each side; a round with a non-finite
    side is left out); its rounds are drawn whole where there are at least PAIRED_MIN_ROUNDS of them."""
    if paired:
        if len(a) != len(b):
            raise ValueError(f"paired samples need one of each per round: {len(a)} and {len(b)} given")
        pa, pb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        keep = np.isfinite(pa) & np.isfinite(pb)
        xa, xb = pa[keep], pb[keep]
        paired = bool(xa.size >= PAIRED_MIN_ROUNDS)
        if not paired:  # drawn apart, as an unpaired comparison is: each side's own finite samples (review29:
            # a record's paired false then recomputes as it reads)
            xa, xb = _clean(a), _clean(b)
    else:
        xa, xb = _clean(a), _clean(b)
    ma = float(np.median(xa)) if xa.size else math.nan
    mb = float(np.median(xb)) if xb.size else math.nan

    def ratio_of(med_a, med_b):
        return (med_b / med_a) if lower_is_better else (med_a / med_b)

    ratio = ratio_of(ma, mb) if xa.size and xb.size and ma > 0 and mb > 0 else math.nan
    common = dict(
        label_a=label_a,
        label_b=label_b,
        ratio=ratio,
        confidence=confidence,
        median_a=ma,
        median_b=mb,
        n_a=int(xa.size),
        n_b=int(xb.size),
        lower_is_better=lower_is_better,
        what=what,
        interleaved=interleaved,
        load_a=tuple(float(x) for x in load_a or ()),
        load_b=tuple(float(x) for x in load_b or ()),
        load_margin=load_margin,
        busy_load=busy_load,
        noise=noise,
        min_effect=min_effect,
        paired=paired,
    )
    if xa.size < MIN_SAMPLES or xb.size < MIN_SAMPLES or not math.isfinite(ratio):
        return Verdict(outcome="tie", ci_low=math.nan, ci_high=math.nan, reason="too few samples", **common)
    rng = np.random.default_rng(seed)
    if paired:  # whole rounds drawn: each round's two samples together
        rounds = rng.integers(0, xa.size, size=(n_boot, xa.size))
        meds_a, meds_b = np.median(xa[rounds], axis=1), np.median(xb[rounds], axis=1)
    else:
        meds_a = np.median(rng.choice(xa, size=(n_boot, xa.size), replace=True), axis=1)
        meds_b = np.median(rng.choice(xb, size=(n_boot, xb.size), replace=True), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        boots = ratio_of(meds_a, meds_b)
    boots = boots[np.isfinite(boots)]
    tail = (1 - confidence) / 2 * 100
    lo, hi = (float(x) for x in np.percentile(boots, [tail, 100 - tail]))
    if lo > 1 + min_effect:
        outcome, reason = "better", ""
    elif hi < 1 / (1 + min_effect):
        outcome, reason = "worse", ""
    elif lo <= 1 <= hi:
        outcome, reason = "tie", "interval includes no difference"
    else:  # wholly on one side of no difference, within the least difference of it: apart, perhaps by
        # little, where the design lets the samples show a side at all (runs one after the other on a busy
        # machine do not: review39, "may differ only negligibly" of such runs claimed a difference)
        outcome, reason = "tie", _design("better" if lo > 1 else "worse", lo, hi, common)[1]
        reason = reason or f"difference under {min_effect:.0%}"
    if outcome != "tie":
        outcome, reason = _design(outcome, lo, hi, common)
    return Verdict(outcome=outcome, ci_low=lo, ci_high=hi, reason=reason, **common)


def _design(outcome: str, lo: float, hi: float, common: dict) -> tuple[str, str]:
    """A separated verdict kept only where its design allows it: sequential runs on a steady, recorded load of
    an idle machine, and a difference beyond the twin-configuration noise."""
    loads = [*common["load_a"], *common["load_b"]]
    loaded = not common["what"] or bool(LOADED.search(common["what"]))  # a loss or an accuracy: no
    if common["interleaved"] is False and loaded:
        if not common["load_a"] or not common["load_b"]:
            return "tie", "load not recorded"
        if max(loads) - min(loads) > common["load_margin"]:
            return "tie", "load moved"
        if max(loads) > common["busy_load"]:
            return "tie", "busy machine"
    noise = common["noise"]
    if noise is not None and (lo if outcome == "better" else 1 / hi) <= noise:
        return "tie", "within twin noise"
    return outcome, ""


@dataclass(frozen=True)
class Best:
    label: Any  # the label with the best median
    tied: tuple  # labels no verdict separates from it (the best included)
    verdicts: dict  # label -> Verdict of the best against it


def best(
    samples: Mapping[Any, Sequence[float]],
    *,
    lower_is_better: bool = True,
    what: str = "time",
    loads: Mapping[Any, Sequence[float]] | None = None,
    **kw: Any,
) -> Best:
    """The label with the best median, and every label the data cannot separate from it. `loads` (label -> the
    machine's load per core during its runs) says the labels ran one after the other: each comparison is then
    sequential, with each side's own load."""
    meds = {k: float(np.median(_clean(v))) if _clean(v).size else math.nan for k, v in samples.items()}
    finite = {k: m for k, m in meds.items() if math.isfinite(m)}
    if not finite:
        raise ValueError("best() needs at least one label with samples")
    top = (min if lower_is_better else max)(finite, key=finite.get)

    def design(k) -> dict:
        if loads is None:
            return kw
        return {**kw, "interleaved": False, "load_a": loads.get(top) or (), "load_b": loads.get(k) or ()}

    verdicts = {
        k: compare(samples[top], v, str(top), str(k), lower_is_better=lower_is_better, what=what, **design(k))
        for k, v in samples.items()
        if k != top
    }
    tied = (top,) + tuple(k for k, v in verdicts.items() if v.outcome != "better")
    return Best(label=top, tied=tied, verdicts=verdicts)


def sample_record(v: Verdict, a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """The verdict with its input samples, for an answer record: anyone can recompute it."""
    return {**v.as_dict(), "samples_a": [float(x) for x in a], "samples_b": [float(x) for x in b]}


def target_met(v: Verdict, threshold: float, at_least: bool = True) -> bool | None:
    """Whether a target on the verdict's ratio is met: True only when the whole confidence interval is on the
    target's side, False when it is wholly on the other side, None ("can't tell") when the interval straddles
    the threshold or there were too few samples. `at_least`: the target is ratio >= threshold, else ratio <=
    threshold."""
    if v.reason == "too few samples" or not (v.ci_low == v.ci_low and v.ci_high == v.ci_high):
        return None
    lo, hi = v.ci_low, v.ci_high
    if at_least:
        return True if lo >= threshold else (False if hi < threshold else None)
    return True if hi <= threshold else (False if lo > threshold else None)
