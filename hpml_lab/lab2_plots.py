"""Figures for the Lab 2 reports C3 to C8 and the questions. Each returns a matplotlib Figure.

    from hpml_lab import lab2, lab2_plots
    lab2_plots.loader_sweep(lab2.c3_loader_sweep(cfg))

Timed figures show every repeat as a dot, the median as a bar or line and
min-max whiskers, and say n in the axis label or title.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd


def loader_sweep(sweep) -> plt.Figure:
    """C3: seconds per loader epoch against worker count: every repeat, median line, min-max whiskers."""
    s, rows = sweep.summary, sweep.rows
    fig, ax = plt.subplots(figsize=(7, 3.8))
    x = range(len(s))
    pos = dict(zip(s["num_workers"], x))
    ax.scatter([pos[n] for n in rows["num_workers"]], rows["seconds"], s=14, color="0.5", zorder=3,
               label="each timed epoch")
    ax.errorbar(list(x), s["median_s"], yerr=[s["median_s"] - s["min_s"], s["max_s"] - s["median_s"]],
                fmt="o-", color="#1b9e77", capsize=4, label="median, min-max")
    best = s[s["best"]].index[0]
    ax.scatter([best], [s.loc[best, "median_s"]], s=160, facecolors="none", edgecolors="#d95f02", lw=2,
               label=f"best: {int(s.loc[best, 'num_workers'])} workers", zorder=4)
    if sweep.cores in pos:
        ax.axvline(pos[sweep.cores], color="0.7", ls="--")
    ax.set_xticks(list(x), [str(n) for n in s["num_workers"]])
    ax.set_xlabel(f"num_workers ({sweep.cores} usable cores" + (", dashed)" if sweep.cores in pos else ")"))
    ax.set_ylabel(f"DataLoader seconds per epoch (n={int(s['n'].iloc[0])} each)")
    ax.legend(frameon=False, fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def phase_bars(summary: pd.DataFrame, by: str, xlabel: str) -> plt.Figure:
    """C4: stacked median data-loading / training / other seconds per group (steady epochs)."""
    fig, ax = plt.subplots(figsize=(6, 3.8))
    x = summary[by].astype(str)
    other = (summary["total_median_s"] - summary["data_median_s"] - summary["train_median_s"]).clip(lower=0)
    ax.bar(x, summary["data_median_s"], color="#d95f02", label="data loading (waiting on loader)")
    ax.bar(x, summary["train_median_s"], bottom=summary["data_median_s"], color="#1b9e77",
           label="compute (copy+fwd+bwd+step)")
    ax.bar(x, other, bottom=summary["data_median_s"] + summary["train_median_s"], color="#bbbbbb", label="other")
    ax.errorbar(x, summary["total_median_s"], yerr=[summary["total_median_s"] - summary["total_min_s"],
                                                    summary["total_max_s"] - summary["total_median_s"]],
                fmt="none", color="k", capsize=4)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"median seconds per epoch (n={int(summary['n'].min())} epochs)")
    ax.legend(frameon=False, fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def median_bars(summary: pd.DataFrame, label: str, epochs: pd.DataFrame | None = None,
                ylabel: str = "seconds per epoch") -> plt.Figure:
    """C5, C8: median steady epoch time per row with min-max whiskers (and each epoch as a dot)."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    x = list(range(len(summary)))
    ax.bar(x, summary["median_s"], color="#7570b3", alpha=0.8)
    ax.errorbar(x, summary["median_s"], yerr=[summary["median_s"] - summary["min_s"],
                                              summary["max_s"] - summary["median_s"]], fmt="none", color="k", capsize=4)
    if epochs is not None:
        for i, key in enumerate(summary[label]):
            vals = epochs[epochs[label] == key]["total_s"]
            ax.scatter([i] * len(vals), vals, color="k", s=10, zorder=3)
    ax.set_xticks(x, [f"{k}\n(n={int(n)})" for k, n in zip(summary[label], summary["n"])])
    ax.set_ylabel(f"{ylabel}, median (min-max)")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def training_curves(batches: pd.DataFrame, epochs: pd.DataFrame, by: str, smooth: int = 5) -> plt.Figure:
    """C6, C7: per-batch loss and top-1 (running mean) side by side per group, and steady epoch times."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    for key, g in batches.groupby(by, sort=False):
        g = g.sort_values("step")
        axes[0].plot(g["step"], g["loss"].rolling(smooth, min_periods=1).mean(), label=str(key))
        axes[1].plot(g["step"], 100 * g["acc"].rolling(smooth, min_periods=1).mean(), label=str(key))
    for ax, lab in ((axes[0], "training loss"), (axes[1], "top-1 training accuracy (%)")):
        ax.set_xlabel(f"step (running mean of {smooth} batches)")
        ax.set_ylabel(lab)
        ax.grid(alpha=0.3)
    axes[0].legend(frameon=False, fontsize=8)
    st = epochs[epochs["epoch"] > 1] if epochs["epoch"].max() > 1 else epochs
    keys = list(dict.fromkeys(epochs[by]))
    axes[2].boxplot([st[st[by] == k]["total_s"] for k in keys], whis=(0, 100))
    axes[2].set_xticks(range(1, len(keys) + 1), [str(k) for k in keys], rotation=20)
    axes[2].set_ylabel(f"seconds per epoch (epochs 2+, n={len(st) // max(len(keys), 1)})")
    axes[2].grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def memory_counts(answers: pd.DataFrame) -> plt.Figure:
    """Questions: parameters, gradients and optimizer state, SGD vs Adam, in millions of values."""
    rows = answers[answers["question"].isin(["Q3", "Q4"])].copy()
    rows["optimizer"] = rows["quantity"].str.split(":").str[0].str.split(" ").str[0]
    rows["what"] = rows["quantity"].str.split(": ", n=1).str[1]
    rows = rows[rows["what"] != "optimizer state step"]
    table = rows.pivot_table(index="optimizer", columns="what", values="value", aggfunc="sum").fillna(0) / 1e6
    fig, ax = plt.subplots(figsize=(7, 3.6))
    table.plot(kind="bar", stacked=True, ax=ax, rot=0)
    ax.set_ylabel("millions of float values kept")
    ax.legend(frameon=False, fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig
