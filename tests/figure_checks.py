"""The tests' checks of a drawn figure, read from its matplotlib artists, and the batch rows they draw from
(imported by tests/unit/test_plots.py and tests/studies/test_study_figures.py)."""

import pandas as pd


def overlap(a, b) -> bool:
    """Whether two display-space boxes share any area."""
    return not (a.x1 <= b.x0 or b.x1 <= a.x0 or a.y1 <= b.y0 or b.y1 <= a.y0)


def legends_clear_of_data(fig) -> None:
    """Every legend of the figure, an axes' or the figure's own, lies outside every axes' plotting area."""
    r = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    assert legends, "the figure has no legend"
    for leg in legends:
        for ax in fig.axes:
            assert not overlap(leg.get_window_extent(r), ax.get_window_extent(r)), leg


def batch_rows(epochs: int = 2, per: int = 10, loss: float = 2.3, acc: float = 0.1) -> pd.DataFrame:
    """A run's batches.csv as train() writes it: `per` batches an epoch, the loss falling and top-1 rising."""
    n = epochs * per
    return pd.DataFrame(
        {
            "epoch": [1 + i // per for i in range(n)],
            "batch": range(n),
            "step": range(1, n + 1),
            "loss": [loss - 0.05 * i for i in range(n)],
            "acc": [acc + 0.01 * i for i in range(n)],
            "data_s": 0.01,
            "train_s": 0.1,
        }
    )
