"""Each report's decisions from canned results: a clear win, a tie, a diverged run, a trend, n = 2.

The sentences a report shows are assembled here from verdicts and flags; these tests pin both."""

from types import SimpleNamespace

import pandas as pd

from hpml_lab.config import RunConfig
from hpml_lab.studies import lab2_answers, scaling_answers


def _run(losses, epochs_s=(2.0, 1.0, 1.0, 1.0), per_epoch=None):
    n = len(losses)
    per_epoch = per_epoch or max(1, n // len(epochs_s))
    b = pd.DataFrame(
        {
            "epoch": [1 + i // per_epoch for i in range(n)],
            "batch": range(n),
            "loss": losses,
            "acc": [0.1] * n,
            "data_s": [0.01] * n,
            "train_s": [0.1] * n,
        }
    )
    e = pd.DataFrame(
        {
            "epoch": range(1, len(epochs_s) + 1),
            "total_s": list(epochs_s),
            "data_s": [0.1] * len(epochs_s),
            "train_s": [0.8 * t for t in epochs_s],
        }
    )
    return SimpleNamespace(
        batches=b, epochs=e, meta={"machine": {"load1": 0.1, "cores": 2, "steal_pct": 0.0}}
    )


CFG = RunConfig(task="c1")


def test_c1_learning_run_says_the_loss_fell():
    answers, flags = lab2_answers.c1(CFG, _run([2.3 - 0.03 * i for i in range(40)]))
    assert answers[0].text.startswith("The training loss fell from 2.2")
    assert answers[0].verdict["loss"]["outcome"] == "better" and flags == []


def test_c1_diverged_run_is_not_presented_as_a_result():
    answers, flags = lab2_answers.c1(CFG, _run([2.3, 5.0, 9.7, 12.1, 15.4, 9.0, 11.0, 14.0, 8.0, 13.0]))
    assert answers[0].text.startswith("Training diverged") and "not a result" in answers[0].text
    assert [f.kind for f in flags] == ["diverged"]


def test_c1_flat_loss_is_a_tie_not_learning():
    answers, _ = lab2_answers.c1(CFG, _run([2.30, 2.31, 2.29, 2.30] * 10))
    assert "did not measurably learn" in answers[0].text and answers[0].verdict["loss"]["outcome"] == "tie"


def test_c2_trend_and_too_few_epochs_are_flagged():
    answers, flags = lab2_answers.c2(CFG.replace(task="c2"), _run([2.0] * 12, epochs_s=(2.31, 3.71, 8.83)))
    kinds = {f.kind for f in flags}
    assert {"no steady state", "too few samples"} <= kinds
    assert "median of the 2 after the first" in answers[0].text
    assert all(n.spread is None for n in answers[0].numbers)  # n = 2: no spread shown


def test_c3_tie_between_worker_counts_is_called_a_tie():
    rows = pd.DataFrame(
        {
            "num_workers": [0] * 4 + [2] * 4 + [4] * 4,
            "seconds": [
                0.2955,
                0.2960,
                0.2950,
                0.2958,
                0.2956,
                0.2961,
                0.2949,
                0.2957,
                0.60,
                0.61,
                0.59,
                0.62,
            ],
        }
    )
    sweep = SimpleNamespace(rows=rows, items=[])
    answers, _ = lab2_answers.c3(RunConfig(task="c3"), sweep)
    assert "cannot be told apart from 2" in answers[0].text and "a tie" in answers[0].text
    assert set(answers[0].verdict["tied"]) == {0, 2}


def test_c3_clear_best():
    rows = pd.DataFrame({"num_workers": [0] * 3 + [2] * 3, "seconds": [0.9, 0.91, 0.92, 0.30, 0.31, 0.29]})
    answers, _ = lab2_answers.c3(RunConfig(task="c3"), SimpleNamespace(rows=rows, items=[]))
    assert answers[0].text.startswith("Best count: 2 workers")


def _q1(step_times: dict[int, list[float]], oom=()) -> pd.DataFrame:
    rows = [
        {
            "per_gpu_batch": b,
            "status": "ok",
            "batches_timed": len(t),
            "epoch_s_excl_io": 10.0,
            "step_times_s": ";".join(map(str, t)),
        }
        for b, t in step_times.items()
    ]
    return pd.DataFrame(rows + [{"per_gpu_batch": b, "status": "OOM"} for b in oom])


def test_lab5_q1_best_batch_is_a_verdict():
    # batch 64 clearly has the highest images/s over 8 steps each: named as the peak
    clear = scaling_answers.lab5_q1(_q1({16: [0.010] * 8, 64: [0.020, 0.021] * 4}, oom=[256]))
    assert (
        clear.text.startswith("Throughput peaks at per-worker batch 64 (3,1")
        and "95% confidence" in clear.text
    )
    assert clear.text.endswith("out of memory at 256.") and clear.verdict["tied"] == [64]
    # two timed steps each (a smoke run): too few to separate, so a tie, not a peak
    few = scaling_answers.lab5_q1(_q1({16: [0.010, 0.011], 64: [0.020, 0.021]}))
    assert "Throughput peaks" not in few.text and "cannot be told apart from batch 16: a tie" in few.text
    assert few.verdict["best"] == 64 and set(few.verdict["tied"]) == {16, 64}
