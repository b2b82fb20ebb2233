"""profiling's timers and statistics, checked against known sleeps and hand-computed quartiles."""

import time

import pytest

from hpml_lab.profiling import DeviceTimer, HostTimer, WallClock, interleaved_timed, repeat_timed, summarize


def test_summarize_quartiles_median_and_spread():
    s = summarize([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (s["n"], s["median"], s["q1"], s["q3"], s["iqr"]) == (5, 3.0, 2.0, 4.0, 2.0)
    assert (s["min"], s["max"], s["mean"]) == (1.0, 5.0, 3.0)
    assert s["std"] == pytest.approx(1.5811388, rel=1e-6)
    one = summarize([7.0])
    assert one["n"] == 1 and one["iqr"] == 0.0 and one["std"] == 0.0
    assert summarize([])["n"] == 0


def test_timers_measure_a_known_sleep():
    for timer in (DeviceTimer("cpu"), HostTimer()):
        for _ in range(2):
            timer.start()
            time.sleep(0.02)
            timer.stop()
        assert 0.04 <= timer.total() < 0.2
    clock = WallClock("cpu")
    clock.start()
    time.sleep(0.02)
    assert 0.02 <= clock.stop() < 0.1


def test_device_timer_reset_forgets_intervals():
    t = DeviceTimer("cpu")
    t.start()
    t.stop()
    t.reset()
    assert t.intervals() == [] and t.total() == 0


def test_repeat_timed_keeps_warmup_out():
    calls = []

    def fn():
        calls.append(1)
        time.sleep(0.05 if len(calls) == 1 else 0.001)  # the first call is slow, like a warm-up

    times = repeat_timed(fn, repeats=3, warmup=1)
    assert len(calls) == 4 and len(times) == 3 and max(times) < 0.04


def test_repeat_timed_runs_before_untimed_ahead_of_each_timed_run():
    events = []

    def barrier():
        events.append("before")
        time.sleep(0.05)  # a slow barrier: none of it may show in the times

    times = repeat_timed(lambda: events.append("fn"), repeats=3, warmup=1, before=barrier)
    assert events == ["fn"] + ["before", "fn"] * 3  # the warm-up needs none
    assert len(times) == 3 and max(times) < 0.04


def test_interleaved_timed_rotates_the_order():
    order = []
    fns = [lambda k=k: order.append(k) for k in range(3)]
    out = interleaved_timed(fns, repeats=3, warmup=0)
    assert [len(v) for v in out] == [3, 3, 3]
    assert order == [0, 1, 2, 1, 2, 0, 2, 0, 1]  # none always first
