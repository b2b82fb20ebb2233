"""The tests' check of a study's answers as a grader's page shows them (imported by test_memory, test_scaling,
test_dataloading, test_tinyimagenet): every number stated is a Number of the record, each name once
(answers.check); every digit of a finding's html lies in a <span data-number> slot that prints fmt() of its Number;
a direction word appears only inside a verdict's statement (<span data-verdict>); a measured Number has its n; a
background states no number."""

import re

from hpml_lab.answers import Record, check
from hpml_lab.findings import fmt, stray_digits

DIRECTION = re.compile(r"\b(faster|slower|rose|fell|better|worse)\b", re.I)
SLOT = re.compile(r'<span data-number="([^"]*)">([^<]*)</span>')


def _outside_verdicts(html: str) -> str:
    """The html with every <span data-verdict>...</span> (nested spans included) taken out."""
    out, depth, verdict_at = [], 0, []
    for tok in re.split(r"(<[^>]+>)", html):
        if tok.startswith("<span"):
            depth += 1
            if "data-verdict" in tok:
                verdict_at.append(depth)
        elif tok.startswith("</span"):
            if verdict_at and verdict_at[-1] == depth:
                verdict_at.pop()
            depth -= 1
        elif not verdict_at:
            out.append(tok)
    return "".join(out)


def holds(answers, task: str = "study") -> None:
    import html as _html

    check(Record(task, "t", answers))
    for a in answers:
        numbers = {n.name: n for n in a.numbers}
        for n in numbers.values():
            assert n.provenance != "measured" or n.n is not None, f"measured {n.name!r} has no n"
        for f in a.findings:
            h = f.html()
            for name, printed in SLOT.findall(h):
                name = _html.unescape(name)
                assert name in numbers and _html.unescape(printed) == fmt(numbers[name]), (name, printed)
            bare = re.sub(r"<[^>]+>", "", SLOT.sub("", h))
            assert stray_digits(bare) == [], f.plain()
            loose = DIRECTION.search(re.sub(r"<[^>]+>", "", _outside_verdicts(h)))
            assert loose is None, f"direction {loose.group(0)!r} outside a verdict: {f.plain()}"
        for b in a.background:
            assert stray_digits(b.text) == [], b.text
