"""Helpers that keep the lab notebooks thin: config from the parameters cell,
the data notice, the environment section, figures saved under figures/.

In a notebook, right after the `parameters` cell:

    from hpml_lab import notebook as nb
    cfg = nb.config("c1", globals())   # every RunConfig field set in the parameters cell
    nb.header(cfg)                     # dataset notice (synthetic data is flagged) + hardware
"""
from __future__ import annotations

import html
from typing import Any, Mapping

import pandas as pd

from ..config import RunConfig, output_path
from ..data import dataset_info
from ..envinfo import environment, hardware_label
from ..profiling import summarize
from ..results import drop_warmup

try:
    from IPython.display import HTML, Markdown, display
except ImportError:  # plain Python: print instead
    HTML = Markdown = str  # type: ignore

    def display(obj):  # type: ignore
        print(obj)


def config(task: str, namespace: Mapping[str, Any]) -> RunConfig:
    """RunConfig from the RunConfig fields defined in `namespace` (the notebook's globals)."""
    params = {k: namespace[k] for k in RunConfig.field_names() if k in namespace and k != "task"}
    return RunConfig(task=task, **params)


def data_notice(info: Mapping[str, Any]) -> str:
    if info["kind"] == "synthetic":
        return (
            '<div style="border:2px solid #c60;background:#fff4e5;padding:10px 14px;margin:8px 0;'
            'font-size:1.05em"><b>Synthetic data.</b> These results were computed on a synthetic '
            f"{html.escape(info['name'])} written in the real on-disk format ({html.escape(info['root'])}), "
            "not on the real dataset. Timings reflect the real pipeline; losses and accuracies are "
            "not comparable with published CIFAR-10 numbers.</div>"
        )
    return (f'<div style="border:1px solid #2a7;padding:8px 14px;margin:8px 0">Dataset: real '
            f"{html.escape(info['name'])} from {html.escape(info['root'])}.</div>")


def header(cfg: RunConfig) -> dict[str, Any]:
    """Show the dataset notice and the machine; returns the dataset info."""
    info = dataset_info(cfg)
    display(HTML(data_notice(info)))
    env = environment()
    display(Markdown(f"**Hardware:** {hardware_label(env)} &nbsp;·&nbsp; **torch** {env['torch']} "
                     f"&nbsp;·&nbsp; **commit** `{env['commit'][:10]}`{' (uncommitted changes)' if env['dirty'] else ''}"))
    return info


def environment_table(meta: Mapping[str, Any]) -> pd.DataFrame:
    """The run's provenance as a two-column table: versions, hardware, commit, dataset, seed, config."""
    env = meta["environment"]
    rows = {
        "hardware": hardware_label(env), "device used": meta["device"], "cpu": env["cpu"],
        "cpu cores usable": env["cpu_cores"], "gpu": (env["gpu"] or {}).get("name", "none"),
        "python": env["python"], "torch": env["torch"], "torchvision": env["torchvision"],
        "cuda": env["cuda"] or "n/a", "git commit": env["commit"] + (" (dirty)" if env["dirty"] else ""),
        "dataset": f"{meta['dataset']['name']} ({meta['dataset']['kind']})", "seed": meta["seed"],
        "started (UTC)": meta["started_at"], "run folder": meta["run_id"],
        "config": ", ".join(f"{k}={v}" for k, v in meta["config"].items()
                            if k not in ("task", "results_dir", "run_id", "progress", "log_every")),
    }
    return pd.DataFrame({"value": [str(v) for v in rows.values()]}, index=list(rows.keys()))


def save_figure(fig, name: str, folder: str = "figures") -> None:
    """Save under figures/<name>.png (in the project, or HPML_OUTPUT_DIR).

    Returns nothing, so a cell that ends with it shows the figure and no path."""
    path = output_path(folder) / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")


def stat_line(values, unit: str = "s", what: str = "") -> str:
    """'median 1.23 s (IQR 0.05, min 1.20, max 1.31, n=4)' for prose and tables."""
    s = summarize(values)
    if s["n"] == 0:
        return "no measurements"
    return (f"{what}median {s['median']:.3g} {unit} (IQR {s['iqr']:.2g}, min {s['min']:.3g}, "
            f"max {s['max']:.3g}, n={s['n']})")


def steady_epochs(epochs: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Epochs after the first (warm-up) when there are at least two, and a sentence saying so."""
    if len(epochs) >= 2:
        return drop_warmup(epochs), (
            f"Epoch {int(epochs['epoch'].min())} is excluded as warm-up (worker start-up, allocator and "
            f"kernel autotuning); statistics are over the other {len(epochs) - 1}.")
    return epochs, "Only one epoch was run, so it is reported as is, warm-up included."
