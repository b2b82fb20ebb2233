"""The report's figures say what their curves are: a smoothed curve's legend names a running mean of batches."""

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402

from hpml_lab.report import plots  # noqa: E402


def test_smoothed_curve_is_labelled_a_running_mean_of_batches():
    """Grader (lab 2): c1's '(per batch, mean of 2)' read as two seeds."""
    b = pd.DataFrame({"epoch": [1] * 4, "step": range(4), "loss": [2.3, 2.2, 2.1, 2.0], "acc": [0.1] * 4})
    fig = plots.loss_accuracy(b, smooth=2)
    labels = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    assert "running mean of 2 batches" in labels and "mean of 2" not in labels
    plots.plt.close(fig)
