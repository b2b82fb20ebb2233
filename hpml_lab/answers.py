"""The answer types every conclusion returns: Number (a value tagged measured/predicted/reference/counted/setting),
Answer (one lab question's one-line answer), Record (a report's answers and flags) and check(), which refuses a
record with an untagged or unexplained number. They live in the core so that studies/ can build answers without importing
report/; report/answers.py writes and shows records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# measured: timed or observed, with its n; predicted: from a model (source says which); reference: a publication;
# counted: an exact count (parameters, FLOPs, bytes saved for backward): no n, no spread, source says how counted;
# setting: a value the run was given (a simulated latency, a budget), not a result: source says which setting.
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

    def text(self) -> str:
        v = self.value
        num = (
            f"{v:,.0f}"
            if isinstance(v, (int, float)) and abs(v) >= 1000
            else (f"{v:.3g}" if isinstance(v, float) else str(v))
        )
        extra = []
        if self.n is not None:
            extra.append(f"n = {self.n}")
        if self.spread is not None and (self.n or 0) >= 3:
            extra.append(f"IQR {self.spread:.3g}")
        tag = self.provenance + (f": {self.source}" if self.source else "")
        return (
            f"{self.name}: {num} {self.unit}".rstrip() + f" [{tag}{'; ' + ', '.join(extra) if extra else ''}]"
        )


@dataclass
class Answer:
    question: str
    text: str  # one line, assembled from computed values
    status: str
    numbers: list[Number] = field(default_factory=list)
    missing: str = ""  # what a partial / not answered status lacks
    verdict: dict | None = None  # verdict.Verdict.as_dict() (with samples) behind a comparison


@dataclass
class Record:
    task: str
    title: str
    answers: list[Answer]
    flags: list[dict] = field(default_factory=list)  # sanity.Flag.as_dict() entries
    synthetic_data: bool = False
    stand_in_model: str = ""  # the stand-in's name, "" when the lab's model ran
    ran_vs_lab: list[dict] = field(default_factory=list)
    reused: int = 0  # runs reused from an earlier run of the task (resumed sweep)

    @property
    def status(self) -> str:
        got = {a.status for a in self.answers}
        if got == {"answered"}:
            return "answered"
        if got <= {"not answered"}:
            return "not answered"
        return "partial"

    def summary(self) -> str:
        """One line for the index: the first answer's text (and how many more there are)."""
        if not self.answers:
            return "no answer"
        more = len(self.answers) - 1
        return self.answers[0].text + (f" (+{more} more answer{'s' if more > 1 else ''})" if more else "")


def check(rec: Record) -> None:
    """Refuse a record whose numbers lack provenance, whose statuses are unknown, or whose text is not one line."""
    for a in rec.answers:
        if a.status not in STATUSES:
            raise RecordError(
                f"{rec.task}: answer {a.question!r} has status {a.status!r}; valid: {', '.join(STATUSES)}"
            )
        if a.status != "answered" and not a.missing:
            raise RecordError(
                f"{rec.task}: answer {a.question!r} is {a.status} but does not say what is missing"
            )
        if "\n" in a.text.strip():
            raise RecordError(f"{rec.task}: answer {a.question!r} is not one line")
        for num in a.numbers:
            if num.provenance not in PROVENANCE:
                raise RecordError(
                    f"{rec.task}: number {num.name!r} has provenance {num.provenance!r}; "
                    f"valid: {', '.join(PROVENANCE)}"
                )
            if num.provenance != "measured" and not num.source:
                raise RecordError(f"{rec.task}: {num.provenance} number {num.name!r} does not say its source")
            if isinstance(num.value, float) and not math.isfinite(num.value):
                raise RecordError(f"{rec.task}: number {num.name!r} is {num.value}")
