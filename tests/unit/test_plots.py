"""The report's figures draw what their text and record say, read off the figure's artists: a smoothed curve's
legend names a running mean of batches; a caption that describes the plot drawn (the chance lines the answers
state: tests/studies/test_study_figures.py); no error bar on fewer than three samples; axes that hold every
bar; times that can overlap never stacked; legends beside the data, not on it."""

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from figure_checks import batch_rows, legends_clear_of_data  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from hpml_lab import plots  # noqa: E402
from hpml_lab.studies.c1 import figure as c1_figure  # noqa: E402
from hpml_lab.studies.c2 import figure as c2_figure  # noqa: E402
from hpml_lab.studies.c4 import figure as c4_figure  # noqa: E402


def labels(fig) -> list[str]:
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    return [t.get_text() for leg in legends for t in leg.get_texts()]


def chance_lines(ax) -> list[Line2D]:
    return [ln for ln in ax.get_lines() if ln.get_label().startswith("chance")]


def bars_held(ax) -> None:
    """Every bar ends inside the axes, clear of the frame (a bar whose end is the frame hides where it
    ends)."""
    bottom, top = ax.get_ylim()
    tops = [p.get_y() + p.get_height() for p in ax.patches]
    assert tops and max(tops) < top - 0.01 * (top - bottom), (max(tops), top)


def error_bars(ax) -> int:
    return sum(1 for c in ax.containers if type(c).__name__ == "ErrorbarContainer")


def test_smoothed_curve_is_labelled_a_running_mean_of_batches():
    """Grader (lab 2): c1's '(per batch, mean of 2)' read as two seeds."""
    b = pd.DataFrame({"epoch": [1] * 4, "step": range(4), "loss": [2.3, 2.2, 2.1, 2.0], "acc": [0.1] * 4})
    fig = c1_figure.loss_accuracy(b, smooth=2)
    assert "running mean of the last 2 batches, fewer at the start" in labels(fig)
    # the words match the curve: its first point is the first batch alone, then the mean of the last two
    (mean,) = [ln for ln in fig.axes[0].get_lines() if "running mean" in ln.get_label()]
    assert list(mean.get_ydata()) == pytest.approx([2.3, 2.25, 2.15, 2.05])
    legends_clear_of_data(fig)
    plots.plt.close(fig)


def test_c1_caption_says_what_the_figure_draws():
    """Grader: c1's caption said each point is one mini-batch where the plot draws lines."""
    fig = c1_figure.loss_accuracy(batch_rows(), smooth=4)
    caption = plots.caption_of(fig)
    per_batch = [ln for ln in fig.axes[0].get_lines() if ln.get_label() == "per batch"]
    assert per_batch[0].get_linestyle() == "-" and per_batch[0].get_marker() in ("None", None, "")
    assert (
        "thin line" in caption
        and "point" not in caption
        and "running mean of the last 4 batches, fewer at the start" in caption
    )
    boundaries = [ln for ln in fig.axes[0].get_lines() if list(ln.get_xdata()) == [10.5, 10.5]]
    assert len(boundaries) == 1 and "grey vertical lines" in caption  # two epochs: one boundary
    one = c1_figure.loss_accuracy(batch_rows(epochs=1), smooth=0)
    assert "grey" not in plots.caption_of(one) and "no smoothing" in plots.caption_of(one)
    assert "chance" not in plots.caption_of(one) and not chance_lines(one.axes[0])
    for f in (fig, one):
        plots.plt.close(f)


def _bars(n):
    return pd.DataFrame(
        {
            "device": ["cpu", "cuda"],
            "n": [n, n],
            "median_s": [7.6, 0.47],
            "min_s": [7.5, 0.46],
            "max_s": [7.7, 0.5],
        }
    )


def test_no_error_bar_on_fewer_than_three_samples():
    """Grader: the H200's c5 drew a min-max bar on one epoch per device."""
    one = plots.median_bars(_bars(1), "device")
    assert error_bars(one.axes[0]) == 0 and "min-max" not in one.axes[0].get_ylabel()
    five = plots.median_bars(_bars(5), "device")
    assert error_bars(five.axes[0]) == 1 and "min-max" in five.axes[0].get_ylabel()
    for f in (one, five):
        bars_held(f.axes[0])
        plots.plt.close(f)


def _phases(n=1):
    return pd.DataFrame(  # the H200's C4: 1 worker's data 10.03 s + compute 4.41 s, the total 14.4 s
        {
            "num_workers": [1, 16],
            "n": [n, n],
            "data_median_s": [10.03, 0.557],
            "train_median_s": [4.41, 3.48],
            "total_median_s": [14.4, 4.07],
            "total_min_s": [14.3, 4.0],
            "total_max_s": [14.5, 4.1],
        }
    )


def test_axes_hold_every_bar():
    """Grader: the H200's C4 figure cut its tallest bar at the frame (an empty 'other' segment on top pinned
    the axis to it)."""
    for fig in (
        c4_figure.phase_bars(_phases(), "num_workers", "workers"),
        c4_figure.phase_bars(_phases(5), "num_workers", "workers", disjoint=False),
        c2_figure.epoch_timing(
            pd.DataFrame(
                {"epoch": [1, 2], "data_s": [1.0, 1.0], "train_s": [2.0, 2.0], "total_s": [3.0, 2.9]}
            )
        ),
    ):
        bars_held(fig.axes[0])
        legends_clear_of_data(fig)
        plots.plt.close(fig)


def test_times_that_can_overlap_are_never_stacked():
    """On a GPU without a synchronize after each step the data wait and the step overlap: a stack would add
    them."""
    ep = pd.DataFrame({"epoch": [1, 2], "data_s": [0.3, 0.4], "train_s": [5.4, 5.44], "total_s": [5.6, 5.5]})
    stacked = c2_figure.epoch_timing(ep, disjoint=True)
    assert any(p.get_y() > 0 for p in stacked.axes[0].patches)  # data at the bottom, training on top
    apart = c2_figure.epoch_timing(ep, disjoint=False)
    assert all(p.get_y() == 0 for p in apart.axes[0].patches) and len(apart.axes[0].patches) == 3 * len(ep)
    assert "other" not in " ".join(labels(apart)) and "not stacked" in " ".join(labels(apart))
    phases = c4_figure.phase_bars(_phases(), "num_workers", "workers", disjoint=False)
    assert all(p.get_y() == 0 for p in phases.axes[0].patches)
    for f in (stacked, apart, phases):
        plots.plt.close(f)
