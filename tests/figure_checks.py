"""The tests' checks of a drawn figure, read from its matplotlib artists (imported by tests/unit/test_plots.py
and tests/studies/test_study_figures.py)."""


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
