"""What every report's figures share: a caption written where the drawing is decided, the chance lines an
answer states, legends beside the axes, bars with room above them, spread drawn only from enough samples; and
the charts several tasks draw (median bars, training curves, stacked bars). Each chart returns a matplotlib
Figure; save it with notebook.save_figure. A task's own figures are its folder's figure.py
(hpml_lab/studies/<task_id>/).

    from hpml_lab import plots
    fig = plots.median_bars(out.summary, "device")
    plots.captioned(fig, "what is drawn")
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd

from .findings import fmt_value
from .sanity import MIN_SAMPLES


def spread(ax, groups, labels) -> str:
    """Each group's values at x = 1, 2, ...: a box plot (quartiles, min-max whiskers) when every group has at
    least 3 values, else only the values as points, since fewer than 3 have no spread. Returns 'box' or
    'points'."""
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


def epoch_boundaries(ax, batches: pd.DataFrame) -> int:
    """Grey vertical lines where each epoch after the first starts; how many were drawn."""
    starts = batches.groupby("epoch")["step"].min().iloc[1:]
    for s in starts:
        ax.axvline(s - 0.5, color="0.8", lw=0.8, zorder=0)
    return len(starts)


def stated(answers, name: str):
    """The Number named `name` that the answers state (a reference a figure draws because the text uses it,
    such as "chance loss"), or None when no answer states it."""
    return next((n for a in answers for n in a.numbers if n.name == name), None)


def captioned(fig, text: str):
    """The figure with its caption: what is drawn, written where the drawing is decided (notebook.save_figure
    shows it under the image), so that a caption cannot describe another plot."""
    fig.hpml_caption = text
    return fig


def caption_of(fig) -> str:
    return getattr(fig, "hpml_caption", "")


def chance_line(ax, number, what: str) -> None:
    """A reference line at a chance level the answer states (`number`, a Number of the record), labelled with
    it."""
    from .findings import fmt

    ax.axhline(
        number.value, color="0.3", ls=":", lw=1.2, label=f"chance {what} ({fmt(number)}, a uniform guess)"
    )


def plain_log_y(ax, values) -> None:
    """A log y axis whose ticks read as the page's numbers (fmt_value): the powers of ten, and between them
    every whole multiple where `values` (what the axis draws) span at most 3x, 2, 3 and 5 up to 10x, 2 and 5
    up to two decades (grade36b: every minor
    tick named, '0.8' over '0.9', ran into each other; grade39b: a lone '10^3' beside points from 904 to
    1,714 s)."""
    from matplotlib.ticker import FuncFormatter

    drawn = [float(v) for v in values if v == v and v > 0]
    span = max(drawn) / min(drawn) if drawn else math.inf
    # the narrower the span, the more of the ticks between the decades are named (review40: a span of 2x,
    # 2,600 to 4,200 s, named none); a span inside one step of them (1,100 to 1,900) still names none
    named = range(2, 10) if span <= 3 else (2, 3, 5) if span <= 10 else (2, 5) if span <= 100 else ()
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt_value(v)))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: fmt_value(v) if _mantissa(v) in named else ""))


def _mantissa(v: float) -> int:
    """The leading digit of a tick at a whole multiple of a power of ten (2 for 0.2, 20, 2,000); else 0."""
    if not v > 0:
        return 0
    m = v / 10 ** math.floor(math.log10(v))
    return round(m) if abs(m - round(m)) < 1e-6 else 0


def bars_inside(ax, axis: str = "y") -> None:
    """Room above the longest bar: a bar of height 0 stacked on top of the others (an empty "other" segment)
    pins the axis' end to the bar's top through its sticky edge, so the bar's end sat on the frame and could
    not be seen. Sticky edges off, the limits recomputed with their margin, the axis kept starting at 0."""
    ax.use_sticky_edges = False
    ax.relim()
    ax.autoscale_view()
    (ax.set_ylim if axis == "y" else ax.set_xlim)(0, None)


def median_bars(
    summary: pd.DataFrame, label: str, epochs: pd.DataFrame | None = None, ylabel: str = "seconds per epoch"
) -> plt.Figure:
    """Median steady epoch time per row (a device, a mode) with min-max whiskers (and each epoch as a dot)."""
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


def limit_line(ax, number, text: str) -> None:
    """A threshold the answer states (`number`, a Number of its record) drawn dashed, labelled `text` and
    the number as the record formats it."""
    from .findings import fmt

    ax.axhline(number.value, color="0.55", ls="--", lw=1.0, label=f"{text} {fmt(number)}")


def running_mean(values: pd.Series, smooth: int) -> pd.Series:
    """The running mean a figure draws: of the last `smooth` values, of fewer where fewer came before (a
    run's first points), as running_words says."""
    return values.rolling(smooth, min_periods=1).mean()


def running_words(smooth: int) -> str:
    """What running_mean draws, in a legend's or an axis's words (a grader: "running mean of 5 batches"
    stood over first points that average fewer)."""
    return f"running mean of the last {smooth} batches, fewer at the start"


def training_curves(
    batches: pd.DataFrame,
    epochs: pd.DataFrame,
    by: str,
    smooth: int = 5,
    chance_loss=None,
    chance_top1=None,
    loss_limit=None,
    top1_limit=None,
    names: dict | None = None,
) -> plt.Figure:
    """A training sweep's per-batch loss and top-1 (running mean) side by side per group, and steady epoch
    times; the chance levels the answer states (`chance_loss`, `chance_top1`: Numbers of its record,
    plots.stated) drawn dotted, and the limits of its 'did not learn' rule (`loss_limit`, `top1_limit`,
    sanity.chance_rule's Numbers) dashed. `names`: each group as the page's sentences name it (C7's
    'BatchNorm' and 'no BatchNorm' for its 'bn' and 'none')."""

    def name(key) -> str:
        return str((names or {}).get(key, key))

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    for key, g in batches.groupby(by, sort=False):
        g = g.sort_values("step")
        axes[0].plot(g["step"], running_mean(g["loss"], smooth), label=name(key))
        axes[1].plot(g["step"], 100 * running_mean(g["acc"], smooth), label=name(key))
    for ax, lab, chance, what in (
        (axes[0], "training loss", chance_loss, "loss"),
        (axes[1], "top-1 training accuracy (%)", chance_top1, "top-1"),
    ):
        ax.set_xlabel(f"step\n({running_words(smooth)})")  # two lines: one was wider than its panel
        ax.set_ylabel(lab)
        ax.grid(alpha=0.3)
        if chance is not None:
            chance_line(ax, chance, what)
    for ax, limit, text in (
        (axes[0], loss_limit, "did not learn: loss at or above"),
        (axes[1], top1_limit, "did not learn: top-1 at or below"),
    ):
        if limit is not None:
            limit_line(ax, limit, text)
    st = epochs[epochs["epoch"] > 1] if epochs["epoch"].max() > 1 else epochs
    keys = list(dict.fromkeys(epochs[by]))
    spread(axes[2], [st[st[by] == k]["total_s"] for k in keys], [name(k) for k in keys])
    axes[2].set_ylabel(f"seconds per epoch (epochs 2+, n={len(st) // max(len(keys), 1)})")
    axes[2].grid(axis="y", alpha=0.3)
    fig.tight_layout()
    figure_legend(fig)
    return fig


def figure_legend(fig, fontsize: int = 8) -> None:
    """One legend for every panel of a figure, to the right of them all (a legend beside one panel of several
    would lie on the next): each label once, in the order drawn."""
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
    """The legend to the right of the axes, never over the data (saved with bbox_inches="tight", it is
    kept)."""
    ax.legend(frameon=False, fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)


PHASE_COLORS = {"data": "#d95f02", "train": "#1b9e77", "other": "#bbbbbb", "total": "#7570b3"}


def time_phases(
    ax: plt.Axes,
    labels: list[str],
    data: pd.Series,
    train: pd.Series,
    total: pd.Series,
    disjoint: bool,
    train_word: str = "training",
    other_label: str = "other",
) -> list[float]:
    """Vertical bars, one group per label, of data loading, training (`train_word`) and the rest of the epoch:
    stacked where the two intervals are disjoint (a CPU, or a GPU synchronized after every step), else data
    loading, training and the whole epoch side by side, since a stack would add times that overlap. Returns
    where each whole-epoch bar stands (for a whisker over it)."""
    if disjoint:
        other = (total - data - train).clip(lower=0)
        ax.bar(labels, data, label="data loading (time in next(loader))", color=PHASE_COLORS["data"])
        ax.bar(
            labels,
            train,
            bottom=data,
            label=f"{train_word} (copy+fwd+bwd+step)",
            color=PHASE_COLORS["train"],
        )
        ax.bar(labels, other, bottom=data + train, label=other_label, color=PHASE_COLORS["other"])
        return list(range(len(labels)))
    pos = range(len(labels))
    parts = (
        (data, "data loading (time in next(loader))", PHASE_COLORS["data"]),
        (train, f"{train_word} (copy+fwd+bwd+step, on the GPU)", PHASE_COLORS["train"]),
        (total, "whole epoch (the two can overlap: not stacked)", PHASE_COLORS["total"]),
    )
    for k, (values, label, color) in enumerate(parts):
        ax.bar([p + (k - 1) * 0.27 for p in pos], values, width=0.27, label=label, color=color)
    ax.set_xticks(list(pos), list(labels))
    return [p + 0.27 for p in pos]


def stacked_bars(
    table: pd.DataFrame, by: str, parts: list[str], xlabel: str, stacked: bool = True
) -> plt.Figure:
    """Horizontal bars, one row of `table` (labelled by `by`) each, one segment per column in `parts`: stacked
    where the parts add up (disjoint times), else side by side (times that can overlap, which a stack would
    add)."""
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
