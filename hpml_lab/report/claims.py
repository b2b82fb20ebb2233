"""The claims check: what a report's sentences state against the answer record they came from.

    from hpml_lab.report import claims
    problems = claims.check_record(answers.load("c8"))     # [] when every claim holds
    claims.check_reports(Path("reports"))                  # {task: problems} over every reports/<task>.answer.json

For each answer of a record (report/answers.py):
- every quantity its text states (a number with a decimal point, or followed by x, % or a unit) is a number of the
  record: one of its Numbers (value, or value x 100 stated as %), or its verdict's ratio, interval or medians,
  equal at the precision the text prints;
- a sentence that compares (faster, slower, better, worse, best, higher/lower than, pays off, a tie) has a verdict,
  and says what the verdict says: a tie is called a tie and states no direction; a direction is the verdict's word
  ("faster"/"slower" for times, "higher"/"lower" otherwise) and names the winner; a line over several verdicts
  (verdict.best, or named ones) states a direction only with a separated verdict's winner and word;
- every measured number has n; with n < 3 it has no spread, and no verdict from fewer than 3 samples states a
  direction.
Integers without a unit (2 workers, batch 128, 5 epochs) are settings, not claims, and are not checked.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..sanity import MIN_SAMPLES

UNITS = r"(?:ms|us|µs|s|min|h|MB|MiB|GB|GiB|KB|KiB|images/s|img/s|samples/s|[GT]?FLOP/s|GFLOP|W)"
# "2 x 8", "1 x B": a spaced x between two operands is a product of settings, never a ratio ("1.21x")
PRODUCT = r"(?!\s+[x×]\s+\w)"
NUMBER = re.compile(
    r"(?<![\w.\-/])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?:"
    + PRODUCT
    + r"\s*(x|×|%)|\s+("
    + UNITS
    + r")(?![\w]))?(?![\w])"
)
DIRECTION = re.compile(
    r"\b(faster|slower|better|worse|higher than|lower than|pays? (?:off|back)|outperforms?|"
    r"beats?|speeds? up|'s best|(?:is|was|trains|works) best|best:)(?!\w)",
    re.I,
)
TIE = re.compile(r"\b(cannot be told apart|can't tell|tie[sd]?|too few samples)\b", re.I)
# "too few to tell whether compiling pays back", "whether it is faster": an open question, not a direction stated
QUESTIONED = re.compile(r"\bwhether\b[^.;:]*", re.I)
RATIO = re.compile(r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?" + PRODUCT + r"\s*(?:x|×)(?![\w])")


def stated_numbers(text: str) -> list[tuple[float, int, str]]:
    """(value, decimals printed, suffix) for every quantity the text states; settings (bare integers) left out."""
    out = []
    for m in NUMBER.finditer(text):
        whole, frac, mark, unit = m.group(1), m.group(2) or "", m.group(3) or "", m.group(4) or ""
        if not (frac or mark or unit):
            continue
        out.append((float(whole.replace(",", "") + frac), max(len(frac) - 1, 0), mark or unit))
    return out


def verdicts_of(v: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The pairwise verdicts in an answer's verdict: a Verdict.as_dict(), a verdict.best() record whose
    `against` maps each label to the best's Verdict against it, or named verdicts ({"data": v, "compute": v})."""
    if not v:
        return []
    if "outcome" in v:
        return [v]
    group = v.get("against") if isinstance(v.get("against"), Mapping) else v
    return [x for x in group.values() if isinstance(x, Mapping) and "outcome" in x]


def _candidates(answer: Mapping[str, Any]) -> list[float]:
    vals: list[float] = []
    for num in answer.get("numbers", []):
        v = num.get("value")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            vals += [float(v), 100.0 * float(v)]  # a fraction may be stated as a percentage
            if num.get("spread") is not None:
                vals.append(float(num["spread"]))
    for v in verdicts_of(answer.get("verdict")):
        if isinstance(v.get("confidence"), (int, float)):
            vals.append(100.0 * v["confidence"])  # "95% CI"
        for key in ("ratio", "ci_low", "ci_high", "median_a", "median_b"):
            x = v.get(key)
            if isinstance(x, (int, float)) and math.isfinite(x) and x:
                vals += [float(x)] + ([1.0 / x] if key in ("ratio", "ci_low", "ci_high") else [])
                if key == "ratio":
                    vals.append(100.0 * (x - 1.0))  # "31% faster" from a 1.31x ratio
    return vals


def _value(token: str) -> tuple[float, int]:
    """'1.31x' -> (1.31, 2): the value and the decimals it is printed with."""
    digits = re.match(r"[\d,]+(?:\.\d+)?", token).group(0)
    return float(digits.replace(",", "")), len(digits.partition(".")[2])


def _matches(value: float, decimals: int, candidates: list[float]) -> bool:
    tol = 0.5 * 10.0**-decimals * 1.001 + 1e-12
    if value == 0:  # "0%" for 0.335% rounds a measured share away: zero is said only of zero
        return any(c == 0 for c in candidates)
    return any(abs(value - c) <= tol or abs(value - round(c, decimals)) <= 1e-9 for c in candidates)


def check_answer(answer: Mapping[str, Any], where: str = "") -> list[str]:
    """Every way one answer's text disagrees with its own numbers and verdict (empty when none)."""
    text, v = answer.get("text", ""), answer.get("verdict")
    at = f"{where}{answer.get('question', '?')!r}: "
    problems = []
    pool = _candidates(answer)
    for value, decimals, suffix in stated_numbers(text):
        if not _matches(value, decimals, pool):
            problems.append(f"{at}states {value:g}{suffix and ' ' + suffix} which is no number of its record")
    direction, tie = DIRECTION.search(QUESTIONED.sub("", text)), TIE.search(text)
    modelled = [
        float(n["value"])
        for n in answer.get("numbers", [])
        if n.get("provenance") != "measured" and isinstance(n.get("value"), (int, float))
    ]
    ratio = next(
        (m for m in RATIO.finditer(text) if not _matches(*_value(m.group(0)), modelled)), None
    )  # a predicted or cited ratio is no comparison of measurements
    if (direction or tie or ratio) and not v:
        problems.append(f"{at}compares ({(direction or tie or ratio).group(0)!r}) without a verdict")
    verdicts = verdicts_of(v)
    if v and not verdicts:
        problems.append(f"{at}has a verdict of no known shape (keys {sorted(v)})")
    directional = [x for x in verdicts if x.get("outcome") in ("better", "worse")]
    if verdicts and not directional:
        if direction:
            problems.append(f"{at}states a direction ({direction.group(0)!r}) from a tie")
        if not tie:
            problems.append(f"{at}does not say its verdict is a tie")
    for x in directional:
        if min(x.get("n_a", 0), x.get("n_b", 0)) < MIN_SAMPLES:
            problems.append(
                f"{at}states a direction from fewer than {MIN_SAMPLES} samples "
                f"(n = {x.get('n_a')} and {x.get('n_b')})"
            )
    for x in directional if len(verdicts) == 1 else []:
        problems += _direction_problems(text, x, at)
    if (
        len(verdicts) > 1 and direction and directional
    ):  # one line over several verdicts: what it states holds
        named = [x for x in directional if not _direction_problems(text, x, at)]
        if not named:
            problems.append(
                f"{at}states {direction.group(0)!r} but names no separated verdict's winner and direction"
            )
    return problems + _number_problems(answer, at)


def _direction_problems(text: str, x: Mapping[str, Any], at: str) -> list[str]:
    problems = []
    up, down = _words(x)
    winner = x.get("label_a") if x.get("outcome") == "better" else x.get("label_b")
    if not re.search(rf"\b({up}|{down})\b", text, re.I):
        problems.append(
            f"{at}does not state its verdict's direction ({up.replace('|', ', ')} or "
            f"{down.replace('|', ', ')})"
        )
    if winner is not None and not re.search(rf"(?<!\w){re.escape(str(winner))}(?!\w)", text, re.I):
        problems.append(f"{at}does not name the verdict's winner {winner!r}")
    return problems


TIMED = re.compile(r"\b(time|times|per step|per batch|per pass|per epoch|wait|seconds|latency)\b", re.I)


def _words(x: Mapping[str, Any]) -> tuple[str, str]:
    """The words a verdict's direction is stated with: faster/slower for a time, else lower/higher (a loss that
    is lower is better: it is lower, or it fell)."""
    if not x.get("lower_is_better", True):
        return "higher|rose", "lower|fell"
    if TIMED.search(str(x.get("what", ""))) or not x.get("what"):
        return "faster", "slower"
    return "lower|fell", "higher|rose"


def _number_problems(answer: Mapping[str, Any], at: str) -> list[str]:
    problems = []
    for num in answer.get("numbers", []):
        if num.get("provenance") != "measured":
            continue
        if num.get("n") is None:
            problems.append(f"{at}measured number {num.get('name')!r} has no n")
        elif num["n"] < MIN_SAMPLES and num.get("spread") is not None:
            problems.append(f"{at}measured number {num.get('name')!r} shows a spread from n = {num['n']}")
    return problems


def check_record(rec: Mapping[str, Any]) -> list[str]:
    """Every claim of a record (reports/<task>.answer.json, loaded) that its own numbers or verdicts contradict."""
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
