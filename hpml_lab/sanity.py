"""Sanity flags computed for every run, shown where the reader sees the number. Each flag is a finding like
any other (findings.say): a template over named Numbers read from the run or setting it names, so the answer
record holds its numbers and the claims check reads it; the busy flag names its run (the environment table
states that run's load with the same Numbers).

    from hpml_lab import sanity
    flags = sanity.run_flags(cfg, epochs, batches, meta)        # list of Flag
    sanity.ran_vs_lab(cfg)                                       # every setting that differs from the lab's

The flags, and when each is raised:

- diverged: the loss at the end (mean of the last fifth of the batches) is above ln(classes) + 0.5, chance
  level plus a margin, or is NaN/inf
- did not learn: a run of two epochs or more whose last epoch's mean loss is still at chance, at or above
  (1 - CHANCE_MARGIN) ln(classes) (CHANCE_MARGIN 0.05: 2.19 for CIFAR-10), and its top-1 at chance too (where
  it was measured), at or below CHANCE_TOP1 / classes and no more than CHANCE_TOP1_POINTS above 1 / classes
  (chance_top1: 15% for CIFAR-10, 30% for 4 classes). Decided once, at the run's end, over its last epoch:
  training records it in meta.json's `did_not_learn` (a NaN loss is "diverged" instead) and prints that
  decision; a run at chance earlier (after its second epoch) prints a note that the end confirms or
  withdraws (chance_note, chance_left), never the decision. The flag, the line the run prints, and every
  page that reads the record state the rule the same way (chance_rule)
- no steady state: the epochs after the first (warm-up) keep growing or shrinking: each beyond the last by 10%
  and the last beyond the first by 25% (by 2x when there are only two)
- too few samples: fewer than 3 values behind a median: no interquartile range is shown
- machine busy: the 1-minute load average before the run per usable core was above BUSY_LOAD_PER_CORE (1.0),
  or the CPU steal time above BUSY_STEAL_PCT (10%); recorded per run in meta.json's `machine`; any run a
  report used or made raises it on that report
- noisy machine: two identical configurations (e.g. c6's sgd and c7's bn) have medians more than NOISE_FACTOR
  (1.5x) apart
- stand-in model: the model is not the lab's (e.g. resnet_tiny for ResNet-18 in a smoke run)
- settings differ: any setting differs from the lab's (the full table comes from ran_vs_lab)
- live plot: the run drew a live plot (progress=plot in a Jupyter kernel, meta.json's `progress`): its redraws
  count in total_s
- MFU above 100%: a share of the device's measured peak passed the whole of it: that peak was measured low
  and no share of it can be read (above_peak)
- peak measured busy: a page shows shares of a peak measured while the machine was busy by the rule of
  "machine busy", on the measurement's own load (meta.json's flops.machine): each share is uncertain
  (busy_peak)

Why one module of about 900 lines: the flags share Flag, the thresholds and the label slots above, and this
list is the one place a reader finds when each of them is raised.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .answers import Number
from .findings import Finding, Ident, beside, fmt_in, join, say, stray_digits

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
CHANCE_TOP1 = 1.5  # top-1 at or below 1.5 / classes (and CHANCE_TOP1_POINTS above chance at most): chance
# so that with few classes a top-1 far above chance is not called chance (4 classes: 30%, not 37.5%)
CHANCE_TOP1_POINTS = 0.05
BUSY_LOAD_PER_CORE = 1.0  # 1-minute load average per usable core above which timings are shared with others
BUSY_STEAL_PCT = 10.0  # CPU steal (% of CPU time taken by the hypervisor) above which the same holds
NOISE_FACTOR = 1.5  # identical configurations further apart than this: the machine, not the setting, moved

_SEEN: list[dict[str, Any]] = []  # the machine load of every run this process made or showed (see observe)


@dataclass(frozen=True)
class Flag:
    """A sanity flag: its kind and a finding (a template over named Numbers, findings.say) stating what was
    seen, so that every number a flag shows is a Number of the answer record, formatted by findings.fmt like
    any other. Plain words (no digit) are taken as a finding without slots; a flag that types a digit is
    refused."""

    kind: str  # diverged | did not learn | no steady state | too few samples | machine busy | noisy machine
    # | stand-in model | settings differ | live plot | MFU above 100% | peak measured busy
    finding: Any  # findings.Finding (words: a finding without slots)
    run: str = ""  # the run folder its numbers were read from, where one run's (machine busy)

    def __post_init__(self):
        if isinstance(self.finding, str):
            object.__setattr__(self, "finding", say(self.finding.replace("{", "{{").replace("}", "}}")))

    @property
    def message(self) -> str:
        return self.finding.plain()

    def numbers(self) -> list:
        return self.finding.numbers()

    def as_dict(self) -> dict[str, Any]:
        """As the answer record holds it: the plain message, its html (each number in its slot) and its
        Numbers."""
        return {
            "kind": self.kind,
            "message": self.message,
            "html": self.finding.html(),
            "numbers": [asdict(n) for n in self.numbers()],
            "run": self.run,
        }


def _prefix(label: Any) -> str:
    """The start of the names of a flag's Numbers about one setting of a sweep ('adam: loss at the end')."""
    text = label.plain() if isinstance(label, Finding) else str(label or "")
    return f"{text}: " if text else ""


def _label(label: Any) -> Finding:
    """'adam: ' before a flag about one setting of a sweep: a word, a name (an Ident where it holds digits
    that are no quantity: 'resnet18_adjusted'), or a Finding whose numbers are Numbers ('{n} workers')."""
    if isinstance(label, Finding):
        return say("{label}: ", label=label)
    if not label:
        return say("")
    return say("{label}: ", label=Ident(label) if stray_digits(label) else label)


def chance_loss(num_classes: int) -> float:
    """Cross-entropy of a uniform guess: ln(classes) (2.30 for CIFAR-10)."""
    return math.log(num_classes)


def diverged(
    losses: Sequence[float], num_classes: int, margin: float = DIVERGE_MARGIN, label: str = ""
) -> Flag | None:
    """'diverged' when the loss ends above chance + margin or is not finite; `label` names the setting of a
    sweep (its Numbers are named after it, one flag per setting)."""
    vals = [float(x) for x in losses]
    if not vals:
        return None
    if any(not math.isfinite(v) for v in vals):
        return Flag(
            "diverged", say("{label}the loss became NaN or infinite: training diverged", label=_label(label))
        )
    tail = vals[-max(1, len(vals) // 5) :]
    end = sum(tail) / len(tail)
    limit = chance_loss(num_classes) + margin
    if end > limit:
        p = _prefix(label)
        return Flag(
            "diverged",
            say(
                "{label}the loss at the end ({end}, mean of the last {k} batches) is above chance level "
                "ln({classes}) = {chance} + {margin}: training is diverging or has not settled, so its "
                "losses and accuracies are not results",
                label=_label(label),
                end=beside(Number(f"{p}loss at the end", end, "", "measured", n=len(tail)), limit),
                k=Number(
                    f"{p}batches at the end", len(tail), "", "counted", source="the last fifth of the batches"
                ),
                classes=Number(
                    f"{p}classes", int(num_classes), "", "counted", source="the dataset's classes"
                ),
                chance=Number(
                    f"{p}chance loss", chance_loss(num_classes), "", "predicted", source="ln(classes)"
                ),
                margin=Number("divergence margin", margin, "", "setting", source="sanity.DIVERGE_MARGIN"),
            ),
        )
    return None


def did_not_learn(
    epoch_losses: Sequence[float], epoch_top1: Sequence[float], num_classes: int
) -> Flag | None:
    """'did not learn' when, after two epochs or more, the last epoch's mean loss is still within
    CHANCE_MARGIN of ln(classes) (or above it) and its top-1 (a fraction, where measured) is at chance too
    (chance_top1). None before the second epoch, and for a loss that is not finite (that run diverged: its own
    flag)."""
    losses, top1 = [float(x) for x in epoch_losses], [float(x) for x in epoch_top1]
    if len(losses) < 2 or not math.isfinite(losses[-1]):
        return None
    return _not_learned(len(losses), losses[-1], top1[-1] if top1 else math.nan, num_classes)


def chance_top1(num_classes: int) -> float:
    """The top-1 (a fraction) at or below which a run is at chance: CHANCE_TOP1 / classes, and no more than
    CHANCE_TOP1_POINTS above 1 / classes."""
    return min(CHANCE_TOP1 / num_classes, 1 / num_classes + CHANCE_TOP1_POINTS)


def _limit_numbers(
    num_classes: int, loss: float = math.nan, top1: float = math.nan, label: Any = ""
) -> tuple[Number, Number]:
    """The rule's loss limit and top-1 limit (in %) as Numbers, named after `label` where a sweep's run is
    flagged. Beside a run's last `loss` and `top1` (a fraction), where known, each limit shows the digits that
    put it, as the page prints it, on its side of that value ('loss 2.19 ... at or above 2.187' for a loss of
    2.1878 against 2.18746, not '... at or above 2.19')."""
    p = _prefix(label)
    loss_limit = Number(
        f"{p}did not learn: loss limit",
        (1 - CHANCE_MARGIN) * chance_loss(num_classes),
        "",
        "setting",
        source="(1 - sanity.CHANCE_MARGIN) x ln(classes)",
    )
    top1_limit = Number(
        f"{p}did not learn: top-1 limit",
        100 * chance_top1(num_classes),
        "%",
        "setting",
        source="sanity.chance_top1: min(1.5 / classes, 1 / classes + 5 points)",
    )
    if math.isfinite(loss):
        loss_limit = beside(loss_limit, loss)
    if math.isfinite(top1):
        top1_limit = beside(top1_limit, 100 * top1)
    return loss_limit, top1_limit


def chance_rule(
    num_classes: int,
    top1: bool = True,
    chance: Number | None = None,
    limits: tuple[Number, Number] | None = None,
) -> Finding:
    """The one rule by which a run is at chance, said the same way wherever a page states it (the 'did not
    learn' flag, the answers that read its record): 'loss at or above 2.19, within 5% of the chance loss
    ln(10) = 2.3; top-1 at or below 15%' for CIFAR-10 (CHANCE_MARGIN, chance_top1); the loss's part alone
    where no top-1 was measured (`top1` False). `chance`: the chance loss as the caller's answer names it
    (its own Number), else the flag's ('did not learn: chance loss', a name no answer's Number takes).
    `limits`: the two limits as a run's epoch is set beside them (_limit_numbers), else at own digits."""
    chance = chance or Number(
        "did not learn: chance loss", chance_loss(num_classes), "", "predicted", source="ln(classes)"
    )
    loss_limit, top1_limit = limits or _limit_numbers(num_classes)
    return say(
        "loss at or above {limit}, within {margin} of the chance loss ln({classes}) = {chance}"
        + ("; top-1 at or below {top1}" if top1 else ""),
        limit=loss_limit,
        margin=Number(
            "did not learn: chance margin", 100 * CHANCE_MARGIN, "%", "setting", source="sanity.CHANCE_MARGIN"
        ),
        classes=Number(
            "did not learn: classes", int(num_classes), "", "counted", source="the dataset's classes"
        ),
        chance=chance,
        **({"top1": top1_limit} if top1 else {}),
    )


def _epoch_numbers(
    epoch: int, loss: float, top1: float, limits: tuple[Number, Number], label: Any = ""
) -> tuple[Number, Number, Number | None]:
    """What one epoch of a run ended at (its number, mean loss and top-1), as Numbers named after `label` (the
    setting of a sweep it ran, where there is one), the loss and top-1 showing their side of the rule's
    `limits` as the page prints them (_limit_numbers); no top-1 Number where it was not measured (nan)."""
    p = _prefix(label)
    epoch_n = Number(f"{p}did not learn: epoch", int(epoch), "", "counted", source="the run's epochs")
    loss_n = Number(
        f"{p}did not learn: last epoch's loss",
        loss,
        "",
        "measured",
        n=1,
        source="epochs.csv: the epoch's mean",
    )
    loss_n = beside(loss_n, limits[0])
    if not math.isfinite(top1):
        return epoch_n, loss_n, None
    top1_n = Number(
        f"{p}did not learn: last epoch's top-1",
        100 * top1,
        "%",
        "measured",
        n=1,
        source="epochs.csv: the epoch's",
    )
    return epoch_n, loss_n, beside(top1_n, limits[1])


def _chance_seen(
    epoch: int, loss: float, top1: float, limits: tuple[Number, Number], label: Any = ""
) -> tuple[Number, Finding]:
    """(the epoch's Number, 'its loss 2.3 and top-1 14.5%'): _epoch_numbers said as a phrase."""
    epoch_n, loss_n, top1_n = _epoch_numbers(epoch, loss, top1, limits, label)
    if top1_n is None:
        return epoch_n, say("its loss {loss}", loss=loss_n)
    return epoch_n, say("its loss {loss} and top-1 {top1}", loss=loss_n, top1=top1_n)


def _at_chance(loss: float, top1: float, num_classes: int) -> bool:
    """The rule (chance_rule): the loss at chance, and the top-1 at chance too where it was measured; a loss
    near chance beside a top-1 well above it (or the reverse) is a run that learned something."""
    loss_stuck = math.isfinite(loss) and loss >= (1 - CHANCE_MARGIN) * chance_loss(num_classes)
    return loss_stuck and (not math.isfinite(top1) or top1 <= chance_top1(num_classes))


def _not_learned(epoch: int, loss: float, top1: float, num_classes: int, label: Any = "") -> Flag | None:
    """The 'did not learn' flag of a run whose epoch `epoch` ended at `loss` and `top1` (a fraction), its
    numbers named Numbers (named after `label`, the setting of a sweep it ran, where there is one) and the
    rule stated with them (chance_rule); None unless its loss is at chance and its top-1 too (where it was
    measured)."""
    if not _at_chance(loss, top1, num_classes):
        return None
    top1_known = math.isfinite(top1)
    limits = _limit_numbers(num_classes, loss, top1, label)
    epoch_n, seen = _chance_seen(epoch, loss, top1, limits, label)
    return Flag(
        "did not learn",
        say(
            "{label}after epoch {epoch} {seen} "
            + ("are" if top1_known else "is")
            + " still at chance"
            + ("" if top1_known else ", its top-1 not measured")
            + " ({rule}): the run did not learn, so its losses and accuracies say nothing about the setting "
            "it ran",
            label=_label(label),
            epoch=epoch_n,
            seen=seen,
            rule=chance_rule(num_classes, top1=top1_known, limits=limits),
        ),
    )


def chance_note(
    epoch_losses: Sequence[float], epoch_top1: Sequence[float], num_classes: int, last_epoch: int
) -> Finding | None:
    """What a training run may say mid-run, from its second epoch on, when its latest epoch is at chance by
    the rule (the same test as did_not_learn): an observation that its last epoch (`last_epoch`) confirms or
    withdraws, never the decision, which is the record's at the run's end (did_not_learn over the last
    epoch). None where the latest epoch is not at chance, or is the last."""
    losses, top1 = [float(x) for x in epoch_losses], [float(x) for x in epoch_top1]
    if len(losses) < 2 or len(losses) >= last_epoch or did_not_learn(losses, top1, num_classes) is None:
        return None
    acc = top1[-1] if top1 else math.nan
    limits = _limit_numbers(num_classes, losses[-1], acc)
    epoch_n, seen = _chance_seen(len(losses), losses[-1], acc, limits)
    return say(
        "after epoch {epoch} {seen} "
        + ("are" if math.isfinite(acc) else "is")
        + " at chance ({rule}); whether the run learned is decided after its last epoch, epoch {last}",
        epoch=epoch_n,
        seen=seen,
        rule=chance_rule(num_classes, top1=math.isfinite(acc), limits=limits),
        last=Number("did not learn: the run's last epoch", int(last_epoch), "", "setting", source="epochs"),
    )


def chance_left(
    epoch_losses: Sequence[float], epoch_top1: Sequence[float], num_classes: int, noted: int
) -> Finding:
    """What a run says at its end when a mid-run note (chance_note, after epoch `noted`) found it at chance
    and its last epoch is not (did_not_learn is None): which of its loss and top-1 left chance, by the rule,
    and that the note is withdrawn and the record holds no did_not_learn."""
    losses, top1 = [float(x) for x in epoch_losses], [float(x) for x in epoch_top1]
    acc = top1[-1] if top1 else math.nan
    loss_off = not losses[-1] >= (1 - CHANCE_MARGIN) * chance_loss(num_classes)
    top1_off = math.isfinite(acc) and acc > chance_top1(num_classes)
    limits = _limit_numbers(num_classes, losses[-1], acc)
    epoch_n, loss_n, top1_n = _epoch_numbers(len(losses), losses[-1], acc, limits)
    if loss_off and top1_off:
        off = say("its loss {loss} and top-1 {top1} are past the rule's limits", loss=loss_n, top1=top1_n)
    elif top1_off:
        off = say("its top-1 {top1} is above the rule's limit", top1=top1_n)
    else:
        off = say("its loss {loss} is below the rule's limit", loss=loss_n)
    return say(
        "the note after epoch {noted} is withdrawn: after epoch {epoch} {off} ({rule}), so the run is no "
        "longer at chance, and meta.json records no did_not_learn",
        epoch=epoch_n,
        off=off,
        rule=chance_rule(num_classes, top1=math.isfinite(acc), limits=limits),
        noted=Number(
            "did not learn: epoch of the note", int(noted), "", "counted", source="the run's epochs"
        ),
    )


def chance_noted(epoch_losses: Sequence[float], epoch_top1: Sequence[float], num_classes: int) -> int:
    """The epoch after which a run of these epochs said its mid-run note (chance_note: the first epoch from
    the second on, before the last, that was at chance), or 0: decided from the epochs alone, so the run's
    end knows what it said without keeping a state."""
    losses, top1 = list(epoch_losses), list(epoch_top1)
    for k in range(2, len(losses)):
        if did_not_learn(losses[:k], top1[:k], num_classes) is not None:
            return k
    return 0


def at_chance(losses: Sequence[float], num_classes: int, margin: float = CHANCE_MARGIN) -> bool:
    """The loss at the end is not clearly below chance level (within `margin` of it, or above it): the network
    has learned nothing yet. A loss above chance is no sign of learning (it was read as one: memory's "only
    resnet got below chance" for a ResNet at 2.43 against 2.30)."""
    vals = [float(x) for x in losses if math.isfinite(float(x))]
    if not vals:
        return False
    tail = vals[-max(1, len(vals) // 5) :]
    return sum(tail) / len(tail) >= (1 - margin) * chance_loss(num_classes)


def learning_flag(meta: Mapping | None, label: Any = "") -> Flag | None:
    """The run's own 'did not learn' record (meta.json, written by training with did_not_learn) as its flag,
    its numbers those the record holds; `label` names the setting of a sweep the run was (its Numbers are
    named after it, one flag per setting)."""
    rec = (meta or {}).get("did_not_learn")
    if not isinstance(rec, Mapping):
        return None
    try:
        epoch, loss, acc, classes = (
            int(rec["epoch"]),
            float(rec["loss"]),
            float(rec["acc"]),
            int(rec["classes"]),
        )
    except (KeyError, TypeError, ValueError):  # a record of another shape: said without numbers
        return Flag(
            "did not learn",
            say(
                "{label}the run recorded that it did not learn (meta.json's did_not_learn)",
                label=_label(label),
            ),
        )
    return _not_learned(epoch, loss, acc, classes, label)


def trend(
    epoch_seconds: Sequence[float], step: float = 0.10, overall: float = 0.25, label: str = ""
) -> Flag | None:
    """Epoch times after the warm-up epoch that keep moving in one direction are no steady state."""
    v = [float(x) for x in epoch_seconds][1:]
    if len(v) < 2:
        return None
    if len(v) == 2:  # one step is a trend only when it is large: two noisy epochs differ by chance
        overall = max(overall, 1.0)
    up = all(b > a * (1 + step) for a, b in zip(v, v[1:])) and v[-1] > v[0] * (1 + overall)
    down = all(b < a / (1 + step) for a, b in zip(v, v[1:])) and v[-1] < v[0] / (1 + overall)
    if up or down:
        p = _prefix(label)
        # epoch 1 apart: it is not part of the trend and may go either way
        seq = join(
            [
                say("{t}", t=Number(fmt_in("{p}epoch {i} time", p=p, i=i), x, "s", "measured", n=1))
                for i, x in enumerate(v, 2)
            ],
            " -> ",
        )
        return Flag(
            "no steady state",
            say(
                "{label}epoch times after the warm-up epoch {way} ({seq}; epoch one: {first}): there is "
                "no steady state to summarise; the median describes no typical epoch",
                label=_label(label),
                # two epochs make one move, not a course (grade39a: "keep growing" of 0.302 s -> 0.706 s)
                way=("keep growing" if up else "keep shrinking")
                if len(v) > 2
                else ("more than doubled" if up else "more than halved"),
                seq=seq,
                first=Number(f"{p}epoch 1 time", float(epoch_seconds[0]), "s", "measured", n=1),
            ),
        )
    return None


# the counted nouns too_few's callers name, each with its form for a count of one ("only 1 cpu epoch")
_ONE = {"epochs": "epoch", "passes": "pass", "batches": "batch", "repeats": "repeat", "values": "value"}


def too_few(n: int, what: str = "values") -> Flag | None:
    if n < MIN_SAMPLES:
        said = " ".join(_ONE.get(w, w) for w in what.split()) if int(n) == 1 else what
        return Flag(
            "too few samples",
            say(
                # grade27a: "no spread ... none is shown" beside a table's min and max columns
                "only {n} {what}: a median of fewer than {min} has no interquartile range to show, so none "
                "is shown (a min and a max, where a table gives them, are the values themselves); treat the "
                "median as those few observations, not a typical value",
                n=Number(f"samples: {what}", int(n), "", "counted", source="counted in the results"),
                what=said,
                min=Number(
                    "samples needed for a spread", MIN_SAMPLES, "", "setting", source="sanity.MIN_SAMPLES"
                ),
            ),
        )
    return None


# The CPU-time counters of this process's last steal sample: (monotonic time, /proc/stat's cpu line).
_LAST_STAT: tuple[float, list[int]] | None = None
STEAL_WINDOW_MAX_S = 60.0  # an older last sample is not "just before the run": a fresh one is taken


def load_now() -> float | None:
    """The machine's 1-minute load average now, or None where the system gives none: what a study records
    after each round of a comparison (machine_load reads it with the cores and the steal share)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def machine_load(sample_s: float = 0.1, run: str = "", seen: bool = True) -> dict[str, Any]:
    """Load average, usable cores and the CPU steal share over at least `sample_s` before now (Linux
    /proc/stat). The steal window is the time since this process's previous sample where that is between
    sample_s and STEAL_WINDOW_MAX_S old (the run before, in a sweep: no wait), else a wait of sample_s;
    `steal_window_s` says which it was. `run`: the folder of the run it is read for (results.new_meta), so
    that a busy flag from it names that run. `seen`: whether the page's busy check counts it (observe); a
    reading that is no run's (a peak's measurement) is not."""
    global _LAST_STAT
    out: dict[str, Any] = {"cores": usable_cores()}
    out["load1"] = load_now()

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
    if seen:
        observe(out, run)
    return out


def observe(load: Mapping[str, Any] | None, run: str = "") -> None:
    """Remember one run's machine load (meta.json's `machine`; `run` its folder) so the report that made or
    showed it can say whether the machine was busy (busiest_seen); machine_load() calls it for every run it
    samples."""
    if load:
        _SEEN.append({**dict(load), **({"run": run} if run else {})})


def load_numbers(load: Mapping[str, Any], run: str = "") -> dict[str, Any]:
    """One run's machine load as Numbers of the record, named after its run folder (`run`, or load['run']), so
    that a flag and the environment table that state the same run's load state the same Numbers."""
    run = run or str(load.get("run") or "")
    at = f" before {run}" if run else " before the run"
    src = "read before the run (its meta.json's machine)"
    out: dict[str, Any] = {}
    cores = int(load.get("cores") or 1)
    # each shown on its side of the busy line (a flag sets the two together)
    if load.get("load1") is not None:
        load1 = Number(f"load average{at}", float(load["load1"]), "", "measured", n=1, source=src)
        out["load1"] = beside(load1, cores * BUSY_LOAD_PER_CORE)
    out["cores"] = Number(f"usable cores{at}", cores, "", "counted", source="os.sched_getaffinity")
    if load.get("steal_pct") is not None:
        steal = Number(f"CPU steal{at}", float(load["steal_pct"]), "%", "measured", n=1, source=src)
        out["steal"] = beside(steal, BUSY_STEAL_PCT)
    return out


def load_finding(load: Mapping[str, Any] | None, run: str = "") -> Finding:
    """'load average 3.4 on 2 usable cores, CPU steal 0%': one run's load as the environment table shows it,
    over the Numbers of load_numbers (the busy flag's, when it is the same run)."""
    if not load:
        return say("not recorded")
    x = load_numbers(load, run)
    head = (
        say("load average {load1} on {cores} usable cores", load1=x["load1"], cores=x["cores"])
        if "load1" in x
        else say("load average not recorded, {cores} usable cores", cores=x["cores"])
    )
    return say("{head}, CPU steal {steal}", head=head, steal=x["steal"]) if "steal" in x else head


# the busy lines as the flags state them: one Number each, the same on every flag that names it
BUSY_LIMITS = {
    "load": lambda: Number(
        "busy load per core", BUSY_LOAD_PER_CORE, "", "setting", source="sanity.BUSY_LOAD_PER_CORE"
    ),
    "steal": lambda: Number("busy CPU steal", BUSY_STEAL_PCT, "%", "setting", source="sanity.BUSY_STEAL_PCT"),
}


def busy(load: Mapping[str, Any] | None, run: str = "", runs: int = 0) -> Flag | None:
    """'machine busy' when load per usable core passes BUSY_LOAD_PER_CORE or steal passes BUSY_STEAL_PCT; its
    numbers are the run's (load_numbers: named after `run`, or load['run']); `runs`: how many runs the report
    used, when this is the busiest of several."""
    if not load:
        return None
    run = run or str(load.get("run") or "")
    x = load_numbers(load, run)
    cores = load.get("cores") or 1
    msgs = []
    if "load1" in x and load["load1"] / cores > BUSY_LOAD_PER_CORE:
        limit = BUSY_LIMITS["load"]()
        msgs.append(
            say(
                "load average {load1} on {cores} usable cores, above {limit} per core",
                load1=x["load1"],
                cores=x["cores"],
                limit=limit,
            )
        )
    if "steal" in x and load["steal_pct"] > BUSY_STEAL_PCT:
        msgs.append(say("CPU steal {steal}, above {limit}", steal=x["steal"], limit=BUSY_LIMITS["steal"]()))
    if not msgs:
        return None
    if run and runs > 1:
        which = say(
            "before run {run}, the busiest of the {k} runs this report used",
            run=Ident(run),
            k=Number(
                "runs this report used", int(runs), "", "counted", source="the runs whose load was read"
            ),
        )
    elif run:
        which = say("before run {run}", run=Ident(run))
    else:
        which = say("before the run")
    return Flag(
        "machine busy",
        say(
            "the machine was busy {which} ({msgs}): timings take longer and vary more than on an idle "
            "machine",
            which=which,
            msgs=join(msgs, "; "),
        ),
        run=run,
    )


def busy_peak(fl: Mapping[str, Any] | None, label: str = "") -> Flag | None:
    """'peak measured busy': the measured peak a page's shares divide by (meta.json's `flops`) was measured
    while the machine was busy by busy()'s rule, on the load its measurement recorded (flops.machine: the
    load average read before it, the CPU steal over it); None for a data sheet's peak, an idle measurement,
    or one that recorded no load (the run's own load says nothing of the measurement's: review36). Every
    share of it on the page is uncertain: a peak measured at another load gives another share (grade34a: c2
    said so, c1 and c5 showed shares of the same peak without a word). Its Numbers are named by the peak's
    precision and `label` (a device, where a page has several), so two such flags on one page stay apart; the
    peak's own value is the page's to state (its environment table, its answers), not repeated here."""
    fl = fl or {}
    load = fl.get("machine")
    if not str(fl.get("peak_source", "")).startswith("measured") or not load or busy(load) is None:
        return None
    prec = str(fl.get("precision") or "")
    who = f"{label}: " if label else ""
    src = "the peak's measurement (meta.json's flops.machine)"
    cores = int(load.get("cores") or 1)
    said = []
    if load.get("load1") is not None and load["load1"] / cores > BUSY_LOAD_PER_CORE:
        at = f"before the {prec} peak's measurement"
        said.append(
            say(
                "load average {load1} on {cores} usable cores, above {limit} per core, before it",
                load1=beside(
                    Number(f"{who}load average {at}", float(load["load1"]), "", "measured", n=1, source=src),
                    cores * BUSY_LOAD_PER_CORE,
                ),
                cores=Number(f"{who}usable cores {at}", cores, "", "counted", source=src),
                limit=BUSY_LIMITS["load"](),
            )
        )
    if load.get("steal_pct") is not None and load["steal_pct"] > BUSY_STEAL_PCT:  # read over the measurement
        name = f"{who}CPU steal during the {prec} peak's measurement"
        steal = Number(name, float(load["steal_pct"]), "%", "measured", n=1, source=src)
        said.append(
            say(
                "CPU steal {steal}, above {limit}, during it",
                steal=beside(steal, BUSY_STEAL_PCT),
                limit=BUSY_LIMITS["steal"](),
            )
        )
    return Flag(
        "peak measured busy",
        say(
            ("{label}: " if label else "")
            + "this device's {prec} peak was measured while the machine was busy ({said}): a peak measured "
            "at another load gives another share, so each share of it on this page is uncertain",
            prec=Ident(prec),
            said=join(said, "; "),
            **({"label": Ident(label)} if label else {}),
        ),
    )


def pressure(load: Mapping[str, Any]) -> float:
    """How busy a run's machine was, as a multiple of the busy thresholds (the larger of load and steal)."""
    return max(
        (load.get("load1") or 0) / (load.get("cores") or 1) / BUSY_LOAD_PER_CORE,
        (load.get("steal_pct") or 0) / BUSY_STEAL_PCT,
    )


def busiest_seen(loads: Iterable[Mapping[str, Any] | None] | None = None) -> Flag | None:
    """The busy flag of the busiest of `loads` (default: every run this process observed), or None."""
    seen = [dict(x) for x in (_SEEN if loads is None else loads) if x]
    runs = len({x.get("run") or i for i, x in enumerate(seen)})
    return busy(max(seen, key=pressure), runs=runs) if seen else None


def noise(
    a: Sequence[float], b: Sequence[float], what_a: str, what_b: str, factor: float = NOISE_FACTOR
) -> Flag | None:
    """Two runs of one configuration whose medians are more than `factor` apart: the machine's noise is at
    least that large, so smaller differences between settings on this machine are not results."""
    va, vb = sorted(float(x) for x in a), sorted(float(x) for x in b)
    if not va or not vb:
        return None
    ma, mb = statistics.median(va), statistics.median(vb)
    lo, hi = min(ma, mb), max(ma, mb)
    if lo > 0 and hi / lo > factor:
        return Flag(
            "noisy machine",
            say(
                "{a} and {b} are the same configuration, yet their medians are {ma} and {mb} ({r} apart, "
                "above {factor}): differences smaller than that between settings measured here are noise, "
                "not results",
                a=what_a,
                b=what_b,
                ma=Number(f"{what_a}: median epoch", ma, "s", "measured", n=len(va)),
                mb=Number(f"{what_b}: median epoch", mb, "s", "measured", n=len(vb)),
                r=beside(
                    Number(
                        f"{what_a} against {what_b}: ratio", hi / lo, "x", "measured", n=min(len(va), len(vb))
                    ),
                    factor,
                ),
                factor=Number("noise factor", factor, "x", "setting", source="sanity.NOISE_FACTOR"),
            ),
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


def stand_in(
    cfg,
    lab_model: str = LAB["model"],
    num_classes: int | None = None,
    counts: Mapping[str, int] | None = None,
) -> Flag | None:
    """'stand-in model' naming the model that ran and its parameter count, counted on the model as built for
    this run's classes (`num_classes`, else the config's dataset's). `counts`: where a sweep built several
    networks from the model (C7's with and without BatchNorm), each network's count by its name (from its
    run's record, meta.json's parameters): one count where they agree, else each with its name, so that no
    network is given another's count."""
    if cfg.model == lab_model:
        return None
    from .data import classes_of

    classes = int(num_classes or classes_of(cfg))
    model = Ident(cfg.model) if stray_digits(cfg.model) else cfg.model
    classes_n = Number(f"classes of {cfg.model}", classes, "", "counted", source="the dataset's classes")
    tail = "stands in for the lab's {lab}: its times, memory and accuracies are not the lab model's"
    if counts and len(set(counts.values())) > 1:
        each = [
            say(
                "{n} with {name}",
                n=Number(
                    fmt_in(
                        "parameters of {model} with {name} ({classes} classes)",
                        model=cfg.model,
                        name=name,
                        classes=classes,
                    ),
                    int(n),
                    "",
                    "counted",
                    source="models.count_parameters",
                ),
                name=Ident(name) if stray_digits(name) else name,
            )
            for name, n in counts.items()
        ]
        return Flag(
            "stand-in model",
            say(
                "model {model} (parameters: {each}; for {classes} classes) " + tail,
                model=model,
                each=join(each, ", ", " and "),
                classes=classes_n,
                lab=lab_model,
            ),
        )
    if counts:
        n = int(next(iter(counts.values())))
    else:
        from . import models

        # built as the run built it: its classes, norm and stem (an ImageNet stem has other weights)
        stem = {"stem": cfg.stem} if models.accepts(cfg.model, "stem") else {}
        n = models.count_parameters(models.build(cfg.model, num_classes=classes, norm=cfg.norm, **stem))
    return Flag(
        "stand-in model",
        say(
            "model {model} ({n} parameters, for {classes} classes) " + tail,
            model=model,
            n=Number(
                fmt_in("parameters of {model} ({classes} classes)", model=cfg.model, classes=classes),
                n,
                "",
                "counted",
                source="models.count_parameters",
            ),
            classes=classes_n,
            lab=lab_model,
        ),
    )


def _setting_slot(key: str, value: Any, whose: str) -> Any:
    """A setting's value as a slot: a Number when it is a number, else a word ('all', 'resnet_tiny', 'on')."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (int, float)) and not (key in ("max_batches", "subset") and value == 0):
        src = "this run's settings" if whose == "ran" else "the lab's settings (sanity.LAB)"
        return Number(f"{key} ({whose})", value, "", "setting", source=src)
    text = _show(key, value)
    return Ident(text) if stray_digits(text) else text


def differ(cfg, lab: Mapping[str, Any] = LAB) -> Flag | None:
    """'settings differ', each setting that differs with the value that ran and the lab's, as Numbers of the
    record (the ran-vs-lab table shows the same values)."""
    rows = []
    for key, want in lab.items():
        got = getattr(cfg, key)
        if got != want:
            rows.append(
                say(
                    "{key} {ran} (lab {lab})",
                    key=key,
                    ran=_setting_slot(key, got, "ran"),
                    lab=_setting_slot(key, want, "lab"),
                )
            )
    if not rows:
        return None
    return Flag("settings differ", say("settings differ from the lab's: {rows}", rows=join(rows, ", ")))


def above_peak(shares: Sequence[Number], peak: Number | None) -> Flag | None:
    """'MFU above 100%' when any of `shares` (Numbers in %, each named for what reached it) passed the whole
    of a measured peak: that peak (the best of a few matrix products on this machine) was measured low, a busy
    machine or oversubscribed threads slowing it, and is no bound, so no share of it on the page can be read.
    A data-sheet peak cannot be passed; None where none passed it."""
    over = [s for s in shares if isinstance(s.value, (int, float)) and s.value > 100]
    if not over:
        return None
    top = max(over, key=lambda s: s.value)
    of_peak = say(" of the measured {peak}", peak=peak) if peak is not None else ""
    return Flag(
        "MFU above 100%",
        say(
            "{k} ran at more FLOP/s than this device's measured peak (up to {top}{of_peak}): that peak was "
            "measured low, so it is no bound and no share of it on this page can be read",
            k=join([say("{n}", n=Ident(s.name.split(":")[0])) for s in over], ", ", " and "),
            top=top,
            of_peak=of_peak,
        ),
    )


def run_flags(
    cfg,
    losses: Iterable[float] = (),
    epoch_seconds: Sequence[float] = (),
    meta: Mapping | None = None,
    num_classes: int = 10,
    lab: Mapping[str, Any] = LAB,
    label: str = "",
) -> list[Flag]:
    """Every flag that applies to one run (or one configuration of a sweep, named by `label`)."""
    meta_run = str((meta or {}).get("run_id") or "")
    flags = [
        diverged(list(losses), num_classes, label=label),
        learning_flag(meta),
        trend(epoch_seconds, label=label),
        busy((meta or {}).get("machine"), run=meta_run),
        stand_in(cfg, lab.get("model", LAB["model"]), num_classes),
    ]
    if flags[0] is not None:  # a diverged run: that flag says it; "did not learn" would repeat it
        flags[1] = None
    # what the run did (meta.json: a reused run may have been made with other progress settings), else the
    # config
    drew = meta.get("progress") == "plot" if meta is not None else getattr(cfg, "progress", None) == "plot"
    if drew:
        flags.append(
            Flag(
                "live plot",
                "a live plot was drawn during the epochs (progress=plot): its redraws count "
                "in total_s, and DataLoader workers prefetch meanwhile, so data_s can be lower",
            )
        )
    flags.append(differ(cfg, lab))
    return [f for f in flags if f is not None]
