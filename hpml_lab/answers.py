"""The answer types every conclusion returns: Number (a value tagged
measured/predicted/reference/counted/setting), Answer (one lab question's answer: a headline Finding, detail
Findings and general Background, whose numbers are the findings' numbers; see findings.py), Record (a report's
answers and flags) and check(), which refuses a record with an untagged or unexplained number. They live in
the core so that studies/ can build answers without importing report/; report/answer_box.py writes and shows
records.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from .findings import Background, Finding, fmt_value, say

# measured: timed or observed, with its n; predicted: from a model (source says which); reference: a
# publication; counted: an exact count (parameters, FLOPs, bytes saved for backward): no n, no spread, source
# says how counted; setting: a value the run was given (a simulated latency, a budget), not a result: source
# says which setting.
PROVENANCE = ("measured", "predicted", "reference", "counted", "setting")
STATUSES = ("answered", "partial", "not answered")


class RecordError(ValueError):
    """An answer record that would let a report show an untagged or unexplained number."""


@dataclass
class Number:
    name: str
    value: float
    unit: str
    provenance: str
    n: int | None = None  # samples behind the value (a median's n)
    spread: float | None = None  # interquartile range (or as `source` says), same unit; None when n < 3
    source: str = ""  # model (predicted) or publication (reference); optional for measured
    digits: int = 3  # significant digits shown: more only where it must show its side of a limit (beside)

    def text(self) -> str:
        """The number as the answer box lists it: 'epoch: 1.25 s [measured; n = 5, IQR 0.1]'."""
        extra = []
        if self.n is not None:
            extra.append(f"n = {self.n}")
        if self.spread is not None and (self.n or 0) >= 3:
            extra.append(f"IQR {fmt_value(self.spread)}")
        tag = self.provenance + (f": {self.source}" if self.source else "")
        shown = fmt_value(self.value, self.unit, self.digits)
        return f"{self.name}: {shown}" + f" [{tag}{'; ' + ', '.join(extra) if extra else ''}]"


def sentence(text: str) -> str:
    """A finding as a sentence: ends with a full stop unless it ends with one already (or ? !)."""
    text = text.strip()
    return text if not text or text.endswith((".", "?", "!")) else text + "."


@dataclass
class Answer:
    """One lab question's answer. `headline`: the one line a grader reads first (the verdict, about 25 words
    at most); `details`: further findings of this run; `background`: general explanations, shown apart. Its
    numbers are its findings' numbers."""

    question: str
    headline: Finding
    details: list = field(default_factory=list)
    background: list = field(default_factory=list)
    status: str = "answered"
    missing: Any = (
        ""  # what a partial / not answered status lacks: words, or a Finding when it states a number
    )
    verdict: dict | None = None  # verdict.Verdict.as_dict() (with samples) behind a comparison

    def __post_init__(self):
        if not isinstance(self.headline, Finding):  # a text would carry its numbers outside any slot
            raise TypeError(f"an answer's headline is a Finding (findings.say), not {self.headline!r}")
        if isinstance(self.details, Finding):
            self.details = [self.details]
        if isinstance(self.background, Background):
            self.background = [self.background]
        self.details = [d for d in self.details if d is not None]
        self.background = [b if isinstance(b, Background) else Background(b) for b in self.background if b]
        _ = self.missing_finding  # words with a digit typed in them are refused here, as in a template

    @property
    def missing_finding(self) -> Finding:
        """What is missing as a Finding: the one given, or words as a Finding without slots."""
        if isinstance(self.missing, Finding):
            return self.missing
        return say(str(self.missing or "").replace("{", "{{").replace("}", "}}"))

    @property
    def findings(self) -> list[Finding]:
        return [self.headline, *self.details]

    @property
    def text(self) -> str:
        """The plain text: the headline, then the details, each a sentence (for the index and old callers)."""
        return " ".join(sentence(f.plain()) for f in self.findings if f.plain().strip())

    @property
    def numbers(self) -> list[Number]:
        """Every Number its findings state (each once), in the order stated."""
        out: list = []
        for f in [*self.findings, self.missing_finding]:
            out += [n for n in f.numbers() if not any(n is m or n == m for m in out)]
        return out

    def as_dict(self) -> dict[str, Any]:
        """The answer as reports/<task>.answer.json holds it: the plain text and numbers as before, plus each
        finding's plain and html text and the background."""
        return {
            "question": self.question,
            "text": self.text,
            "status": self.status,
            "numbers": [asdict(n) for n in self.numbers],
            "missing": self.missing_finding.plain(),
            "missing_html": self.missing_finding.html(),
            "verdict": self.verdict,
            "headline": {"plain": sentence(self.headline.plain()), "html": sentence(self.headline.html())},
            "details": [{"plain": sentence(d.plain()), "html": sentence(d.html())} for d in self.details],
            "background": [b.text for b in self.background],
        }


@dataclass
class Record:
    task: str
    title: str
    answers: list[Answer]
    flags: list[dict] = field(default_factory=list)  # sanity.Flag.as_dict() entries: message, html, numbers
    synthetic_data: bool = False
    stand_in_model: str = ""  # the stand-in's name, "" when the lab's model ran
    ran_vs_lab: list[dict] = field(default_factory=list)
    reused: int = 0  # runs reused from an earlier run of the task (resumed sweep)
    # the runs the page's numbers come from (results.runs_used): each one's folder, commit, uncommitted
    # changes, start, and whether an earlier render made it ('reused'); the index names a report's commits
    runs: list = field(default_factory=list)
    # what the page shows outside the answers and flags, held so the claims check can read the whole page:
    # tables by name ({"columns", "rows" (cells as shown), "values"}), figures by name ({"alt"}: its labels),
    # and the Numbers of sentences shown in the body (captions, notes, the environment table's load), as dicts
    tables: dict = field(default_factory=dict)
    figures: dict = field(default_factory=dict)
    shown: list = field(default_factory=list)

    @property
    def status(self) -> str:
        got = {a.status for a in self.answers}
        if got == {"answered"}:
            return "answered"
        if got <= {"not answered"}:
            return "not answered"
        return "partial"

    def as_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "answers"}
        answers = [a.as_dict() for a in self.answers]
        return {**data, "answers": answers, "status": self.status, "summary": self.summary()}

    def summary(self) -> str:
        """One line for the index: the first answer's text (and how many more there are)."""
        if not self.answers:
            return "no answer"
        more = len(self.answers) - 1
        return self.answers[0].headline.plain().strip() + (
            f" (+{more} more answer{'s' if more > 1 else ''})" if more else ""
        )


def all_numbers(rec: Record) -> list[Number]:
    """Every Number the record's page states: its answers', its flags' and those of the sentences in its
    body."""
    out = [n for a in rec.answers for n in a.numbers]
    out += [Number(**n) for f in rec.flags for n in f.get("numbers", [])]
    return out + [Number(**n) for n in rec.shown]


def check(rec: Record) -> None:
    """Refuse a record whose numbers lack provenance or share a name, whose statuses are unknown, or whose
    text is not one line."""
    seen: dict[str, Number] = {}
    for num in all_numbers(rec):
        _check_number(rec, num, seen)
    for a in rec.answers:
        if a.status not in STATUSES:
            raise RecordError(
                f"{rec.task}: answer {a.question!r} has status {a.status!r}; valid: {', '.join(STATUSES)}"
            )
        if a.status != "answered" and not a.missing_finding.plain().strip():
            raise RecordError(
                f"{rec.task}: answer {a.question!r} is {a.status} but does not say what is missing"
            )
        if "\n" in a.text.strip():
            raise RecordError(f"{rec.task}: answer {a.question!r} is not one line")


def _check_number(rec: Record, num: Number, seen: dict) -> None:
    if seen.setdefault(num.name, num) is not num and asdict(seen[num.name]) != asdict(num):
        raise RecordError(
            f"{rec.task}: two different numbers are named {num.name!r}: a number's name is its slot in the "
            "page, one per record"
        )
    if num.provenance not in PROVENANCE:
        raise RecordError(
            f"{rec.task}: number {num.name!r} has provenance {num.provenance!r}; valid: "
            f"{', '.join(PROVENANCE)}"
        )
    if num.provenance != "measured" and not num.source:
        raise RecordError(f"{rec.task}: {num.provenance} number {num.name!r} does not say its source")
    if isinstance(num.value, float) and not math.isfinite(num.value):
        raise RecordError(f"{rec.task}: number {num.name!r} is {num.value}")
