"""The memory task's figures: activation memory and time per batch against depth, and the loss curves.

from hpml_lab.studies.memory import figure
fig = figure.depth_figure(conclusion.at_peak(res), "peak_act_MB_per_sample")
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from ...plots import legend_outside
from ...sanity import MIN_SAMPLES


def depth_figure(table, column: str = "act_MB_per_sample", label: str = "saved for backward (MB per sample)"):
    """Activation MB per sample (`column`: e.g. saved + recompute working set) and seconds per batch against
    depth, one line per family; min-max bars only where a network had at least MIN_SAMPLES timed rounds."""

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.8))
    spread_shown = bool(len(table)) and int(table["repeats"].min()) >= MIN_SAMPLES
    for family, part in table.groupby("family", sort=False):
        part = part.sort_values("depth")
        a1.plot(part["depth"], part[column], "o-", label=family)
        if spread_shown:
            a2.errorbar(
                part["depth"],
                part["s_per_batch"],
                yerr=[part["s_per_batch"] - part["s_min"], part["s_max"] - part["s_per_batch"]],
                fmt="o-",
                capsize=3,
                label=family,
            )
        else:
            a2.plot(part["depth"], part["s_per_batch"], "o-", label=family)
    a1.set_ylabel(label)
    a2.set_ylabel(
        f"s per batch ({'median, min-max' if spread_shown else 'median, too few rounds for a spread'}), "
        f"batch {int(table['batch_size'].iloc[0])}"
    )
    for ax in (a1, a2):
        ax.set_xlabel("depth (layers)")
        ax.grid(alpha=0.3)
    legend_outside(a2)
    fig.tight_layout()
    return fig


def loss_curves(runs, smooth: int = 5, chance: float | None = None):
    """Per-batch training loss of several train() runs on the same steps: {label: batches df}; `chance`: the
    loss of a uniform guess (ln classes), drawn as a line because the text judges the runs against it."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.8))
    for label, batches in runs.items():
        (line,) = ax.plot(batches["step"], batches["loss"], lw=0.8, alpha=0.4)
        ax.plot(
            batches["step"],
            batches["loss"].rolling(smooth, min_periods=1).mean(),
            lw=1.8,
            color=line.get_color(),
            label=f"{label} (running mean of {smooth} batches)",
        )
    if chance is not None:
        ax.axhline(chance, color="0.3", ls=":", lw=1.2, label="chance (uniform guess, ln classes)")
    ax.set_xlabel("step (batch)")
    ax.set_ylabel("training loss")
    ax.grid(alpha=0.3)
    legend_outside(ax)
    fig.tight_layout()
    return fig
