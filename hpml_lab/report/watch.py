"""What a person watching `hpml-lab report` (or `hpml-lab run`) sees: a line as each task starts and ends, an
estimate of what is left, and a heartbeat while a task runs, so the terminal is never silent for long.

    w = Watch(["c1", "c2"], "smoke")          # prints: 2 tasks (smoke profile), about 1 min 22 s ...
    streams = w.start("c1", "C1: training")   # [1/2] c1 C1: training ...
    papermill.execute_notebook(..., stdout_file=streams.out, stderr_file=streams.err)
    w.end("c1", "ok", 41.0)                   # [1/2] c1 ... ok in 41 s; about 41 s left (c2)

The kernel's own output is not printed: it is recorded in the executed notebook (and folded on the page). Its
stdout is read for the training loop's progress lines ("[c1] epoch 1/2 batch 20/40 ...", progress.py), whose
epoch and batch the heartbeat states at least every HEARTBEAT_S seconds; its stderr (torch's DataLoader worker
warnings and the like) is only counted.

The estimate, always said as "about", is this run's own as soon as it has one:
  * the running task's rest, from its progress lines (the share of its sweep's runs, epochs and batches done,
    at the pace it has kept since its first batch: its start-up is not its pace);
  * the tasks after it, from each task's figure (the times this output folder's earlier runs recorded for it
    at this profile, reports/executed/durations.json; else the task's measured smoke figure, or the GPU
    plan's) times this run's pace: its time over the figures, for the last PACE_WINDOW tasks it finished (the
    machine's load changes; the running task's projection counts before any has finished).
A task past its figure with no progress line to go by is said to be so, never given a figure already passed.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..ticker import about, duration  # noqa: F401 (watch.duration, watch.about: how the report says times)
from . import tasks

HEARTBEAT_S = 20.0  # the longest a running task stays silent (the issue asks for at most 30 s)
IDLE = "a fresh clone on 2 idle cores"  # where the smoke figures come from (each TASK's smoke_s)
# the pace is this run's over its last few finished tasks: a machine's load changes over a report
PACE_WINDOW = 3

_PROGRESS = re.compile(
    r"\[(?P<task>[^\]]+)\] epoch (?P<epoch>\d+)/(?P<epochs>\d+) batch (?P<batch>\d+)/(?P<of>\d+)"
)
_EPOCH_DONE = re.compile(r"\[(?P<task>[^\]]+)\] epoch (?P<epoch>\d+) done")
_SWEEP = re.compile(r"\[sweep (?P<i>\d+)/(?P<n>\d+)\]")
_ROUND = re.compile(
    r"\[(?P<task>[^\]]+)\] (?P<what>(?:warm-up|round) \d+/\d+) done"
)  # the speed ladder's rounds


class _Stream:
    """A file-like sink for one of the kernel's streams: lines are kept (not printed) and passed to
    `on_line`."""

    def __init__(self, on_line: Callable[[str], None]):
        self.on_line, self.lines, self._part = on_line, 0, ""

    def write(self, text: str) -> int:
        self._part += text
        *whole, self._part = self._part.split("\n")
        for line in whole:
            self.lines += 1
            self.on_line(line)
        return len(text)

    def flush(self) -> None:
        pass


class Streams:
    """The kernel's stdout and stderr for papermill (stdout_file, stderr_file) while one task runs."""

    def __init__(self, watch: Watch):
        self.out = _Stream(watch._stdout_line)
        self.err = _Stream(
            watch._stdout_line
        )  # progress may come on stderr too (the speed ladder logs there)


class Watch:
    """The progress of one `hpml-lab report` (or one `hpml-lab run`): see the module docstring."""

    def __init__(
        self,
        ids: list[str],
        profile: str,
        log: Callable[[str], None] = print,
        times_file: Path | None = None,
        heartbeat_s: float = HEARTBEAT_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.ids, self.profile, self.log, self.clock = list(ids), profile, log, clock
        self.heartbeat_s = heartbeat_s
        self.times_file = times_file
        self.recorded = self._read_times()
        self.done: dict[str, float] = {}
        self.current: str | None = None
        self.started = self.last_said = self.task_t0 = clock()
        self.state = ""  # what the running task said last: its epoch and batch
        self.sweep = ""  # which configuration of a sweep it runs, when it runs one
        self.order: list[str] = []  # the tasks done, in the order they ended (the pace reads the last few)
        # the running task's sweep run, epoch, batch and round as it said them
        self._where: dict[str, int] = {}
        self.marks: list[tuple[float, float]] = []  # (clock, share of the running task done) at each change
        self.restarted = False  # a second training run began without a sweep's count: no share can be told
        self.streams: Streams | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if len(self.ids) > 1:
            self._say(
                f"{len(self.ids)} tasks ({profile} profile), {self._left_text(self.ids)}"
                + (_busy_now() if any(self.expected(t)[1] == IDLE for t in self.ids) else "")
                + "; a line "
                f"every {duration(heartbeat_s)} at most while a task runs"
            )

    # the estimate -------------------------------------------------------------------------------------------
    def _read_times(self) -> dict[str, float]:
        """Each task's last successful time at this profile: durations.json, else the outcome the task's last
        run left beside it (executed/<task>.json, written before this module kept times). A damaged file only
        loses the estimate."""
        if self.times_file is None:
            return {}
        times: dict[str, float] = {}
        for outcome in sorted(self.times_file.parent.glob("*.json")):
            if outcome == self.times_file:
                continue
            try:
                o = json.loads(outcome.read_text())
                if o.get("profile") == self.profile and o.get("status") == "ok":
                    times[str(o["task"])] = float(o["seconds"])
            except (OSError, ValueError, TypeError, AttributeError, KeyError):
                pass
        try:
            data = json.loads(self.times_file.read_text()) if self.times_file.is_file() else {}
            times.update({k: float(v) for k, v in data.get(self.profile, {}).items()})
        except (OSError, ValueError, TypeError, AttributeError):
            pass
        return times

    def _record_time(self, tid: str, seconds: float) -> None:
        if self.times_file is None:
            return
        from ..io import atomic_write_json

        try:
            data = json.loads(self.times_file.read_text()) if self.times_file.is_file() else {}
            if not isinstance(data, dict):
                data = {}
        except (OSError, ValueError):
            data = {}
        data.setdefault(self.profile, {})
        if not isinstance(data[self.profile], dict):
            data[self.profile] = {}
        data[self.profile][tid] = round(seconds, 1)
        try:
            atomic_write_json(self.times_file, data)
        except OSError:
            pass  # the estimate is a convenience: a read-only folder does not stop the run

    def expected(self, tid: str) -> tuple[float | None, str]:
        """(seconds, where the figure comes from) for one task, or (None, '') when nothing says."""
        if tid in self.recorded:
            return self.recorded[tid], "earlier runs"
        smoke_s = getattr(tasks.TASKS.get(tid), "smoke_s", None)
        if self.profile == "smoke" and smoke_s is not None:  # the task's own measured figure (its TASK)
            return float(smoke_s), IDLE
        if self.profile == "gpu" and _cuda():
            try:
                from .gpuplan import task_estimate

                return task_estimate(tid)[0], "the GPU plan"
            except Exception:  # a task the plan does not know
                return None, ""
        return None, ""

    def done_share(self) -> float | None:
        """The share of the running task done, from its progress lines: a sweep's runs, each run's epochs and
        batches (an epoch said done counts whole), the speed ladder's rounds. None before any line says, or
        once a second training run began that no sweep count announced (its length is then unknown)."""
        w = self._where
        if self.restarted or not w:
            return None
        if "rounds" in w:
            return w["round"] / w["rounds"]
        if "epochs" not in w:
            return None
        run = (w["epoch"] - 1 + (w["batch"] / w["of"] if w.get("of") else 0.0)) / w["epochs"]
        if "runs" in w:
            return (w["run"] - 1 + run) / w["runs"]
        return run

    def _mark(self) -> None:
        share = self.done_share()
        if share is None:
            return
        if self.marks and share < self.marks[-1][1] - 1e-9:  # a new run started from its first epoch
            if "runs" not in self._where:
                self.restarted = True
                self.marks = []
                return
        if not self.marks or share != self.marks[-1][1]:
            self.marks.append((self.clock(), min(share, 1.0)))

    def running_left(self) -> float | None:
        """Seconds the running task has left at the pace it has kept since the first of its progress lines
        that said some of it done (its first batch: the kernel's start, the imports and the loader's first
        workers are behind it); the time since the last line counts, so a stalled task's estimate grows. None
        before two such lines."""
        marks = [m for m in self.marks if m[1] > 0]
        if len(marks) < 2:
            return None
        (t0, f0), (_, f) = marks[0], marks[-1]
        elapsed = self.clock() - t0
        if f <= f0 or elapsed <= 0:
            return None
        return (1.0 - f) * elapsed / (f - f0)

    def pace(self) -> float | None:
        """This run's time over the figures', for its last PACE_WINDOW finished tasks that have a figure;
        before any, the running task's projected time over its figure; None while nothing is measured."""
        pairs = [(self.done[t], self.expected(t)[0]) for t in self.order[-PACE_WINDOW:]]
        pairs = [(s, e) for s, e in pairs if e]
        if not pairs and self.current is not None:
            left, est = self.running_left(), self.expected(self.current)[0]
            if left is not None and est:
                pairs = [(self.clock() - self.task_t0 + left, est)]
        return sum(s for s, _ in pairs) / sum(e for _, e in pairs) if pairs else None

    def _left_text(self, ids: list[str], running_for: float | None = None) -> str:
        """What is left of `ids` (the first one running for `running_for` seconds, when given), in words."""
        if not ids:
            return "nothing left"
        pace = self.pace()
        factor = pace or 1.0
        total, parts, sources, unknown = 0.0, [], set(), []
        rest = ids
        if running_for is not None:
            first, rest = ids[0], ids[1:]
            left = self.running_left()
            est = self.expected(first)[0]
            if left is not None:
                total += left
                parts.append(
                    f"{first} {about(left)} more at its own pace" if rest else "at its own pace so far"
                )
            elif est is not None and est * factor > running_for:
                total += est * factor - running_for
                sources.add(self.expected(first)[1])
            elif est is not None:
                parts.append(
                    f"{first} has run past its figure ({about(est * factor)}), no progress line to go by"
                )
            else:
                unknown.append(first)
        for tid in rest:
            est, source = self.expected(tid)
            if est is None:
                unknown.append(tid)
                continue
            total += est * factor
            sources.add(source)
        if not total and not parts:
            return f"no estimate yet (no earlier {self.profile} run recorded a time)"
        how = []
        if sources:
            how.append(
                f"from {' and '.join(sorted(sources))}"
                + (f", at this run's pace: {pace:.1f}x" if pace is not None else "")
            )
        text = f"{about(total)} left" if total or parts else ""
        if parts or how:
            text += (" (" if text else "") + "; ".join(parts + how) + (")" if text else "")
        if unknown:
            text += f", plus {', '.join(unknown)} (no time recorded yet)"
        return text

    # the lines ----------------------------------------------------------------------------------------------
    def _say(self, line: str) -> None:
        with self._lock:
            self.log(line)
            sys.stdout.flush()  # seen now also through a pipe (make report | tee log)
            self.last_said = self.clock()

    def _tag(self, tid: str) -> str:
        n = self.ids.index(tid) + 1 if tid in self.ids else len(self.done) + 1
        return f"[{n}/{len(self.ids)}] {tid}"

    def start(self, tid: str, title: str, detail: str = "") -> Streams:
        """Say that a task starts; returns the streams to give papermill, and starts the heartbeat."""
        self.current, self.state, self.task_t0 = tid, "", self.clock()
        self._where, self.marks, self.restarted = {}, [], False
        self._say(f"{self._tag(tid)} {title} ..." + (f" ({detail})" if detail else ""))
        self.streams = Streams(self)
        self._stop.clear()
        if self.heartbeat_s > 0:
            self._thread = threading.Thread(target=self._beat, name=f"hpml-watch-{tid}", daemon=True)
            self._thread.start()
        return self.streams

    def _stdout_line(self, line: str) -> None:
        """One line the kernel printed: a training progress line or a sweep's item sets what the heartbeat
        says and how much of the task is done."""
        w = self._where
        m = _PROGRESS.search(line)
        if m:
            self.state = f"epoch {m['epoch']}/{m['epochs']}, batch {m['batch']}/{m['of']}"
            w.update({k: int(m[k]) for k in ("epoch", "epochs", "batch", "of")})
        elif m := _EPOCH_DONE.search(line):
            self.state = f"epoch {m['epoch']} done"
            if "epochs" in w:
                w.update(epoch=int(m["epoch"]), batch=w.get("of", 1), of=w.get("of", 1))
        elif m := _SWEEP.search(line):
            self.sweep, self.state = f"run {m['i']} of {m['n']}", ""
            # the run has begun, nothing of it done yet
            w.update(run=int(m["i"]), runs=int(m["n"]), epoch=1, epochs=1, batch=0, of=1)
        elif m := _ROUND.search(line):
            self.state = f"{m['what']} done"
            what, count = m["what"].split(" ")
            if what == "round":
                done, n = count.split("/")
                w.update(round=int(done), rounds=int(n))
        else:
            return
        self._mark()

    def heartbeat(self) -> str:
        """The line said while a task runs: how long it has run, where it is, what is left."""
        tid = self.current or ""
        running = self.clock() - self.task_t0
        printed = (self.streams.out.lines + self.streams.err.lines) if self.streams else 0
        where = ", ".join(w for w in (self.sweep, self.state) if w) or (
            f"no progress line yet ({printed} line(s) of output)"
            if printed
            else "starting (the kernel, its imports and data; no output yet)"
        )
        left = self.ids[self.ids.index(tid) :] if tid in self.ids else [tid]
        return f"    {tid} running {duration(running)}: {where}; {self._left_text(left, running)}"

    def _beat(self) -> None:
        while not self._stop.wait(min(1.0, self.heartbeat_s / 4)):
            if self.clock() - self.last_said >= self.heartbeat_s:
                self._say(self.heartbeat())

    def stop(self) -> None:
        """Stop the heartbeat (end() does; run_task also does when its task ends by an exception, so no beat
        of a finished task goes on beside the next one's)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def end(self, tid: str, status: str, seconds: float, error: str = "", target: str = "") -> None:
        """Stop the heartbeat; say the task's outcome and time, and what is left."""
        self.stop()
        self.done[tid] = seconds
        self.order.append(tid)
        if status == "ok":
            self._record_time(tid, seconds)
        warned = self.streams.err.lines if self.streams else 0
        rest = self.ids[self.ids.index(tid) + 1 :] if tid in self.ids else []
        line = f"{self._tag(tid)} ... {status} in {duration(seconds)}" + (f" -> {target}" if target else "")
        if error:
            line += f" ({error})"
        if warned:
            line += f"; {warned} line(s) on stderr kept in its executed notebook"
        if rest:
            line += f"; {self._left_text(rest)}"
        self._say(line)
        self.current, self.streams, self.sweep = None, None, ""
        self._where, self.marks = {}, []

    def finish(self) -> None:
        if len(self.ids) > 1:
            self._say(f"all {len(self.done)} tasks in {duration(self.clock() - self.started)}")


def _busy_now() -> str:
    """Before anything is measured the figures are an idle machine's: say so where this one is busy now (its
    1-minute load average above its usable cores), as the pace measured once a task runs will show."""
    import os

    try:
        load, cores = os.getloadavg()[0], len(os.sched_getaffinity(0))
    except (OSError, AttributeError):
        return ""
    if load <= cores:
        return ""
    return (
        f" (an idle machine's figures; this one is busy now, load {load:.1f} on {cores} cores: likely longer)"
    )


def times_file(reports: Path) -> Path:
    """Where each task's last successful time is kept, per profile (read for the next run's estimate)."""
    return reports / "executed" / "durations.json"


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()
