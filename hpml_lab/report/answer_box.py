"""The answer record of a report: the lab question(s) it answers, one line each, with every number tagged.

    from hpml_lab.report import answer_box
    from hpml_lab.findings import say
    step = answer_box.Number("compiled step", 17.3, "ms", "measured", n=40, spread=0.4)
    rec = answer_box.Record("c8", "C8: torch.compile vs eager", [
        answer_box.Answer("Does torch.compile pay off?", say("Compiling paid off"),
                          [say("{v}", v=v.finding("C8 step")), say("Per step: compiled {c}", c=step)])],
        flags=[f.as_dict() for f in flags], synthetic_data=True, stand_in_model="resnet_tiny")
    answer_box.show(rec)       # writes reports/c8.answer.json (atomically) and shows the answer box

Provenance of a number: `measured` (this run), `predicted` (a model: say which in `source`), `reference` (a
published figure: say where in `source`), `counted` (an exact count: parameters, FLOPs, bytes saved for
backward; no n), `setting` (a value the run was given, such as a simulated latency). Status of an answer:
`answered`, `partial` (say what is missing in `missing`, e.g. "needs a GPU"), `not answered`. A record with a
number that has no provenance, or a predicted/reference number without its source, is refused when written, so
no report can show one. The runner puts the box at the top of the rendered page and the one-line answers on
reports/index.html.
"""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path
from typing import Any

from ..answers import PROVENANCE, STATUSES, Answer, Number, Record, RecordError, check  # noqa: F401 (re-exported)
from ..config import output_path
from ..findings import fmt_value
from ..io import atomic_write_json

WORDS = {
    "gpu": "GPU",
    "cpu": "CPU",
    "io": "I/O",
    "lr": "learning rate",
    "num": "",
    "pct": "%",
    "mfu": "MFU",
    "iqr": "IQR",
    "bn": "BN",
    "per": "per",
    "max": "max",
    "min": "min",
}
UNIT_SUFFIX = {
    "s": "(s)",
    "ms": "(ms)",
    "gbps": "(GB/s)",
    "pct": "(%)",
    "mb": "(MB)",
    "gb": "(GB)",
    "mib": "(MiB)",
    "gib": "(GiB)",
}


def readable(name: str) -> str:
    """A column or setting name for a reader: 'per_gpu_batch' -> 'per-GPU batch', 'epoch_s_excl_io' ->
    'epoch excl. I/O (s)', 'num_workers' -> 'workers', 'batch_size' -> 'batch size'."""
    if str(name).endswith("_per_s") and len(str(name)) > 6:  # 'images_per_s' -> 'images/s'
        return readable(str(name)[:-6]) + "/s"
    if "_per_s_" in str(name):  # 'images_per_s_q1' -> 'images/s q1' (it read 'images per q1 (s)')
        head, tail = str(name).split("_per_s_", 1)
        return f"{readable(head)}/s {readable(tail)}"
    parts = str(name).split("_")
    at = next((i for i, p in enumerate(parts) if i and p.lower() in UNIT_SUFFIX), None)
    unit = UNIT_SUFFIX[parts[at].lower()] if at is not None else None
    if at is not None:
        parts = parts[:at] + parts[at + 1 :]
    words = [WORDS.get(p.lower(), p + "." if p.lower() in ("excl", "incl") else p) for p in parts]
    text = " ".join(w for w in words if w).replace("per GPU", "per-GPU").replace("per CPU", "per-CPU")
    return f"{text} {unit}" if unit else text


def scrub_paths(text: str) -> str:
    """Text with this machine's folders taken out: the project and output folders become relative, the home
    folder '~', the temporary folder '$TMPDIR' (for pages handed in: tracebacks and logs name files)."""
    import tempfile

    from ..config import project_root

    for base, short in (
        (output_path("."), ""),
        (project_root(), ""),
        (Path(os.path.expanduser("~")), "~/"),
        (Path(tempfile.gettempdir()), "$TMPDIR/"),
    ):
        b = str(Path(base).resolve())
        if len(Path(b).parts) > 1:  # not inside base64 (a figure's bytes may spell '/tmp/' by chance)
            text = re.sub(r"(?<![A-Za-z0-9+/])" + re.escape(b + os.sep), short.replace("\\", r"\\"), text)
    return text


def percent(fraction_or_pct: float, of_one: bool = True) -> str:
    """'14.2%' from 0.142 (or from 14.2 with of_one=False): a share as a reader writes it, through the one
    formatter (findings.fmt_value), so a table and its sentence agree."""
    return fmt_value(float(fraction_or_pct) * (100.0 if of_one else 1.0), "%")


# set by the runner for its kernel: the pid whose hidden report files the kernel writes
STAGE_ENV = "HPML_REPORT_STAGE"


def path_for(task: str, stage: str | None = None) -> Path:
    """reports/<task>.answer.json. Inside a kernel the runner started (HPML_REPORT_STAGE, or `stage`, its
    pid): reports/.<task>.running-<pid>.answer.json, which replaces the record in place only when the run's
    whole report does (report.guards.land_report): a rerun never costs the report it replaces."""
    stage = os.environ.get(STAGE_ENV, "") if stage is None else stage
    return output_path("reports") / (
        f".{task}.running-{stage}.answer.json" if stage else f"{task}.answer.json"
    )


def write(rec: Record) -> Path:
    check(rec)
    data = rec.as_dict()
    p = path_for(rec.task)
    atomic_write_json(p, data)
    return p


def load(task: str) -> dict[str, Any] | None:
    """The record a task's last run wrote, or None (none written, or unreadable)."""
    p = path_for(task)
    if not p.is_file():  # a FIFO or a device put there would block the index and every page
        return None
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


STATUS_COLOR = {"answered": "#1a7f37", "partial": "#9a6700", "not answered": "#cf222e", "failed": "#cf222e"}


# notices a bundle states once at its top rather than in every answer box (box_html(rec, shared=True))
SHARED_FLAGS = ("stand-in model", "machine busy")
LEGEND = (
    "Every number is tagged: measured (this run), predicted (a model, named), reference (a published figure, "
    "cited), counted (exact), setting (given to the run)."
)


def answer_html(a: dict[str, Any], demonstration: bool = False) -> str:
    """One answer in the box: the question and status, the headline (the line a grader reads first), the
    details under it, the background apart and labelled as general, then its tagged numbers folded. Every
    number of a finding sits in its <span data-number="NAME"> (findings.py), NAME being the Number's name in
    the record. In a demonstration an answer the run gave is tagged `shown`, never `answered`: it answers none
    of the lab's questions (partial and not answered stay as they are: something is missing even there)."""
    from .pages import headline

    nums = "".join(f"<li>{html.escape(Number(**n).text())}</li>" for n in a["numbers"])
    from .pages import finding_html

    shown_missing = (
        finding_html(a["missing_html"])
        if a.get("missing_html") is not None
        else html.escape(a.get("missing") or "")
    )
    missing = f" <i>(missing: {shown_missing})</i>" if a.get("missing") else ""
    head, details = headline(a, "html")
    tag = "shown" if demonstration and a["status"] == "answered" else a["status"]
    background = "".join(
        f"<p class='hpml-background'><i>In general (not a finding of this run):</i> {html.escape(b)}</p>"
        for b in a.get("background") or []
    )
    return (
        f"<li class='hpml-item'><p class='hpml-question'>{html.escape(a['question'])} "
        f"<span style='color:{STATUS_COLOR[a['status']]}'>[{tag}]</span></p>"
        f"<p class='hpml-headline'>{head}</p>"
        + (f"<p class='hpml-details'>{details}{missing}</p>" if details or missing else "")
        + background
        + (
            f"<details data-numbers><summary>its numbers, tagged</summary><ul>{nums}</ul></details>"
            if nums
            else ""
        )
        + "</li>"
    )


def box_html(rec: dict[str, Any], shared: bool = False, shown_status: str | None = None) -> str:
    """The answer box: status, each question's answer (answer_html), and the flags. `shared`: leave out what a
    bundle says once for every report (synthetic data, stand-in model, busy machine, the legend of the tags).
    `shown_status`: what its heading says instead of the record's status (a demonstration's)."""
    from .pages import finding_html

    items = [answer_html(a, demonstration=shown_status == "demonstration") for a in rec["answers"]]
    # a flag is a finding: its numbers in their slots, as the record holds them (a record without html:
    # escaped)
    flags = "".join(
        f"<li><b>{html.escape(f['kind'])}</b>: "
        f"{finding_html(f['html']) if f.get('html') is not None else html.escape(f['message'])}</li>"
        for f in rec["flags"]
        if not (shared and f["kind"] in SHARED_FLAGS)
    )
    notes = []
    if rec.get("synthetic_data") and not shared:
        notes.append("computed on <b>synthetic data</b> in the real on-disk format")
    if rec.get("stand_in_model") and not shared:
        notes.append(f"model <b>{html.escape(rec['stand_in_model'])}</b> stands in for the lab's")
    status = rec["status"]
    # one settings table per page: the report's own ran-vs-lab table; the box says it in a flag
    return (
        f"<div class='hpml-answer' style='border-color:{STATUS_COLOR[status]}'><h2>Answer "
        f"<span style='color:{STATUS_COLOR[status]}'>({html.escape(shown_status or status)})</span></h2>"
        + (f"<p>{'; '.join(notes)}.</p>" if notes else "")
        + f"<ul class='hpml-items'>{''.join(items)}</ul>"
        + (f"<p><b>Flags</b></p><ul class='hpml-flags'>{flags}</ul>" if flags else "")
        + ("" if shared else f"<p class='hpml-legend'>{LEGEND}</p>")
        + "</div>"
    )


def show(rec: Record, pointer: bool = True) -> Path:
    """Write the record and show its box (in JupyterLab and under plain papermill; when hpml-lab renders the
    report it puts the box at the top of the page instead, so it is not shown twice)."""
    p = write(rec)
    from IPython.display import HTML, display

    if os.environ.get("HPML_RENDERING") != "1":
        display(HTML(box_html(load(rec.task) or {})))
    elif pointer:  # the section that asked for the answer says where it is, rather than stand empty
        display(HTML("<p><i>The answer is at the top of this page, in its answer box.</i></p>"))
    return p


def fold_logs(nb, min_lines: int = 3):
    """Training logs (a cell's printed lines, stdout/stderr) folded into a closed <details> the reader can
    open: the report shows its answers, tables and figures, not pages of progress lines. Returns the
    notebook."""
    import nbformat

    for cell in nb.cells:
        merged: list = []  # a log printed line by line arrives as many stream outputs: one log, one fold
        for o in cell.get("outputs", []):
            last = merged[-1] if merged else None
            if (
                o.get("output_type") == "stream"
                and last is not None
                and last.get("output_type") == "stream"
                and last.get("name") == o.get("name")
            ):
                last["text"] = last.get("text", "") + o.get("text", "")
            else:
                merged.append(nbformat.from_dict(dict(o)) if o.get("output_type") == "stream" else o)
        outs = []
        for o in merged:
            text = o.get("text", "") if o.get("output_type") == "stream" else None
            if text is not None and text.count("\n") >= min_lines:
                n = text.count("\n")
                outs.append(
                    nbformat.v4.new_output(
                        "display_data",
                        data={
                            "text/html": (
                                f"<details data-log><summary>training log ({n} "
                                f"lines)</summary><pre>{html.escape(text)}</pre></details>"
                            )
                        },
                    )
                )
            else:
                outs.append(o)
        if "outputs" in cell:
            cell.outputs = outs
    return nb
