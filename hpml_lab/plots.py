"""Figures the reports share. Each function returns a matplotlib Figure; save with notebook.save_figure.

from hpml_lab.report import plots
plots.loss_accuracy(run.batches)
plots.epoch_timing(run.epochs)
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from ..sanity import MIN_SAMPLES
from ..studies.dataloading.dataloading_study import ORDER


def spread(ax, groups, labels) -> str:
    """Each group's values at x = 1, 2, ...: a box plot (quartiles, min-max whiskers) when every group has at
    least 3 values, else only the values as points, since fewer than 3 have no spread. Returns 'box' or 'points'."""
    groups = [list(map(float, g)) for g in groups]
    if groups and min(len(g) for g in groups) >= MIN_SAMPLES:
        ax.boxplot(groups, whis=(0, 100))
        kind = "box"
    else:
        for i, g in enumerate(groups, start=1):
            ax.scatter([i] * len(g), g, color="k", s=18, zorder=3)
        kind = "points"
    ax.set_xticks(range(1, len(labels) + 1), labels, rotation=20)
    return kind


def _epoch_boundaries(ax, batches: pd.DataFrame) -> int:
    """Grey vertical lines where each epoch after the first starts; how many were drawn."""
    starts = batches.groupby("epoch")["step"].min().iloc[1:]
    for s in starts:
        ax.axvline(s - 0.5, color="0.8", lw=0.8, zorder=0)
    return len(starts)


def stated(answers, name: str):
    """The Number named `name` that the answers state (a reference a figure draws because the text uses it, such as
    "chance loss"), or None when no answer states it."""
    return next((n for a in answers for n in a.numbers if n.name == name), None)


def captioned(fig, text: str):
    """The figure with its caption: what is drawn, written where the drawing is decided (notebook.save_figure shows
    it under the image), so that a caption cannot describe another plot."""
    fig.hpml_caption = text
    return fig


def caption_of(fig) -> str:
    return getattr(fig, "hpml_caption", "")


def chance_line(ax, number, what: str) -> None:
    """A reference line at a chance level the answer states (`number`, a Number of the record), labelled with it."""
    from ..findings import fmt

    ax.axhline(
        number.value, color="0.3", ls=":", lw=1.2, label=f"chance {what} ({fmt(number)}, a uniform guess)"
    )


def loss_accuracy(
    batches: pd.DataFrame, title: str = "", smooth: int = 0, chance_loss=None, chance_top1=None
) -> plt.Figure:
    """Per-batch training loss and top-1 accuracy against step, each a thin line through every batch; grey vertical
    lines mark epochs; smooth > 1 overlays a running mean of that many batches (a thick line). `chance_loss`,
    `chance_top1`: the chance levels the answer states (Numbers of its record, plots.stated), drawn dotted. The
    caption (captioned) says what is drawn."""
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
                y.rolling(smooth, min_periods=1).mean(),
                lw=1.8,
                label=f"running mean of {smooth} batches",
            )
        if chance is not None:
            chance_line(ax, chance, what)
        bounds = _epoch_boundaries(ax, batches)
        ax.set_xlabel("step (batch)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if smooth > 1 or chance_loss is not None or chance_top1 is not None:
        figure_legend(fig)
    parts = [
        "Each mini-batch's training loss and top-1 (on the images it was trained on, in training mode), joined by a "
        "thin line over the steps"
        + (f"; a thick line is their running mean over {smooth} batches" if smooth > 1 else ": no smoothing")
    ]
    if bounds:
        parts.append("grey vertical lines mark where each epoch after the first starts")
    drawn = [w for _, c, w in refs if c is not None]
    if drawn:
        parts.append(f"the dotted line is the chance {' and '.join(drawn)} the answer states")
    return captioned(fig, "; ".join(parts) + ".")


def bars_inside(ax, axis: str = "y") -> None:
    """Room above the longest bar: a bar of height 0 stacked on top of the others (an empty "other" segment) pins
    the axis' end to the bar's top through its sticky edge, so the bar's end sat on the frame and could not be
    seen. Sticky edges off, the limits recomputed with their margin, the axis kept starting at 0."""
    ax.use_sticky_edges = False
    ax.relim()
    ax.autoscale_view()
    (ax.set_ylim if axis == "y" else ax.set_xlim)(0, None)


def epoch_timing(epochs: pd.DataFrame, title: str = "", disjoint: bool = True) -> plt.Figure:
    """Per epoch: data loading, training and the rest of the epoch's wall time stacked, where the two intervals are
    disjoint (lab2_answers.timing_disjoint: a CPU, or a GPU synchronized after every step); where they can overlap
    (a GPU without that synchronize) data loading, training and the total side by side, since a stack would add
    times that overlap."""
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


def loader_sweep(sweep, verdict: dict | None = None) -> plt.Figure:
    """C3: seconds per loader epoch against worker count: every repeat, median line, min-max whiskers; the
    lowest median is called best only when C3's verdict (lab2_answers.c3's answer) names no tie."""
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
        best = s[s["best"]].index[0]
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
        ax.axvline(pos[sweep.cores], color="0.7", ls="--")
    ax.set_xticks(list(x), [str(n) for n in s["num_workers"]])
    ax.set_xlabel(
        f"DataLoader workers ({sweep.cores} usable cores" + (", dashed)" if sweep.cores in pos else ")")
    )
    ax.set_ylabel(f"DataLoader seconds per epoch (n={int(s['n'].iloc[0])} each)")
    legend_outside(ax)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def phase_bars(summary: pd.DataFrame, by: str, xlabel: str, disjoint: bool = True) -> plt.Figure:
    """C4: median data-loading / compute / other seconds per group (steady epochs), stacked where the two intervals
    are disjoint (lab2_answers.timing_disjoint); where they can overlap (a GPU without a synchronize after each
    step), data loading, compute and the total side by side."""
    fig, ax = plt.subplots(figsize=(6, 3.8))
    x = summary[by].astype(str)
    if disjoint:
        other = (summary["total_median_s"] - summary["data_median_s"] - summary["train_median_s"]).clip(
            lower=0
        )
        ax.bar(x, summary["data_median_s"], color="#d95f02", label="data loading (waiting on loader)")
        ax.bar(
            x,
            summary["train_median_s"],
            bottom=summary["data_median_s"],
            color="#1b9e77",
            label="compute (copy+fwd+bwd+step)",
        )
        ax.bar(
            x,
            other,
            bottom=summary["data_median_s"] + summary["train_median_s"],
            color="#bbbbbb",
            label="other",
        )
        totals = list(range(len(x)))
    else:
        pos = range(len(summary))
        parts = (
            ("data_median_s", "data loading (waiting on loader)", "#d95f02"),
            ("train_median_s", "compute (copy+fwd+bwd+step, on the GPU)", "#1b9e77"),
            ("total_median_s", "whole epoch (the two can overlap: not stacked)", "#7570b3"),
        )
        for k, (col, label, color) in enumerate(parts):
            ax.bar([p + (k - 1) * 0.27 for p in pos], summary[col], width=0.27, label=label, color=color)
        ax.set_xticks(list(pos), list(x))
        totals = [p + 0.27 for p in pos]
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
    ax.set_ylabel(f"median seconds per epoch (n={int(summary['n'].min())} epochs)")
    bars_inside(ax)
    legend_outside(ax)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def median_bars(
    summary: pd.DataFrame, label: str, epochs: pd.DataFrame | None = None, ylabel: str = "seconds per epoch"
) -> plt.Figure:
    """C5, C8: median steady epoch time per row with min-max whiskers (and each epoch as a dot)."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    x = list(range(len(summary)))
    ax.bar(x, summary["median_s"], color="#7570b3", alpha=0.8)
    spread = summary["n"] >= MIN_SAMPLES  # a min-max of one or two values is no spread: no whisker on it
    if spread.any():
        ax.errorbar(
            [i for i, keep in zip(x, spread) if keep],
            summary.loc[spread, "median_s"],
            yerr=[
                (summary["median_s"] - summary["min_s"])[spread],
                (summary["max_s"] - summary["median_s"])[spread],
            ],
            fmt="none",
            color="k",
            capsize=4,
        )
    if epochs is not None:
        for i, key in enumerate(summary[label]):
            vals = epochs[epochs[label] == key]["total_s"]
            ax.scatter([i] * len(vals), vals, color="k", s=10, zorder=3)
    ax.set_xticks(x, [f"{k}\n(n={int(n)})" for k, n in zip(summary[label], summary["n"])])
    ax.set_ylabel(
        f"{ylabel}, median"
        + (" (min-max)" if spread.all() else " (min-max where n >= 3)" if spread.any() else "")
    )
    bars_inside(ax)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def training_curves(
    batches: pd.DataFrame, epochs: pd.DataFrame, by: str, smooth: int = 5, chance_loss=None, chance_top1=None
) -> plt.Figure:
    """C6, C7: per-batch loss and top-1 (running mean) side by side per group, and steady epoch times; the chance
    levels the answer states (`chance_loss`, `chance_top1`: Numbers of its record, plots.stated) drawn dotted."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    for key, g in batches.groupby(by, sort=False):
        g = g.sort_values("step")
        axes[0].plot(g["step"], g["loss"].rolling(smooth, min_periods=1).mean(), label=str(key))
        axes[1].plot(g["step"], 100 * g["acc"].rolling(smooth, min_periods=1).mean(), label=str(key))
    for ax, lab, chance, what in (
        (axes[0], "training loss", chance_loss, "loss"),
        (axes[1], "top-1 training accuracy (%)", chance_top1, "top-1"),
    ):
        ax.set_xlabel(f"step (running mean of {smooth} batches)")
        ax.set_ylabel(lab)
        ax.grid(alpha=0.3)
        if chance is not None:
            chance_line(ax, chance, what)
    st = epochs[epochs["epoch"] > 1] if epochs["epoch"].max() > 1 else epochs
    keys = list(dict.fromkeys(epochs[by]))
    spread(axes[2], [st[st[by] == k]["total_s"] for k in keys], [str(k) for k in keys])
    axes[2].set_ylabel(f"seconds per epoch (epochs 2+, n={len(st) // max(len(keys), 1)})")
    axes[2].grid(axis="y", alpha=0.3)
    fig.tight_layout()
    figure_legend(fig)
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
    mb = ax.secondary_yaxis("right", functions=(lambda m: m * 4, lambda mb: mb / 4))
    mb.set_ylabel("MB as float32 (4 bytes a value)")
    ax.legend(
        frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.18, 1)
    )  # beside the bars, not on them
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def figure_legend(fig, fontsize: int = 8) -> None:
    """One legend for every panel of a figure, to the right of them all (a legend beside one panel of several would
    lie on the next): each label once, in the order drawn."""
    seen: dict = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(
            list(seen.values()),
            list(seen),
            frameon=False,
            fontsize=fontsize,
            loc="upper left",
            bbox_to_anchor=(1.0, 0.95),
        )


def legend_outside(ax, fontsize: int = 8) -> None:
    """The legend to the right of the axes, never over the data (saved with bbox_inches="tight", it is kept)."""
    ax.legend(frameon=False, fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)


def depth_figure(table, column: str = "act_MB_per_sample", label: str = "saved for backward (MB per sample)"):
    """Activation MB per sample (`column`: e.g. saved + recompute working set) and seconds per batch against depth,
    one line per family; min-max bars only where a network had at least MIN_SAMPLES timed rounds."""

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.8))
    spread_shown = bool(len(table)) and int(table["repeats"].min()) >= MIN_SAMPLES
    for family, part in table.groupby("family", sort=False):
        part = part.sort_values("depth")
        a1.plot(part["depth"], part[column], "o-", label=family)
        if spread_shown:
            a2.errorbar(
                part["depth"],
                part["s_per_batch"],
                yerr=[part["s_per_batch"] - part["s_min"], part["s_max"] - part["s_per_batch"]],
                fmt="o-",
                capsize=3,
                label=family,
            )
        else:
            a2.plot(part["depth"], part["s_per_batch"], "o-", label=family)
    a1.set_ylabel(label)
    a2.set_ylabel(
        f"s per batch ({'median, min-max' if spread_shown else 'median, too few rounds for a spread'}), "
        f"batch {int(table['batch_size'].iloc[0])}"
    )
    for ax in (a1, a2):
        ax.set_xlabel("depth (layers)")
        ax.grid(alpha=0.3)
    legend_outside(a2)
    fig.tight_layout()
    return fig


def loss_curves(runs, smooth: int = 5, chance: float | None = None):
    """Per-batch training loss of several train() runs on the same steps: {label: batches df}; `chance`: the loss
    of a uniform guess (ln classes), drawn as a line because the text judges the runs against it."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.8))
    for label, batches in runs.items():
        (line,) = ax.plot(batches["step"], batches["loss"], lw=0.8, alpha=0.4)
        ax.plot(
            batches["step"],
            batches["loss"].rolling(smooth, min_periods=1).mean(),
            lw=1.8,
            color=line.get_color(),
            label=f"{label} (running mean of {smooth} batches)",
        )
    if chance is not None:
        ax.axhline(chance, color="0.3", ls=":", lw=1.2, label="chance (uniform guess, ln classes)")
    ax.set_xlabel("step (batch)")
    ax.set_ylabel("training loss")
    ax.grid(alpha=0.3)
    legend_outside(ax)
    fig.tight_layout()
    return fig


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
        title="Loading throughput (one pass, start-up included)",
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


def stacked_bars(
    table: pd.DataFrame, by: str, parts: list[str], xlabel: str, stacked: bool = True
) -> plt.Figure:
    """Horizontal bars, one row of `table` (labelled by `by`) each, one segment per column in `parts`: stacked where
    the parts add up (disjoint times), else side by side (times that can overlap, which a stack would add)."""
    fig, ax = plt.subplots(figsize=(6, 0.6 + (0.6 if stacked else 0.3 * len(parts)) * len(table)))
    left = pd.Series(0.0, index=table.index)
    labels = [f"{v} {by}" for v in table[by]]
    height = 0.8 / len(parts)
    for k, col in enumerate(parts):
        if stacked:
            ax.barh(labels, table[col], left=left, label=col)
            left = left + table[col]
        else:
            ax.barh(
                [i + (k - (len(parts) - 1) / 2) * height for i in range(len(table))],
                table[col],
                height=height,
                label=col + " (can overlap: not stacked)",
            )
    if not stacked:
        ax.set_yticks(range(len(table)), labels)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(by)  # one bar per value of `by`; else the figure's caption reads "value against <xlabel>"
    bars_inside(ax, "x")
    legend_outside(ax)
    fig.tight_layout()
    return fig


def scaling_figure(table: pd.DataFrame, model_ok: bool = True) -> plt.Figure:
    """Lab 5: epoch time against workers per per-worker batch. Epochs extrapolated from timed steps: filled points
    on solid lines; the scaling model's predictions: hollow points on a dashed line of their own (the model's
    points only, never joined to a timed one), drawn only where the answer states them: every prediction while the
    model agrees with its own runs (`model_ok`), else only at the runs it misses (scaling_answers.missed_rows);
    the ideal, the 1-worker epoch / n: a dotted line. None of them is a measured epoch: the legend says "from
    timed steps", "model" and "ideal"."""
    from ..studies.lab5.scaling_answers import missed_rows

    fig, ax = plt.subplots(figsize=(9.5, 4))
    stated = table if model_ok or "predicted_s" not in table else missed_rows(table)
    for b, g in table.groupby("per_gpu_batch"):
        g = g.sort_values("workers")
        meas = g[g.source == "measured"]
        said = stated[stated.per_gpu_batch == b].sort_values("workers")
        model = said[said.predicted_s.notna()] if "predicted_s" in said else said[said.source != "measured"]
        model_s = model.predicted_s if "predicted_s" in model else model.epoch_s
        (line,) = ax.plot(meas.workers, meas.epoch_s, "o-", label=f"batch {b}/worker, from timed steps")
        if len(model):
            ax.plot(
                model.workers,
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
                n,
                [float(one.epoch_s.iloc[0]) / k for k in n],
                ":",
                color=line.get_color(),
                alpha=0.7,
                label=f"batch {b}/worker, ideal (1-worker epoch / n)",
            )
    ax.set_xlabel("workers")
    ax.set_ylabel("epoch time (s), incl. data loading")
    ax.set_xticks(sorted(table.workers.unique()))
    ax.set_yscale("log")
    legend_outside(ax, fontsize=7)
    fig.tight_layout()
    return fig
