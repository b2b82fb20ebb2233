"""The claims check: a report's answers against the record they came from, by structure, not by reading prose.

    from hpml_lab.report import claims
    problems = claims.check_record(answer_box.load("c8"))     # [] when every claim holds
    claims.check_reports(Path("reports"))                  # {task: problems} over every reports/<task>.answer.json

Each finding of an answer is stored as html in which every number is a `<span data-number="NAME">` (findings.py).
In every prose field of an answer that a page shows (question, headline, details, missing, background): every
digit lies in such a slot (digits inside names such as 'top-1' are words); every slot names a Number of the answer
and prints exactly fmt() of it; a direction word (faster, slower, rose, fell, better, worse) appears only inside a
verdict's statement (`<span data-verdict>`, made by Verdict.finding); a measured
Number has its n, and no spread from fewer than 3 samples. An answer written before findings (a plain text) fails.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from ..answers import Number
from ..findings import DIRECTION, fmt, stray_digits
from ..sanity import MIN_SAMPLES


class _Slots(HTMLParser):
    """Splits a finding's html into the text outside number slots, the slots (name, printed text) and the text
    outside verdicts."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, str]] = []  # (kind, name) per open span
        self.outside, self.unverdicted, self.slots = [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        kind = "number" if "data-number" in a else ("verdict" if "data-verdict" in a else "")
        self.stack.append((kind, a.get("data-number") or ""))
        if kind == "number":
            self.slots.append([a["data-number"], ""])

    def handle_endtag(self, tag):
        if self.stack:
            self.stack.pop()

    def handle_data(self, data):
        kinds = [k for k, _ in self.stack]
        if "number" in kinds:
            self.slots[-1][1] += data
        else:
            self.outside.append(data)
        if "verdict" not in kinds:
            self.unverdicted.append(data)


def verdicts_of(v: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The pairwise verdicts in an answer's verdict: a Verdict.as_dict(), a verdict.best() record whose `against`
    maps each label to a Verdict, or named verdicts ({"data": v, "compute": v})."""
    if not v:
        return []
    if "outcome" in v:
        return [v]
    group = v.get("against") if isinstance(v.get("against"), Mapping) else v
    return [x for x in group.values() if isinstance(x, Mapping) and "outcome" in x]


def _check_html(stored: str, numbers: Mapping[str, Any], at: str) -> list[str]:
    """One shown piece of an answer (as html, its numbers in slots) against the answer's numbers."""
    parts = _Slots()
    parts.feed(stored)
    problems = []
    outside = "".join(parts.outside)
    if stray_digits(outside):
        problems.append(f"{at}states a number outside a number slot: {outside!r}")
    for name, printed in parts.slots:
        if name not in numbers:
            problems.append(f"{at}shows {printed!r} as {name!r}, which is no number of its record")
        elif printed != fmt(Number(**numbers[name])):
            problems.append(
                f"{at}shows {name!r} as {printed!r}; its record holds {fmt(Number(**numbers[name]))!r}"
            )
    direction = DIRECTION.search("".join(parts.unverdicted))
    if direction:
        problems.append(f"{at}states a direction ({direction.group(0)!r}) outside a verdict")
    return problems


def shown(answer: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every prose field of an answer that a page shows, as (field, html): the question, the headline, the details,
    what is missing and the background (plain fields escaped, so a digit in them is outside any slot)."""
    out = [("question", html.escape(str(answer.get("question") or "")))]
    out += [("headline", answer["headline"]["html"])]
    out += [("details", d["html"]) for d in answer.get("details", [])]
    missing = answer.get("missing_html")
    out += [("missing", missing if missing is not None else html.escape(str(answer.get("missing") or "")))]
    out += [("background", html.escape(str(b))) for b in answer.get("background", [])]
    return out


def check_answer(answer: Mapping[str, Any], where: str = "") -> list[str]:
    """Every way one answer's shown prose disagrees with its own numbers (empty when none)."""
    at = f"{where}{answer.get('question', '?')!r}: "
    if answer.get("legacy") or "headline" not in answer:
        return [f"{at}is a plain text, not findings over named numbers"]
    numbers = {n["name"]: n for n in answer.get("numbers", [])}
    problems = []
    for part, stored in shown(answer):
        problems += _check_html(stored, numbers, f"{at}{part} ")
    for n in numbers.values():
        if n.get("provenance") == "measured" and n.get("n") is None:
            problems.append(f"{at}measured number {n['name']!r} has no n")
        elif n.get("provenance") == "measured" and n["n"] < MIN_SAMPLES and n.get("spread") is not None:
            problems.append(f"{at}measured number {n['name']!r} shows a spread from n = {n['n']}")
    return problems


def check_record(rec: Mapping[str, Any]) -> list[str]:
    """Every claim of a record (reports/<task>.answer.json, loaded) that its own numbers contradict."""
    return [p for a in rec.get("answers", []) for p in check_answer(a, f"{rec.get('task', '?')}: ")]


def check_reports(reports: Path) -> dict[str, list[str]]:
    """check_record over every answer record in a reports folder; a record that cannot be read is a problem."""
    out = {}
    for path in sorted(Path(reports).glob("*.answer.json")):
        task = path.name[: -len(".answer.json")]
        try:
            out[task] = check_record(json.loads(path.read_text()))
        except (OSError, ValueError) as e:
            out[task] = [f"{task}: unreadable answer record ({e})"]
    return out
