"""The speed ladder's figure: per rung, images/s against the device's ideal, MFU, and the step time's spread.

from hpml_lab.studies.speed import chart
fig = chart(result)       # result: study.Ladder (or its table, read back from ladder.csv)
"""

from __future__ import annotations

import math

import pandas as pd

from ...findings import fmt_value


def chart(result):
    """One figure, two panels sharing the rungs. Left: images/s (median bar, interquartile whisker) on a log
    axis, the images/s the device's peak would allow for the rung's precision as a marker above each bar, and
    the timed steps' MFU written above each bar (the whole epochs' MFU is the table's and the answer's).
    Right: the step time (median, whiskers from the fastest to the slowest timed run). Rungs that did not run
    keep their place, marked 'not run'."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    table: pd.DataFrame = getattr(result, "table", result)
    labels = [str(v) for v in table["label"]]
    ran = table["status"] == "measured"
    x = list(range(len(table)))
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    ips = table["images_per_s"]
    low = (ips - table["images_per_s_q1"]).clip(lower=0)
    high = (table["images_per_s_q3"] - ips).clip(lower=0)
    ax.bar(x, ips.fillna(0), color=["#4c72b0" if r else "#dddddd" for r in ran], label="measured (median)")
    ax.errorbar(x, ips, yerr=[low, high], fmt="none", ecolor="black", capsize=3)
    ax.scatter(
        x,
        table["ideal_images_per_s"],
        marker="_",
        s=600,
        color="#c44e52",
        zorder=3,
        label="ideal: FLOPs at the device's peak",
    )
    for i, row in table.reset_index(drop=True).iterrows():
        if row["status"] != "measured":
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
        elif isinstance(row["mfu"], float) and math.isfinite(row["mfu"]):
            top = max(v for v in (row["images_per_s"], row["images_per_s_q3"]) if math.isfinite(v))
            ax.text(
                i,
                top * 1.15,  # above the whisker's cap, not on it (a log axis: a factor is a fixed gap)
                # the timed steps' MFU, as the bar's images/s; the first answer states the whole epoch's
                "step MFU " + fmt_value(100 * row["mfu"], "%"),
                ha="center",
                va="bottom",
                fontsize=8,
            )
    finite = [v for v in list(ips) + list(table["ideal_images_per_s"]) if isinstance(v, float) and v > 0]
    if finite:
        ax.set_yscale("log")
        ax.set_ylim(min(finite) / 3, max(finite) * 60)  # room for the legend above the ideal
    ax.set_xticks(x, labels, rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("images/s (log scale)")
    ax.set_title("Throughput per rung over the timed steps, and the device's ideal")
    ax.legend(fontsize=8, loc="upper left")
    step_ms = 1000 * table["step_s"]
    ax2.errorbar(
        x,
        step_ms,
        yerr=[
            1000 * (table["step_s"] - table["step_min_s"]).clip(lower=0),
            1000 * (table["step_max_s"] - table["step_s"]).clip(lower=0),
        ],
        fmt="o",
        color="#4c72b0",
        capsize=3,
    )
    ax2.set_xticks(x, labels, rotation=25, ha="right", fontsize=8)
    ax2.set_ylabel("step time (ms), median; whiskers min to max")
    ax2.set_title("Step time per rung (batch grows on the last)")
    fig.suptitle("Speed ladder: each rung adds one optimisation to the one before")
    fig.tight_layout()
    return fig
