"""C1's figure: per-batch training loss and top-1 against step, with the chance levels the answer states.

from hpml_lab.studies.c1 import figure
fig = figure.loss_accuracy(run.batches, chance_loss=plots.stated(answers, "chance loss"))
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from ...plots import captioned, chance_line, epoch_boundaries, figure_legend, running_mean, running_words


def loss_accuracy(
    batches: pd.DataFrame, title: str = "", smooth: int = 0, chance_loss=None, chance_top1=None
) -> plt.Figure:
    """Per-batch training loss and top-1 accuracy against step, each a thin line through every batch; grey
    vertical lines mark epochs; smooth > 1 overlays a running mean of that many batches (a thick line).
    `chance_loss`, `chance_top1`: the chance levels the answer states (Numbers of its record, plots.stated),
    drawn dotted. The caption (captioned) says what is drawn."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.8))
    refs = ((a1, chance_loss, "loss"), (a2, chance_top1, "top-1"))
    for (ax, chance, what), col, label in zip(
        refs, ("loss", "acc"), ("training loss", "top-1 training accuracy (%)")
    ):
        y = batches[col] * (100 if col == "acc" else 1)
        ax.plot(batches["step"], y, lw=0.9, alpha=0.5 if smooth > 1 else 1.0, label="per batch")
        if smooth > 1:
            ax.plot(
                batches["step"],
                running_mean(y, smooth),
                lw=1.8,
                label=running_words(smooth),
            )
        if chance is not None:
            chance_line(ax, chance, what)
        bounds = epoch_boundaries(ax, batches)
        ax.set_xlabel("step (batch)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if smooth > 1 or chance_loss is not None or chance_top1 is not None:
        figure_legend(fig)
    parts = [
        "Each mini-batch's training loss and top-1 (on the images it was trained on, in training mode), "
        "joined by a thin line over the steps"
        + (f"; a thick line is their {running_words(smooth)}" if smooth > 1 else ": no smoothing")
    ]
    if bounds:
        parts.append("grey vertical lines mark where each epoch after the first starts")
    drawn = [w for _, c, w in refs if c is not None]
    if drawn:
        parts.append(f"the dotted line is the chance {' and '.join(drawn)} the answer states")
    return captioned(fig, "; ".join(parts) + ".")
