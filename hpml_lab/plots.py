"""Figures the reports share. Each function returns a matplotlib Figure; save with notebook.save_figure.

    from hpml_lab import plots
    plots.loss_accuracy(run.batches)
    plots.epoch_timing(run.epochs)
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd


def _epoch_boundaries(ax, batches: pd.DataFrame) -> None:
    starts = batches.groupby("epoch")["step"].min().iloc[1:]
    for s in starts:
        ax.axvline(s - 0.5, color="0.8", lw=0.8, zorder=0)


def loss_accuracy(batches: pd.DataFrame, title: str = "", smooth: int = 0) -> plt.Figure:
    """Per-batch training loss and top-1 accuracy against step; grey lines mark epochs.

    smooth > 1 overlays a running mean of that many batches.
    """
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, col, label in ((a1, "loss", "training loss"), (a2, "acc", "top-1 training accuracy (%)")):
        y = batches[col] * (100 if col == "acc" else 1)
        ax.plot(batches["step"], y, lw=0.9, alpha=0.5 if smooth > 1 else 1.0, label="per batch")
        if smooth > 1:
            ax.plot(batches["step"], y.rolling(smooth, min_periods=1).mean(), lw=1.8, label=f"mean of {smooth}")
            ax.legend(frameon=False)
        _epoch_boundaries(ax, batches)
        ax.set_xlabel("step (batch)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def epoch_timing(epochs: pd.DataFrame, title: str = "") -> plt.Figure:
    """Stacked bars per epoch: data loading, training, and the rest of the epoch's wall time."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    other = (epochs["total_s"] - epochs["data_s"] - epochs["train_s"]).clip(lower=0)
    x = epochs["epoch"].astype(str)
    ax.bar(x, epochs["data_s"], label="data loading (waiting on loader)", color="#d95f02")
    ax.bar(x, epochs["train_s"], bottom=epochs["data_s"], label="training (copy+fwd+bwd+step)", color="#1b9e77")
    ax.bar(x, other, bottom=epochs["data_s"] + epochs["train_s"], label="other (loop, metrics)", color="#bbbbbb")
    ax.set_xlabel("epoch")
    ax.set_ylabel("seconds")
    ax.legend(frameon=False, fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig
