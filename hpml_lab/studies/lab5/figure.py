"""Lab 5's figure: epoch time against workers per per-worker batch, timed, modelled and ideal.

from hpml_lab.studies.lab5 import figure
fig = figure.scaling_figure(res.table, model_ok)
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from ...plots import legend_outside, plain_log_y
from .conclusion import missed_rows

DODGE = 0.12  # of a worker: how far apart two per-worker batches' points stand at one worker count
MODEL_DX = DODGE / 3  # and a batch's model points beside its timed ones, which they may all but equal


def scaling_figure(table: pd.DataFrame, model_ok: bool = True) -> plt.Figure:
    """Lab 5: epoch time against workers per per-worker batch. Epochs extrapolated from timed steps: filled
    points on solid lines; the scaling model's predictions: hollow points on a dashed line of their own (the
    model's points only, never joined to a timed one), drawn only where the answer states them: every
    prediction while the model agrees with its own runs (`model_ok`), else only at the runs it misses
    (conclusion.missed_rows), and then no worker count that did not run is drawn at all; the ideal, the
    1-worker epoch / n: a dotted line. None of them is a measured epoch: the legend says "from timed steps",
    "model" and "ideal"."""
    fig, ax = plt.subplots(figsize=(9.5, 4))
    stated = table if model_ok or "predicted_s" not in table else missed_rows(table)
    # the worker counts that did not run are the unused model's alone: not drawn, nor their axis
    if not model_ok:
        table = table[table.source == "measured"]
    groups = list(table.groupby("per_gpu_batch"))
    for i, (b, g) in enumerate(groups):
        # each batch's points a little apart from the others' at a worker count (DODGE of a worker, the middle
        # batch's on it), and its model points MODEL_DX beside its timed ones, so that near-equal epochs do
        # not hide one another (a grader found one point wholly under another's, then a model point over its
        # timed one); the ticks stay on the worker counts
        dx = (i - (len(groups) - 1) / 2) * DODGE
        g = g.sort_values("workers")
        meas = g[g.source == "measured"]
        said = stated[stated.per_gpu_batch == b].sort_values("workers")
        model = said[said.predicted_s.notna()] if "predicted_s" in said else said[said.source != "measured"]
        model_s = model.predicted_s if "predicted_s" in model else model.epoch_s
        (line,) = ax.plot(meas.workers + dx, meas.epoch_s, "o-", label=f"batch {b}/worker, from timed steps")
        if len(model):
            ax.plot(
                model.workers + dx + MODEL_DX,
                model_s,
                "o--",
                mfc="white",
                color=line.get_color(),
                label=f"batch {b}/worker, model"
                + ("" if model_ok else " (misses these runs: not used for more workers)"),
            )
        one = g[g.workers == 1]
        if len(one):
            n = sorted(g.workers.unique())
            ax.plot(
                [k + dx for k in n],
                [float(one.epoch_s.iloc[0]) / k for k in n],
                ":",
                color=line.get_color(),
                alpha=0.7,
                label=f"batch {b}/worker, ideal (1-worker epoch / n)",
            )
    ax.set_xlabel("workers")
    ax.set_ylabel("epoch time (s), incl. data loading")
    ax.set_xticks(sorted(table.workers.unique()))
    # every y the axes draw (points, ideal lines): its ticks read as numbers, 2 and 5 between the decades
    plain_log_y(ax, [y for ln in ax.get_lines() for y in ln.get_ydata()])
    legend_outside(ax, fontsize=7)
    fig.tight_layout()
    return fig
