"""C2's figure: per epoch, data loading, training and the rest of the epoch's time.

from hpml_lab.studies.c2 import figure
fig = figure.epoch_timing(run.epochs, disjoint=lab2_conclusion.timing_disjoint(cfg, run.meta))
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from ...plots import bars_inside, legend_outside


def epoch_timing(epochs: pd.DataFrame, title: str = "", disjoint: bool = True) -> plt.Figure:
    """Per epoch: data loading, training and the rest of the epoch's wall time stacked, where the two
    intervals are disjoint (lab2_conclusion.timing_disjoint: a CPU, or a GPU synchronized after every step);
    where they can overlap (a GPU without that synchronize) data loading, training and the total side by side,
    since a stack would add times that overlap."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    x = epochs["epoch"].astype(str)
    if disjoint:
        other = (epochs["total_s"] - epochs["data_s"] - epochs["train_s"]).clip(lower=0)
        ax.bar(x, epochs["data_s"], label="data loading (waiting on loader)", color="#d95f02")
        ax.bar(
            x,
            epochs["train_s"],
            bottom=epochs["data_s"],
            label="training (copy+fwd+bwd+step)",
            color="#1b9e77",
        )
        ax.bar(
            x,
            other,
            bottom=epochs["data_s"] + epochs["train_s"],
            label="other (loop, metrics)",
            color="#bbbbbb",
        )
    else:
        pos = range(len(epochs))
        parts = (
            ("data_s", "data loading (waiting on loader)", "#d95f02"),
            ("train_s", "training (copy+fwd+bwd+step, on the GPU)", "#1b9e77"),
            ("total_s", "whole epoch (the two can overlap: not stacked)", "#7570b3"),
        )
        for k, (col, label, color) in enumerate(parts):
            ax.bar([p + (k - 1) * 0.27 for p in pos], epochs[col], width=0.27, label=label, color=color)
        ax.set_xticks(list(pos), list(x))
    ax.set_xlabel("epoch")
    ax.set_ylabel("seconds")
    bars_inside(ax)
    legend_outside(ax)
    ax.grid(axis="y", alpha=0.3)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig
