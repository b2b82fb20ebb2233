"""What the speed ladder concludes: first, on whole epochs (the lab asks for training time), the rung with the
shortest epoch against the baseline's and how much of the device's one peak that epoch used (MFU); then per
rung a verdict against the rung before it, how far the project's whole epoch is from the plain script's at
the same settings, and how far the shortest epoch is from the course's own lab2.py run as written (on a GPU).

    from hpml_lab.studies.speed import conclude
    answers, flags = conclude(cfg, result)      # result: study.Ladder

Every comparison is a verdict (hpml_lab.verdict.compare, told that the samples were interleaved and the load
of each round) on the seconds of whole epochs (the first answer, the plain script's, and each rung's where
its epochs can decide) or the images/s of the timed runs (each rung's, beside its epochs' or alone), stated
by Verdict.finding: a rung that ran slower than the one before on the one measure and not faster on the
other says it was a cost here, a rung the data cannot separate from the one before says this run cannot
tell, and a rung that did not run here says so (why: the answer's `missing`, and the table). Every
number is a named Number of the record (findings.say); the why of each rung is general Background, shown
apart.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ... import sanity
from ...answers import Answer, Number
from ...fastpath import GRAPH_MODES
from ...findings import Background, Finding, Ident, beside, fmt_in, join, say, stray_digits
from ...profiling import summarize
from ...verdict import best, compare, sample_record
from .study import REFERENCE, RUNGS

QUESTION_TOP = "How fast does this machine train, and how far is that from the hardware?"

WHY = {
    "tensor": "A DataLoader worker decodes, crops, flips and normalises one image at a time in Python; a "
    "resident dataset is augmented a whole batch at a time in a few tensor operations, and no worker "
    "process competes with the training step for the CPU.",
    "channels_last": "Convolution libraries (cuDNN on a GPU, oneDNN on a CPU) have kernels tuned for the "
    "NHWC layout, above all for bf16 or fp16 on tensor cores; in fp32 the gain is often small or none.",
    "bf16": "On a GPU with tensor cores bf16 matrix products run at several times the fp32 rate and move "
    "half the bytes. A CPU without bf16 units (AMX, AVX512-BF16) converts and computes slowly, so bf16 "
    "autocast usually takes longer there than fp32.",
    "fp16": "On a GPU without bf16 (a V100), fp16 autocast uses the tensor cores; fp16's narrow exponent "
    "range lets small gradients underflow, so a GradScaler scales the loss and adapts the scale as training "
    "goes.",
    "compile": "torch.compile fuses element-wise work (BatchNorm, ReLU, the residual add) into fewer kernels "
    "and removes Python overhead per operation; it pays a one-off build before its first step, left out of "
    "the timing here.",
    "cuda_graphs": "A CUDA graph records the step's kernels once and replays them with one launch, so the "
    "host's work per kernel (Python, the dispatcher, the launch itself) leaves the step; it needs shapes "
    "and memory addresses that do not change, which static shapes and the compiler's memory pool give.",
    "big_batch": "A larger batch gives every kernel more work, so the fixed costs of a step (kernel "
    "launches, the optimizer step, Python) weigh less per image; the linear scaling rule (Goyal et al.) "
    "multiplies the learning rate by the same factor so that the update per image stays alike, usually with "
    "a warm-up.",
    "bigger_batch": "Doubling the batch again halves the fixed costs per image once more, until the kernels "
    "fill the device; past that the step's time grows with the batch and images/s stops rising.",
}
REFERENCE_WHY = (
    "The plain script (reference.py) trains the same network with the same data, augmentation, precision, "
    "memory format and compile mode in plain torch, and keeps nothing of a run: no per-batch records, no "
    "timers, no progress, no checks. Its epoch against the project's shows what the project's own work per "
    "step costs, together with what differs between the two runs: the script runs in its own process, after "
    "the ladder, so the machine's state (caches, load, clocks) need not be the same."
)
QUESTION_REFERENCE = (
    "How far is the project's epoch from a plain script's at the same settings on this device?"
)
COURSE_WHY = (
    "The course's own training script for this lab is what a student starts from: the same network in "
    "single precision fed by a PIL loader at its default workers and batch, a loop that synchronizes the GPU "
    "after every step and compares each prediction on the host. Its epoch against the ladder's shortest says "
    "what the ladder's changes give together over that code, on this device; it runs in its own process, "
    "after the ladder."
)
QUESTION_COURSE = "How far is the ladder's shortest epoch from the course's own script, run as written here?"
MFU_WHY = (
    "MFU is the model's FLOPs per second over the device's peak for the precision used. A small ResNet on "
    "small images stays far below the peak: many of its kernels are limited by memory bandwidth, not "
    "arithmetic, and every step pays fixed costs that do not grow with the batch."
)


def rungs_only(table: pd.DataFrame) -> pd.DataFrame:
    """The ladder's own rungs, without the outside reference's row."""
    return table[table["rung"] != REFERENCE]


def neighbours(table: pd.DataFrame) -> list[tuple[dict, dict | None]]:
    """(rung, the last measured rung before it) for every rung after the first; None when none before it
    ran."""
    out, prev = [], None
    for i, row in enumerate(rungs_only(table).to_dict("records")):
        if i:
            out.append((row, prev))
        if row["status"] == "measured":
            prev = row
    return out


def label(row: dict) -> Finding | str:
    """The rung's label as a finding: its numbers (workers, batch) are Numbers of the record, its words
    words."""
    if row["rung"] == "pil":
        w = Number("pil: workers", int(row["num_workers"]), "", "setting", source="num_workers")
        return say("PIL loader with {w} worker" + ("" if w.value == 1 else "s"), w=w)
    if row["rung"] in ("big_batch", "bigger_batch"):
        how = "batch_size x batch_factor" + (" x 2" if row["rung"] == "bigger_batch" else "")
        b = Number(f"{row['rung']}: batch size", int(row["batch_size"]), "", "setting", source=how)
        return say("+ batch {b}", b=b)
    return str(row["label"])


class Numbers:
    """Each measured rung's Numbers, made once so that every answer that states one states the same object."""

    def __init__(
        self,
        table: pd.DataFrame,
        samples: dict[str, list[float]],
        epochs: dict[str, list[float]] | None = None,
    ):
        self.rows = {r["rung"]: r for r in table.to_dict("records")}
        self.samples = samples
        self.epochs = epochs or {}

    def epoch(self, rung: str) -> Number:
        return self._get(rung, "epoch")

    def epoch_mfu(self, rung: str) -> Number:
        return self._get(rung, "epoch MFU")

    def epoch_line(self, rung: str, mfu: bool = True) -> Finding:
        """'<label>: a whole epoch of <images> images took <s> (MFU <%> over the epoch).', the MFU left out
        where the record holds none or the answer states it apart (`mfu` False)."""
        r = self.rows[rung]
        images = Number(
            f"{rung}: images an epoch", int(r["epoch_images"]), "", "counted", source="the epoch's batches"
        )
        if not mfu or not np.isfinite(float(r["epoch_mfu"])):  # none in the record, or said apart
            return say(
                "{label}: a whole epoch of {images} images took {e}.",
                label=label(r),
                images=images,
                e=self.epoch(rung),
            )
        # which peak: rungs of different precisions divide by different peaks (a grader read a slower fp32
        # rung's 7.02% beside a bf16 rung's 4.14% as the slower one using more of the device)
        prec = r.get("peak_precision")
        of = f" of this device's {prec} peak" if isinstance(prec, str) and prec else ""
        return say(
            "{label}: a whole epoch of {images} images took {e} (MFU {m}" + of + ", over the epoch).",
            label=label(r),
            images=images,
            e=self.epoch(rung),
            m=self.epoch_mfu(rung),
        )

    def ips(self, rung: str) -> Number:
        return self._get(rung, "images/s")

    def step(self, rung: str) -> Number:
        return self._get(rung, "step")

    def mfu(self, rung: str) -> Number:
        return self._get(rung, "MFU")

    def ideal(self, rung: str) -> Number:
        return self._get(rung, "ideal")

    def _get(self, rung: str, what: str) -> Number:
        key = f"_{rung}_{what}"
        if key not in self.__dict__:
            self.__dict__[key] = self._make(rung, what)
        return self.__dict__[key]

    def _make(self, rung: str, what: str) -> Number:
        r = self.rows[rung]
        if what == "epoch":
            e = self.epochs.get(rung, [])
            iqr = float(r["epoch_iqr_s"]) if len(e) >= sanity.MIN_SAMPLES else None
            return Number(f"{rung}: epoch time", float(r["epoch_s"]), "s", "measured", n=len(e), spread=iqr)
        if what == "epoch MFU":
            n_epochs = len(self.epochs.get(rung, []))
            return Number(
                f"{rung}: MFU over the epoch", 100 * float(r["epoch_mfu"]), "%", "measured", n=n_epochs
            )
        # the rounds' samples; the outside reference has none, its rates coming from its whole epochs (a
        # ladder rung without its rounds' samples is an error, not its epochs' count: review30)
        s = self.epochs.get(rung, []) if rung == REFERENCE else self.samples[rung]
        n = len(s)
        spread = n >= sanity.MIN_SAMPLES
        if what == "images/s":
            iqr = float(r["images_per_s_q3"] - r["images_per_s_q1"]) if spread else None
            return Number(
                f"{rung}: images/s", float(r["images_per_s"]), "images/s", "measured", n=n, spread=iqr
            )
        if what == "step":
            iqr = 1000 * float(r["step_iqr_s"]) if spread else None
            return Number(f"{rung}: step time", 1000 * float(r["step_s"]), "ms", "measured", n=n, spread=iqr)
        if what == "MFU":
            return Number(f"{rung}: MFU", 100 * float(r["mfu"]), "%", "measured", n=n)
        return Number(
            f"{rung}: ideal images/s",
            float(r["ideal_images_per_s"]),
            "images/s",
            "predicted",
            source=f"FLOPs per image at the {r['peak_precision']} peak ({r['peak_source']})",
        )

    def line(self, rung: str) -> Finding:
        """'<label>: <images/s>, step <ms>, MFU <%> of the <precision> peak (ideal <images/s>)'."""
        return say(
            "{label}: {ips}, step {step}, MFU {mfu} of the {prec} peak (ideal {ideal}).",
            label=label(self.rows[rung]),
            ips=self.ips(rung),
            step=self.step(rung),
            mfu=self.mfu(rung),
            prec=str(self.rows[rung]["peak_precision"]),
            ideal=self.ideal(rung),
        )


def _loads(meta: dict) -> list[float]:
    """The machine's load average per core after each timed round (the rounds interleave every rung): the
    readings after the untimed warm-up rounds, which the record keeps first, are no sample's (grade24: six
    readings beside five samples)."""
    cores = ((meta.get("load_before") or {}).get("cores")) or 1
    every = list(meta.get("load_per_round") or [])
    warm = int(meta.get("warmup") or 0)
    if warm and len(every) == warm + int(meta.get("repeats") or 0):
        every = every[warm:]
    return [x / cores for x in every if x is not None]


def verdict_of(a: dict, b: dict, samples: dict[str, list[float]], meta: dict, what: str = "images/s"):
    """Rung a's images/s against rung b's (higher is better): 'better' means a has more."""
    loads = _loads(meta)
    return compare(
        samples[a["rung"]],
        samples[b["rung"]],
        str(label(a)),  # as the finding states it
        str(label(b)),
        lower_is_better=False,
        what=what,
        interleaved=True,
        paired=True,  # every rung once per round (study.measure)
        load_a=loads,
        load_b=loads,
    )


def epoch_verdict(a: dict, b: dict, nums: Numbers, meta: dict):
    """Rung a's whole epochs against rung b's (shorter is better): the rungs took turns, one whole epoch of
    every rung per round."""
    loads = _epoch_loads(meta)
    return compare(
        nums.epochs[a["rung"]],
        nums.epochs[b["rung"]],
        str(label(a)),
        str(label(b)),
        what="whole-epoch time",
        interleaved=True,
        paired=True,  # one whole epoch of every rung per round
        load_a=loads,
        load_b=loads,
    )


def _words(reason: str) -> str:
    """Why a rung did not run, as the answer box says it: the reason, unless it states a number (an error's
    version or size), which only the table shows."""
    return reason if not stray_digits(reason) else "a run of this rung (the table says why it did not run)"


def rung_answer(
    row: dict, prev: dict | None, nums: Numbers, meta: dict, device: str, base: dict | None = None
) -> Answer:
    """One rung against the last measured rung before it (`prev`). `base`: the rung before `prev`, when the
    ladder found `prev` slower than it; the answer then says what this rung is measured on top of."""
    question = f"What does {row['change']} buy here?"
    why = [Background(WHY[row["rung"]])] if row["rung"] in WHY else []
    if row["status"] != "measured":
        return Answer(
            question,
            say("{label}: not run here.", label=label(row)),
            [],
            why,
            "not answered",
            _words(str(row["reason"])),
        )
    if prev is None:
        return Answer(
            question,
            say("{label}: no rung before it ran, so there is nothing to compare it with.", label=label(row)),
            [nums.line(row["rung"])],
            why,
            "not answered",
            "the rungs before it did not run",
        )
    (v, kind), other = lead_verdict(row, prev, nums, meta)
    v_name = _verdict_name(row, prev, kind)
    # the headline: the verdict in words (its ratio the one number); the interval and counts: the details
    short = v.short(v_name, label(row), label(prev))
    other_v = other[0] if other else None
    helps_not = v.outcome == "worse" and (other_v is None or other_v.undecided or other_v.outcome != "better")
    # neither measure has the rung faster (review31: not beside epochs that say it is), said in few words, as
    # the cost it is (grade38b: "no gain" understated a rung measured slower): the epochs' verdict names both
    # rungs and its measure (review32: "this rung does not help on this CPU" took a headline past 20 words)
    stated = (
        say("{v}: a cost on this {device}.", v=short, device=device) if helps_not else say("{v}.", v=short)
    )
    said = {
        "epochs": "Over whole epochs, the rungs taking turns round by round: {v}.",
        "steps": "Over the timed rounds of steps: {v}.",
    }
    details = [say(said[kind], v=v.finding(v_name, label(row), label(prev)))]
    record = sample_record(v, *_samples_of(kind, row, prev, nums))
    if other is not None:
        o, o_kind = other
        details.append(
            say(said[o_kind], v=o.finding(_verdict_name(row, prev, o_kind), label(row), label(prev)))
        )
        # a conflict, not a tie beside a direction (review32)
        if {v.outcome, o.outcome} == {"better", "worse"}:
            details.append(
                say(
                    "The two verdicts point opposite ways: a timed round is a few steps at one moment, an "
                    "epoch every step, so the two need not agree."
                )
            )
        record["also"] = {o_kind: sample_record(o, *_samples_of(o_kind, row, prev, nums))}
    # stacked on a rung its own verdict put behind `base`: this one says nothing of `base`
    if base is not None:
        (pv, p_kind), _ = lead_verdict(prev, base, nums, meta)
        details.append(
            say(
                "This rung is measured on top of {prev} ({pv}): it does not show what the rung gives on "
                "{base}.",
                prev=label(prev),
                pv=pv.finding(_verdict_name(prev, base, p_kind), label(prev), label(base)),
                base=label(base),
            )
        )
    details += [nums.line(row["rung"]), nums.line(prev["rung"])]
    return Answer(question, stated.up(), details, why, "answered", verdict=record)


def _verdict_name(a: dict, b: dict, kind: str) -> str:
    """The name a rung verdict's Numbers take: 'tensor vs pil', or 'tensor vs pil: epochs' for the epochs'."""
    return f"{a['rung']} vs {b['rung']}" + (": epochs" if kind == "epochs" else "")


def lead_verdict(a: dict, b: dict, nums: Numbers, meta: dict) -> tuple[tuple, tuple | None]:
    """((verdict, kind), (other verdict, its kind) or None) of rung a against rung b: their whole epochs
    ('epochs') lead where both have timed epochs that can decide (the lab's measure, training time, as the top
    answer: grade27b), else their timed rounds' images/s ('steps'); the other beside it. One choice for a
    rung's answer and for the note on the rung stacked on it (review32)."""
    steps = verdict_of(a, b, nums.samples, meta)
    epochs = (
        epoch_verdict(a, b, nums, meta) if nums.epochs.get(a["rung"]) and nums.epochs.get(b["rung"]) else None
    )
    if epochs is not None and not epochs.undecided:
        return (epochs, "epochs"), (steps, "steps")
    return (steps, "steps"), ((epochs, "epochs") if epochs is not None else None)


def _samples_of(kind: str, a: dict, b: dict, nums: Numbers) -> tuple[list[float], list[float]]:
    """Two rungs' samples of one kind: their rounds' images/s ('steps') or their whole epochs' seconds."""
    held = nums.epochs if kind == "epochs" else nums.samples
    return held[a["rung"]], held[b["rung"]]


def _epoch_loads(meta: dict) -> list[float]:
    """The machine's load average per core after each round of whole epochs (the rungs take turns in each)."""
    cores = ((meta.get("load_before") or {}).get("cores")) or 1
    return [x / cores for x in meta.get("load_epochs") or [] if x is not None]


def peak_said(row: dict, nums: Numbers) -> Finding:
    """How far a rung's whole epoch is from the hardware: its MFU over the epoch against the device's peak for
    its precision, the one peak this device has (flops.peak: a data sheet's, else measured once on this
    machine and kept in results/device-peaks.json for every task), stated as every page states it
    (flops.peak_number); "can't tell" where no peak or no epoch MFU is in the record."""
    from ... import flops

    rung, prec = str(row["rung"]), row.get("peak_precision")
    prec = prec if isinstance(prec, str) else ""  # a row read back without one holds NaN
    pk = float(row.get("peak_tflops") or float("nan"))
    mfu = float(row.get("epoch_mfu") or float("nan"))
    if not (np.isfinite(pk) and pk > 0 and prec) or not np.isfinite(mfu):
        return say(
            "This run can't tell how far {label} is from the hardware: the record holds no "
            + ("{prec} peak" if prec else "peak for its precision")
            + " of this device, so no MFU.",
            label=label(row),
            **({"prec": prec} if prec else {}),
        )
    fl = {"precision": prec, "peak_tflops": pk, "peak_source": str(row.get("peak_source") or "")}
    return say(
        "Over its whole epoch, {label} used {m} of this device's {prec} peak of {peak} (its MFU).",
        label=label(row),
        m=nums.epoch_mfu(rung),
        prec=prec,
        peak=flops.peak_number(fl),
    )


def top_answer(table: pd.DataFrame, nums: Numbers, meta: dict) -> Answer:
    """The lab's question in training time: the rung whose whole epochs were the shortest against the
    baseline's, by a verdict on the epochs' seconds (the rungs took turns, round by round), and how far that
    epoch is from the device's peak (MFU). Where fewer than two rungs have timed epochs, the same on the
    images/s of the timed rounds of steps, said to be per step."""
    rows = {k: r for k, r in nums.rows.items() if k != REFERENCE}
    measured = [k for k in rows if rows[k]["status"] == "measured"]
    if not measured:
        return Answer(QUESTION_TOP, say("No rung ran."), status="not answered", missing="every rung")
    timed = [k for k in measured if nums.epochs.get(k)]
    if len(timed) >= 2 and measured[0] in timed:
        return _top_on_epochs(rows, timed, nums, meta)
    return _top_on_steps(rows, measured, nums, meta)


def _top_on_epochs(rows: dict, timed: list[str], nums: Numbers, meta: dict) -> Answer:
    loads = _epoch_loads(meta)
    what = "whole-epoch time"
    b = best(
        {k: nums.epochs[k] for k in timed},
        lower_is_better=True,
        what=what,
        interleaved=True,
        paired=True,  # one whole epoch of every rung per round
        load_a=loads,
        load_b=loads,
    )
    top, base = rows[b.label], rows[timed[0]]

    def against(k: str):  # the best epoch's verdict against rung k's, stated with its numbers
        return b.verdicts[k].finding(f"top epoch: {b.label} vs {k}", label(top), label(rows[k]))

    if top["rung"] == base["rung"]:  # no later rung has a shorter median epoch: the nearest one
        near = min((k for k in timed if k != b.label), key=lambda k: float(np.median(nums.epochs[k])))
        v, shown = b.verdicts[near], near
        headline = say("No rung after the baseline shortened the whole epoch by what this run can tell.")
        full = say("{v}.", v=against(near).up())
    else:
        v = epoch_verdict(top, base, nums, meta)
        name, shown = f"top epoch: {top['rung']} vs {base['rung']}", base["rung"]
        headline = say("{v}.", v=v.short(name, label(top), label(base)).up())
        full = say("{v}.", v=v.finding(name, label(top), label(base)).up())
    details = [full, peak_said(top, nums), nums.epoch_line(top["rung"], mfu=False), nums.epoch_line(shown)]
    tied = [k for k in b.tied if k not in (b.label, shown)]
    details += [against(k) for k in tied]
    # every other verdict the answer states, with its samples: anyone can recompute it from the record
    also = {
        f"top epoch vs {k}": sample_record(b.verdicts[k], nums.epochs[b.label], nums.epochs[k]) for k in tied
    }
    if shown in nums.samples and top["rung"] in nums.samples and top["rung"] != shown:
        step = verdict_of(
            top, rows[shown], nums.samples, meta, what="images/s over the timed rounds of steps"
        )
        # why the two ratios differ, from the record: each rung's images/s over its rounds and its epochs (a
        # grader: PIL's 2-step rounds ran at 706 images/s, its whole epochs at 927 to 1,047)
        details.append(
            say(
                "Per step, not per epoch: {v}. The rates behind the two ratios: {a} ran at {ar} over its "
                "timed rounds and {ae} over its whole epochs, {b} at {br} and {be}; a timed round is a few "
                "steps at one moment, an epoch every step, so the two ratios need not agree.",
                v=step.finding(f"top per step: {top['rung']} vs {shown}", label(top), label(rows[shown])),
                a=label(top),
                ar=nums.ips(top["rung"]),
                ae=epoch_rate(rows[top["rung"]], nums),
                b=label(rows[shown]),
                br=nums.ips(shown),
                be=epoch_rate(rows[shown], nums),
            )
        )
        also["per step"] = sample_record(step, nums.samples[top["rung"]], nums.samples[shown])
    record = sample_record(v, nums.epochs[top["rung"]], nums.epochs[shown])
    if also:
        record["also"] = also
    return Answer(QUESTION_TOP, headline, details, [Background(MFU_WHY)], "answered", verdict=record)


def epoch_rate(row: dict, nums: Numbers) -> Number:
    """A rung's images per second over its whole epochs: its epoch's images over its median epoch time."""
    e = nums.epoch(str(row["rung"]))
    return Number(
        fmt_in("{rung}: images/s over its epochs", rung=row["rung"]),
        float(row["epoch_images"]) / e.value,
        "images/s",
        "measured",
        n=e.n,
        source="images an epoch / median epoch time",
    )


def _top_on_steps(rows: dict, measured: list[str], nums: Numbers, meta: dict) -> Answer:
    what = "images/s over the timed rounds of steps"
    loads = _loads(meta)
    b = best(
        {k: nums.samples[k] for k in measured},
        lower_is_better=False,
        what=what,
        interleaved=True,
        paired=True,  # every rung once per round (study.measure)
        load_a=loads,
        load_b=loads,
    )
    top, base = rows[b.label], rows[measured[0]]
    if len(measured) == 1:
        headline = say("Only {label} ran: there is nothing to compare it with.", label=label(top))
        return Answer(QUESTION_TOP, headline, [nums.line(top["rung"])], [Background(MFU_WHY)], "answered")

    def against(k: str):  # the best rung's verdict against rung k, stated with its numbers
        return b.verdicts[k].finding(f"top: {b.label} vs {k}", label(top), label(rows[k]))

    if top["rung"] == base["rung"]:  # no later rung has a higher median: compare with the nearest one
        near = max((k for k in measured if k != b.label), key=lambda k: float(np.median(nums.samples[k])))
        v = b.verdicts[near]
        headline = say("No rung after the baseline added images/s per step that this run can tell.")
        full = say("{v}.", v=against(near).up())
        shown = near
    else:
        v = verdict_of(top, base, nums.samples, meta, what=what)
        name = f"top: {top['rung']} vs {base['rung']}"
        headline = say("{v}.", v=v.short(name, label(top), label(base)).up())
        full = say("{v}.", v=v.finding(name, label(top), label(base)).up())
        shown = base["rung"]
    details = [
        full,
        say("No whole epoch of these rungs was timed, so this compares steps, not epochs."),
        nums.line(top["rung"]),
        nums.line(shown),
    ]
    # every other rung the best cannot be told apart from, each by its own verdict (a tie is the verdict's
    # word)
    details += [against(k) for k in b.tied if k not in (b.label, shown)]
    record = sample_record(v, nums.samples[top["rung"]], nums.samples[shown])
    return Answer(QUESTION_TOP, headline, details, [Background(MFU_WHY)], "answered", verdict=record)


# how the outside runs were sampled, said beside their verdicts: one after the other, not interleaved
SEQUENTIAL_REST = (
    " interleaved with them, so the verdict decides only where the machine's load during each stayed within "
    "its rule."
)
SEQUENTIAL_SCRIPT = say(
    "The plain script ran in its own process after the ladder's epochs, not" + SEQUENTIAL_REST
)


def reference_answer(nums: Numbers, meta: dict) -> Answer:
    """The whole epoch of the rung the plain script mirrors (the last rung that ran: its batch, learning rate,
    precision and compile mode are the script's) against the script's, on epoch time: a verdict on runs made
    one after the other (the script ran after the rungs' epochs), told the machine's load during each. A rung
    at other settings would compare the settings, not the project's own work per step."""
    ref = nums.rows.get(REFERENCE)
    background = [Background(REFERENCE_WHY)]
    if ref is None or ref["status"] != "measured":
        why = _words(str(ref["reason"])) if ref is not None else "the plain script's run"
        return Answer(
            QUESTION_REFERENCE, say("The plain script did not run here."), [], background, "not answered", why
        )
    timed = [
        k for k, r in nums.rows.items() if k != REFERENCE and r["status"] == "measured" and nums.epochs.get(k)
    ]
    if not timed:
        return Answer(
            QUESTION_REFERENCE,
            say("No rung's whole epoch was timed, so there is nothing to set beside the plain script's."),
            [nums.epoch_line(REFERENCE)],
            background,
            "not answered",
            "a whole epoch of a rung",
        )
    mirrored = (meta.get("reference") or {}).get("rung")
    if mirrored is None:  # a record from before the script named its rung: the ladder's last that was timed
        order = {**{r: i for i, r in enumerate(RUNGS)}, "fp16": RUNGS.index("bf16")}
        mirrored = max(timed, key=lambda k: order.get(k, -1))
    if mirrored not in timed:
        return Answer(
            QUESTION_REFERENCE,
            say("The rung the plain script mirrors has no timed whole epoch to set beside the script's."),
            [nums.epoch_line(REFERENCE)],
            background,
            "not answered",
            "a whole epoch of the rung at the script's settings",
        )
    fast = mirrored
    cores = ((meta.get("load_before") or {}).get("cores")) or 1
    loads = meta.get("load_epochs") or []
    ref_loads = (meta.get("reference") or {}).get("loads") or []
    v = compare(
        nums.epochs[fast],
        nums.epochs[REFERENCE],
        str(label(nums.rows[fast])),
        "the plain script",
        what="epoch time",
        interleaved=False,
        load_a=[x / cores for x in loads if x is not None],
        load_b=[x / cores for x in ref_loads if x is not None],
    )
    name, a = "same-settings epoch vs plain script", label(nums.rows[fast])
    # the verdict in words first; its interval, counts and the two epochs in the details
    details = [
        say("{v}.", v=v.finding(name, a, "the plain script")).up(),
        SEQUENTIAL_SCRIPT,
        nums.epoch_line(fast),
        nums.epoch_line(REFERENCE),
    ]
    record = sample_record(v, nums.epochs[fast], nums.epochs[REFERENCE])
    return Answer(
        QUESTION_REFERENCE,
        say("{v}.", v=v.short(name, a, "the plain script")).up(),
        details,
        background,
        "answered",
        verdict=record,
    )


def _course() -> Finding:
    """'the course's lab2.py': its file name a name, not a number."""
    return say("the course's {script}", script=Ident("lab2.py"))


def course_answer(nums: Numbers, meta: dict) -> Answer:
    """The ladder's shortest whole epoch against the course's lab2.py's epochs after its first (course.py),
    on epoch time: a verdict on runs made one after the other, told the machine's load during each; where the
    course's code did not run, why."""
    info = meta.get("course") or {}
    background = [Background(COURSE_WHY)]
    if info.get("status") != "measured":
        why = str(info.get("why") or "the course's script's run")
        if stray_digits(why):  # an exit status or an error's text: meta.json's course entry holds it
            why = "a run of the course's script (its entry in the run's meta.json says why it failed)"
        # a run that started and failed ran, and did not complete; one refused before it started did not run
        head = "{c} did not complete here." if info.get("status") == "failed" else "{c} did not run here."
        return Answer(
            QUESTION_COURSE,
            say(head, c=_course()).up(),
            [],
            background,
            "not answered",
            why,
        )
    warm = [float(e["seconds"]) for e in info["epochs"][1:]]
    timed = {
        k: r
        for k, r in nums.rows.items()
        if k != REFERENCE and r["status"] == "measured" and nums.epochs.get(k)
    }
    if not timed or not warm:
        return Answer(
            QUESTION_COURSE,
            say("There is no whole epoch to set beside the course's script's."),
            [],
            background,
            "not answered",
            "a whole epoch of a rung and of the course's script after its first",
        )
    fast = min(timed, key=lambda k: float(timed[k]["epoch_s"]))
    cores = ((meta.get("load_before") or {}).get("cores")) or 1
    course_loads = [(info.get(k) or {}).get("load1") for k in ("load_before", "load_after")]
    v = compare(
        nums.epochs[fast],
        warm,
        str(label(nums.rows[fast])),
        "the course's script",
        what="epoch time",
        interleaved=False,
        load_a=[x / cores for x in meta.get("load_epochs") or [] if x is not None],
        load_b=[x / cores for x in course_loads if x is not None],
    )
    name, a = "shortest epoch vs the course's script", label(nums.rows[fast])
    st = summarize(warm)
    epoch = Number(
        "course script: epoch time",
        st["median"],
        "s",
        "measured",
        n=len(warm),
        spread=st["iqr"] if len(warm) >= sanity.MIN_SAMPLES else None,
    )
    default = "the course script's own default"
    workers = Number("course script: workers", int(info["workers"]), "", "setting", source=default)
    batch = Number("course script: batch size", int(info["batch_size"]), "", "setting", source=default)
    course_line = say(
        "{c}, as written: {e} an epoch after its first, in single precision, a PIL loader with {w} worker"
        + ("" if workers.value == 1 else "s")
        + ", batch {b}.",
        c=_course(),
        e=epoch,
        w=workers,
        b=batch,
    ).up()
    details = [
        say("{v}.", v=v.finding(name, a, _course())).up(),
        say("{c} ran in its own process after the ladder's epochs, not" + SEQUENTIAL_REST, c=_course()).up(),
        nums.epoch_line(fast),
        course_line,
    ]
    return Answer(
        QUESTION_COURSE,
        say("{v}.", v=v.short(name, a, _course())).up(),
        details,
        background,
        "answered",
        verdict=sample_record(v, nums.epochs[fast], warm),
    )


# the ladder table's columns as the page shows them, and those that give a spread (none from too few samples)
SHOWN = [
    "label",
    "status",
    "batch_size",
    "lr",
    "images_per_s",
    "images_per_s_q1",
    "images_per_s_q3",
    "step_s",
    "step_iqr_s",
    "mfu",
    "ideal_images_per_s",
    "peak_precision",
    "epoch_s",
    "epoch_images",
    "epoch_mfu",
]
SPREAD = ("images_per_s_q1", "images_per_s_q3", "step_iqr_s")
TOO_FEW = "n/a"  # a spread cell of a row with fewer than sanity.MIN_SAMPLES samples; "-": a rung not run


def _too_few(table: pd.DataFrame) -> pd.Series:
    """The measured rows timed fewer times than a spread needs (`repeats`: a rung's timed rounds, the plain
    script's epochs after its first)."""
    n = pd.to_numeric(table["repeats"], errors="coerce").fillna(0)
    return (table["status"] == "measured") & (n < sanity.MIN_SAMPLES)


def ladder_table(table: pd.DataFrame) -> pd.DataFrame:
    """The ladder table as the page shows it (SHOWN): a row with fewer than sanity.MIN_SAMPLES samples shows
    TOO_FEW in its spread columns, not a spread of one or two values (q1 = q3 and an IQR of 0 from one
    epoch), and spread_note says why; a rung not run shows '-' in every cell it has no value for."""
    out = table[SHOWN].copy()
    # a rung not run has no peak: its cell reads '-' as its other empty cells do, not blank
    out["peak_precision"] = [v if isinstance(v, str) and v else float("nan") for v in out["peak_precision"]]
    few = _too_few(table)
    for c in SPREAD:
        out[c] = out[c].astype(object)
        out.loc[few, c] = TOO_FEW
    return out


def spread_note(table: pd.DataFrame) -> Finding | None:
    """Why a spread cell of the ladder table reads TOO_FEW: each such row and how many samples it has; None
    where every measured row has enough."""
    rows = table[_too_few(table)].to_dict("records")
    if not rows:
        return None
    items = []
    for r in rows:
        ref = r["rung"] == REFERENCE
        n = Number(
            f"{r['rung']}: timed samples",
            int(r["repeats"]),
            "",
            "counted",
            source="the plain script's epochs after its first" if ref else "the timed rounds",
        )
        what = (
            ("epoch" if n.value == 1 else "epochs")
            if ref
            else ("timed round" if n.value == 1 else "timed rounds")
        )
        items.append(say("{label} ({n} " + what + ")", label=label(r), n=n))
    return say(
        "{mark} in the quartile and IQR columns: {rows} had fewer than {min} samples, and fewer give no "
        "spread, so none is shown.",
        mark=TOO_FEW,
        rows=join(items, ", ", " and "),
        min=Number(
            "samples needed for a spread", sanity.MIN_SAMPLES, "", "setting", source="sanity.MIN_SAMPLES"
        ),
    )


def above_peak(table: pd.DataFrame, nums: Numbers) -> sanity.Flag | None:
    """A rung whose MFU passed 100%, over its timed rounds or over its whole epochs (review29: the epochs'
    was not read): its peak was measured here and is no bound (a busy machine measured it low). Each share
    is the rung's own Number (`nums`), the one its answers and the table state."""

    def passed(r: dict) -> Number | None:
        if r["status"] != "measured":
            return None
        if float(r.get("mfu") or 0) > 1:  # NaN is no share: not above
            return nums.mfu(r["rung"])
        if float(r.get("epoch_mfu") or 0) > 1:
            return nums.epoch_mfu(r["rung"])
        return None

    over = [(r, x) for r in table.to_dict("records") if (x := passed(r)) is not None]
    if not over:
        return None
    reached = [say("{label} ({mfu})", label=Ident(str(r["label"])), mfu=x) for r, x in over]
    return sanity.Flag(
        "MFU above 100%",
        say(
            "{over} reached more FLOP/s than the peak measured for its precision: that peak (the best of a "
            "few matrix products, measured on this machine while it was shared) is no bound, so read MFU "
            "with care",
            over=join(reached, ", ", " and "),
        ),
    )


def busy(meta: dict) -> sanity.Flag | None:
    """'machine busy' for the ladder's run: from the load read before it (meta.json's machine, the one the
    environment table states, its Numbers named after the run's folder), else, where the machine became busy
    while the ladder ran, from the busiest reading of its rounds and epochs (the warm-up rounds' included,
    which the verdicts are not given), said as such: a load read after a round is not the load before the
    run."""
    run = str(meta.get("run_id") or "")
    before = sanity.busy(meta.get("machine"), run=run)
    if before is not None:
        return before
    cores = int(((meta.get("machine") or meta.get("load_before") or {}).get("cores")) or 1)
    ends = [
        (meta.get(k) or {}).get("load1") for k in ("load_before", "load_after")
    ]  # as the ladder began, ended
    during = [x for x in [*ends, *(meta.get("load_per_round") or []), *(meta.get("load_epochs") or [])] if x]
    if not during or max(during) / cores <= sanity.BUSY_LOAD_PER_CORE:
        return None
    at = fmt_in(" during {run}", run=run) if run else " during the ladder"
    return sanity.Flag(
        "machine busy",
        say(
            "the machine became busy while the ladder ran (load average {load} on {cores} usable cores at "
            "its busiest reading, above {limit} per core): timings take longer and vary more than on an "
            "idle machine",
            load=beside(
                Number(
                    "busiest load average" + at,
                    float(max(during)),
                    "",
                    "measured",
                    n=1,
                    source="the 1-minute load average read as the ladder began, after each of its rounds "
                    "and at its end",
                ),
                cores * sanity.BUSY_LOAD_PER_CORE,
            ),
            cores=Number("usable cores" + at, cores, "", "counted", source="os.sched_getaffinity"),
            limit=Number(
                "busy load per core",
                sanity.BUSY_LOAD_PER_CORE,
                "",
                "setting",
                source="sanity.BUSY_LOAD_PER_CORE",
            ),
        ),
        run=run,
    )


def graphs_skipped(table: pd.DataFrame, meta: dict) -> sanity.Flag | None:
    """A rung that asked for CUDA graphs whose compiled step inductor ran without them (meta's steps)."""
    steps = meta.get("step_ran") or {}
    asked = [r for r in table.to_dict("records") if r["status"] == "measured" and r["rung"] in steps]
    skipped = [
        label(r)
        for r in asked
        if steps[r["rung"]].get("cudagraph_skips") and steps[r["rung"]].get("compile_mode") in GRAPH_MODES
    ]
    if not skipped:
        return None
    return sanity.Flag(
        "CUDA graphs skipped",
        say(
            "inductor ran compiled graphs without CUDA graphs during the ladder (its log says why), so "
            "{rungs} may have run without them: read those rungs as compiled, not graphed",
            rungs=join(
                [x if isinstance(x, Finding) else say("{r}", r=Ident(x)) for x in skipped], ", ", " and "
            ),
        ),
    )


def conclude(cfg, result) -> tuple[list[Answer], list[Any]]:
    """(answers, flags): the top answer, one per rung after the baseline, then the plain script's against the
    epoch of the rung at its settings, and the course's script's against the shortest epoch; flags for few
    repeats and a busy machine."""
    nums = Numbers(result.table, result.samples, getattr(result, "epochs", None))
    device = "GPU" if str(result.meta.get("device", cfg.device)).startswith("cuda") else "CPU"
    answers = [top_answer(result.table, nums, result.meta)]
    pairs = neighbours(result.table)
    slower = {  # rungs the ladder found slower than the rung they were stacked on -> that rung
        row["rung"]: prev
        for row, prev in pairs
        if row["status"] == "measured"
        and prev is not None
        and lead_verdict(row, prev, nums, result.meta)[0][0].outcome == "worse"
    }
    answers += [
        rung_answer(row, prev, nums, result.meta, device, slower.get(prev["rung"]) if prev else None)
        for row, prev in pairs
    ]
    answers.append(reference_answer(nums, result.meta))
    answers.append(course_answer(nums, result.meta))
    flags = [
        sanity.too_few(int(result.meta.get("repeats", 0)), "timed repeats per rung"),
        busy(result.meta),
        above_peak(result.table, nums),
        *busy_peaks(result.table, result.meta),
        graphs_skipped(result.table, result.meta),
    ]
    return answers, [f for f in flags if f is not None]


def busy_peaks(table: pd.DataFrame, meta: dict) -> list[sanity.Flag]:
    """'peak measured busy' for each peak the measured rungs' shares divide by that was measured while the
    machine was busy (meta.json's peak_loads, by precision), as C1's, C2's and C5's pages say it of theirs;
    none for a precision some rung passed ('MFU above 100%' says more of that peak: review36)."""
    loads = meta.get("peak_loads") or {}
    ran = [r for r in table.to_dict("records") if r["status"] == "measured"]
    over = {
        r.get("peak_precision") for r in ran if max(float(r.get(k) or 0) for k in ("mfu", "epoch_mfu")) > 1
    }
    flags = []
    for prec in dict.fromkeys(r.get("peak_precision") for r in ran):  # each once, in the rungs' order
        if prec in loads and prec not in over:
            fl = {"precision": prec, "peak_source": "measured", "machine": loads[prec]}
            flags.append(sanity.busy_peak(fl))
    return [f for f in flags if f is not None]
