"""C2's figure: per epoch, data loading, training and the rest of the epoch's time.

from hpml_lab.studies.c2 import figure
fig = figure.epoch_timing(run.epochs, title=figure.title(cfg, run.meta),
                          disjoint=lab2_conclusion.timing_disjoint(cfg, run.meta))
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from ...plots import bars_inside, legend_outside, time_phases
from .._conclude import workers


def title(cfg, meta) -> str:
    """The figure's title: the run's model, batch size, workers ('1 worker', never '1 workers') and device."""
    return (
        f"{cfg.model}, batch {cfg.batch_size}, {workers(cfg.num_workers)}, {(meta or {}).get('device', '')}"
    )


def epoch_timing(epochs: pd.DataFrame, title: str = "", disjoint: bool = True) -> plt.Figure:
    """Per epoch: data loading, training and the rest of the epoch's wall time stacked, where the two
    intervals are disjoint (lab2_conclusion.timing_disjoint: a CPU, or a GPU synchronized after every step);
    where they can overlap (a GPU without that synchronize) data loading, training and the total side by side,
    since a stack would add times that overlap."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    labels = list(epochs["epoch"].astype(str))
    time_phases(
        ax,
        labels,
        epochs["data_s"],
        epochs["train_s"],
        epochs["total_s"],
        disjoint,
        other_label="other (loop, metrics)",
    )
    ax.set_xlabel("epoch")
    ax.set_ylabel("seconds")
    bars_inside(ax)
    legend_outside(ax)
    ax.grid(axis="y", alpha=0.3)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig
