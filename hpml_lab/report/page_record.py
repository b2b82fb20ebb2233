"""What one kernel's page shows, held in its answer record so that the claims check reads the whole page
(report/claims.py check_page): tables by name with their cells as shown, the figures' labels, the Numbers of
sentences outside the answer box; the record written again when the page shows more after it. Beside that
state, the displays that are mostly holding: a table through the one formatter (`table`), answers and findings
in the body (`said`), the note on reused configurations, and the answer record itself (`answer`).

A notebook reaches them as nb.<name> (report/notebook.py re-exports them).
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import pandas as pd

from .. import sanity
from ..config import RunConfig
from ..findings import fmt_value

try:  # the page's other modules (displays, figures, notebook) show through these names too
    from IPython.display import HTML, Markdown, display  # noqa: F401
except ImportError:  # plain Python: print instead
    HTML = Markdown = str  # type: ignore

    def display(obj):  # type: ignore
        print(obj)


# What this kernel's page shows beside the answer record, held in it so that the claims check can read the
# whole page (report/claims.py check_page): tables by name, figures' labels, the Numbers of sentences in the
# body. The record answer() wrote is written again when the page shows more after it (the environment table
# comes last).
_PAGE: dict[str, dict] = {"tables": {}, "figures": {}, "shown": {}}
_RECORD: list = []


_BUSY: list = []  # the 'machine busy' flag answer() put on this page, if any


_REUSED = 0  # configurations reused from an earlier run in this kernel (reused_note), for the answer record


_STARTED: list = []  # when this page began (new_page): a run started before it was made by an earlier render


def new_page() -> None:
    """Forget what an earlier page of this kernel showed (config() calls it: one page per run of the
    notebook)."""
    from .. import results

    _PAGE.update(tables={}, figures={}, shown={})
    _RECORD.clear()
    _BUSY.clear()
    results.forget_runs()
    _STARTED[:] = [results.now()]


def page_runs() -> list[dict[str, Any]]:
    """The runs this page's numbers come from (results.runs_used), each marked 'reused' where it started
    before this page did (an earlier render made it: a resumed sweep)."""
    from .. import results

    start = _STARTED[0] if _STARTED else ""
    return [
        {**r, "reused": bool(start and r["started_at"] and r["started_at"] < start)}
        for r in results.runs_used()
    ]


def _rewrite() -> None:
    if _RECORD:
        from . import answer_box

        rec = _RECORD[-1]
        rec.tables, rec.figures = dict(_PAGE["tables"]), dict(_PAGE["figures"])
        rec.shown = list(_PAGE["shown"].values())
        rec.runs = page_runs()
        answer_box.write(rec)


def hold_numbers(*findings: Any) -> None:
    """The Numbers of findings the page shows outside the answer box (a caption, a note, a table's cell), held
    in the record: every number on the page is a Number of its record."""
    from dataclasses import asdict

    for f in findings:
        for n in f.numbers() if hasattr(f, "numbers") and callable(f.numbers) else getattr(f, "numbers", []):
            _PAGE["shown"][n.name] = asdict(n)
    _rewrite()


def hold_table(name: str, columns: list, rows: list[list], values: list[list] | None = None) -> None:
    """A table the page shows, held in the record by name: its columns and cells as shown (and the values they
    were formatted from), so that a cell on the page that differs from it is caught."""

    def plain(v):
        if isinstance(v, float) and v != v:
            return None
        return (
            v.item()
            if hasattr(v, "item")
            else (v if isinstance(v, (int, float, str, bool)) or v is None else str(v))
        )

    from .answer_box import scrub_paths  # as the page shows them: the runner scrubs the page the same way

    _PAGE["tables"][name] = {
        "columns": [scrub_paths(str(c)) for c in columns],
        "rows": [[scrub_paths(str(c)) for c in r] for r in rows],
        "values": [[plain(v) for v in r] for r in (values if values is not None else rows)],
    }
    _rewrite()


def hold_figure(name: str, alt: str, caption: str = "") -> None:
    """A figure the page shows, held in the record by name: its alt text and caption (figures.save_figure),
    whose numbers the claims check reads."""
    _PAGE["figures"][name] = {"alt": alt, **({"caption": caption} if caption else {})}
    _rewrite()


def busy_flag() -> Any:
    """The 'machine busy' flag answer() put on this page, or None (the environment table names its run)."""
    return _BUSY[0] if _BUSY else None


def _table_name(name: str) -> str:
    if name:
        return name
    k = len(_PAGE["tables"]) + 1
    while f"table {k}" in _PAGE["tables"]:
        k += 1
    return f"table {k}"


def number_text(x: Any, na: str = "-") -> str:
    """A table value for a reader: whole numbers with thousands separators (50,000), others with 3 significant
    digits (0.0323, 14.2, 3,309), missing ones as `na`, booleans as marks (✓, ✗); text as it is."""
    import math
    import numbers

    from .pages import mark

    if type(x).__name__ in ("bool", "bool_"):  # Python's and numpy's: a mark, never True/False
        return mark(bool(x))
    if x is None or (isinstance(x, numbers.Real) and math.isnan(float(x))):
        return na
    if not isinstance(x, numbers.Real):
        return str(x)
    return fmt_value(x)  # the one formatter the findings use too, so a table and its sentence agree


def table(
    df: pd.DataFrame, percent: tuple[str, ...] = (), of_one: bool = True, na: str = "-", name: str = ""
):
    """A table as the report shows it: column names through answer_box.readable ('per_gpu_batch' -> 'per-GPU
    batch'), numbers through number_text, the `percent` columns (fractions, or percentages with of_one=False)
    through answer_box.percent ('14.2%'); no index. Held in the answer record by `name` (default 'table N'),
    its cells as shown, and marked data-table on the page, so the claims check compares the two."""
    import numbers

    from .answer_box import percent as pct
    from .answer_box import readable

    shown = df.copy()
    numeric = []  # columns of numbers: right-aligned, so their digits line up (text stays at the left)
    for c in shown.columns:
        # a cell that says in words why it is empty ('n/a': too few samples for a spread) keeps its column one
        # of numbers, right-aligned
        values = [
            v for v in shown[c] if v is not None and v == v and not (isinstance(v, str) and v in (na, "n/a"))
        ]
        if values and all(
            isinstance(v, numbers.Real) and type(v).__name__ not in ("bool", "bool_") for v in values
        ):
            numeric.append(readable(c))
        if c in percent:
            shown[c] = [na if v is None or v != v else pct(v, of_one=of_one) for v in shown[c]]
        else:
            shown[c] = [number_text(v, na) for v in shown[c]]
    name = _table_name(name)
    hold_table(name, [readable(c) for c in shown.columns], shown.values.tolist(), df.values.tolist())
    styler = (  # every value escaped: a cell may hold text from a file or the user
        shown.rename(columns={c: readable(c) for c in shown.columns})
        .style.set_table_attributes(f'data-table="{html.escape(name)}"')
        .hide(axis="index")
        .format(escape="html")
        .format_index(escape="html", axis=1)
    )
    if numeric:
        styler = styler.set_properties(subset=numeric, **{"text-align": "right"})
        styler = styler.set_table_styles(
            {c: [{"selector": "th", "props": [("text-align", "right")]}] for c in numeric}, overwrite=False
        )
    return styler


def _sentence(f: Any) -> str:
    """A finding's html ending as a sentence: a headline without its full stop ran into the next finding
    ('... unlike ordinary autograd's RevNet saved ...')."""
    shown = f.html()
    return shown if f.plain().rstrip().endswith((".", "!", "?", ":", ";")) else shown + "."


def said(*items: Any, questions: bool = False) -> None:
    """Shows answers (their headline and details) or findings in the report's body as the record holds them:
    each number in its <span data-number> slot, never formatted again here; an answer's background follows
    apart, labelled as general. `questions`: each answer's question first, in bold."""
    from IPython.display import HTML, display

    parts, general = [], []
    for it in items:
        findings = getattr(it, "findings", None) or [it]
        findings = _unrepeated(findings) if getattr(it, "details", None) else findings
        hold_numbers(*findings)
        q = f"<b>{html.escape(it.question)}</b> " if questions and getattr(it, "question", "") else ""
        parts.append(q + " ".join(_sentence(f) for f in findings))
        general += [b.html() for b in getattr(it, "background", [])]
    body = "".join(f"<p>{p}</p>" for p in parts)
    if general:
        body += "<p><i>In general (not measured in this run):</i> " + " ".join(general) + "</p>"
    display(HTML(body))


def _unrepeated(findings: list) -> list:
    """An answer's headline and details for the body, without the headline where its first detail restates it
    with more (a verdict's headline, then the same verdict with its interval and counts): said once."""
    head, first = findings[0].plain().strip().rstrip("."), findings[1].plain().strip()
    return findings[1:] if head and first.startswith(head) else findings


def reused_note(items) -> None:
    """Say how many configurations of a resumed sweep came from an earlier run, if any."""
    global _REUSED
    n = sum(getattr(i, "status", "") == "skipped" for i in items)
    _REUSED += n  # the answer record says it too, and the index from it
    if n:
        from ..answers import Number
        from ..findings import say

        name = "configurations reused from an earlier run"
        k = sum(
            1 for held in _PAGE["shown"] if held.startswith(name)
        )  # a page's later sweeps: their own names
        count = Number(name + (f" (sweep {k + 1})" if k else ""), n, "", "counted", source="the sweep")
        said(
            say(
                "{n} configuration was complete from an earlier run and was reused (a resumed sweep); its "
                "start time is in its meta.json"
                if n == 1
                else "{n} configurations were complete from an earlier run and were reused (a resumed "
                "sweep); their start times are in their meta.json",
                n=count,
            )
        )


def answer(
    cfg: RunConfig,
    info: Mapping[str, Any],
    items: list,
    flags=(),
    title: str = "",
    lab: Mapping[str, Any] = sanity.LAB,
    pointer: bool = True,
) -> None:
    """Build this report's answer record (answer_box.Record) from computed answers and flags, write it to
    reports/<task>.answer.json and show it (at the top of the rendered page). `pointer`: on a rendered page,
    say where the answer went in the cell that asked for it (a section that would stand empty otherwise);
    False where the cell sits in a section of other content (its Environment, say)."""
    from . import answer_box, tasks

    stand_in = sanity.stand_in(cfg, lab["model"]) if "model" in lab else None
    flags = [f for f in flags if f is not None]
    if stand_in and all(f.kind != "stand-in model" for f in flags):
        flags.insert(0, stand_in)
    task = tasks.TASKS.get(cfg.task)
    # any run this report made or showed (machine_load / environment_table), where the page states a time
    busy = sanity.busiest_seen() if task is None or task.times else None
    if busy and all(f.kind != "machine busy" for f in flags):
        flags.append(busy)
    differ = sanity.ran_vs_lab(cfg, lab) if lab else []
    if differ and all(
        f.kind != "settings differ" for f in flags
    ):  # the table shows a difference: so does a flag
        flags.append(sanity.differ(cfg, lab))
    task_title = title or (tasks.TASKS[cfg.task].title if cfg.task in tasks.TASKS else cfg.task)
    rec = answer_box.Record(
        cfg.task,
        task_title,
        list(items),
        [f.as_dict() for f in flags],
        synthetic_data=info.get("kind") == "synthetic" and info.get("read", True),  # read, where it was
        stand_in_model=cfg.model if stand_in else "",
        ran_vs_lab=differ,
        reused=_REUSED,
        runs=page_runs(),
        tables=dict(_PAGE["tables"]),
        figures=dict(_PAGE["figures"]),
        shown=list(_PAGE["shown"].values()),
    )
    _RECORD[:] = [rec]
    _BUSY[:] = [f for f in flags if f.kind == "machine busy"]
    answer_box.show(rec, pointer=pointer)
