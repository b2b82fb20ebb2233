"""A line at least every EVERY_S seconds while a long step of a command runs (data synthesis, the checks
before a report, a bundle's PDF), so that a terminal is never silent for long. Each line says what runs and
for how long, and, where the step knows how much of it is done, what is left at the pace it has kept so far
(said as "about").

    with ticking("data synth cifar10") as t:
        for i, name in enumerate(files, 1):
            write(name)
            # "data synth cifar10: data_batch_2 written (2 of 6, 4 s; ...)"
            t.done(i, len(files), f"{name} written")
    # a slow file: "data synth cifar10: still at it after 40 s (2 of 6 done)" every 20 s meanwhile

`duration` and `about` say times the way report/watch.py says them.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator

EVERY_S = 20.0


def duration(seconds: float) -> str:
    """'41 s', '1 min 59 s', '1 h 3 min': a time as a person says it."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s" if s % 60 else f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"


def about(seconds: float) -> str:
    """A rounded estimate: 'about 40 s', 'about 3 min', 'about 1 h 10 min'."""
    if seconds < 60:
        return f"about {max(5, round(seconds / 5) * 5)} s"
    if seconds < 3600:
        return f"about {round(seconds / 60)} min"
    return "about " + duration(round(seconds / 600) * 600)


class Ticker:
    """The lines of one long step: `done` when a part of it is done, the heartbeat between (see the
    module)."""

    def __init__(
        self,
        what: str,
        every: float = EVERY_S,
        say: Callable[[str], None] = print,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.what, self.every, self.say_, self.clock = what, every, say, clock
        self.t0 = self.said = clock()
        self.progress = ""  # "2 of 6 done", for the heartbeat
        self._lock = threading.Lock()

    def say(self, line: str) -> None:
        with self._lock:
            self.say_(line)
            sys.stdout.flush()  # seen now also through a pipe (make report | tee log)
            self.said = self.clock()

    def done(self, n: int, total: int, detail: str) -> None:
        """Part n of total is done: say it, with what is left at this step's pace so far."""
        elapsed = self.clock() - self.t0
        left = f"; {about(elapsed * (total - n) / n)} left" if 0 < n < total else ""
        self.progress = f"{n} of {total} done"
        self.say(f"{self.what}: {detail} ({n} of {total}, {duration(elapsed)}{left})")

    def beat(self) -> str:
        return f"{self.what}: still at it after {duration(self.clock() - self.t0)}" + (
            f" ({self.progress})" if self.progress else ""
        )


@contextlib.contextmanager
def ticking(
    what: str,
    every: float = EVERY_S,
    say: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[Ticker]:
    """A Ticker whose heartbeat thread says `beat()` whenever `every` seconds passed without a line."""
    ticker = Ticker(what, every, say, clock)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(min(1.0, every / 4)):
            if ticker.clock() - ticker.said >= every:
                ticker.say(ticker.beat())

    thread = threading.Thread(target=beat, name=f"hpml-ticker-{what}", daemon=True)
    thread.start()
    try:
        yield ticker
    finally:
        stop.set()
        thread.join(timeout=5)
