"""The page's displays: the dataset notice, the settings this run changed from the lab's and the hardware
(header), a highlighted notice (warn), the environment table (the run's provenance), a result file copied
beside the reports (artifact), each epoch's peak memory, a trace's breakdown. What they show is held in the
page's record (page_record.py).

A notebook reaches them as nb.<name> (report/notebook.py re-exports them).
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import pandas as pd

from .. import sanity
from ..config import RunConfig, output_path
from ..data import dataset_info
from ..envinfo import commit_label, environment, hardware_label
from ..findings import fmt
from .page_record import (
    HTML,
    Markdown,
    busy_flag,
    display,
    hold_numbers,
    hold_table,
    number_text,
    page_runs,
    table,
)


def shown_path(path: Any) -> str:
    """A path as a report may show it: relative to the project (or the output folder), else '~/...' under the
    home folder, else only its last two parts: a report handed in names no folder of the machine it ran on."""
    import os
    from pathlib import Path

    from ..config import project_root

    p = Path(str(path)).expanduser()
    if not p.is_absolute():
        return str(p)
    for base in (project_root(), output_path(".")):
        if len(Path(base).resolve().parts) < 2:  # the filesystem's root is no project
            continue
        try:
            return str(p.resolve().relative_to(Path(base).resolve())) or "."
        except ValueError:
            pass
    home = Path(os.path.expanduser("~"))
    try:
        return "~/" + str(p.relative_to(home))
    except ValueError:
        return ".../" + "/".join(p.parts[-2:])


NO_DATA_READ = (
    '<div style="border:1px solid #2a7;padding:8px 14px;margin:8px 0"><b>No dataset read.</b> This study '
    "opens no images: what it counts comes from the model itself and one random batch.</div>"
)


# what synthetic data means for a page's timings: of the real pipeline, or of steps on batches already loaded
TIMINGS = {
    False: "Timings reflect the real pipeline; ",
    True: "Its timings are of training steps on batches already loaded, which the data's content does not "
    "change; ",
}


def data_notice(info: Mapping[str, Any], times: bool = True, fixed_batch: bool = False) -> str:
    """The dataset notice at a page's top: synthetic (and what that means for its numbers: timings only where
    the page states one, `times`; timed on batches already loaded, never the pipeline, `fixed_batch`),
    unverified or real."""
    info = {**info, "root": shown_path(info["root"])}
    if info["kind"] == "synthetic":
        return (
            '<div style="border:2px solid #c60;background:#fff4e5;padding:10px 14px;margin:8px 0;'
            'font-size:1.05em"><b>Synthetic data.</b> These results were computed on a synthetic '
            f"{html.escape(info['name'])} written in the real on-disk format (<span "
            f"data-id>{html.escape(info['root'])}</span>), "
            "not on the real dataset. "
            + (TIMINGS[fixed_batch] if times else "")
            + "losses and accuracies are "
            f"not comparable with published {html.escape(info['name'])} numbers.</div>"
        )
    if info["kind"] == "unverified":
        return (
            '<div style="border:2px solid #c60;background:#fff4e5;padding:10px 14px;margin:8px 0">'
            f"<b>Unverified data.</b> The {html.escape(info['name'])} in <span "
            f"data-id>{html.escape(info['root'])}</span> carries no "
            "synthetic marker, but its files do not match the published md5s: it is neither the real dataset "
            "nor this kit's synthetic one, so its losses and accuracies are not comparable with published "
            "numbers.</div>"
        )
    return (
        f'<div style="border:1px solid #2a7;padding:8px 14px;margin:8px 0">Dataset: real '
        f"{html.escape(info['name'])} from <span data-id>{html.escape(info['root'])}</span> (md5s "
        f"verified).</div>"
    )


def header(
    cfg: RunConfig, lab: Mapping[str, Any] = sanity.LAB, stand_in: sanity.Flag | None = None
) -> dict[str, Any]:
    """Show the dataset notice, what this run changed from the lab's settings (a stand-in model first: the
    page's own `stand_in` flag where it gives one) and the machine; returns the dataset info."""
    info = dataset_info(cfg)
    task = _task(cfg.task)
    if task is not None and not task.reads_data:  # nothing was computed on the data, synthetic or real
        info = {**info, "read": False}
        display(HTML(NO_DATA_READ))
    else:
        display(
            HTML(
                data_notice(
                    info, times=task is None or task.times, fixed_batch=task is not None and task.fixed_batch
                )
            )
        )
    display(HTML(settings_notice(cfg, lab, stand_in)))
    env = environment()

    def name(text) -> str:  # a name with digits that states no quantity (a GPU's model, a version, a commit)
        return f"<span data-id>{html.escape(str(text))}</span>"

    display(
        HTML(
            f"<p><b>Hardware:</b> {name(hardware_label(env))} &nbsp;·&nbsp; <b>torch</b> "
            f"{name(env['torch'])} &nbsp;·&nbsp; <b>commit</b> "
            f"<code>{name(env['commit'][:10])}</code>{' (uncommitted changes)' if env['dirty'] else ''}</p>"
        )
    )
    return info


def warn(text: str) -> None:
    """A highlighted notice in the report (what is missing, what to read with care)."""
    display(
        HTML(
            '<div style="border:2px solid #c60;background:#fff4e5;padding:8px 12px;margin:6px 0">'
            + text
            + "</div>"
        )
    )


def settings_notice(
    cfg: RunConfig, lab: Mapping[str, Any] = sanity.LAB, stand_in: sanity.Flag | None = None
) -> str:
    """The ran-vs-lab table, in full, where the reader sees the numbers; empty when the lab's settings ran.
    `stand_in`: the page's own stand-in flag, where the model of cfg alone does not say it (C7's two
    networks, each with its parameter count)."""
    if not lab:  # a study with no lab setting to compare (e.g. the loader alone)
        return ""
    rows = sanity.ran_vs_lab(cfg, lab)
    if not rows:
        return "<p>Settings: the lab's.</p>"
    flag = stand_in or (sanity.stand_in(cfg, lab["model"]) if "model" in lab else None)
    from .answer_box import readable

    shown = [[readable(r["setting"]), r["ran"], r["lab"]] for r in rows]
    hold_table(
        "ran vs lab", ["setting", "ran", "lab"], shown, [[r["setting"], r["ran"], r["lab"]] for r in rows]
    )
    cells = "".join(
        f"<tr><td>{html.escape(s)}</td><td><b>{html.escape(ran)}</b></td><td>{html.escape(want)}</td></tr>"
        for s, ran, want in shown
    )
    if flag:
        hold_numbers(flag.finding)
    # what the tensor loader changes, as the run's settings make it true: the timing follows sync_each_step
    timed = (
        "the device's time is taken around each step (<code>sync_each_step</code>)"
        if getattr(cfg, "sync_each_step", False)
        else "the device's time is taken every <code>log_every</code> steps, not around each step"
    )
    dropped = (
        "<p>The tensor-resident loader hands out batches of one size: each epoch's last partial batch, if "
        "there is one, is left out (static shapes for a compiled step; how many images, in each run's "
        "meta.json, "
        f"<code>loader_dropped</code>), and {timed}.</p>"
        if getattr(cfg, "loader", "pil") == "tensor"
        else ""
    )
    return (
        "<div style='border:1px solid #c60;padding:8px 14px;margin:8px 0'>"
        + (f"<p><b>Stand-in model.</b> {flag.finding.html()}.</p>" if flag else "")
        + "<p>This run's settings differ from the lab's; every number below is for the settings that ran:</p>"
        '<table data-table="ran vs lab"><tr><th>setting</th><th>ran</th><th>lab</th></tr>'
        f"{cells}</table>{dropped}</div>"
    )


def environment_table(meta: Mapping[str, Any]) -> pd.DataFrame:
    """The run's provenance as a two-column table: versions, hardware, commit, dataset, seed, config."""
    from .. import results

    env = meta["environment"]
    task = _task(meta["config"].get("task"))
    # the run whose load it is: the record's own, or the run a summary's load names (a sweep's busiest)
    run = str((meta.get("machine") or {}).get("run") or meta.get("run_id") or "")
    sanity.observe(meta.get("machine"), run)  # a run shown on this report counts for its 'machine busy' flag
    results.note_run(meta)  # and for the commits its record names
    load = sanity.load_finding(meta.get("machine"), run)  # the busy flag's Numbers when it is this run's
    hold_numbers(load)
    rows = {
        "hardware": hardware_label(env),
        "device used": meta["device"],
        "cpu": env["cpu"],
        "cpu cores usable": env["cpu_cores"],
        "gpu": (env["gpu"] or {}).get("name", "none"),
        "python": env["python"],
        "torch": env["torch"],
        "torchvision": env["torchvision"],
        "cuda": env["cuda"] or "n/a",
        "git commit": env["commit"] + (" (dirty)" if env["dirty"] else ""),
        "dataset": f"{meta['dataset']['name']} ({meta['dataset']['kind']})"
        if task is None or task.reads_data
        else "none read (the study opens no image)",
        "seed": meta["seed"],
        "started (UTC)": meta["started_at"],
        "run folder": meta["run_id"],
        # a summary's load is another run's reading (a sweep's busiest): the row names whose
        "machine load before the run": (f"read before {run}: " if run and run != meta["run_id"] else "")
        + load.plain(),
        **_busiest_row(run),
        **runs_row(page_runs()),
        **_peak_row(meta.get("flops")),
        "config": ", ".join(
            f"{k}={shown_path(v) if k.endswith('_root') else number_text(v) if isinstance(v, bool) else v}"
            for k, v in meta["config"].items()
            if k not in ("task", "results_dir", "run_id", "progress", "log_every")
            and k not in (task.ignores if task else ())
        ),
    }
    # a Styler renders every cell whole (a DataFrame's HTML cuts long cells, and the config row is long)
    # left-aligned, the names beside their values (a page that right-aligns cells put them at the far right);
    # escaped: a value is text from the user or a file (a data folder named '<img onerror=...>'), never
    # markup. Held in the record as the table "environment" (its load row states load_finding's Numbers)
    cells = [[k, str(v)] for k, v in rows.items()]
    hold_table("environment", ["", "value"], cells)
    return (
        pd.DataFrame({"value": [str(v) for v in rows.values()]}, index=list(rows.keys()))
        .style.set_table_attributes('data-table="environment"')
        .format(escape="html")
        .format_index(escape="html")
        .set_properties(**{"text-align": "left"})
        .set_table_styles([{"selector": "th", "props": [("text-align", "left")]}])
    )


def _task(task_id: Any):
    """The registered Task of `task_id`, or None for an id this kit does not know (a record of another kit:
    every config field shown, its data said read)."""
    from . import tasks

    return tasks.TASKS.get(str(task_id))


def _peak_row(fl: Mapping[str, Any] | None) -> dict[str, str]:
    """The peak of the run's device that a share of peak on the page divides by, and where it came from (a
    data sheet, or measured on this machine for that device and thread count and kept for every task:
    flops.PEAKS_FILE)."""
    if not fl or not fl.get("peak_tflops"):
        return {}
    from ..findings import say
    from ..flops import peak_number

    peak = peak_number(fl)
    hold_numbers(say("{p}", p=peak))
    # the run's device as its peak is keyed (on a CPU the threads torch used: a run on fewer threads has a
    # lower peak); the shares of peak a page states divide by it
    return {"device peak (of this run's device and threads)": f"{fmt(peak)}: {peak.source}"}


def runs_row(runs: list[Mapping[str, Any]]) -> dict[str, str]:
    """The environment table's row naming each run of the report by commit, where its runs were made at more
    than one commit or an earlier render made some of them (the table's 'git commit' is then one run's
    only): 'commit <c>, made by an earlier render: <run> (started <time>), ...; commit <c>: ...'. Empty
    otherwise."""
    commits = {commit_label(r["commit"], r.get("dirty", False)) for r in runs}
    if len(commits) < 2 and not any(r.get("reused") for r in runs):
        return {}
    groups: dict[tuple[str, bool], list[str]] = {}
    for r in runs:
        key = (commit_label(r["commit"], r.get("dirty", False)), bool(r.get("reused")))
        groups.setdefault(key, []).append(
            f"{r['run']} (started {r['started_at'] or 'at an unrecorded time'})"
        )
    parts = [
        f"commit {c}{', made by an earlier render' if old else ''}: {', '.join(names)}"
        for (c, old), names in groups.items()
    ]
    return {"runs of this report, by commit": "; ".join(parts)}


def _busiest_row(run: str) -> dict[str, str]:
    """The environment table's row for the page's busy flag when that flag read another run than the table's:
    the same run and the same Numbers as the flag, so the two never state two loads without saying whose."""
    flag = busy_flag()
    if flag is None or not flag.run or flag.run == run:
        return {}
    nums = {n.name: n for n in flag.numbers()}
    load = nums.get(f"load average before {flag.run}")
    cores = nums.get(f"usable cores before {flag.run}")
    if load is None or cores is None:
        return {}
    text = f"{flag.run}: load average {fmt(load)} on {fmt(cores)} usable cores"
    return {"busiest run of this report (its machine busy flag)": text}


def _load_text(load: Mapping[str, Any] | None) -> str:
    """One run's load as the environment table states it (sanity.load_finding, through the one formatter)."""
    return sanity.load_finding(load).plain()


HOW_TO_OPEN = {
    "trace": "a gzipped Chrome-trace JSON: open it at https://ui.perfetto.dev (Open trace file)",
    "snapshot": "a CUDA memory snapshot: open it at https://pytorch.org/memory_viz (drag the file in)",
}


def artifact(path, kind: str, task: str) -> str:
    """Copy a result file (a profiler trace, a memory snapshot) next to the reports, under
    reports/artifacts/, and return a Markdown link relative to the report, so it still works when the reports
    folder is copied elsewhere, with one line on how to open it."""
    import gzip
    import shutil
    from pathlib import Path

    src = Path(path)
    gz = kind == "trace"  # Perfetto opens gzipped traces; they shrink about tenfold
    target = (
        output_path("reports") / "artifacts" / f"{task}-{src.parent.name}-{src.name}{'.gz' if gz else ''}"
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(src, "rb") as f, gzip.open(target, "wb") if gz else open(target, "wb") as g:
        shutil.copyfileobj(f, g)
    from ..answers import Number
    from ..findings import say

    # its size a Number of the record, its name a name (run folders hold digits that state no quantity)
    size = say(
        "{size}",
        size=Number(
            f"size of {target.name}",
            target.stat().st_size / 1e6,  # MB of 10^6 bytes (SI); MiB are named MiB
            "MB",
            "counted",
            source="the file's size",
        ),
    )
    hold_numbers(size)
    return (
        f"[<span data-id>{html.escape(target.name)}</span>](artifacts/{target.name}) ({size.html()}), "
        f"{HOW_TO_OPEN[kind]}"
    )


# the per-epoch memory columns of epochs.csv (profiling.MEMORY_COLUMNS) as a table shows them, units in the
# header
MEMORY_HEADERS = {
    "peak_allocated_mb": "CUDA peak allocated (MiB)",
    "peak_reserved_mb": "CUDA peak reserved (MiB)",
    "alloc_retries": "CUDA allocation retries (count)",
    "peak_rss_mb": "process peak RSS (MiB)",
}


def memory_table(epochs: pd.DataFrame, by: tuple[str, ...] = ()) -> Any:
    """Each epoch's peak memory (train() measures it, peaks reset at each epoch's start) as a styled table:
    the `by` columns (e.g. "device"), the epoch, and the memory columns that hold a value; those empty in
    every row (CUDA's on a CPU, all of them in runs older than the measurement) are left out, and a line says
    which."""
    shown = [c for c in MEMORY_HEADERS if c in epochs and epochs[c].notna().any()]
    left_out = [MEMORY_HEADERS[c] for c in MEMORY_HEADERS if c not in shown]
    display(
        Markdown(
            "**Peak memory per epoch** (measured; the peaks are reset at the start of each epoch)."
            + (
                f" Not measured in these runs (the CUDA ones are measured on a GPU only), so left out: "
                f"{', '.join(left_out)}."
                if left_out
                else ""
            )
        )
    )
    # through table(): the one formatter, held in the record like every table on the page
    return table(epochs[[*by, "epoch", *shown]].rename(columns=MEMORY_HEADERS), name="peak memory per epoch")


def breakdown_or_error(path) -> Any:
    """hpml_lab.tracing.breakdown(path), or the exception computing it raised (Holistic Trace Analysis has
    assertions of its own): a report that states from the breakdown goes on without it, and trace_breakdown
    shows the error where the tables would be."""
    from ..tracing import breakdown

    try:
        return breakdown(path)
    except Exception as e:  # noqa: BLE001 (any failure of the analysis: the run's answer must not be lost to it)
        return e


def trace_breakdown(path, bd=None) -> Any:
    """Shows where a trace's recorded steps spent their time (hpml_lab.tracing.breakdown): with GPU kernels,
    Holistic Trace Analysis's temporal and idle-time breakdowns; on a CPU trace, the labelled ranges, and why.
    `bd`: breakdown_or_error's result computed already (C8's answer states from it), not computed again;
    without it, computed here the same way (C4), so a failed analysis is one line on either page."""
    from IPython.display import Markdown, display

    from ..cliargs import one_line

    bd = breakdown_or_error(path) if bd is None else bd
    if isinstance(bd, Exception):
        warn(
            f"The trace could not be broken down ({html.escape(type(bd).__name__)}: "
            f"{html.escape(one_line(bd))})."
        )
        return None
    display(Markdown(f"**Where the recorded steps' time went** (source: {bd.source}). {bd.note}"))
    display(table(bd.table, percent=("share",), name="trace breakdown"))
    if bd.idle is not None:
        display(Markdown("GPU idle time by cause (Holistic Trace Analysis, summed over streams):"))
        display(table(bd.idle, percent=("share",), name="GPU idle time by cause"))
    return bd
