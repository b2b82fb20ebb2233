"""The claims check: a report's answers against the record they came from, by structure, not by reading prose.

    from hpml_lab.report import claims
    problems = claims.check_record(answer_box.load("c8"))  # [] when every claim holds
    claims.check_reports(Path("reports"))                 # {task: problems}, every reports/<task>.answer.json

Each finding of an answer is stored as html in which every number is a `<span data-number="NAME">`
(findings.py). In every prose field of an answer that a page shows (question, headline, details, missing,
background): every digit lies in such a slot (digits inside names such as 'top-1' are words); every slot names
a Number of the answer and prints exactly fmt() of it; a direction word (faster, slower, rose, fell, better,
worse) appears only inside a verdict's statement (`<span data-verdict>`, made by Verdict.finding); a measured
Number has its n, and no spread from fewer than 3 samples. An answer written before findings (a plain text)
fails. The flags are read the same way: each is a finding over Numbers the record holds.

The whole page (check_page: reports/<task>.html against its record) is read too. Where the page shows what the
run computed (the outputs of the notebook's cells; its own markdown cells, the same on every page, printed
logs in <pre> and folded training logs are not read), every digit is in a number slot that names a Number of
the record and prints fmt() of it, in a table the record holds (`<table data-table="NAME">`, compared cell by
cell with the record's table NAME), in a figure's labels the record holds (`<img data-figure="NAME">`, its alt
text compared with the record's), in the answer box's list of tagged numbers (each a Number of the record as
Number.text() shows it), or in a name that states no quantity (`<span data-id>`: a run folder, a version).
Anything else is a number the record does not hold.
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
        kind = (
            "number"
            if "data-number" in a
            else "verdict"
            if "data-verdict" in a
            else "id"
            if "data-id" in a
            else ""
        )
        self.stack.append((kind, a.get("data-number") or ""))
        if kind == "number":
            self.slots.append([a["data-number"], ""])

    def handle_endtag(self, tag):
        if self.stack:
            self.stack.pop()

    def handle_data(self, data):
        kinds = [k for k, _ in self.stack]
        if "id" in kinds:  # a name with digits that states no quantity (a run folder): no number to read
            return
        if "number" in kinds:
            self.slots[-1][1] += data
        else:
            self.outside.append(data)
        if "verdict" not in kinds:
            self.unverdicted.append(data)


def verdicts_of(v: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The pairwise verdicts in an answer's verdict: a Verdict.as_dict(), a verdict.best() record whose
    `against` maps each label to a Verdict, or named verdicts ({"data": v, "compute": v})."""
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
    """Every prose field of an answer that a page shows, as (field, html): the question, the headline, the
    details, what is missing and the background (plain fields escaped, so a digit in them is outside any
    slot)."""
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


def record_numbers(rec: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Every Number a record holds, by name: its answers', its flags' and those of the sentences of its
    body."""
    out: dict = {}
    for a in rec.get("answers", []):
        out.update({n["name"]: n for n in a.get("numbers", [])})
    for f in rec.get("flags", []):
        out.update({n["name"]: n for n in f.get("numbers", [])})
    out.update({n["name"]: n for n in rec.get("shown", [])})
    return out


def _check_numbers(numbers, at: str) -> list[str]:
    problems = []
    for n in numbers:
        if n.get("provenance") == "measured" and n.get("n") is None:
            problems.append(f"{at}measured number {n['name']!r} has no n")
        elif n.get("provenance") == "measured" and n["n"] < MIN_SAMPLES and n.get("spread") is not None:
            problems.append(f"{at}measured number {n['name']!r} shows a spread from n = {n['n']}")
    return problems


def check_flag(flag: Mapping[str, Any], numbers: Mapping[str, Any], where: str = "") -> list[str]:
    """One flag against the record's numbers: a finding (html with its numbers in slots), each slot a Number
    of the record printed as fmt() prints it, no digit outside a slot, no direction word."""
    at = f"{where}flag {flag.get('kind', '?')!r}: "
    if flag.get("html") is None:
        return [f"{at}is a plain text, not a finding over named numbers"]
    return _check_html(str(flag["html"]), numbers, at) + _check_numbers(flag.get("numbers", []), at)


def check_record(rec: Mapping[str, Any]) -> list[str]:
    """Every claim of a record (reports/<task>.answer.json, loaded) that its own numbers contradict: its
    answers' and its flags'."""
    where = f"{rec.get('task', '?')}: "
    numbers = record_numbers(rec)
    problems = [p for a in rec.get("answers", []) for p in check_answer(a, where)]
    return problems + [p for f in rec.get("flags", []) for p in check_flag(f, numbers, where)]


class _Page(HTMLParser):
    """A rendered report read for check_page: the text of its outputs (markdown cells, <pre> logs, scripts and
    styles left out) with each number slot, table, figure and tagged-number list it holds."""

    SKIP = ("script", "style", "pre", "head", "title")
    VOID = ("img", "br", "hr", "meta", "link", "input", "col", "wbr", "source")

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, dict]] = []
        self.outside: list[str] = []  # (text outside any slot, table, list or skipped part)
        self.slots: list[list[str]] = []  # [name, printed]
        self.tables: list[tuple[str, list[list[str]]]] = []  # (name or "", rows of cell texts)
        self.figures: list[tuple[str, str]] = []  # (name or "", alt)
        self.listed: list[str] = []  # the answer box's tagged numbers, as shown
        self.captions: list[list[str]] = []  # [figure name, caption as shown]

    def _in(self, pred) -> bool:
        return any(pred(tag, a) for tag, a in self.stack)

    def handle_starttag(self, tag, attrs):
        a = {k: (v if v is not None else "") for k, v in attrs}
        if tag == "img":
            if "alt" in a and (a.get("data-figure") or stray_digits(a["alt"])):
                self.figures.append((a.get("data-figure", ""), a["alt"]))
            return
        if tag in self.VOID:
            return
        self.stack.append((tag, a))
        if "data-figure" in a and "caption" in a.get("class", "").split():
            a["caption"] = True  # a figure's caption (plots.captioned), held in the record beside its labels
            self.captions.append([a["data-figure"], ""])
        elif tag == "span" and "data-number" in a:
            self.slots.append([a["data-number"], ""])
        elif tag == "table":
            self.tables.append((a.get("data-table", ""), []))
        elif tag == "tr" and self.tables and self._in(lambda t, _: t == "table"):
            self.tables[-1][1].append([])
        elif tag in ("td", "th") and self.tables and self.tables[-1][1]:
            self.tables[-1][1][-1].append("")
        elif tag == "li" and self._in(lambda t, x: t == "details" and "data-numbers" in x):
            a["listed"] = True  # an item of the answer box's list of tagged numbers
            self.listed.append("")

    def handle_endtag(self, tag):
        for i in range(
            len(self.stack) - 1, -1, -1
        ):  # close up to the matching tag (html forgives a missing end)
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        if self._in(
            lambda t, a: t in self.SKIP or "data-log" in a or "jp-MarkdownCell" in a.get("class", "").split()
        ):
            return
        if self._in(lambda t, a: "data-id" in a):
            return
        if self._in(lambda t, a: t == "span" and "data-number" in a):
            self.slots[-1][1] += data
            return
        if self._in(lambda t, _: t in ("td", "th")) and self.tables and self.tables[-1][1]:
            self.tables[-1][1][-1][-1] += data
            return
        if self._in(lambda t, a: a.get("caption") is True):
            self.captions[-1][1] += data
            return
        if self._in(lambda t, a: a.get("listed") is True):
            self.listed[-1] += data
            return
        self.outside.append(data)


def _norm(text: str) -> str:
    return " ".join(str(text).replace("\xa0", " ").split())


def check_page(page: str, rec: Mapping[str, Any]) -> list[str]:
    """Every number the rendered page `page` (html) shows that its record `rec` does not hold (module
    docstring): a slot naming no Number or printing another value, a table or figure the record does not hold
    or whose cell or label differs from it, a digit outside all of these."""
    at = f"{rec.get('task', '?')} page: "
    numbers = record_numbers(rec)
    parts = _Page()
    parts.feed(page)
    problems = []
    for name, printed in parts.slots:
        if name not in numbers:
            problems.append(f"{at}shows {printed!r} as {name!r}, which is no number of its record")
        elif _norm(printed) != fmt(Number(**numbers[name])):
            problems.append(
                f"{at}shows {name!r} as {printed!r}; its record holds {fmt(Number(**numbers[name]))!r}"
            )
    tables = rec.get("tables") or {}
    for name, rows in parts.tables:
        cells = [[_norm(c) for c in r] for r in rows if r]
        if not name:
            if any(stray_digits(c) for r in cells for c in r):
                problems.append(f"{at}shows a table the record does not hold: {cells[:2]!r}")
            continue
        held = tables.get(name)
        if held is None:
            problems.append(f"{at}shows the table {name!r}, which its record does not hold")
            continue
        want = [[_norm(c) for c in held["columns"]]] + [[_norm(c) for c in r] for r in held["rows"]]
        if len(cells) != len(want):
            problems.append(f"{at}table {name!r} shows {len(cells)} rows; its record holds {len(want)}")
        for i, (got, exp) in enumerate(zip(cells, want)):
            if got != exp:
                bad = next((k for k, (g, e) in enumerate(zip(got, exp)) if g != e), min(len(got), len(exp)))
                problems.append(
                    f"{at}table {name!r} row {i} column {bad} shows "
                    f"{(got + [''])[bad]!r}; its record holds {(exp + [''])[bad]!r}"
                )
    figures = rec.get("figures") or {}
    for name, alt in parts.figures:
        held = figures.get(name)
        if held is None:
            problems.append(f"{at}shows a figure whose labels its record does not hold: {alt[:120]!r}")
        elif _norm(alt) != _norm(held.get("alt", "")):
            problems.append(
                f"{at}figure {name!r} is labelled {alt[:200]!r}; its record holds {held.get('alt')!r}"
            )
    for name, caption in parts.captions:
        held = (figures.get(name) or {}).get("caption")
        if held is None or _norm(caption) != _norm(held):
            problems.append(f"{at}figure {name!r} is captioned {caption[:200]!r}; its record holds {held!r}")
    texts = {_norm(Number(**n).text()) for n in numbers.values()}
    problems += [
        f"{at}lists {t!r}, which is no number of its record" for t in parts.listed if _norm(t) not in texts
    ]
    outside = "".join(parts.outside)
    for chunk in _chunks(outside):
        problems.append(f"{at}states a number outside any slot, table or figure of its record: {chunk!r}")
    return problems


def _chunks(text: str) -> list[str]:
    """The stretches of `text` around each stray digit (a few words either side), each once."""
    import re

    out = []
    for line in re.split(r"(?<=[.;:!?])\s+|\n", text):
        if stray_digits(line):
            out.append(_norm(line)[:160])
    return out


def check_reports(reports: Path) -> dict[str, list[str]]:
    """check_record over every answer record in a reports folder; a record that cannot be read is a
    problem."""
    out = {}
    for path in sorted(Path(reports).glob("*.answer.json")):
        task = path.name[: -len(".answer.json")]
        try:
            out[task] = check_record(json.loads(path.read_text()))
        except (OSError, ValueError) as e:
            out[task] = [f"{task}: unreadable answer record ({e})"]
    return out


HEADLINE_WORDS = 20  # a headline a student reads in one breath: the verdict in words first
HEADLINE_NUMBERS = 1  # and at most one number (settings such as '2 workers' are labels, not counted)


def headline_problems(
    answer: Mapping[str, Any], numbers: Mapping[str, Any] | None = None, where: str = ""
) -> list[str]:
    """Whether an answer's headline (as a record holds it) is short: at most HEADLINE_WORDS words and at most
    HEADLINE_NUMBERS numbers that are not settings; the statistics belong in the details."""
    head = answer.get("headline") or {}
    plain, stored = str(head.get("plain", "")), str(head.get("html", ""))
    numbers = numbers if numbers is not None else {n["name"]: n for n in answer.get("numbers", [])}
    parts = _Slots()
    parts.feed(stored)
    stated = {name for name, _ in parts.slots if (numbers.get(name) or {}).get("provenance") != "setting"}
    at = f"{where}{answer.get('question', '?')!r}: headline "
    problems = []
    if len(plain.split()) > HEADLINE_WORDS:
        problems.append(f"{at}has {len(plain.split())} words (at most {HEADLINE_WORDS}): {plain!r}")
    if len(stated) > HEADLINE_NUMBERS:
        problems.append(f"{at}states {len(stated)} numbers (at most {HEADLINE_NUMBERS}): {plain!r}")
    return problems
