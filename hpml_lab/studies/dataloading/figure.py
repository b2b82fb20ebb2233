"""The data-loading task's figure: images/s and batch loading time against the simulated latency.

from hpml_lab.studies.dataloading import figure
fig = figure.latency_figure(df)
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from ...plots import legend_outside
from ...sanity import MIN_SAMPLES
from .study import ORDER


def latency_figure(df):
    """Images/s (median pass; bars: fastest to slowest pass) and batch loading time against latency."""

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.8))
    for name in ORDER:
        d = df[df["loader"] == name].sort_values("latency_ms")
        if d.empty:
            continue
        lo = d["files"] / d["epoch_max_s"]
        hi = d["files"] / d["epoch_min_s"]
        few = int(d["passes"].min()) < MIN_SAMPLES  # no spread from fewer passes: points only, no caps
        a1.errorbar(
            d["latency_ms"],
            d["images_per_s"],
            yerr=None if few else [d["images_per_s"] - lo, hi - d["images_per_s"]],
            marker="o",
            capsize=0 if few else 3,
            label=name,
        )
        a2.plot(d["latency_ms"], 1000 * d["batch_s"], marker="o", label=name)
    a1.set(
        xlabel="simulated storage latency per file (ms)",
        ylabel="images/s (log)",
        yscale="log",
        title="Loading throughput (files / median pass)",  # a tensor-resident pass holds no load: said below
    )
    a2.set(
        xlabel="simulated storage latency per file (ms)",
        ylabel="ms per batch (log)",
        yscale="log",
        title="Batch loading time (pass time / batches)",
    )
    legend_outside(a2)
    fig.tight_layout()
    return fig
