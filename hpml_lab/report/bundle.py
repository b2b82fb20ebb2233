"""One hand-in: every task's answer box first, then every report, in one self-contained HTML (and a PDF where
Chromium is installed), built from the executed notebooks and answer records that `hpml-lab report` left.

    hpml-lab report --bundle            # bundle the reports already rendered (says which are missing)
    hpml-lab report --bundle --rerun    # run every task first, then bundle

Figures are embedded PNGs (as in the reports); traces and snapshots stay linked by relative paths
(artifacts/<file>, beside bundle.html), so they still open when the reports folder is handed in as a whole.
"""

from __future__ import annotations

import html
import shutil
import subprocess
from pathlib import Path

from ..data.checks import first_line
from ..envinfo import environment, hardware_label
from ..io import atomic_write_text
from . import answer_box, guards, tasks
from .answer_box import fold_logs  # noqa: F401 (bundle.fold_logs: the pages and the bundle fold alike)

CSS = """body{font-family:sans-serif;margin:2em auto;max-width:1100px;line-height:1.4}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ccc;padding:3px 7px;text-align:left}
th{background:#f3f3f3}img{max-width:100%}section.task{page-break-before:always;border-top:3px solid #333;
margin-top:2em}pre{white-space:pre-wrap;font-size:0.85em}"""


def shared_notices(recs: dict[str, dict]) -> str:
    """What the answers have in common, said once at the top of the bundle instead of in every box: synthetic
    data, a stand-in model, a busy machine (each naming its reports, or 'every report'), the tags' legend."""
    n = len(recs)

    def which(ids: list[str]) -> str:
        return "every report" if len(ids) == n else ", ".join(ids)

    out = []
    synthetic = [t for t, r in recs.items() if r.get("synthetic_data")]
    if synthetic:
        # a task that times steps on batches already loaded (memory's) is said apart: not the pipeline
        loaded = [t for t in synthetic if t in tasks.TASKS and tasks.TASKS[t].fixed_batch]
        pipeline = [t for t in synthetic if t not in loaded]
        timings = (
            ["timings reflect the real pipeline" + (f" ({', '.join(pipeline)})" if loaded else "")]
            if pipeline
            else []
        ) + ([f"{' and '.join(loaded)}'s timings are of steps on batches already loaded"] if loaded else [])
        out.append(
            f"<p class='hpml-notice'><b>Synthetic data</b> ({which(synthetic)}): computed on a synthetic "
            f"dataset in "
            "the real on-disk format; "
            + "; ".join([*timings, "losses and accuracies are not the real dataset's"])
            + ".</p>"
        )
    stand_in: dict[str, list[str]] = {}
    for t, r in recs.items():
        if r.get("stand_in_model"):
            stand_in.setdefault(r["stand_in_model"], []).append(t)
    for model, ids in stand_in.items():
        out.append(
            f"<p class='hpml-notice'><b>Stand-in model</b> ({which(ids)}): {html.escape(model)} ran instead "
            f"of the "
            "lab's model: its times, memory and accuracies are not the lab model's.</p>"
        )
    busy = [t for t, r in recs.items() if any(f.get("kind") == "machine busy" for f in r.get("flags", []))]
    if busy:
        out.append(
            f"<p class='hpml-banner'><b>Busy machine</b> ({which(busy)}): times are slower and noisier than "
            f"on an idle "
            "machine (each report's flag says how it was busy: its load average or CPU steal).</p>"
        )
    out.append(f"<p class='hpml-legend'>{answer_box.LEGEND}</p>")
    return "".join(out)


def demonstration_banner(demo: list[str], n: int) -> str:
    """At the bundle's top when some of its reports are demonstrations (smoke or tiny runs): never a
    hand-in."""
    if not demo:
        return ""
    which = "Every report here" if len(demo) == n else f"{len(demo)} of its {n} reports ({', '.join(demo)})"
    return (
        f"<p class='hpml-banner'><b>A demonstration, not a hand-in.</b> {html.escape(which)} ran at a "
        f"demonstration "
        "profile (smoke or tiny: a few batches, to show every step working): their numbers do not answer the "
        "lab's questions. The reports to hand in come from <code>--profile full</code> on the real data, on "
        "a GPU.</p>"
    )


def _report_body(executed: Path) -> str:
    import nbformat
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="basic")
    exporter.exclude_input = True
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    body, _ = exporter.from_notebook_node(fold_logs(nbformat.read(str(executed), as_version=4)))
    return body


def write_bundle(reports: Path, log=print) -> Path:
    """reports/bundle.html from reports/executed/<task>.ipynb and reports/<task>.answer.json, in task order; a
    report a killed run left set aside is put back first (guards.recover_reports); a line at least every 20 s
    while it runs (Chromium's PDF can take a while)."""
    from ..ticker import ticking

    with ticking("bundle", say=log):
        return _write_bundle(reports, log)


def _write_bundle(reports: Path, log) -> Path:
    from .runner import lab_order

    guards.recover_reports()

    present = [
        tasks.TASKS[t] for t in lab_order(tasks.TASKS) if (reports / "executed" / f"{t}.ipynb").is_file()
    ]
    if not present:
        from ..config import ConfigError

        raise ConfigError(
            f"nothing to bundle in {reports}: run `hpml-lab report` (or `hpml-lab run TASK`) first"
        )
    from .pages import PAGE_CSS, demonstration

    toc, boxes, sections, damaged, recs, demo = [], [], [], [], {}, []
    for t in present:
        executed = reports / "executed" / f"{t.id}.ipynb"
        rec, problem = guards.read_record(t.id)
        try:
            body = _report_body(executed) if not problem else ""
        except Exception as e:  # noqa: BLE001 (cut short, '{}', not a notebook: that report is missing, not the bundle)
            problem = f"{executed} is not a whole notebook ({type(e).__name__}: {first_line(e)[:80]})"
        if problem:
            log(f"bundle: {answer_box.scrub_paths(problem)}; {t.id} is bundled as missing")
            damaged.append(t.id)
            continue
        status = rec["status"] if rec else "no answer record"
        ran, _ = guards.read_outcome(executed.with_suffix(".json"))
        shown = None
        if ran and demonstration(str(ran.get("profile", ""))):
            demo.append(f"{t.id} ({ran['profile']})")
            status = shown = "demonstration" if status in ("answered", "partial") else status
        if rec:
            recs[t.id] = rec
        toc.append(f"<li><a href='#{t.id}'>{html.escape(t.title)}</a> ({html.escape(status)})</li>")
        boxes.append(
            f"<h3><a href='#{t.id}'>{html.escape(t.id)}</a></h3>"
            + (
                answer_box.box_html(rec, shared=True, shown_status=shown)  # shared notices: said once, above
                if rec
                else "<p>No answer record: the notebook did not finish.</p>"
            )
        )
        sections.append(f"<section class='task' id='{t.id}'><h1>{html.escape(t.title)}</h1>{body}</section>")
    missing = [t for t in lab_order(tasks.TASKS) if tasks.TASKS[t] not in present or t in damaged]
    if len(damaged) == len(present):
        from ..config import ConfigError

        raise ConfigError(
            f"nothing to bundle in {reports}: every report there is damaged (see the lines above)"
        )
    if missing:
        log(
            f"bundle: missing {', '.join(missing)} (not rendered yet or damaged: `hpml-lab run TASK`, or "
            "`hpml-lab report --bundle --rerun` for every task)"
        )
    env = environment()
    page = (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>hpml-lab: all reports</title>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<style>{CSS}{PAGE_CSS}</style></head><body><div class='hpml-page'><h1>hpml-lab: all "
        f"reports</h1><p>Machine: {html.escape(hardware_label(env))}; torch {env['torch']}; commit "
        f"<code>{env['commit'][:10]}</code>{' (uncommitted changes)' if env['dirty'] else ''}. Each "
        f"report's environment table is at its "
        f"end.</p>{demonstration_banner(demo, len(present) - len(damaged))}"
        f"<h2>Contents</h2><ol>{''.join(toc)}</ol>"
        f"<h2>Answers</h2>{shared_notices(recs)}{''.join(boxes)}"
        + (
            f"<p>Not in this bundle (not rendered or damaged): {html.escape(', '.join(missing))}.</p>"
            if missing
            else ""
        )
        + f"{''.join(sections)}</div></body></html>"
    )
    path = reports / "bundle.html"
    atomic_write_text(path, answer_box.scrub_paths(page))  # no folder of this machine in the hand-in
    log(
        f"bundle: {path} ({path.stat().st_size / 1e6:.1f} MB, {len(present) - len(damaged)} reports)"
        + (f"; a demonstration, not a hand-in: {', '.join(demo)}" if demo else "")
    )
    pdf = to_pdf(path)
    if pdf:
        log(f"bundle: {pdf}")
    elif not chromium():
        log(NO_PDF)
    return path


NO_PDF = (
    "bundle: no PDF made: Chromium is not installed (apt-get install chromium, or print bundle.html to PDF "
    "from any browser; then `hpml-lab report --bundle` again)"
)


def chromium() -> str | None:
    return next(
        (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None
    )


PDF_SECONDS = 120  # a bundle of every report prints in about 10 s; Chromium blocked by a dialog never ends


def to_pdf(page: Path) -> Path | None:
    """The page printed to PDF by headless Chromium, when it is installed; None otherwise (or if printing
    failed, which is said). Written under a temporary name and renamed: never a half-written bundle.pdf."""
    import os
    import tempfile

    exe = chromium()
    if not exe:
        return None
    pdf = page.with_suffix(".pdf")
    part = page.with_name(f".{pdf.name}.{os.getpid()}.part")
    with tempfile.TemporaryDirectory(prefix="hpml-chromium-") as profile:
        # no sandbox (root in containers), no GPU, no background connections (refused on closed networks)
        cmd = [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            f"--print-to-pdf={part}",
            "--no-pdf-header-footer",
            page.resolve().as_uri(),
        ]
        try:
            subprocess.run(cmd, capture_output=True, timeout=PDF_SECONDS, stdin=subprocess.DEVNULL)
        except (
            subprocess.TimeoutExpired
        ):  # e.g. a page that opens a dialog (alert()) blocks the print for ever
            part.unlink(missing_ok=True)
            print(
                f"warning: {exe} did not print {page.name} to PDF within {PDF_SECONDS} s (stopped); "
                "the HTML bundle is complete: print it from a browser",
                flush=True,
            )
            return None
    if not part.is_file() or not part.read_bytes()[:5] == b"%PDF-":
        part.unlink(missing_ok=True)
        print(f"warning: {exe} did not print {page.name} to PDF; the HTML bundle is complete", flush=True)
        return None
    os.replace(part, pdf)
    return pdf
