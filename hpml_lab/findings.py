"""Findings: what a report states of this run, written as templates whose every number is a named Number of
the answer record, and Background: what usually happens and why, shown apart and labelled as general.

    from hpml_lab.findings import say, fmt, fmt_in, Background
    f = say("data loading {data}, training {train} per epoch", data=data_s, train=train_s)  # Numbers
    f.plain()    # 'data loading 1.25 s, training 3.5 s per epoch'
    f.html()     # 'data loading <span data-number="data-loading epoch">1.25 s</span>, training ...'
    f.numbers()  # [data_s, train_s]
    fmt(data_s)  # '1.25 s': the one formatter of a value, used by sentences and tables alike
    fmt_in("global batch {gb}: loss", gb=8192)  # 'global batch 8,192: loss': a value in a Number's name

A template holds `{name}` slots only, each bound to a Number, a nested Finding (a verdict's statement), a word
(a label such as 'eager') or an Ident (a name with digits that states no quantity: a run folder); a digit
typed in the template is refused, so every number a finding states is a bound Number the record holds. Digits
inside names ('top-1', 'ResNet-18', 'bf16') are words, not numbers.
"""

from __future__ import annotations

import html as _html
import math
import numbers
import re
import string
from dataclasses import dataclass, field, replace
from typing import Any

Number = Any  # hpml_lab.answers.Number (answers.py imports this module, so it is recognised by its fields)

# a digit that is part of a name: right after a letter ('bf16', 'L2') or after a letter and a hyphen ('top-1')
_NAME_DIGITS = re.compile(r"(?<=[A-Za-z])\d+|(?<=[A-Za-z]-)\d+")
NO_SPACE_UNITS = ("%", "x")
# a comparison's direction: said only by a verdict (Verdict.finding marks its statement), never typed in prose
DIRECTION = re.compile(r"\b(faster|slower|rose|fell|better|worse)\b", re.I)


def stray_digits(text: str) -> list[str]:
    """The digits of `text` that are not part of a name: what a template may not type and an answer's text may
    state only inside a number slot."""
    return re.findall(r"\d", _NAME_DIGITS.sub("", text))


def fmt_value(x: Any, unit: str = "", digits: int = 3) -> str:
    """One value as every sentence and table shows it: whole numbers with thousands separators (50,000),
    others with `digits` significant digits, 3 unless a Number asks for more (0.0323, 14.2), and whole from
    1,000 up (3,309; with decimals only where more digits are asked than the whole part has), never an
    exponent; '%' and 'x' follow the value, other units follow a space; text as it is; a missing value is
    'n/a'. A Number that asks for fewer than 3 digits, where its whole part has more, is rounded to them and
    shown whole (an estimate beside a wide interval, such as C8's break-even: 'about 6,700 steps', '670
    steps', '100' for 99.6)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    if isinstance(x, float) and not math.isfinite(x):
        return "n/a"
    if isinstance(x, float) and x != 0 and digits < 3:
        rounded = round(x, digits - 1 - math.floor(math.log10(abs(x))))  # 99.6 at 2 digits is 100
        if abs(rounded) >= 10**digits:
            text = f"{rounded:,.0f}"
            return text + unit if unit in NO_SPACE_UNITS else (f"{text} {unit}" if unit else text)
    if isinstance(x, float) and x != 0 and abs(x) < 1000:
        x = round(x, digits - 1 - math.floor(math.log10(abs(x))))  # 999.96 is 1,000, not '1e+03'
    if isinstance(x, int):
        text = f"{x:,}"
    elif abs(x) >= 1000:  # whole, unless a Number asks for more digits than its whole part has (beside)
        decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
        text = f"{x:,.{decimals}f}".rstrip("0").rstrip(".") if decimals else f"{x:,.0f}"
    elif x == 0:
        text = "0"
    elif abs(x) < 1e-4:  # 'g' would print an exponent
        decimals = digits - 1 - math.floor(math.log10(abs(x)))
        text = f"{x:.{decimals}f}".rstrip("0").rstrip(".")
    else:
        text = f"{x:.{digits}g}"
    if not unit:
        return text
    return text + unit if unit in NO_SPACE_UNITS else f"{text} {unit}"


def fmt(num: Number) -> str:
    """THE formatter of one Number in a sentence: its value (fmt_value, at the Number's significant digits)
    with its unit ('1.25 s', '12.3%', '1.31x', '2,048 images')."""
    return fmt_value(num.value, num.unit, getattr(num, "digits", 3))


MOST_DIGITS = 6  # beside() shows at most this many significant digits


def _beside_one(num: Number, limit: float | Number) -> Number:
    """`num` with the significant digits it needs to show on which side of `limit` it lies, where a sentence
    sets the two side by side ('load average 2.002 on 2 cores, above 1 per core', not '2 ... above 1'; 'loss
    2.803 ... above 2.3 + 0.5', not '2.8'; '95% CI ... to 1.327x' beside a prediction of 4/3, shown 1.33x):
    its own digits where the value shown is already on its side of the limit and of the limit as shown, more
    (up to MOST_DIGITS) where rounding shows either or crosses it. A value equal to the limit keeps its
    digits. A limit given as a Number is read as the page shows it, at its own digits."""
    digits = getattr(num, "digits", 3)
    if not math.isfinite(float(limit.value if _is_number(limit) else limit)):
        return num  # no side of a NaN limit to show (a diverged run's loss set beside another's limit)
    if _is_number(limit):  # a limit the page shows as a Number: as fmt() prints it, at its own digits
        as_shown = float(fmt_value(float(limit.value), "", getattr(limit, "digits", 3)).replace(",", ""))
        limit = float(limit.value)
    else:
        as_shown = float(fmt_value(float(limit)).replace(",", ""))  # the limit as a sentence shows it
    if not isinstance(num.value, float) or not math.isfinite(num.value) or num.value == limit:
        return num
    side = num.value > limit

    def hidden(d: int) -> bool:  # the value shown reads as the limit, or on its other side
        x = float(fmt_value(num.value, "", d).replace(",", ""))
        return x in (limit, as_shown) or (x > limit) != side or (x > as_shown) != (num.value > as_shown)

    while digits < MOST_DIGITS and hidden(digits):
        digits += 1
    return num if digits == getattr(num, "digits", 3) else replace(num, digits=digits)


def beside(num: Number, *limits: float | Number) -> Number:
    """`num` showing its side of each of `limits` (_beside_one, one limit after another): the fewest
    significant digits that do, at least its own."""
    for limit in limits:
        num = _beside_one(num, limit)
    return num


def fmt_in(template: str, **values: Any) -> str:
    """A Number's name or source, or a label, that holds values ('global batch {gb}: loss', 'ln {classes}: a
    uniform guess'): each value put in through the one formatter (fmt_value), so that a count in a name reads
    as sentences and tables write it ('global batch 8,192'); a word stays as it is."""

    def plain(v: Any) -> Any:  # numpy's and pandas' numbers as Python's, which fmt_value knows
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            return v
        return int(v) if isinstance(v, numbers.Integral) else float(v)

    return template.format_map({k: fmt_value(plain(v)) for k, v in values.items()})


class Ident(str):
    """A name that holds digits but states no quantity: a run folder ('loader-w0-b128-484b6bb8'), a model
    ('resnet_tiny'), a version. A slot may hold one; its html marks it <span data-id>, where the claims check
    reads no number."""


def _is_number(x: Any) -> bool:
    return all(hasattr(x, k) for k in ("name", "value", "unit", "provenance"))


@dataclass(frozen=True)
class Finding:
    """A statement of this run: a template and its bound slots (Numbers, nested Findings, words)."""

    template: str
    slots: dict = field(default_factory=dict)
    capital: bool = False  # the first letter shown upper-case (a sentence that starts with a label)
    verdict: str = (
        ""  # set on a verdict's statement: its html is marked data-verdict (direction words live there)
    )

    def _parts(self):
        for literal, name, _, _ in string.Formatter().parse(self.template):
            yield literal, (self.slots[name] if name is not None else None), name is not None

    def _render(self, as_html: bool) -> str:
        out = []
        for literal, value, has in self._parts():
            out.append(_html.escape(literal, quote=False) if as_html else literal)
            if not has:
                continue
            if isinstance(value, Finding):
                out.append(value._render(as_html))
            elif _is_number(value):
                text = fmt(value)
                out.append(
                    f'<span data-number="{_html.escape(value.name)}">{_html.escape(text, quote=False)}</span>'
                    if as_html
                    else text
                )
            elif isinstance(value, Ident) and as_html:
                out.append(f"<span data-id>{_html.escape(str(value), quote=False)}</span>")
            else:
                out.append(_html.escape(str(value), quote=False) if as_html else str(value))
        text = "".join(out)
        if self.capital:
            text = _capitalize(text, as_html)
        if as_html and self.verdict:
            text = f'<span data-verdict="{_html.escape(self.verdict)}">{text}</span>'
        return text

    def plain(self) -> str:
        return self._render(False)

    def html(self) -> str:
        """The text escaped, each Number as <span data-number="NAME">formatted value</span>."""
        return self._render(True)

    def numbers(self) -> list[Number]:
        """Every bound Number in the order stated, nested findings' included (each once)."""
        out: list = []
        for _, value, _has in self._parts():
            got = value.numbers() if isinstance(value, Finding) else ([value] if _is_number(value) else [])
            out += [n for n in got if not any(n is m for m in out)]
        return out

    def up(self) -> Finding:
        """This finding with its first letter upper-case (a sentence that starts with a label)."""
        return Finding(self.template, self.slots, capital=True, verdict=self.verdict)

    def marked(self, verdict: str) -> Finding:
        """This finding marked as the statement of the verdict `verdict` (Verdict.finding does it)."""
        return Finding(self.template, self.slots, capital=self.capital, verdict=verdict)

    def __str__(self) -> str:
        return self.plain()


def _capitalize(text: str, as_html: bool) -> str:
    if not as_html:
        return text[:1].upper() + text[1:]
    m = re.match(r"((?:<[^>]*>)*)(.)", text, re.S)  # the first character outside a tag
    return text if not m else m.group(1) + m.group(2).upper() + text[m.end() :]


def say(template: str, **slots: Any) -> Finding:
    """A Finding from a template of `{name}` slots. Each slot is a Number, a Finding or a word (str without a
    stray digit); a digit typed in the template, a format spec, an unbound or an unused slot is refused."""
    names = []
    for literal, name, spec, conv in string.Formatter().parse(template):
        if stray_digits(literal):
            raise ValueError(
                f"a digit typed in the template {template!r}: bind every number as a Number slot"
            )
        if name is None:
            continue
        if not name.isidentifier() or spec or conv:
            raise ValueError(
                f"slot {{{name}}} of {template!r}: only plain {{name}} slots (the formatter is fmt)"
            )
        if name not in slots:
            raise ValueError(f"slot {{{name}}} of {template!r} is not bound")
        names.append(name)
    unused = set(slots) - set(names)
    if unused:
        raise ValueError(f"slots {sorted(unused)} are not in the template {template!r}")
    for name, value in slots.items():
        if isinstance(value, (Finding,)) or _is_number(value):
            continue
        if not isinstance(value, str):
            raise ValueError(
                f"slot {{{name}}} is a {type(value).__name__}: bind a Number, a Finding or a word"
            )
        if stray_digits(value) and not isinstance(value, Ident):
            raise ValueError(
                f"slot {{{name}}} = {value!r} holds a digit: bind it as a Number (or a name as Ident)"
            )
    return Finding(template, dict(slots))


def join(parts: list[Finding], sep: str = "; ", last: str | None = None) -> Finding:
    """Findings joined into one ('a; b; c', or 'a, b and c' with sep=', ', last=' and ')."""
    parts = list(parts)
    if not parts:
        return say("")
    seps = [sep] * (len(parts) - 1) + [""]
    if last is not None and len(parts) > 1:
        seps[-2] = last
    template = "".join("{part_%d}" % i + s.replace("{", "{{").replace("}", "}}") for i, s in enumerate(seps))
    return say(template, **{f"part_{i}": p for i, p in enumerate(parts)})


@dataclass(frozen=True)
class Background:
    """A general explanation (what usually happens, and why): shown apart from the findings, labelled as
    general. It states no number of this run (a digit is refused) and no direction (a comparison is a
    verdict's)."""

    text: str

    def __post_init__(self):
        if stray_digits(self.text):
            raise ValueError(f"background states a number: {self.text!r}; a number of this run is a finding")
        if DIRECTION.search(self.text):
            raise ValueError(f"background states a direction: {self.text!r}; a comparison is a verdict's")

    def plain(self) -> str:
        return self.text

    def html(self) -> str:
        return _html.escape(self.text, quote=False)
