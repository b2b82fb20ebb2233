"""The questions' figure: parameters, gradients and optimizer state, SGD against Adam.

from hpml_lab.studies.questions import figure
fig = figure.memory_counts(res.table)
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd


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
