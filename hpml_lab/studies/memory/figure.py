"""The memory task's figures: activation memory and time per batch against depth, and the loss curves.

from hpml_lab.studies.memory import figure
fig = figure.depth_figure(conclusion.at_peak(res))
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from ...plots import captioned, legend_outside, running_mean, running_words
from ...sanity import MIN_SAMPLES


def depth_figure(table):
    """Activation MB per sample and seconds per batch against depth, one colour per family. Left: the bytes
    autograd saves for backward (solid; the RevNet answer's growth is of these) and, for the networks that
    recompute in backward, those plus the recompute working set (dashed; the checkpointing answer's share is
    of these), so that each answer's quantity is drawn and labelled. Right: min-max bars only where a network
    had at least MIN_SAMPLES timed rounds."""
    from matplotlib.lines import Line2D

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.8))
    spread_shown = bool(len(table)) and int(table["repeats"].min()) >= MIN_SAMPLES
    held = "working_MB_per_sample" in table and bool((table["working_MB_per_sample"] > 0).any())
    for family, part in table.groupby("family", sort=False):
        part = part.sort_values("depth")
        (line,) = a1.plot(part["depth"], part["act_MB_per_sample"], "o-", label=family)
        if held and (part["working_MB_per_sample"] > 0).any():
            a1.plot(part["depth"], part["peak_act_MB_per_sample"], "o--", color=line.get_color(), mfc="none")
        if spread_shown:
            a2.errorbar(
                part["depth"],
                part["s_per_batch"],
                yerr=[part["s_per_batch"] - part["s_min"], part["s_max"] - part["s_per_batch"]],
                fmt="o-",
                capsize=3,
                color=line.get_color(),
                label=family,
            )
        else:
            a2.plot(part["depth"], part["s_per_batch"], "o-", color=line.get_color(), label=family)
    # which line is which in the panel's title, where it has the panel's width: on the axis it ran past the
    # panel's height
    a1.set_ylabel("MB per sample" if held else "MB per sample, saved for backward")
    if held:
        a1.set_title("saved for backward (solid); + recompute working set (dashed)", fontsize=9)
    a2.set_ylabel(
        f"s per batch ({'median, min-max' if spread_shown else 'median, too few rounds for a spread'}), "
        f"batch {int(table['batch_size'].iloc[0])}"
    )
    for ax in (a1, a2):
        ax.set_xlabel("depth (layers)")
        ax.grid(alpha=0.3)
    if held:  # the line styles, beside the families' colours
        handles, labels = a2.get_legend_handles_labels()
        handles += [
            Line2D([], [], color="0.3", ls="-", marker="o", label="saved for backward"),
            Line2D(
                [], [], color="0.3", ls="--", marker="o", mfc="none", label="saved + recompute working set"
            ),
        ]
        a2.legend(
            handles=handles,
            frameon=False,
            fontsize=8,
            loc="upper left",
            bbox_to_anchor=(1.02, 1),
            borderaxespad=0,
        )
    else:
        legend_outside(a2)
    fig.tight_layout()
    return captioned(
        fig,
        "Left: solid lines are the bytes autograd saves for backward per sample, the quantity the RevNet "
        "answer compares across depths"
        + (
            "; dashed lines add the working set a recomputation holds again during backward, the quantity "
            "the checkpointing answer compares with the plain network"
            if held
            else ""
        )
        + ". Right: time per training step.",
    )


def loss_curves(runs, smooth: int = 5, chance: float | None = None, clear: float | None = None):
    """Per-batch training loss of several train() runs on the same steps: {label: batches df}; `chance`: the
    loss of a uniform guess (ln classes), and `clear`: the loss a run must get under to be clearly below it
    (conclusion.clear_of_chance), each drawn as a line because the text judges the runs against them."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.5, 3.8))
    for label, batches in runs.items():
        (line,) = ax.plot(batches["step"], batches["loss"], lw=0.8, alpha=0.4)
        ax.plot(
            batches["step"],
            running_mean(batches["loss"], smooth),
            lw=1.8,
            color=line.get_color(),
            label=str(label),
        )
    if chance is not None:
        ax.axhline(chance, color="0.3", ls=":", lw=1.2, label="chance (uniform guess, ln classes)")
    if clear is not None:
        below = f"{100 * (1 - clear / chance):.3g}% under chance" if chance else "the answer's limit"
        ax.axhline(clear, color="0.3", ls="--", lw=1.0, label=f"clearly below chance: {below}")
    # what the two kinds of line are, said once under the plot, not in every run's legend entry (grade29b: the
    # legend left the plot a third of the figure)
    ax.set_xlabel(f"step (batch)\nthin lines: each batch\nthick lines: the {running_words(smooth)}")
    ax.set_ylabel("training loss")
    ax.grid(alpha=0.3)
    legend_outside(ax)
    fig.tight_layout()
    return fig
