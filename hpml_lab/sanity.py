"""Sanity flags computed for every run, shown where the reader sees the number.

    from hpml_lab import sanity
    flags = sanity.run_flags(cfg, epochs, batches, meta)        # list of Flag
    sanity.ran_vs_lab(cfg)                                       # every setting that differs from the lab's

| flag | when |
|---|---|
| diverged | the loss at the end (mean of the last fifth of the batches) is above ln(classes) + 0.5, chance level plus a margin, or is NaN/inf |
| did not learn | from the second epoch on, the last epoch's mean loss is still at chance, at or above (1 - CHANCE_MARGIN) ln(classes) (CHANCE_MARGIN 0.05: 2.19 for CIFAR-10), or its top-1 at or below CHANCE_TOP1 (1.5) / classes (15% for CIFAR-10); training recorded it in meta.json's `did_not_learn` (a NaN loss is "diverged" instead) |
| no steady state | the epochs after the first (warm-up) keep growing or shrinking: each beyond the last by 10% and the last beyond the first by 25% (by 2x when there are only two) |
| too few samples | fewer than 3 values behind a median: no spread is shown |
| machine busy | the 1-minute load average before the run per usable core was above BUSY_LOAD_PER_CORE (1.0), or the CPU steal time above BUSY_STEAL_PCT (10%); recorded per run in meta.json's `machine`; any run a report used or made raises it on that report |
| noisy machine | two identical configurations (e.g. c6's sgd and c7's bn) have medians more than NOISE_FACTOR (1.5x) apart |
| stand-in model | the model is not the lab's (e.g. resnet_tiny for ResNet-18 in a smoke run) |
| settings differ | any setting differs from the lab's (the full table comes from ran_vs_lab) |
| live plot | the run drew a live plot (progress=plot in a Jupyter kernel, meta.json's `progress`): its redraws count in total_s |
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The lab's settings (Lab 2, shared/notes/lab-tasks.md): what a report's numbers are compared with.
LAB = {
    "model": "resnet18",
    "optimizer": "sgd",
    "lr": 0.1,
    "momentum": 0.9,
    "weight_decay": 5e-4,
    "batch_size": 128,
    "num_workers": 2,
    "epochs": 5,
    "max_batches": 0,
    "subset": 0,
    "augment": True,
    "norm": "bn",
    # the fast path's options (hpml_lab.fastpath), off in the lab: a run that turns one on says so
    "loader": "pil",
    "channels_last": False,
    "precision": "fp32",
    "compile": False,
}
MIN_SAMPLES = 3
DIVERGE_MARGIN = 0.5
CHANCE_MARGIN = 0.05  # a loss within 5% of ln(classes) is still at chance
CHANCE_TOP1 = 1.5  # top-1 at or below 1.5 / classes is at chance
BUSY_LOAD_PER_CORE = 1.0  # 1-minute load average per usable core above which timings are shared with others
BUSY_STEAL_PCT = 10.0  # CPU steal (% of CPU time taken by the hypervisor) above which the same holds
NOISE_FACTOR = 1.5  # identical configurations further apart than this: the machine, not the setting, moved

_SEEN: list[dict[str, Any]] = []  # the machine load of every run this process made or showed (see observe)


@dataclass(frozen=True)
class Flag:
    kind: str  # diverged | did not learn | no steady state | too few samples | machine busy | noisy machine
    # | stand-in model | settings differ | live plot
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}


def chance_loss(num_classes: int) -> float:
    """Cross-entropy of a uniform guess: ln(classes) (2.30 for CIFAR-10)."""
    return math.log(num_classes)


def diverged(losses: Sequence[float], num_classes: int, margin: float = DIVERGE_MARGIN) -> Flag | None:
    vals = [float(x) for x in losses]
    if not vals:
        return None
    if any(not math.isfinite(v) for v in vals):
        return Flag("diverged", "the loss became NaN or infinite: training diverged")
    tail = vals[-max(1, len(vals) // 5) :]
    end = sum(tail) / len(tail)
    limit = chance_loss(num_classes) + margin
    if end > limit:
        return Flag(
            "diverged",
            f"the loss at the end ({end:.2f}, mean of the last {len(tail)} batches) is above "
            f"chance level ln({num_classes}) = {chance_loss(num_classes):.2f} + {margin}: "
            "training is diverging or has not settled, so its losses and accuracies are not results",
        )
    return None


def did_not_learn(
    epoch_losses: Sequence[float], epoch_top1: Sequence[float], num_classes: int
) -> Flag | None:
    """'did not learn' when, after two epochs or more, the last epoch's mean loss is still within CHANCE_MARGIN of
    ln(classes) (or above it), or its top-1 (a fraction) is at most CHANCE_TOP1 / classes. None before the second
    epoch, and for a loss that is not finite (that run diverged: its own flag)."""
    losses, top1 = [float(x) for x in epoch_losses], [float(x) for x in epoch_top1]
    if len(losses) < 2 or not math.isfinite(losses[-1]):
        return None
    chance = chance_loss(num_classes)
    loss_stuck = losses[-1] >= (1 - CHANCE_MARGIN) * chance
    top1_stuck = bool(top1) and math.isfinite(top1[-1]) and top1[-1] <= CHANCE_TOP1 / num_classes
    if not (loss_stuck or top1_stuck):
        return None
    said = []
    if loss_stuck:
        said.append(f"its loss {losses[-1]:.3f} is still at chance level ln({num_classes}) = {chance:.3f}")
    if top1_stuck:
        said.append(f"its top-1 {100 * top1[-1]:.1f}% is at chance ({100 / num_classes:.1f}%)")
    return Flag(
        "did not learn",
        f"after epoch {len(losses)} " + " and ".join(said) + ": the run did not learn, so its losses and "
        "accuracies say nothing about the setting it ran",
    )


def at_chance(losses: Sequence[float], num_classes: int, margin: float = 0.05) -> bool:
    """The loss at the end is not clearly below chance level (within `margin` of it, or above it): the network has
    learned nothing yet. A loss above chance is no sign of learning (it was read as one: memory's "only resnet got
    below chance" for a ResNet at 2.43 against 2.30)."""
    vals = [float(x) for x in losses if math.isfinite(float(x))]
    if not vals:
        return False
    tail = vals[-max(1, len(vals) // 5) :]
    return sum(tail) / len(tail) >= (1 - margin) * chance_loss(num_classes)


def learning_flag(meta: Mapping | None) -> Flag | None:
    """The run's own 'did not learn' record (meta.json, written by training with did_not_learn) as its flag."""
    rec = (meta or {}).get("did_not_learn")
    if not isinstance(rec, Mapping):
        return None
    return Flag(
        "did not learn", str(rec.get("message") or "the run did not learn (meta.json's did_not_learn)")
    )


def trend(epoch_seconds: Sequence[float], step: float = 0.10, overall: float = 0.25) -> Flag | None:
    """Epoch times after the warm-up epoch that keep moving in one direction are no steady state."""
    v = [float(x) for x in epoch_seconds][1:]
    if len(v) < 2:
        return None
    if len(v) == 2:  # one step is a trend only when it is large: two noisy epochs differ by chance
        overall = max(overall, 1.0)
    up = all(b > a * (1 + step) for a, b in zip(v, v[1:])) and v[-1] > v[0] * (1 + overall)
    down = all(b < a / (1 + step) for a, b in zip(v, v[1:])) and v[-1] < v[0] / (1 + overall)
    if up or down:
        seq = " -> ".join(
            f"{x:.2f}" for x in v
        )  # epoch 1 apart: it is not part of the trend and may go either way
        return Flag(
            "no steady state",
            f"epoch times after the warm-up epoch keep {'growing' if up else 'shrinking'} "
            f"({seq} s; epoch 1: {float(epoch_seconds[0]):.2f} s): there is no steady "
            "state to summarise; the median describes no typical epoch",
        )
    return None


def too_few(n: int, what: str = "values") -> Flag | None:
    if n < MIN_SAMPLES:
        return Flag(
            "too few samples",
            f"only {n} {what}: a median of fewer than {MIN_SAMPLES} has no spread to "
            "show, so none is shown; treat the number as one observation",
        )
    return None


# The CPU-time counters of this process's last steal sample: (monotonic time, /proc/stat's cpu line).
_LAST_STAT: tuple[float, list[int]] | None = None
STEAL_WINDOW_MAX_S = 60.0  # an older last sample is not "just before the run": a fresh one is taken


def machine_load(sample_s: float = 0.1) -> dict[str, Any]:
    """Load average, usable cores and the CPU steal share over at least `sample_s` before now (Linux /proc/stat).
    The steal window is the time since this process's previous sample where that is between sample_s and
    STEAL_WINDOW_MAX_S old (the run before, in a sweep: no wait), else a wait of sample_s; `steal_window_s` says
    which it was."""
    global _LAST_STAT
    out: dict[str, Any] = {
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    }
    try:
        out["load1"] = os.getloadavg()[0]
    except OSError:
        out["load1"] = None

    def cpu_times():
        with open("/proc/stat") as f:
            return [int(x) for x in f.readline().split()[1:]]

    try:
        now = time.monotonic()
        if _LAST_STAT is not None and sample_s <= now - _LAST_STAT[0] <= STEAL_WINDOW_MAX_S:
            t0, a = _LAST_STAT
        else:
            t0, a = now, cpu_times()
            time.sleep(sample_s)
        b = cpu_times()
        _LAST_STAT = (time.monotonic(), b)
        d = [y - x for x, y in zip(a, b)]
        total = sum(d)
        out["steal_pct"] = 100.0 * d[7] / total if total and len(d) > 7 else 0.0
        out["steal_window_s"] = round(_LAST_STAT[0] - t0, 2)
    except (OSError, ValueError, IndexError):
        out["steal_pct"] = None
    observe(out)
    return out


def observe(load: Mapping[str, Any] | None) -> None:
    """Remember one run's machine load (meta.json's `machine`) so the report that made or showed it can say
    whether the machine was busy (busiest_seen); machine_load() calls it for every run it samples."""
    if load:
        _SEEN.append(dict(load))


def busy(load: Mapping[str, Any] | None) -> Flag | None:
    """'machine busy' when load per usable core passes BUSY_LOAD_PER_CORE or steal passes BUSY_STEAL_PCT."""
    if not load:
        return None
    msgs = []
    cores = load.get("cores") or 1
    if load.get("load1") is not None and load["load1"] / cores > BUSY_LOAD_PER_CORE:
        msgs.append(
            f"load average {load['load1']:.1f} on {cores} usable cores before the run, above "
            f"{BUSY_LOAD_PER_CORE:g} per core"
        )
    if load.get("steal_pct") is not None and load["steal_pct"] > BUSY_STEAL_PCT:
        msgs.append(f"CPU steal {load['steal_pct']:.0f}%, above {BUSY_STEAL_PCT:g}%")
    if msgs:
        return Flag(
            "machine busy",
            "the machine was busy (" + "; ".join(msgs) + "): timings are slower and noisier "
            "than on an idle machine",
        )
    return None


def busiest_seen(loads: Iterable[Mapping[str, Any] | None] | None = None) -> Flag | None:
    """The busy flag of the busiest of `loads` (default: every run this process observed), or None."""
    seen = [dict(x) for x in (_SEEN if loads is None else loads) if x]

    def pressure(x):
        return max(
            (x.get("load1") or 0) / (x.get("cores") or 1) / BUSY_LOAD_PER_CORE,
            (x.get("steal_pct") or 0) / BUSY_STEAL_PCT,
        )

    return busy(max(seen, key=pressure)) if seen else None


def noise(
    a: Sequence[float], b: Sequence[float], what_a: str, what_b: str, factor: float = NOISE_FACTOR
) -> Flag | None:
    """Two runs of one configuration whose medians are more than `factor` apart: the machine's noise is at least
    that large, so smaller differences between settings on this machine are not results."""
    va, vb = sorted(float(x) for x in a), sorted(float(x) for x in b)
    if not va or not vb:
        return None
    ma, mb = statistics.median(va), statistics.median(vb)
    lo, hi = min(ma, mb), max(ma, mb)
    if lo > 0 and hi / lo > factor:
        return Flag(
            "noisy machine",
            f"{what_a} and {what_b} are the same configuration, yet their medians are "
            f"{ma:.3g} and {mb:.3g} ({hi / lo:.2f}x apart, above {factor:g}x): differences "
            "smaller than that between settings measured here are noise, not results",
        )
    return None


def ran_vs_lab(cfg, lab: Mapping[str, Any] = LAB) -> list[dict[str, Any]]:
    """Every lab setting this run changed, as rows {setting, ran, lab}; 0 for max_batches/subset means all."""
    rows = []
    for key, want in lab.items():
        got = getattr(cfg, key)
        if got != want:
            rows.append({"setting": key, "ran": _show(key, got), "lab": _show(key, want)})
    return rows


def _show(key: str, value: Any) -> str:
    if key in ("max_batches", "subset") and value == 0:
        return "all"
    return str(value)


def stand_in(cfg, lab_model: str = LAB["model"]) -> Flag | None:
    if cfg.model != lab_model:
        from . import models

        n = models.count_parameters(models.build(cfg.model))
        return Flag(
            "stand-in model",
            f"model {cfg.model} ({n:,} parameters) stands in for the lab's {lab_model}: "
            "its times, memory and accuracies are not the lab model's",
        )
    return None


def run_flags(
    cfg,
    losses: Iterable[float] = (),
    epoch_seconds: Sequence[float] = (),
    meta: Mapping | None = None,
    num_classes: int = 10,
    lab: Mapping[str, Any] = LAB,
) -> list[Flag]:
    """Every flag that applies to one run (or one configuration of a sweep)."""
    flags = [
        diverged(list(losses), num_classes),
        learning_flag(meta),
        trend(epoch_seconds),
        busy((meta or {}).get("machine")),
        stand_in(cfg, lab.get("model", LAB["model"])),
    ]
    if flags[0] is not None:  # a diverged run: that flag says it; "did not learn" would repeat it
        flags[1] = None
    # what the run did (meta.json: a reused run may have been made with other progress settings), else the config
    drew = meta.get("progress") == "plot" if meta is not None else getattr(cfg, "progress", None) == "plot"
    if drew:
        flags.append(
            Flag(
                "live plot",
                "a live plot was drawn during the epochs (progress=plot): its redraws count "
                "in total_s, and DataLoader workers prefetch meanwhile, so data_s can be lower",
            )
        )
    differ = ran_vs_lab(cfg, lab)
    if differ:
        flags.append(
            Flag(
                "settings differ",
                "settings differ from the lab's: "
                + ", ".join(f"{r['setting']} {r['ran']} (lab {r['lab']})" for r in differ),
            )
        )
    return [f for f in flags if f is not None]
