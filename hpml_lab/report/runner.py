"""Run lab notebooks with papermill and render them to HTML with nbconvert.

    hpml-lab run c1 -p epochs=2 -f params.yaml --profile smoke
    hpml-lab report --profile smoke          # every task + reports/index.html

Parameters are checked against RunConfig and the notebook's own `parameters`
cell before a kernel starts. The executed notebook is kept in
reports/executed/<task>.ipynb (also when it fails), the report is
reports/<task>.html with code hidden, and reports/executed/<task>.json records
the outcome for the index.
"""

from __future__ import annotations

import ast
import datetime as _dt
import html
import logging
import os
import sys
import time
import typing
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import results
from ..config import ConfigError, RunConfig, _short, check_keys, coerce_value, output_path, project_root
from ..envinfo import commit_label, environment, hardware_label
from ..io import atomic_write_json, atomic_write_text, signals_deferred
from ..ticker import ticking
from . import answer_box, dataprep, guards, pages, tasks, watch
from . import kernel as kernel_env
from .guards import recover_reports

KERNEL = "hpml-lab"


@dataclass
class Outcome:
    task: str
    title: str
    status: str  # "ok", "failed" or "interrupted"
    seconds: float
    profile: str
    parameters: dict[str, Any]
    hardware: str
    dataset: str
    html: str
    executed: str
    error: str = ""
    finished_at: str = field(default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))


def notebooks_dir() -> Path:
    """The checkout's notebooks/ when run from a checkout, else the copies installed with the package
    (hpml_lab.notebooks), else, for an editable install run from another folder, the notebooks/ of the
    checkout the package lives in: `hpml-lab run` works from any folder."""
    import hpml_lab

    package = Path(hpml_lab.__file__).parent
    candidates = [project_root() / "notebooks", package / "notebooks", package.parent / "notebooks"]
    for folder in candidates:
        if folder.is_dir() and any(folder.glob("*.ipynb")):
            return folder
    return candidates[1]  # where a non-editable install puts them (the error names it)


def reports_dir() -> Path:
    return output_path("reports")


def notebook_parameters(path: Path) -> dict[str, Any]:
    """The names and default values of a notebook's `parameters` cell (papermill.inspect_notebook)."""
    import papermill

    return {name: ast.literal_eval(p["default"]) for name, p in papermill.inspect_notebook(str(path)).items()}


def read_params_file(path: str | os.PathLike) -> dict[str, Any]:
    """A YAML file of name: value parameters, checked as guards.read_params_file does (no aliases, capped
    size)."""
    return guards.read_params_file(path)


def parse_assignments(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"-p takes key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v
    return out


def resolve_parameters(
    task: tasks.Task,
    profile: str,
    file_params: Mapping[str, Any] | None = None,
    cli_params: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], RunConfig]:
    """Profile < params file < -p, checked against the notebook and RunConfig. No compute happens here.
    A profile only sets the parameters the notebook has; -p and -f names must all be the notebook's."""
    nb_params = notebook_parameters(notebooks_dir() / task.notebook)
    prof = {k: v for k, v in task.profile(profile).items() if k in nb_params}
    merged: dict[str, Any] = {**prof, **(file_params or {}), **(cli_params or {})}
    hints = typing.get_type_hints(RunConfig)
    valid = RunConfig.field_names()
    study = task.settings.field_names() if task.settings else []
    check_keys(merged, also=study, shown=sorted(nb_params))
    for key in merged:
        if key not in nb_params:
            raise ConfigError(
                f"task {task.id} does not take parameter {_short(key)}; "
                f"it takes: {', '.join(sorted(nb_params))}"
            )
    typed = {
        k: coerce_value(k, v, hints[k]) if k in valid else task.settings.coerce(k, v)
        for k, v in merged.items()
    }
    settings = None
    if task.settings:  # the study's own settings, checked here too: one line before any kernel starts
        settings = task.settings(**{k: v for k, v in {**nb_params, **typed}.items() if k in study})
        typed = {k: list(v) if isinstance(v, tuple) else v for k, v in typed.items()}  # papermill takes lists
    defaults = {k: v for k, v in nb_params.items() if k in valid}
    cfg = RunConfig(task=task.id, **{**defaults, **{k: v for k, v in typed.items() if k in valid}})
    if settings is not None:  # the shared pre-run check's last step: the settings against this run's config
        settings.check_run(cfg)
    return typed, cfg


def _render_html(
    executed: Path,
    target: Path,
    task: tasks.Task,
    rec: dict | None,
    top: str = "",
    demonstration: bool = False,
) -> None:
    """The report page: code hidden, titled with the task, a link back to the index, then `top` (the machine,
    data and profile, and the demonstration banner: pages.top_html) and the task's answer box from its record
    `rec` (headed "demonstration" for one; None: the page says no answer was recorded) right after the
    notebook's title, in the page's own type (pages.PAGE_CSS), before the task's introduction and outputs."""
    import nbformat
    from nbconvert import HTMLExporter

    from .pages import PAGE_CSS, box_after_title

    exporter = HTMLExporter()
    exporter.exclude_input = True
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    box = (
        answer_box.box_html(rec, shown_status="demonstration" if demonstration else None)
        if rec
        else "<div class='hpml-banner'>This run wrote no answer record: its notebook stopped before "
        "answering (see the error below).</div>"
    )
    # training logs folded away (a closed <details>), and no folder of this machine named on the page
    nb = box_after_title(answer_box.fold_logs(nbformat.read(str(executed), as_version=4)), top + box)
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": f"hpml-lab {task.title}"}})
    body = body.replace(
        "</head>",
        f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<style>{PAGE_CSS}</style></head>",
        1,
    )
    top = "<nav style='margin:8px 0'><a href='index.html'>&larr; all reports (index)</a></nav>"
    i = body.find("<main")
    i = body.find(">", i if i >= 0 else body.find("<body")) + 1
    atomic_write_text(target, answer_box.scrub_paths(body[:i] + top + body[i:]))


def run_task(
    task_id: str,
    profile: str = "smoke",
    file_params: Mapping[str, Any] | None = None,
    cli_params: Mapping[str, str] | None = None,
    kernel: str = KERNEL,
    log=print,
    watcher: watch.Watch | None = None,
) -> Outcome:
    """One task's life, each step once and in order: its settings (the TASK's profile, the notebook's
    parameters, RunConfig, the study's own settings), the guards (every check before compute, the dataset, the
    task's lock, its files staged: guards.stage), the notebook executed by papermill, its answer record read
    once, its page rendered from that record, the report landed as one set with its outcome, the task's line
    said; after an interruption the index too (run_all writes it after every task). Raises ConfigError or
    DatasetError before any compute. `watcher` (run_all's) says the task's start, heartbeat and end; without
    one, a Watch of this task alone."""
    task = tasks.get(task_id)
    params, cfg = resolve_parameters(task, profile, file_params, cli_params)
    with guards.stage(task, cfg, _gives_root(file_params, cli_params), log) as stage:
        watcher = watcher or watch.Watch([task.id], profile, log, watch.times_file(reports_dir()))
        try:
            ran = _execute(task, params, profile, kernel, stage, watcher)
            # a SIGTERM or Ctrl-C while the page renders waits until the outcome is written: it once ended the
            # run with exit 143, no outcome and an index that linked a missing page
            with signals_deferred():
                outcome, rec = _record_and_render(task, params, cfg, profile, stage, ran)
                # '' when this run's report is the one in place now; else the line saying which report stays
                kept = stage.land(asdict(outcome))
                if kept:  # the run's own page, kept beside the complete report
                    page = guards.rerun_files(task.id)["page"]
                    outcome.html = page.name if page.exists() else ""
            said = f"{outcome.error}; {kept}" if kept else outcome.error or _not_a_result(rec)
            page = reports_dir() / outcome.html if outcome.html else None
            watcher.end(task.id, outcome.status, outcome.seconds, said, str(page) if page else "")
        finally:
            watcher.stop()  # the heartbeat ends with its task, also when the task ends by an exception
    if ran.interrupted is not None:
        write_index(load_outcomes())
        raise ran.interrupted
    return outcome


@dataclass
class _Ran:
    """How the notebook's execution ended: its status, the error that ended it, the signal that stopped it."""

    status: str
    error: str
    seconds: float
    interrupted: KeyboardInterrupt | None = None


def _execute(task: tasks.Task, params: dict, profile: str, kernel: str, stage: guards.Stage, watcher) -> _Ran:
    """The notebook executed by papermill into the stage's notebook, under the task's watch line: how it
    ended."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    streams = watcher.start(
        task.id,
        task.title,
        f"notebooks/{task.notebook}, {profile} profile"
        + (f", {', '.join(f'{k}={v}' for k, v in params.items())}" if params else ""),
    )
    t0 = time.perf_counter()
    status, error = "ok", ""
    interrupted: KeyboardInterrupt | None = None
    stopped: list[KeyboardInterrupt] = []  # a signal passed to the kernel (kernel.stops_with_us)
    try:
        # SIGTERM (Slurm's time limit) ends the task like Ctrl-C
        with (
            results.sigterm_interrupts(),
            kernel_env.environment(),
            kernel_env.ipc_sockets() as kernel_config,
            kernel_env.stops_with_us() as stopped,
        ):
            papermill.execute_notebook(
                str(notebooks_dir() / task.notebook),
                str(stage.notebook),
                parameters=params,
                kernel_name=kernel,
                cwd=str(project_root()),
                log_output=False,  # papermill would log the kernel's stderr as warnings on ours
                progress_bar=False,
                stdout_file=streams.out,  # read for the heartbeat, kept in the notebook, not printed
                stderr_file=streams.err,
                config=kernel_config,
            )
        if stopped:  # the notebook ended anyway, as the signal came: still a stop asked for
            raise stopped[0]
    except KeyboardInterrupt as e:  # record it, render what ran, update the index; then stop
        status, error, interrupted = "interrupted", f"interrupted ({str(e) or 'Ctrl-C'})", e
        # the notebook client's cell task dies with the killed kernel (DeadKernelError) and nobody awaits it
        # any more: asyncio would print "Task exception was never retrieved" and a traceback when it is
        # collected
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    except Exception as e:  # a cell's error, a dead kernel (e.g. killed for memory), missing kernel, ...
        # the kernel we signalled ended its cell (Interrupted) or died of it: a stop, not a failure
        if stopped:
            status, error, interrupted = (
                "interrupted",
                f"interrupted ({str(stopped[0]) or 'Ctrl-C'})",
                stopped[0],
            )
            logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        elif isinstance(e, PapermillExecutionError):
            status, error = "failed", f"{e.ename}: {e.evalue}"
        else:
            status, error = (
                "failed",
                f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}",
            )
    return _Ran(status, error, time.perf_counter() - t0, interrupted)


def _record_and_render(
    task: tasks.Task, params: dict, cfg: RunConfig, profile: str, stage: guards.Stage, ran: _Ran
) -> tuple[Outcome, dict | None]:
    """The run's outcome and its answer record (read once, from the stage), and its page rendered from that
    record into the stage: a notebook cut short (a full disk) is not kept, a render that fails is the task's
    failure after the error that came first."""
    executed = reports_dir() / "executed" / f"{task.id}.ipynb"
    status = ran.status
    error = ran.error.replace(str(stage.notebook), str(executed))  # a write error names the file users know
    broken = guards.whole_notebook(
        stage.notebook, executed
    )  # a full disk cut it short: not kept, not rendered
    if broken:
        status, error = "failed", (f"{error}; " if error else "") + broken
    rec, problem = guards.read_record(task.id, stage.answer)
    if problem:  # a damaged record is one line, and the page says no answer
        print(f"hpml-lab: warning: {answer_box.scrub_paths(problem)}", file=sys.stderr)
    elif rec is not None:
        # the record says the profile it ran at, and whether that makes it a demonstration: a tool that reads
        # reports/<task>.answer.json alone sees what the page's top says (its answers' statuses are the run's)
        rec = {**rec, "profile": profile, "demonstration": pages.demonstration(profile)}
        atomic_write_json(stage.answer, rec)
    machine = hardware_label(environment())
    # what the page's numbers were computed on: the data folder's kind, or none where the study reads no data
    data = f"{stage.kind} {dataprep.NAMES.get(cfg.dataset, cfg.dataset)}" if task.reads_data else "none read"
    if stage.notebook.exists():
        # a render error (e.g. missing nbconvert templates) is this task's outcome, not the end of the run
        try:
            top = pages.top_html(task.id, machine, data, profile, task.reads_data, task.times)
            _render_html(stage.notebook, stage.page, task, rec, top, pages.demonstration(profile))
        except Exception as e:  # the first error stays first: a render that fails after it is its consequence
            said = (
                f"{e.strerror}: {e.filename}"
                if isinstance(e, OSError) and e.strerror
                else str(e).strip()[:300]
            )
            status, error = (
                "failed",
                (f"{error}; " if error else "") + f"HTML render: {type(e).__name__}: {said}",
            )
    outcome = Outcome(
        task.id,
        task.title,
        status,
        ran.seconds,
        profile,
        params,
        machine,
        f"{cfg.dataset} ({stage.kind})" if task.reads_data else "none read",
        f"{task.id}.html" if stage.page.exists() else "",
        str(executed),
        error,
    )
    return outcome, rec


def _not_a_result(rec: dict | None) -> str:
    """'diverged: ...' or 'did not learn: ...' when the run's answer record flags one of them (the task is ok,
    its numbers are not a result), for the task's line; else ''. The flag's message without its asides (the
    rule and the sample counts, which the page states): a cut at a length had ended the line mid-phrase."""
    flags = rec.get("flags") if isinstance(rec, dict) else None
    for kind in ("diverged", "did not learn"):
        listed = flags if isinstance(flags, list) else []  # a damaged record's flags: none
        found = [f for f in listed if isinstance(f, dict) and f.get("kind") == kind]
        if not found:
            continue
        message = str(found[0].get("message", ""))
        short = _without_asides(message)
        # the first run's flag, and how many more say the same (grade35a: c6's line named 1 of 3 settings)
        more = len(found) - 1
        also = f"; {more} more run{'' if more == 1 else 's'} flagged the same" if more else ""
        return f"{kind}: {short}{also}" + ("; in full on the page" if short != message or more else "")
    return ""


def _without_asides(text: str) -> str:
    """`text` without its parenthesised asides, each opened by a space: ' (a (b) c)' goes whole, 'ln(10)'
    stays; an aside left open runs to the end."""
    out, depth = [], 0
    for i, ch in enumerate(text):
        if ch == "(" and (depth or (i and text[i - 1] == " ")):
            depth += 1
            if depth == 1 and out and out[-1] == " ":
                out.pop()
            continue
        if depth:
            depth -= ch == ")"
            continue
        out.append(ch)
    return "".join(out)


def lab_order(ids) -> list[str]:
    """Task ids in the lab's order, each TASK's `order` (c1 ... c8, the questions, then the other studies); an
    id no task has goes last, in the order given."""
    ids = list(ids)
    known = sorted((t for t in ids if t in tasks.TASKS), key=lambda t: (tasks.TASKS[t].order, t))
    return known + [t for t in ids if t not in tasks.TASKS]


def _answer_cell(rec: dict[str, Any]) -> str:
    """The index's answer: each answer's headline (its first line), one per line."""
    from .pages import headline

    heads = [html.escape(headline(a)[0]) for a in rec.get("answers", [])]
    return "<br>".join(heads) if heads else html.escape(rec.get("summary", ""))


def _runs(rec: Mapping[str, Any] | None) -> list[dict]:
    """The runs an answer record names (page_record.page_runs), each a dict; none from an older record."""
    runs = rec.get("runs") if isinstance(rec, Mapping) else None
    return [r for r in runs if isinstance(r, dict)] if isinstance(runs, list) else []


def _commits(rec: Mapping[str, Any] | None) -> list[str] | None:
    """The commits a report's runs were made at (displays.commit_label), in the order its runs started; None
    where its record names no runs (a failed task, an older record)."""
    got: list[str] = []
    for r in _runs(rec):
        label = commit_label(str(r.get("commit") or "unknown"), bool(r.get("dirty")))
        if label not in got:
            got.append(label)
    return got or None


def _commit_cell(commits: list[str] | None, usual: str) -> str:
    """A row's own commit where it is not the one said above the table: its runs' one commit, or every
    commit when its runs were made at more than one; 'not recorded' where its record names no runs."""
    if commits is None:
        return "not recorded" if usual else ""
    if len(commits) > 1:
        return " and ".join(commits) + f" (its runs were made at {len(commits)} commits)"
    return "" if commits[0] == usual else commits[0]


def write_index(outcomes: list[Outcome]) -> Path:
    """reports/index.html: one row per task, in task order, with each answer's headline and its status (from
    the answer record; "failed" when the notebook failed), time taken and a link. The machine, dataset and
    profile are said once above the table (a column only for what differs between rows); a banner says when
    the runs were on a busy machine, and a notice names exactly the reports computed on synthetic data or with
    a stand-in model."""
    from .pages import PAGE_CSS
    from .watch import duration

    by_id = {o.task: o for o in outcomes}
    shown = [by_id[t] for t in lab_order(tasks.TASKS) if t in by_id]
    # machine, dataset and profile: the most common value said once above the table; a row says its own only
    # where it differs (a column only when some row does)
    fields = ("hardware", "dataset", "profile")
    usual = {w: Counter(getattr(o, w) for o in shown).most_common(1)[0][0] if shown else "" for w in fields}
    same = {w: all(getattr(o, w) == usual[w] for o in shown) for w in fields}
    days = {o.finished_at[:10] for o in shown}
    records = {}
    for o in shown:
        rec, problem = guards.read_record(o.task) if o.status == "ok" else (None, "")
        if problem:
            print(f"hpml-lab: warning: {answer_box.scrub_paths(problem)}", file=sys.stderr)
        records[o.task] = rec
    # the commit: that of most reports' runs said once above the table, a row naming its own where its runs
    # were made at another (or at more than one)
    commits = {t: _commits(rec) for t, rec in records.items()}
    held = Counter(c for got in commits.values() for c in set(got or ()))
    usual_commit = held.most_common(1)[0][0] if held else ""
    own_commit = {t: _commit_cell(got, usual_commit) if records[t] else "" for t, got in commits.items()}
    rows, synthetic, stand_in, busy, demo = [], [], [], [], []
    for o in shown:
        tid = o.task
        rec = records[tid]
        status = o.status if o.status != "ok" else (rec["status"] if rec else "no answer record")
        if pages.demonstration(o.profile):
            demo.append(tid)
            if status in ("answered", "partial"):  # a demonstration answers none of the lab's questions
                status = "demonstration"
        answer = _answer_cell(rec) if rec else html.escape(answer_box.scrub_paths(o.error))
        reused = (
            max(int(rec.get("reused") or 0), sum(bool(r.get("reused")) for r in _runs(rec))) if rec else 0
        )
        if reused:
            answer += (
                f" <i>({reused} run{'s' if reused > 1 else ''} reused from an earlier run of this task, not "
                "made for this report: "
                + ("their start times are" if reused > 1 else "its start time is")
                + " in the report)</i>"
            )
        reads = tid not in tasks.TASKS or tasks.TASKS[tid].reads_data  # the questions open no image
        if reads and (rec and rec.get("synthetic_data") or "synthetic" in o.dataset):
            synthetic.append(tid)
        if rec and rec.get("stand_in_model"):
            stand_in.append(html.escape(f"{tid} ({rec['stand_in_model']})"))
        flag = [f for f in (rec or {}).get("flags", []) if f.get("kind") == "machine busy"]
        if flag:
            busy.append((tid, bool(flag[0].get("run"))))
        page = guards.page_link(o.html)  # a relative page inside reports/, never javascript: or a URL
        link = f'<a href="{html.escape(page)}">{html.escape(tid)}</a>' if page else html.escape(tid)
        color = answer_box.STATUS_COLOR.get(status, "#9a6700" if status == "demonstration" else "#cf222e")
        differ = "".join(
            f"<td>{html.escape(str(getattr(o, w))) if getattr(o, w) != usual[w] else ''}</td>"
            for w in fields
            if not same[w]
        )
        if any(own_commit.values()):
            differ += f"<td>{html.escape(own_commit[tid])}</td>"
        finished = o.finished_at.replace("T", " ").split("+")[0]
        rows.append(
            f"<tr><td>{link}</td><td>{html.escape(o.title)}</td>"
            f'<td style="color:{color};font-weight:bold">{html.escape(status)}</td>'
            f'<td class="hpml-head">{answer}</td>'
            f"{differ}<td class='hpml-num' style='white-space:nowrap'>{duration(o.seconds)}</td>"
            f"<td style='white-space:nowrap'>{html.escape(finished[11:] if len(days) == 1 else finished)}"
            "</td></tr>"
        )
    notices = []
    if busy:
        # counted in reports, not runs: a report reads several runs, and its flag names the busiest of them
        # (where it knows which: a flag that names none is not said to)
        every = "Every report" if len(busy) == len(rows) else f"{len(busy)} of {len(rows)} reports"
        names = all(named for _, named in busy)
        which = "" if len(busy) == len(rows) else f" ({', '.join(t for t, _ in busy)})"
        notices.append(
            f"<p class='hpml-banner'><b>Busy machine.</b> {every}{which} read a run made on a busy machine "
            "(each "
            + ("report's flag names the run and says how busy" if names else "report's flag says how busy")
            + ": its load average or CPU steal): times from a "
            "busy machine are slower and noisier than on an idle one, and where a report compares times, its "
            "verdicts say where a comparison cannot tell. Run again on an idle machine for times to hand "
            "in.</p>"
        )
    if synthetic:
        every = "All reports" if len(synthetic) == len(rows) else "These reports"
        notices.append(
            f"<p class='hpml-notice'>{every} were computed on <b>synthetic data</b> in the real on-disk "
            f"format "
            "(their accuracies are not the real dataset's)"
            + (f": {', '.join(synthetic)}" if every == "These reports" else "")
            + ".</p>"
        )
    if stand_in:
        notices.append(
            f"<p class='hpml-notice'>These reports ran a <b>stand-in model</b> instead of the lab's: "
            f"{', '.join(stand_in)}.</p>"
        )
    notice = "".join(notices)
    made = reports_dir() / "bundle.html"
    if demo and len(demo) == len(
        rows
    ):  # never offered as a hand-in: the bundle only shows what one looks like
        notice += (
            "<p class='hpml-banner'><b>Nothing here to hand in.</b> Every report is a demonstration (the "
            f"{html.escape(' and '.join(sorted({o.profile for o in shown})))} profile: a few batches, to "
            f"show "
            "every step working): none answers the lab's questions"
            + (
                ', and <a href="bundle.html">bundle.html</a> only shows what a hand-in looks like'
                if made.is_file()
                else ""
            )
            + ". The answers come from <code>hpml-lab report --profile full -p data_root=... -p "
            "device=cuda</code> on the real data, on a GPU.</p>"
        )
    else:
        notice += (
            '<p><b>Hand-in:</b> <a href="bundle.html">bundle.html</a>'
            + (' and <a href="bundle.pdf">bundle.pdf</a>' if made.with_suffix(".pdf").is_file() else "")
            + ": every answer first, then every report, in one file (hand in the reports folder with it: its "
            "traces are linked from artifacts/).</p>"
            if made.is_file()
            else "<p><b>Hand-in:</b> not made yet: <code>hpml-lab report --bundle</code> writes bundle.html "
            "from these reports in seconds.</p>"
        )
        if demo:
            notice += (
                f"<p class='hpml-banner'><b>Demonstrations, not answers:</b> {html.escape(', '.join(demo))} "
                f"ran at a "
                "demonstration profile (smoke or tiny): run them again with <code>--profile full</code> "
                "before handing in.</p>"
            )
    env = environment()
    context = [f"<b>Machine:</b> {html.escape(usual['hardware'] if shown else hardware_label(env))}"]
    if shown:
        context.append(f"<b>dataset:</b> {html.escape(usual['dataset'])}")
        context.append(f"<b>profile:</b> {html.escape(usual['profile'])}")
    if not all(same.values()) or any(own_commit.values()):
        context.append("a row names its own where it differs")
    context.append(
        f"torch {env['torch']}; "
        + (
            f"commit of the reports' runs <code>{html.escape(usual_commit)}</code>"
            if usual_commit
            else f"commit <code>{html.escape(commit_label(env['commit'], bool(env['dirty'])))}</code> (this "
            "index's: the reports do not record their runs' commits)"
        )
    )
    heads = "".join(f"<th>{w}</th>" for w in fields if not same[w])
    heads += "<th>commit of its runs</th>" if any(own_commit.values()) else ""
    day = f", {days.pop()}" if len(days) == 1 else ""
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>hpml-lab reports</title>
<style>{PAGE_CSS}
td,th{{border:1px solid #d0d7de;padding:4px 8px}} th{{background:#f3f3f3}} td.hpml-head{{min-width:18em}}
</style></head>
<body><div class="hpml-page"><h1>hpml-lab reports</h1>
<p class="hpml-context">{" &middot; ".join(context)}</p>
{notice}
<p>Status is the report's own: <i>answered</i>, <i>partial</i> (what is missing is said in the report),
<i>not answered</i>, or <i>failed</i> (the notebook did not run through); <i>demonstration</i> for a run at
the smoke or tiny profile, which shows every step working and answers none of the lab's questions. The answer
is each report's headline: its details, numbers and flags are in the report.</p>
<div class="hpml-scroll"><table class="hpml-index">
<tr><th>task</th><th>what</th><th>status</th><th>answer</th>{heads}
<th>time taken</th><th>finished (UTC{day})</th></tr>
{"".join(rows)}
</table></div></div></body></html>
"""
    path = reports_dir() / "index.html"
    atomic_write_text(path, page)
    return path


def load_outcomes() -> list[Outcome]:
    """The outcome of each task's last run; one that cannot be read (truncated, hand-edited) is skipped with a
    line on stderr, so one bad file never breaks the index or a later run. A rerun killed with -9 gets its
    previous report back first (guards.recover_reports)."""
    recover_reports()
    out = []
    for t in tasks.TASKS.values():
        p = reports_dir() / "executed" / f"{t.id}.json"
        data, problem = guards.read_outcome(p)
        if data is not None:
            out.append(Outcome(**{k: v for k, v in data.items() if k in Outcome.__dataclass_fields__}))
        elif problem:
            print(
                f"hpml-lab: warning: ignoring unreadable outcome: {answer_box.scrub_paths(problem)}",
                file=sys.stderr,
            )
    return out


def _gives_root(*given: Mapping[str, Any] | None) -> bool:
    """The user named a data_root (-p or -f): missing data there is refused, never made."""
    return any("data_root" in (g or {}) for g in given)


def run_all(
    profile: str = "smoke",
    file_params: Mapping[str, Any] | None = None,
    cli_params: Mapping[str, str] | None = None,
    only: list[str] | None = None,
    log=print,
) -> list[Outcome]:
    """Every task in order; a failing task is recorded and the others still run.

    Shared parameters (-p) go to the tasks whose notebook takes them.
    Bad parameters for any task stop everything before the first kernel starts.
    """
    if only is not None and (not only or not all(only)):
        raise ConfigError("--only needs task ids separated by commas (see hpml-lab tasks), got an empty one")
    if only and len(set(only)) != len(only):
        raise ConfigError(f"--only names a task twice: {','.join(only)}")
    ids = only or list(tasks.TASKS)
    plans = []
    if len(ids) > 1:
        log(f"checking the settings and data of {len(ids)} tasks before the first starts")
    with ticking("checking the tasks", say=log) as ticker:  # a line every 20 s, also on a slow disk
        for n, tid in enumerate(ids, 1):
            task = tasks.get(tid)
            nb_params = notebook_parameters(notebooks_dir() / task.notebook)
            fp = {
                k: v
                for k, v in (file_params or {}).items()
                if k in nb_params or k not in RunConfig.field_names()
            }
            cp = {
                k: v
                for k, v in (cli_params or {}).items()
                if k in nb_params or k not in RunConfig.field_names()
            }
            _, cfg = resolve_parameters(task, profile, fp, cp)  # validate all before running any
            guards.checked(task, cfg, _gives_root(fp, cp), log)
            plans.append((tid, fp, cp))
            ticker.progress = f"{n} of {len(ids)} checked"
    outcomes = []
    watcher = watch.Watch([tid for tid, _, _ in plans], profile, log, watch.times_file(reports_dir()))
    for tid, fp, cp in plans:
        outcomes.append(run_task(tid, profile, fp, cp, log=log, watcher=watcher))
        write_index(load_outcomes())
    watcher.finish()
    return outcomes
