"""Shared pieces of the studies' conclusions (each study's conclude() lives beside its run()): a measured
median as a tagged Number, flags without repeats, per-batch tables of a sweep and a verdict between two of its
settings.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .. import sanity
from ..answers import Number
from ..data import classes_of
from ..findings import Finding, fmt, fmt_in, fmt_value, join, say
from ..profiling import summarize
from ..results import drop_warmup
from ..verdict import compare


def num(name: str, values, unit: str, scale: float = 1.0) -> Number:
    """A measured median with its n and (for n >= 3) its IQR; for n < 3 no spread at all. A value that is no
    number (NaN: a time a record does not hold) is no sample (review31: summarize raised on it)."""
    s = summarize([v * scale for v in values if v == v])
    return Number(name, s["median"], unit, "measured", n=s["n"], spread=s["iqr"] if s["n"] >= 3 else None)


def short(x: float) -> str:
    """(Kept for conclusions not yet on findings) a value through the one formatter, findings.fmt_value."""
    return fmt_value(float(x))


def share(fraction: float) -> str:
    """(Kept for conclusions not yet on findings) a share through the one formatter: '0.15%', never '0%'."""
    return fmt_value(100 * float(fraction), "%")


def setting(name: str, value, unit: str = "", source: str = "the run's settings") -> Number:
    """A value the run was given (a worker count, a batch size), as a Number a finding can state."""
    return Number(name, value, unit, "setting", source=source)


def on_gpu(meta) -> bool:
    """Whether a run's steps ran on a CUDA device (its meta's device: "cuda", "cuda:0"; "cpu" or none:
    not)."""
    return str((meta or {}).get("device", "cpu")).startswith("cuda")


def timing_disjoint(sync_each_step: bool, meta) -> bool:
    """Whether a run's data-loading and training intervals are disjoint, so that data + training <= total and
    the rest of the epoch is the loop's own work: on a CPU, where work runs as it is issued, or on a GPU
    synchronized after every step (sync_each_step). On a GPU without it they may overlap
    (hpml_lab.training)."""
    return not on_gpu(meta) or bool(sync_each_step)


def sampling(verdicts) -> str | None:
    """How the compared samples were taken, as the verdicts themselves record it (Verdict.interleaved):
    "sequential" (every side's runs one after the other), "interleaved" (the sides took turns), or None when
    the verdicts do not say or disagree, and no sentence about the design may be written."""
    designs = {v.interleaved for v in verdicts}
    return {frozenset({False}): "sequential", frozenset({True}): "interleaved"}.get(frozenset(designs))


# a verdict's reasons whose sentence already says its runs were made one after the other (verdict.TIES)
SEQUENTIAL_REASONS = ("load moved", "busy machine", "load not recorded")


def one_after_the_other(samples: str) -> str:
    """What a verdict over two runs made one after the other holds, said after it: its interval is over each
    run's own `samples` (batches, steps), not over how a run varies from the next (grade21: two renders'
    ratios, 3.80x and 2.01x, each fell outside the other's interval). Words only: no number."""
    return (
        "; the two runs were made one after the other, so its interval holds each run's own spread of "
        f"{samples}, not how a run varies from the next."
    )


def after_sequential(v, samples: str, order: bool = True) -> str:
    """What ends the sentence of a verdict over two runs made one after the other: a full stop where its
    reason says so itself (SEQUENTIAL_REASONS); what its interval holds where it has one
    (one_after_the_other); else, with no interval (too few samples), the order alone where `order` (a review:
    'its interval holds ...' was said of a verdict with none)."""
    if v.reason.startswith(SEQUENTIAL_REASONS):
        return "."
    if v.has_interval:
        return one_after_the_other(samples)
    return "; the two runs were made one after the other." if order else "."


def counted(name: str, value: int, unit: str = "", source: str = "counted in the results") -> Number:
    return Number(name, int(value), unit, "counted", source=source)


def worker_label(n: int, name: str = "") -> Finding:
    """'2 workers' / '1 worker' as a Finding whose count is a setting Number (named `name`, default 'workers:
    n')."""
    num = setting(name or fmt_in("worker count {n}", n=int(n)), int(n))
    return say("{n} worker" if int(n) == 1 else "{n} workers", n=num)


def workers_list(counts, name: str = "worker count", source: str = "the run's settings") -> Finding:
    """Several worker counts: '0 or 2 workers'; the one count 1: '1 worker'. `source`: where the counts come
    from (another task's sweep says so, not 'the run's settings')."""
    counts = [int(c) for c in counts]
    nums = [say("{n}", n=setting(fmt_in("{name} {c}", name=name, c=c), c, source=source)) for c in counts]
    return say("{counts} worker" if counts == [1] else "{counts} workers", counts=join(nums, ", ", " or "))


def span(numbers) -> Finding:
    """Several Numbers as the range a sentence states, '{lowest} to {highest}' by value; the one value (the
    highest) where the range shows one: a single Number, or ends the formatter writes alike."""
    by_value = sorted(numbers, key=lambda x: x.value)
    lowest, highest = by_value[0], by_value[-1]
    if fmt(lowest) == fmt(highest):
        return say("{x}", x=highest)
    return say("{lo} to {hi}", lo=lowest, hi=highest)


def loads_by(items, by: str) -> dict:
    """The machine's load per core recorded before each run of a sweep, by the value of `by` in its config."""
    from ..results import read_run

    out: dict = {}
    for it in items or ():
        try:
            meta = read_run(it.run_dir).meta
        except (OSError, ValueError):
            continue
        m, value = meta.get("machine") or {}, (meta.get("config") or {}).get(by)
        if m.get("load1") is not None and m.get("cores"):
            out.setdefault(value, []).append(float(m["load1"]) / float(m["cores"]))
    return out


def workers(counts) -> str:
    """Worker counts as a sentence says them, a label of Numbers' names and verdicts: '1 worker', '0 workers',
    '0 or 2 workers' (never 'worker(s)'), each count through the one formatter."""
    counts = [int(c) for c in (counts if isinstance(counts, (list, tuple, set)) else [counts])]
    said = " or ".join(
        [", ".join(map(fmt_value, counts[:-1])), fmt_value(counts[-1])]
        if len(counts) > 1
        else [fmt_value(counts[0])]
    )
    return f"{said} worker{'' if counts == [1] else 's'}"


def first_up(sentence: str) -> str:
    """A sentence that starts with a label ('compiled and eager ...') starts with a capital."""
    return sentence[:1].upper() + sentence[1:]


def training_flags(cfg, batches: pd.DataFrame, epochs: pd.DataFrame, meta: dict | None) -> list[sanity.Flag]:
    flags = sanity.run_flags(cfg, batches["loss"], list(epochs["total_s"]), meta, classes_of(cfg, meta))
    return flags + share_flags(meta, epoch_shares(epochs))


def share_flags(meta: dict | None, shares: list[Number], label: str = "") -> list[sanity.Flag]:
    """What a page that shows `shares` of the run's peak says of that peak: 'MFU above 100%' where a share
    passed it (no share of it can be read), else 'peak measured busy' where its measurement recorded a busy
    machine (each share uncertain; `label` names the device where a page has several); nothing where it shows
    none."""
    if not shares:
        return []
    over = sanity.above_peak(shares, run_peak(meta))
    if over is not None:
        return [over]
    busy = sanity.busy_peak((meta or {}).get("flops"), label)
    return [busy] if busy is not None else []


def readable_share(df: pd.DataFrame, column: str, whole: float = 1.0) -> pd.DataFrame:
    """`df` without its share-of-peak `column` where any value passes the whole peak (`whole`: 1 for a
    fraction, 100 for a percentage): that peak was measured low and no share of it can be read, as the page's
    'MFU above 100%' flag says, so c1's, c2's and c5's tables show none (grade24: c2 left its column out, c1
    and c5 showed 115% and 145% beside the flag). The speed ladder, whose subject is the shares, keeps them
    with its own flag: read them with care."""
    if column in df and bool((df[column] > whole).any()):
        return df.drop(columns=[column])
    return df


def epochs_shown(epochs: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    """An epochs table as a page shows it: the `columns` it has, in their order, renamed to the page's words
    (a column mapped to itself keeps its name), without a share of a peak that some share passed
    (readable_share, the column 'mfu')."""
    kept = readable_share(epochs[[c for c in columns if c in epochs]], "mfu")
    return kept.rename(columns={k: v for k, v in columns.items() if k != v})


def too_few_epochs(summary, what: str):
    """'too few samples' for a summary table's epoch medians (its column n: each row's timed epochs), where
    the fewest rows hold under three; None without such a table."""
    if summary is None or "n" not in summary or not len(summary):
        return None
    return sanity.too_few(int(summary["n"].min()), what)


def run_peak(meta: dict | None):
    """The run's peak as every page states it (flops.peak_number), or None where the run recorded none."""
    from ..flops import peak_number

    fl = (meta or {}).get("flops") or {}
    return peak_number(fl) if fl.get("peak_tflops") else None


def epoch_shares(epochs: pd.DataFrame) -> list[Number]:
    """Each epoch's training compute as a share of the device's peak (the epochs table's column), as Numbers
    named for their epoch."""
    if "mfu" not in epochs:
        return []
    return [
        Number(fmt_in("epoch {e}: share of device peak", e=int(e)), 100 * float(m), "%", "measured", n=1)
        for e, m in zip(epochs["epoch"], epochs["mfu"])
        if pd.notna(m)
    ]


def machines(sweep) -> list[dict]:
    """The machine load recorded before each run of a sweep, each with its run folder ('run')."""
    from ..results import read_run

    loads = []
    for it in getattr(sweep, "items", None) or []:
        try:
            meta = read_run(it.run_dir).meta
        except (OSError, ValueError):
            continue
        if meta.get("machine"):
            loads.append({**meta["machine"], "run": str(meta.get("run_id") or Path(it.run_dir).name)})
    return loads


def meta_machine(sweep) -> dict | None:
    """The machine load recorded by the busiest run of a sweep (one busy run is enough to flag), or None."""
    return max(machines(sweep), key=sanity.pressure, default=None)


def trace_loads(trace) -> list[dict]:
    """The machine load recorded with a study's profiler trace (its folder's meta.json), named after that
    folder: a page that shows the trace's tables read that run too. [] without one."""
    from ..results import read_run

    path = getattr(trace, "path", None)
    if not path:
        return []
    folder = Path(path).parent
    try:
        meta = read_run(folder).meta
    except (OSError, ValueError):
        return []
    return [{**meta["machine"], "run": str(meta.get("run_id") or folder.name)}] if meta.get("machine") else []


def busy_of(sweep, trace=None, more: list[dict] | None = None) -> sanity.Flag | None:
    """'machine busy' from the busiest run of a sweep, of `more` runs the page read (each load with its
    'run'), and of its profiler trace where the page shows one (`trace`, tracing.Trace): its numbers are that
    run's, named after its folder, and the flag says how many runs the report read."""
    return sanity.busiest_seen(machines(sweep) + list(more or []) + trace_loads(trace))


def trend_flags(epochs, field: str, labels: dict) -> list[sanity.Flag]:
    """The 'no steady state' flag (sanity.trend) of each value of `field` in `labels` whose epoch times after
    the warm-up keep moving one way, named by its label there; none where there is no epochs table."""
    if epochs is None or not {field, "epoch", "total_s"} <= set(epochs.columns):
        return []
    flags = []
    for value, label in labels.items():
        seconds = epochs.loc[epochs[field] == value].sort_values("epoch")["total_s"]
        flags.append(sanity.trend(list(seconds), label=label))
    return [f for f in flags if f is not None]


def learning_flags(items, label_of) -> list[sanity.Flag]:
    """Each complete run's own 'did not learn' record (meta.json's did_not_learn, decided by training at the
    run's end, by sanity's one rule) as its flag, named by label_of(meta) (a word or a Finding; None leaves
    the run out): the page says of a run what its record and the line the run printed say, and nothing of
    its own."""
    named = ((label_of(meta), meta) for meta in complete_metas(items, unknown=True))
    return learned_flags((label, meta) for label, meta in named if label is not None)


def learned_flags(named) -> list[sanity.Flag]:
    """The 'did not learn' flag of each (label, meta.json) whose record says so (sanity.learning_flag), in
    order: a sweep's runs (learning_flags), or the runs a study read by other means (lab5, tinyimagenet)."""
    flags = [sanity.learning_flag(meta, label=label) for label, meta in named]
    return [f for f in flags if f is not None]


def complete_metas(items, unknown: bool = False):
    """The records (meta.json) of a sweep's complete runs, in order, leaving out runs whose record cannot be
    read; `unknown`: whether an item that does not say it is complete counts as complete."""
    from ..results import read_run

    for it in items or ():
        if not getattr(it, "complete", unknown):
            continue
        try:
            yield read_run(it.run_dir).meta
        except (OSError, ValueError):
            continue


def metas_by(items, field: str, unknown: bool = False) -> dict:
    """Each value of `field` in the runs' configs -> the first complete run's record (meta.json) with it
    (complete_metas: unreadable records left out; `unknown` as there)."""
    got: dict = {}
    for meta in complete_metas(items, unknown=unknown):
        got.setdefault((meta.get("config") or {}).get(field), meta)
    return got


def epoch_word(counts, one: str) -> str:
    """What a table's per-epoch value is, by the epochs behind each row (`counts`, its n column): `one` (the
    one epoch kept) where every row kept one, "median epoch" where every row kept several, else both
    (review39, review40: "median epoch" beside "n epochs" 1)."""
    lo, hi = int(min(counts)), int(max(counts))
    return one if hi == 1 else "median epoch" if lo > 1 else f"median epoch, or {one}"


def step_times(batches: pd.DataFrame, meta) -> pd.Series:
    """A run's train_s as samples: one a step where it timed every step; one an interval where it timed the
    device only every log_every steps (meta.json's timing "interval", the fast path: each batch of an interval
    holds the interval's mean, one measurement, not log_every of them; grade40g: C7's "n = 390" over 20
    intervals, its interquartile range over their copies)."""
    t = batches["train_s"]
    if (meta or {}).get("timing", "step") != "interval":
        return t
    return t[t.ne(t.shift()) | batches["epoch"].ne(batches["epoch"].shift())]


def steady_batches(items, by: str, steps: bool = False) -> pd.DataFrame:
    """Per-batch rows of a sweep's complete runs, the warm-up epoch of each run left out. `steps`: the rows
    are read for their train_s as samples, so a run timed in intervals (step_times) keeps one row an
    interval (its other columns, data_s and loss, are then not all the run's)."""
    from ..sweeps import tables

    b = drop_warmup(tables(items, "batches", with_config=(by,)))
    if not steps or b.empty:
        return b
    metas = {str(v): m for v, m in metas_by(items, by, unknown=True).items()}
    keep = [i for v, g in b.groupby(by, sort=False) for i in step_times(g, metas.get(str(v))).index]
    return b.loc[sorted(keep)]


def compare_configs(
    batches: pd.DataFrame,
    by: str,
    a,
    b,
    column: str,
    what: str,
    label_a: str = "",
    label_b: str = "",
    loads: dict | None = None,
):
    """Verdict of configuration `a` against `b` (values of `by`) on a per-batch column (seconds: lower is
    better). With `loads` (loads_by: value -> load per core of its runs) the runs are known to have been made
    one after the other, and the verdict cannot tell when the load moved between them."""
    xa = list(batches.loc[batches[by] == a, column])
    xb = list(batches.loc[batches[by] == b, column])
    design = {} if loads is None else {"interleaved": False, "load_a": loads.get(a), "load_b": loads.get(b)}
    return compare(xa, xb, label_a or f"{by} {a}", label_b or f"{by} {b}", what=what, **design), xa, xb


# flag kinds a page may raise once per setting, device or peak: kept apart by their message
PER_SETTING = (
    "diverged",
    "did not learn",
    "too few samples",
    "no steady state",
    "MFU above 100%",
    "peak measured busy",
)


def dedupe(flags) -> list[sanity.Flag]:
    """Flags without repeats: one of each kind, except those kept once per setting or device they name
    (PER_SETTING: a sweep's second diverged or unsteady setting is not hidden behind its first; review36: c7's
    second 'no steady state' was), and 'too few samples', kept once per thing it counts (a sweep's batches
    and its epochs)."""
    seen, out = set(), []
    for f in flags:
        per_setting = f is not None and f.kind in PER_SETTING
        key = (f.kind, f.message) if per_setting else getattr(f, "kind", None)
        if f is not None and key not in seen:
            seen.add(key)
            out.append(f)
    return out


NOT_SETTINGS = ("task", "results_dir", "run_id", "progress", "log_every", "data_root")


def _setting_key(config: dict) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in config.items() if k not in NOT_SETTINGS))


def twin_noise(cfg, items, field: str, twin: tuple[str, str] | None, other_runs=None) -> sanity.Flag | None:
    """'noisy machine' when a run of this sweep and a run of its twin task with the same configuration have
    epoch medians (after warm-up) further apart than sanity.NOISE_FACTOR. `twin`: the twin task's id and the
    field its sweep varies (the TASK's twin: two tasks whose sweeps share a configuration, such as the lab's
    defaults); None: no twin. `other_runs` defaults to the twin task's complete runs in cfg.results_dir."""
    from ..results import load_runs, read_run

    twin, twin_field = twin or (None, "")
    items = [it for it in items or () if getattr(it, "complete", False)]
    if twin is None or not items:
        return None
    others = load_runs(twin, cfg.results_dir) if other_runs is None else other_runs
    if not others:
        return None
    by_key = {}
    for o in others:
        by_key.setdefault(_setting_key(o.meta.get("config", {})), o)
    for it in items:
        try:
            mine = read_run(it.run_dir)
            other = by_key.get(_setting_key(mine.meta.get("config", {})))
            if other is None:
                continue
            a, b = drop_warmup(mine.epochs)["total_s"], drop_warmup(other.epochs)["total_s"]
        except (OSError, ValueError, KeyError):
            continue
        value = mine.meta.get("config", {}).get(field, "?")
        other_value = other.meta.get("config", {}).get(twin_field, "?")
        flag = sanity.noise(list(a), list(b), f"{cfg.task}'s {value}", f"{twin}'s {other_value}")
        if flag:
            return flag
    return None
