"""Helpers that keep the lab notebooks thin: config from the parameters cell,
the data notice, the environment section, figures saved under figures/.

In a notebook, right after the `parameters` cell:

    from hpml_lab.report import notebook as nb
    cfg = nb.config("c1", globals())   # every RunConfig field set in the parameters cell
    info = nb.header(cfg)              # dataset notice (synthetic data is flagged), ran-vs-lab, hardware
    ...
    nb.answer(cfg, info, *conclusion.conclude(cfg, run))   # the answer record and box (c1/conclusion.py)
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping
from typing import Any

import pandas as pd

from .. import sanity
from ..config import RunConfig, check_keys, output_path
from ..data import dataset_info
from ..envinfo import environment, hardware_label
from ..findings import fmt_value

try:
    from IPython.display import HTML, Markdown, display
except ImportError:  # plain Python: print instead
    HTML = Markdown = str  # type: ignore

    def display(obj):  # type: ignore
        print(obj)


def config(task: str, namespace: Mapping[str, Any]) -> RunConfig:
    """RunConfig from the RunConfig fields defined in `namespace` (the notebook's globals). Under papermill,
    however it was started, a parameter the notebook does not take is refused here (papermill itself only
    warns and runs with the default)."""
    from . import tasks

    t = tasks.TASKS.get(task)
    study = t.settings.field_names() if t is not None and t.settings is not None else []
    check_keys(
        sorted(injected_names(namespace)),
        also=study,
        where=f" for task {task}",
        shown=sorted({*RunConfig.field_names(), *study}),
    )
    given = parameter_names(namespace)
    params = {
        k: namespace[k]
        for k in RunConfig.field_names()
        if k in namespace and k != "task" and (given is None or k in given)
    }
    cfg = RunConfig(task=task, **params)
    _RUN["model"] = cfg.model
    new_page()  # a notebook run again in the same kernel starts its page afresh
    if not injected_names(namespace) and os.environ.get("HPML_RENDERING") != "1":
        notice = cpu_time_notice(cfg)  # opened in JupyterLab, not run with a profile: how long it takes here
        if notice:
            display(Markdown(notice))
    return cfg


# the training images of each dataset's full training set (the lab's settings train on all of them)
TRAIN_IMAGES = {"cifar10": 50_000, "tinyimagenet": 100_000}


def step_seconds(cfg: RunConfig) -> float:
    """Seconds of one training step of cfg's model at cfg's batch on this CPU, as train() takes it: one step
    at a batch of up to 16 images twice (the first builds the kernels for its shape), the second timed and
    scaled to cfg's batch (a CPU's step grows about linearly with the batch): seconds, also for ResNet-18 at
    batch 128."""
    import time

    import torch

    from ..training import build_model, build_optimizer, train_step

    device = torch.device("cpu")
    model = build_model(cfg, device, compile=False)
    optimizer = build_optimizer(cfg, model.parameters())
    size = 64 if cfg.dataset == "tinyimagenet" else 32
    took, batch = 0.0, min(16, cfg.batch_size)
    x, y = torch.randn(batch, 3, size, size), torch.randint(0, 10, (batch,))
    for _ in range(2):  # the first step of a shape also builds its kernels: the second is the one to time
        t0 = time.perf_counter()
        train_step(model, optimizer, torch.nn.CrossEntropyLoss(), x, y, None, device)
        took = time.perf_counter() - t0
    return took * cfg.batch_size / batch


def cpu_time_notice(cfg: RunConfig, measure=step_seconds) -> str | None:
    """For a notebook opened in JupyterLab on a machine without CUDA (no profile applied): how long its
    settings take here, from a step of its model measured now, and how to pick the smoke or tiny settings
    instead (those that differ from its own). None where the run goes to a GPU."""
    import math

    from ..device import resolve_device
    from ..ticker import about
    from . import tasks

    if resolve_device(cfg.device).type != "cpu":
        return None
    task = tasks.TASKS.get(cfg.task)
    if task is None:
        return None
    images = TRAIN_IMAGES.get(cfg.dataset, 50_000)
    images = min(images, cfg.subset) if cfg.subset else images
    per_epoch = math.ceil(images / cfg.batch_size)
    per_epoch = min(per_epoch, cfg.max_batches) if cfg.max_batches else per_epoch
    steps = task.gpu_runs * cfg.epochs * per_epoch
    extra = f", plus {task.gpu_extra[1]}" if task.gpu_extra else ""
    if steps:
        step = measure(cfg)
        told = (
            f"**On this CPU these settings take {about(steps * step)} of training**: {task.gpu_runs} run(s) "
            f"of {cfg.epochs} epoch(s) x {per_epoch} batches of {cfg.batch_size}, at {step:.2g} s a step of "
            f"{cfg.model} (measured here just now){extra}."
        )
    else:
        told = "This task's time here is not estimated: its work is not one training loop" + (
            f" ({task.gpu_extra[1]})." if task.gpu_extra else "."
        )
        if task.smoke_s:
            told += f" Its smoke profile took about {round(task.smoke_s)} s on 2 idle cores."

    def settings(profile: str) -> dict[str, Any]:
        return {k: v for k, v in task.profile(profile).items() if hasattr(cfg, k) and k != "data_root"}

    other = [p for p in ("smoke", "tiny") if any(getattr(cfg, k) != v for k, v in settings(p).items())]
    if not other or (steps and steps * step <= 120):
        return told
    how = " or ".join(
        f"the **{p}** profile's ({', '.join(f'`{k} = {v!r}`' for k, v in settings(p).items())})"
        for p in other
    )
    return (
        f"{told} For a demonstration in a minute or less, set in the parameters cell the values of {how}, or "
        f"run it from a terminal: `hpml-lab run {task.id} --profile {other[0]}`."
    )


def parameter_names(namespace: Mapping[str, Any]) -> set[str] | None:
    """The names the notebook's parameters cell and papermill's injected cell assign (both start with '#
    Parameters'): the only names config() reads, so that `from hpml_lab.studies import precision` in a later
    cell is never taken for a parameter. None outside a kernel with input history (then every RunConfig name
    is read, modules left out)."""
    import ast

    cells = [
        src
        for src in namespace.get("In", []) or []
        if isinstance(src, str) and src.lstrip().startswith("# Parameters")
    ]
    if not cells:
        return None
    names: set[str] = set()
    for src in cells:
        for node in ast.parse(src).body:
            if isinstance(node, ast.Assign):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def injected_names(namespace: Mapping[str, Any]) -> list[str]:
    """The names papermill injected: its cell (tagged injected-parameters) starts with the line '# Parameters'
    and is in the kernel's input history ("In"). Empty in an interactive session."""
    import ast

    names: list[str] = []
    for src in namespace.get("In", []) or []:
        if isinstance(src, str) and src.split("\n", 1)[0].strip() == "# Parameters":
            for node in ast.parse(src).body:
                if isinstance(node, ast.Assign):
                    names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return names


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


def data_notice(info: Mapping[str, Any]) -> str:
    info = {**info, "root": shown_path(info["root"])}
    if info["kind"] == "synthetic":
        return (
            '<div style="border:2px solid #c60;background:#fff4e5;padding:10px 14px;margin:8px 0;'
            'font-size:1.05em"><b>Synthetic data.</b> These results were computed on a synthetic '
            f"{html.escape(info['name'])} written in the real on-disk format (<span "
            f"data-id>{html.escape(info['root'])}</span>), "
            "not on the real dataset. Timings reflect the real pipeline; losses and accuracies are "
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


def header(cfg: RunConfig, lab: Mapping[str, Any] = sanity.LAB) -> dict[str, Any]:
    """Show the dataset notice, what this run changed from the lab's settings (a stand-in model first) and
    the machine; returns the dataset info."""
    info = dataset_info(cfg)
    display(HTML(data_notice(info)))
    display(HTML(settings_notice(cfg, lab)))
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


_REUSED = 0  # configurations reused from an earlier run in this kernel (reused_note), for the answer record


def reused_note(items) -> None:
    """Say how many configurations of a resumed sweep came from an earlier run, if any."""
    global _REUSED
    n = sum(getattr(i, "status", "") == "skipped" for i in items)
    _REUSED += n  # the answer record says it too, and the index from it
    if n:
        display(
            Markdown(
                f"*{n} configuration(s) were complete from an earlier run and were reused (resumed sweep); "
                "their start time is in their meta.json.*"
            )
        )


def settings_notice(cfg: RunConfig, lab: Mapping[str, Any] = sanity.LAB) -> str:
    """The ran-vs-lab table, in full, where the reader sees the numbers; empty when the lab's settings ran."""
    if not lab:  # a study with no lab setting to compare (e.g. the loader alone)
        return ""
    rows = sanity.ran_vs_lab(cfg, lab)
    if not rows:
        return "<p>Settings: the lab's.</p>"
    flag = sanity.stand_in(cfg, lab["model"]) if "model" in lab else None
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
    dropped = (
        "<p>The tensor-resident loader hands out batches of one size: each epoch's last partial batch is "
        "left out (static shapes for a compiled step; how many images, in each run's meta.json, "
        "<code>loader_dropped</code>), and the device's time is taken every <code>log_every</code> steps, "
        "not around each step.</p>"
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


# What this kernel's page shows beside the answer record, held in it so that the claims check can read the
# whole page (report/claims.py check_page): tables by name, figures' labels, the Numbers of sentences in the
# body. The record answer() wrote is written again when the page shows more after it (the environment table
# comes last).
_PAGE: dict[str, dict] = {"tables": {}, "figures": {}, "shown": {}}
_RECORD: list = []


def new_page() -> None:
    """Forget what an earlier page of this kernel showed (config() calls it: one page per run of the
    notebook)."""
    _PAGE.update(tables={}, figures={}, shown={})
    _RECORD.clear()
    _BUSY.clear()


def _rewrite() -> None:
    if _RECORD:
        from . import answer_box

        rec = _RECORD[-1]
        rec.tables, rec.figures = dict(_PAGE["tables"]), dict(_PAGE["figures"])
        rec.shown = list(_PAGE["shown"].values())
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


def _table_name(name: str) -> str:
    if name:
        return name
    k = len(_PAGE["tables"]) + 1
    while f"table {k}" in _PAGE["tables"]:
        k += 1
    return f"table {k}"


def answer(
    cfg: RunConfig,
    info: Mapping[str, Any],
    items: list,
    flags=(),
    title: str = "",
    lab: Mapping[str, Any] = sanity.LAB,
) -> None:
    """Build this report's answer record (answer_box.Record) from computed answers and flags, write it to
    reports/<task>.answer.json and show it (at the top of the rendered page)."""
    from . import answer_box, tasks

    stand_in = sanity.stand_in(cfg, lab["model"]) if "model" in lab else None
    flags = [f for f in flags if f is not None]
    if stand_in and all(f.kind != "stand-in model" for f in flags):
        flags.insert(0, stand_in)
    busy = sanity.busiest_seen()  # any run this report made or showed (machine_load / environment_table)
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
        synthetic_data=info.get("kind") == "synthetic",
        stand_in_model=cfg.model if stand_in else "",
        ran_vs_lab=differ,
        reused=_REUSED,
        tables=dict(_PAGE["tables"]),
        figures=dict(_PAGE["figures"]),
        shown=list(_PAGE["shown"].values()),
    )
    _RECORD[:] = [rec]
    _BUSY[:] = [f for f in flags if f.kind == "machine busy"]
    answer_box.show(rec)


def environment_table(meta: Mapping[str, Any]) -> pd.DataFrame:
    """The run's provenance as a two-column table: versions, hardware, commit, dataset, seed, config."""
    env = meta["environment"]
    run = str(meta.get("run_id") or "")
    sanity.observe(meta.get("machine"), run)  # a run shown on this report counts for its 'machine busy' flag
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
        "dataset": f"{meta['dataset']['name']} ({meta['dataset']['kind']})",
        "seed": meta["seed"],
        "started (UTC)": meta["started_at"],
        "run folder": meta["run_id"],
        "machine load before the run": load.plain(),
        **_busiest_row(run),
        **_peak_row(meta.get("flops")),
        "config": ", ".join(
            f"{k}={shown_path(v) if k.endswith('_root') else number_text(v) if isinstance(v, bool) else v}"
            for k, v in meta["config"].items()
            if k not in ("task", "results_dir", "run_id", "progress", "log_every")
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


_BUSY: list = []  # the 'machine busy' flag answer() put on this page, if any


def _peak_row(fl: Mapping[str, Any] | None) -> dict[str, str]:
    """The device's peak that every share of peak on the page divides by, and where it came from (a data
    sheet, or measured once on this machine and kept for every task: flops.PEAKS_FILE)."""
    if not fl or not fl.get("peak_tflops"):
        return {}
    from ..findings import say
    from ..flops import peak_number

    peak = peak_number(fl)
    hold_numbers(say("{p}", p=peak))
    return {
        "device peak (every share of peak divides by it)": f"{fmt_value(peak.value, peak.unit)}: "
        f"{peak.source}"
    }


def _busiest_row(run: str) -> dict[str, str]:
    """The environment table's row for the page's busy flag when that flag read another run than the table's:
    the same run and the same Numbers as the flag, so the two never state two loads without saying whose."""
    flag = _BUSY[0] if _BUSY else None
    if flag is None or not flag.run or flag.run == run:
        return {}
    nums = {n.name: n for n in flag.numbers()}
    load = nums.get(f"load average before {flag.run}")
    cores = nums.get(f"usable cores before {flag.run}")
    if load is None or cores is None:
        return {}
    text = f"{flag.run}: load average {fmt_value(load.value)} on {fmt_value(cores.value)} usable cores"
    return {"busiest run of this report (its machine busy flag)": text}


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
        values = [v for v in shown[c] if v is not None and v == v]
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
            target.stat().st_size / 1024**2,
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


_RUN: dict[str, Any] = {}  # the model this kernel's report runs (config), for figure titles


def stand_in_label(model: str | None, lab_model: str = sanity.LAB["model"]) -> str:
    """'model resnet_tiny, a stand-in for the lab's resnet18', or '' for the lab's model (or its adjusted
    form)."""
    if not model or model == lab_model or model.startswith(lab_model + "_"):
        return ""
    return f"model {model}, a stand-in for the lab's {lab_model}"


def alt_text(fig, name: str) -> str:
    """What a figure shows, for readers who cannot see it: each panel's title, axes and legend entries."""
    parts = []
    sup = getattr(fig, "_suptitle", None)
    if sup is not None and sup.get_text():
        parts.append(sup.get_text().replace("\n", " "))
    for ax in fig.get_axes():
        if not ax.get_visible() or not (ax.get_xlabel() or ax.get_ylabel() or ax.get_title()):
            continue
        what = ax.get_title() or "a panel"
        ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        axes = f"{ax.get_ylabel() or 'value'} " + (
            f"against {ax.get_xlabel()}" if ax.get_xlabel() else f"for {', '.join(ticks)}" if ticks else ""
        )
        legend = ax.get_legend()
        names = [t.get_text() for t in legend.get_texts()] if legend else []
        parts.append(f"{what}: {axes}" + (f" ({', '.join(names)})" if names else ""))
    # one legend for all panels (plots.figure_legend)
    shared = [t.get_text() for leg in getattr(fig, "legends", []) for t in leg.get_texts()]
    if shared:
        parts.append(f"legend: {', '.join(shared)}")
    return f"Figure {name}: " + ("; ".join(parts) if parts else "no labelled axes") + "."


def save_figure(fig, name: str, folder: str = "figures", alt: str = "") -> None:
    """Save under figures/<name>.png (in the project, or HPML_OUTPUT_DIR) and show it with alt text (`alt`,
    else what alt_text reads off the figure); a stand-in model is named in the figure's title.

    Returns nothing, so a cell that ends with it shows the figure once and no path."""
    import base64
    import io

    label = stand_in_label(_RUN.get("model"))
    if label:
        sup = getattr(fig, "_suptitle", None)
        head = sup.get_text() if sup is not None else ""
        if label not in head:
            fig.suptitle((head + "\n" if head else "") + f"({label})", fontsize=9)
            engine = fig.get_layout_engine()
            if type(engine).__name__ != "ConstrainedLayoutEngine":  # constrained layout makes room by itself
                # make room for the caption: it was added after the layout and sat on the plot
                fig.tight_layout()
    alt = alt or alt_text(fig, name)
    caption = getattr(
        fig, "hpml_caption", ""
    )  # plots.captioned: what is drawn, said by the code that drew it
    # its labels and caption, held in the record: the claims check reads the page's
    _PAGE["figures"][name] = {"alt": alt, **({"caption": caption} if caption else {})}
    _rewrite()
    path = output_path(folder) / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with the kernel
        return
    if get_ipython() is None:  # a plain script: the file is the figure
        return
    from IPython.display import HTML

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    data = base64.b64encode(buf.getvalue()).decode()
    display(
        HTML(
            f'<img src="data:image/png;base64,{data}" data-figure="{html.escape(name)}" '
            f'alt="{html.escape(alt)}">'
        )
    )
    if caption:
        display(
            HTML(f'<p class="caption" data-figure="{html.escape(name)}"><i>{html.escape(caption)}</i></p>')
        )
    import matplotlib.pyplot as plt

    plt.close(fig)  # shown above, with its alt text: the inline backend would show it again without


# the per-epoch memory columns of epochs.csv (profiling.MEMORY_COLUMNS) as a table shows them, units in the
# header
MEMORY_HEADERS = {
    "peak_allocated_mb": "CUDA peak allocated (MB)",
    "peak_reserved_mb": "CUDA peak reserved (MB)",
    "alloc_retries": "CUDA allocation retries (count)",
    "peak_rss_mb": "process peak RSS (MB)",
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


def said(*items: Any, questions: bool = False) -> None:
    """Shows answers (their headline and details) or findings in the report's body as the record holds them:
    each number in its <span data-number> slot, never formatted again here; an answer's background follows
    apart, labelled as general. `questions`: each answer's question first, in bold."""
    from IPython.display import HTML, display

    parts, general = [], []
    for it in items:
        findings = getattr(it, "findings", None) or [it]
        hold_numbers(*findings)
        q = f"<b>{html.escape(it.question)}</b> " if questions and getattr(it, "question", "") else ""
        parts.append(q + " ".join(f.html() for f in findings))
        general += [b.html() for b in getattr(it, "background", [])]
    body = "".join(f"<p>{p}</p>" for p in parts)
    if general:
        body += "<p><i>In general (not measured in this run):</i> " + " ".join(general) + "</p>"
    display(HTML(body))
