"""The speed ladder's figure: per rung, images/s against the device's ideal, MFU, the step time's spread and
the whole epochs.

from hpml_lab.studies.speed import chart
fig = chart(result)       # result: study.Ladder (or its table, read back from ladder.csv)
"""

from __future__ import annotations

import math

import pandas as pd

from ...findings import fmt_value
from ...plots import plain_log_y
from .study import REFERENCE

# the MFU labels: the gap between a label and the highest thing drawn at its rung (points), and the share of
# the axes' height kept free above them, so that a later layout (a stand-in's two-line title) keeps them in
LABEL_GAP_PT = 4
HEADROOM = 0.12
IDEAL_SIZE = 600  # the ideal marker's size (points squared): a bar's width where rungs are few


def chart(result):
    """One figure, two panels sharing the rungs (three where whole epochs were timed: each epoch and its
    median, _epochs_panel). Left: images/s (median bar, interquartile whisker) on a log
    axis, the images/s the device's peak would allow for the rung's precision as a marker above each bar, and
    the timed steps' MFU written above the highest of the two (the whole epochs' MFU is the table's and the
    answer's). Right: the step time (median, whiskers from the fastest to the slowest timed run). No whisker
    where a row has too few samples for a spread (its quartiles are empty). Rungs that did not run keep their
    place in every panel, marked 'not run'. The legend stands outside the panels: it covers no data."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from ...plots import figure_legend

    table: pd.DataFrame = getattr(result, "table", result).reset_index(drop=True)

    ran = table["status"] == "measured"
    # the plain script's bar (and its MFU) is from its whole epochs, not timed steps as the rungs' are: its
    # label, the title and the legend say so where it has one
    script = bool(((table["rung"] == REFERENCE) & ran).any())

    def shown(label: str, rung: str) -> str:
        if rung != REFERENCE or not script:
            return label
        return f"{label[:-1]}, whole epochs)" if label.endswith(")") else f"{label} (whole epochs)"

    labels = [shown(str(v), rung) for v, rung in zip(table["label"], table["rung"])]
    x = list(range(len(table)))
    # the whole epochs every rung's answer leads with (grade31b: the figure drew only the timed rounds)
    epochs = {k: list(v) for k, v in (getattr(result, "epochs", None) or {}).items() if v}
    if epochs:
        fig, (ax, ax2, ax3) = plt.subplots(1, 3, figsize=(16, 4.2), gridspec_kw={"width_ratios": [3, 2, 2]})
    else:
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    ips = table["images_per_s"]
    low = (ips - table["images_per_s_q1"]).clip(lower=0)
    high = (table["images_per_s_q3"] - ips).clip(lower=0)
    ax.bar(x, ips.fillna(0), color=["#4c72b0" if r else "#dddddd" for r in ran], label="measured (median)")
    spread = low.notna() & high.notna()
    if spread.any():
        at = [i for i in x if spread[i]]
        ax.errorbar(at, ips[spread], yerr=[low[spread], high[spread]], fmt="none", ecolor="black", capsize=3)
    ideal = ax.scatter(
        x,
        table["ideal_images_per_s"],
        marker="_",
        s=IDEAL_SIZE,
        color="#c44e52",
        zorder=3,
        label="ideal: FLOPs at the device's peak",
    )
    marks = []  # the MFU labels, laid out below once the axes have their size
    for i, row in table.iterrows():
        if row["status"] != "measured":
            _not_run(ax, i)
        elif isinstance(row["mfu"], float) and math.isfinite(row["mfu"]):
            # above the highest thing drawn at this rung: the whisker's cap, the bar or the ideal marker
            drawn = (row["images_per_s"], row["images_per_s_q3"], row["ideal_images_per_s"])
            top = max(float(v) for v in drawn if isinstance(v, float) and math.isfinite(v))
            marks.append(
                ax.annotate(
                    fmt_value(100 * row["mfu"], "%"),
                    (i, top),
                    xytext=(0, LABEL_GAP_PT),
                    textcoords="offset points",
                    ha="center",
                    va="bottom",
                    fontsize=8,
                    gid="mfu",
                )
            )
    finite = [v for v in list(ips) + list(table["ideal_images_per_s"]) if isinstance(v, float) and v > 0]
    if finite:
        ax.set_yscale("log")
        ax.set_ylim(min(finite) / 3, max(finite) * 3)
    ax.set_xticks(x, labels, rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("images/s (log scale)")
    ax.set_title(
        "Throughput over each rung's timed steps"
        + (" (the plain script's: its\nwhole epochs), " if script else "\n(")
        + "median, interquartile range"
        + (", " if script else ") ")
        + "and the device's ideal"
    )
    if marks:  # a legend entry that says what the numbers above the bars are
        ax.plot(
            [],
            [],
            ls="none",
            marker="$\\%$",
            color="black",
            label="MFU over the timed steps (above each rung"
            + (";\nthe plain script's over its whole epochs)" if script else ")"),
        )
    step_ms = 1000 * table["step_s"]
    whiskers = table["step_min_s"].notna() & table["step_max_s"].notna()
    ax2.plot(x, step_ms, "o", color="#4c72b0")
    for i in x:  # as in the other panels (grade34b: this one left the rungs that did not run blank)
        if not ran[i]:
            _not_run(ax2, i)
    if whiskers.any():
        at = [i for i in x if whiskers[i]]
        ax2.errorbar(
            at,
            step_ms[whiskers],
            yerr=[
                1000 * (table["step_s"] - table["step_min_s"])[whiskers].clip(lower=0),
                1000 * (table["step_max_s"] - table["step_s"])[whiskers].clip(lower=0),
            ],
            fmt="none",
            ecolor="#4c72b0",
            capsize=3,
        )
    ax2.set_xticks(x, labels, rotation=25, ha="right", fontsize=8)
    # a short axis label: a long one ran past the axes' foot into the first rung's slanted name
    ax2.set_ylabel("step time (ms)")
    ax2.set_title("Step time per rung (median, min to max)")
    if epochs:
        _epochs_panel(ax3, table, epochs, labels)
    fig.suptitle("Speed ladder: each rung adds one optimisation to the one before")
    figure_legend(fig)
    fig.tight_layout()
    # each ideal marker at most 60% of a rung's width: wider, it reached the next rung's label
    rung_pt = ax.get_window_extent(fig.canvas.get_renderer()).width * 72 / fig.dpi / max(1, len(x))
    ideal.set_sizes([min(IDEAL_SIZE, (0.6 * rung_pt) ** 2)])
    if marks:
        _lay_out(fig, ax, marks)
    return fig


def _lay_out(fig, ax, marks) -> None:
    """Upright labels where each clears its neighbours, else all turned on end (rungs packed closer than a
    label's width); then the log axis raised until every label stands inside the axes, HEADROOM to spare."""
    r = fig.canvas.get_renderer()
    boxes = [m.get_window_extent(r) for m in marks]
    if any(a.x1 + 2 > b.x0 for a, b in zip(boxes, boxes[1:])):  # drawn left to right, rung by rung
        for m in marks:
            m.set_rotation(90)
    for _ in range(3):  # the axes' height settles with the layout
        r = fig.canvas.get_renderer()
        height = ax.get_window_extent(r).height
        lo, hi = ax.get_ylim()
        span = math.log10(hi / lo)
        # each label's top as a share of the axes' height, at this span
        tops = [
            math.log10(m.xy[1] / lo) / span
            + (LABEL_GAP_PT * fig.dpi / 72 + m.get_window_extent(r).height) / height
            for m in marks
        ]
        need = max(tops)
        if need <= 1 - HEADROOM:
            break
        # the labels' own height stays in pixels: widen the span until the highest fits
        k = max(range(len(marks)), key=lambda j: tops[j])
        base = math.log10(marks[k].xy[1] / lo)
        room = 1 - HEADROOM - (tops[k] - base / span)
        ax.set_ylim(lo, lo * 10 ** (base / max(room, 0.2)))
        fig.tight_layout()


def _not_run(ax, i: int) -> None:
    """'not run' at rung i's place, upright at the foot of the panel."""
    ax.text(
        i,
        0.02,
        "not run",
        ha="center",
        va="bottom",
        rotation=90,
        fontsize=8,
        transform=ax.get_xaxis_transform(),
    )


def _epochs_panel(ax, table: pd.DataFrame, epochs: dict, labels: list[str]) -> None:
    """The whole epochs each rung trained, the rungs taking turns: every epoch a dot, their median a bar
    across them (no spread drawn: the dots are every sample); the plain script's, run after the ladder in its
    own process, in a colour of its own. A log axis where the epochs span a wide range (a GPU's, as the
    throughput's), so its short epochs are not pressed to the floor beside the PIL loader's. A rung that did
    not run keeps its place, marked 'not run'."""
    x = list(range(len(table)))
    for i, (rung, status) in enumerate(zip(table["rung"], table["status"])):
        seconds = [float(v) for v in epochs.get(rung) or [] if v == v and v > 0]
        if status != "measured" or not seconds:
            if status != "measured":
                _not_run(ax, i)
            continue
        script = rung == REFERENCE
        ax.plot(
            [i] * len(seconds),
            seconds,
            "o",
            ms=4,
            color="#8172b3" if script else "0.45",
            label="plain script's whole epochs (its own process, after the ladder)"
            if script
            else "each whole epoch (the rungs taking turns)",
        )
        median = float(pd.Series(seconds).median())
        ax.plot(
            [i - 0.3, i + 0.3], [median, median], color="#dd8452", lw=2, label="median of the whole epochs"
        )
    ax.set_xticks(x, labels, rotation=25, ha="right", fontsize=8)
    drawn = [float(v) for k, vs in epochs.items() for v in vs if v == v and v > 0]
    if drawn and max(drawn) > 5 * min(drawn):  # a wide range (a GPU's ladder): a log axis, its ticks plain
        plain_log_y(ax, drawn)
        ax.set_ylabel("seconds per whole epoch (log scale)")
    else:
        ax.set_ylim(bottom=0)
        ax.set_ylabel("seconds per whole epoch")
    ax.set_title("Whole epochs per rung (each, and the median)")
