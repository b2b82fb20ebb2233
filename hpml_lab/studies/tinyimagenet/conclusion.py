"""What the Tiny ImageNet report concludes, computed from tinyimagenet.TinResult: where the bottleneck is with
0 and N workers (each run's data wait against its copy + compute over the same batches, which cannot tell on a
busy machine; shares from the same medians the table shows; the two runs made one after the other, so the
verdicts between them carry their loads), what checkpointing costs and buys (a tie said as a tie), each
variant's throughput against the baseline's (a DDP row beyond what its processes can give is said to be no DDP
effect), and the estimated against the actual epoch time with what was measured outside the batches. Every
number a sentence states is a Number of the record, bound to a template (hpml_lab.findings); what usually
happens is Background, apart.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from ... import sanity
from ...answers import Answer, Number
from ...findings import Background, Finding, Ident, beside, fmt_in, join, say
from ...profiling import summarize
from ...verdict import BUSY_LOAD, Verdict, compare, sample_record
from .._conclude import after_sequential, dedupe, learned_flags, num, timing_disjoint

CLASSES_TIN = 200


def _load(rec) -> list[float]:
    """The machine's load per core when a run started (its meta), as a verdict's load for that side."""
    m = (getattr(rec, "meta", None) or {}).get("machine") or {}
    if m.get("load1") is None:
        return []
    return [m["load1"] / max(1, m.get("cores") or 1)]


def _thread_clause(res, variant: str) -> tuple[str, dict]:
    """', and they differ in more than the method: ...' where the variant's processes ran another number of
    torch threads than the baseline's one (grade34b, grade35b), with its slots; ('', {}) where they agree or
    a run did not record its threads."""
    tb, tv = _threads(res.workers[max(res.workers)]), _threads(res.variants.get(variant))
    if tb is None or tv is None or tb == tv:
        return "", {}
    tsrc = "the run's torch threads (meta.json's environment)"
    return (
        ", and they differ in more than the method: each of {v}'s processes ran {tv} and the baseline's "
        "one {tb}",
        {
            "v": variant,
            "tv": _thread_count(f"{variant}: torch threads per process", tv, tsrc),
            "tb": _thread_count("baseline: torch threads", tb, tsrc),
        },
    )


def _threads(rec) -> int | None:
    """The torch threads a run's process used (its meta's environment), or None where it did not record it."""
    n = ((getattr(rec, "meta", None) or {}).get("environment") or {}).get("torch_threads")
    return int(n) if isinstance(n, int) else None


def _thread_count(name: str, n: int, source: str) -> Finding:
    """'1 torch thread', '2 torch threads': a run's thread count as a sentence says it."""
    return say("{n} torch thread" + ("" if n == 1 else "s"), n=Number(name, n, "", "setting", source=source))


def _workers(w: int) -> Finding:
    return say("{w} workers", w=_setting_workers(w))


def _setting_workers(w: int) -> Number:
    """A loader-worker count as a setting of the run ('2', as in '2 workers')."""
    return Number(fmt_in("loader workers: {w}", w=int(w)), int(w), "", "setting", source="the run's config")


def _last_epoch(rec) -> pd.DataFrame:
    b = rec.table("batches")
    return b[b.epoch == b.epoch.max()]


def _steady(rec) -> pd.DataFrame:
    """study.steady of a run's batches: the last epoch's after its first."""
    from .study import steady

    return steady(rec.table("batches"))


def _first_wait(rec, w) -> Number:
    return Number(
        fmt_in("{w} workers: first batch's data wait, last epoch", w=w),
        1000 * float(_last_epoch(rec).data_s.iloc[0]),
        "ms",
        "measured",
        n=1,
    )


def _epoch_s(rec, w) -> Number:
    return Number(
        fmt_in("{w} workers: last epoch", w=w),
        float(rec.table("epochs").iloc[-1].total_s),
        "s",
        "measured",
        n=1,
        source="the run's epochs table: the last epoch's total time",
    )


# why two runs' batch times cannot be told apart, by the verdict's reason, in a headline's words
WHY_NOT = {
    "too few samples": "too few batches",
    "load moved": "load moved between the runs",
    "busy machine": "back-to-back runs on a busy machine",
    "load not recorded": "the runs' load was not recorded",
    # an interval that comes within the least difference of none, at one end: the difference may be large
    # (grade19: 1.0055x to 1.476x over 3 batches each was called "too small a difference")
    "difference under": "its interval nears no difference",
}


def _why_not(v) -> str:
    return next((w for r, w in WHY_NOT.items() if v.reason.startswith(r)), "the batches spread too widely")


# why a part verdict (part_verdict) names no bottleneck on a busy machine
BUSY_PARTS = "parts on a busy machine"


def part_verdict(b: pd.DataFrame, load: list[float]) -> Verdict:
    """Data wait (A) against copy + compute (B) over the same batches of one run: "better" when the loop waits
    less for data than it computes (loading is not the bottleneck), "worse" when it waits longer (loading is).
    The two take turns batch by batch, so a steady load falls on both; but they are different work (the
    loading, or a wait on worker processes, against the training step's threads), and on a busy machine (a
    load per core above verdict.BUSY_LOAD at the run's start) other work may slow one and not the other, so
    there the verdict names no direction (reason BUSY_PARTS). Each batch gives one of each: the batches are
    drawn whole (paired), each batch's wait and compute together, where there are enough of them."""
    v = compare(
        list(b.data_s),
        list(b.train_s),
        "data wait",
        "copy + compute",
        what="time per batch",
        interleaved=True,
        paired=True,  # review24/29: one data wait and one compute per batch
        load_a=load,
        load_b=load,
    )
    # a side shown, by a whole interval or one within the least difference: on a busy machine, no side
    # (review40: a 1% gap said "differ, perhaps negligibly" where a 10% one said the machine was busy)
    shown = v.outcome != "tie" or v.reason.startswith("difference under")
    if shown and load and max(load) > BUSY_LOAD:
        v = replace(v, outcome="tie", reason=BUSY_PARTS)
    return v


def _bottleneck(v: Verdict) -> str | None:
    """Where a part verdict puts the bottleneck: "loading", "compute", or None (it cannot tell)."""
    return {"better": "compute", "worse": "loading"}.get(v.outcome)


# a part verdict's reason in fewer words, for a headline that gives two
SHORT_WHY = {
    "the machine was busy": "a busy machine",
    "the batches spread too widely": "widely spread batches",
}


def _why_part(v: Verdict) -> str:
    """Why a part verdict cannot tell, in a headline's words."""
    return "the machine was busy" if v.reason == BUSY_PARTS else _why_not(v)


def _part_finding(v: Verdict, w: int, b: pd.DataFrame) -> Finding:
    """A part verdict as a sentence ('With 0 workers, ...'), its numbers those of v.numbers()."""
    name = fmt_in("{w} workers: data wait against copy + compute", w=w)
    x = v.numbers(name)
    wf = _workers(w)
    interval = "({conf} CI {low} to {high}; n = {na} batches)"
    slots = {
        "w": wf,
        "ratio": x["ratio"],
        "conf": x["conf"],
        "low": x["low"],
        "high": x["high"],
        "na": x["na"],
    }
    if v.outcome == "better":
        f = say(
            "With {w}, the loop waited less for data than it spent on copy + compute: the median copy + "
            "compute is {ratio} the median data wait " + interval,
            **slots,
        )
    elif v.outcome == "worse":
        f = say(
            "With {w}, the loop waited longer for data than it spent on copy + compute: the median data wait "
            "is {ratio} the median copy + compute " + interval,
            **slots,
        )
    elif v.undecided:
        f = say(
            "With {w}, too few batches to tell which is longer, data wait or copy + compute (n = {na}; at "
            "least {min} are needed)",
            w=wf,
            na=x["na"],
            min=x["min"],
        )
    elif v.reason == BUSY_PARTS:

        def ms(what, values, pick):
            return Number(
                fmt_in("{w} workers: {what} per batch", w=w, what=what),
                1000 * float(pick(values)),
                "ms",
                "measured",
                n=len(values),
                source="the last epoch's batches after its first",
            )

        f = say(
            "With {w}, this run cannot tell which is longer, data wait or copy + compute: the machine was "
            "busy (load per core {load}, above {busy}), and other work may slow the two unequally; copy + "
            "compute took {clo} to {chi} a batch, the data wait {dlo} to {dhi} (ratio of medians {ratio}, "
            + interval[1:],
            load=x["load_hi"],
            busy=x["busy"],
            clo=ms("shortest copy + compute", b.train_s, min),
            chi=ms("longest copy + compute", b.train_s, max),
            dlo=ms("shortest data wait", b.data_s, min),
            dhi=ms("longest data wait", b.data_s, max),
            **slots,
        )
    else:
        # apart by too little to count, or not told apart (review39: "cannot tell which is longer" of an
        # interval wholly on one side)
        lead = (
            "With {w}, data wait and copy + compute differ, perhaps negligibly"
            if v.reason.startswith("difference under")
            else "With {w}, this run cannot tell which is longer, data wait or copy + compute"
        )
        f = say(
            lead + ": {why} (ratio of medians {ratio}, " + interval[1:],
            why=_why_not(v),
            **slots,
        )
    return say("{f}.", f=f.marked(name))  # the verdict's statement, the full stop outside it


def bottleneck_answer(res) -> Answer:
    """Where the bottleneck is with 0 and N loader workers: within each run, its data wait against its copy +
    compute over the same batches (part_verdict: the last epoch's batches after its first), which decides the
    headline or says why it cannot; beside it the medians' shares, and the two runs compared on each part and,
    where the two add up to a batch's time, on the whole batch."""
    (w0, r0), (wn, rn) = sorted(res.workers.items())
    b0, bn = _steady(r0), _steady(rn)
    p0, pn = part_verdict(b0, _load(r0)), part_verdict(bn, _load(rn))
    design = dict(interleaved=False, load_a=_load(rn), load_b=_load(r0))  # one run after the other
    labels = fmt_in("{w} workers", w=wn), fmt_in("{w} workers", w=w0)
    vd = compare(list(bn.data_s), list(b0.data_s), *labels, what="data wait per batch", **design)
    vc = compare(list(bn.train_s), list(b0.train_s), *labels, what="copy + compute per batch", **design)
    disjoint = worker_times_disjoint(res)
    whole = "data wait + copy + compute per batch"
    # the whole batch, batch by batch: only where the two parts add up to its time (they do not overlap)
    vt = (
        compare(list(bn.data_s + bn.train_s), list(b0.data_s + b0.train_s), *labels, what=whole, **design)
        if disjoint
        else None
    )
    d0 = num(fmt_in("{w} workers: data wait per batch", w=w0), b0.data_s, "ms", 1000)
    dn = num(fmt_in("{w} workers: data wait per batch", w=wn), bn.data_s, "ms", 1000)
    c0 = num(fmt_in("{w} workers: copy + compute per batch", w=w0), b0.train_s, "ms", 1000)
    cn = num(fmt_in("{w} workers: copy + compute per batch", w=wn), bn.train_s, "ms", 1000)
    share0, sharen = d0.value / (d0.value + c0.value), dn.value / (dn.value + cn.value)

    def part(w, d, c, share, n, of):
        return say(
            "{share}" + of + " with {w} ({d} of {total})",
            share=Number(
                fmt_in("{w} workers: data wait share of a batch", w=w), 100 * share, "%", "measured", n=n
            ),
            w=_workers(w),
            d=d,
            total=Number(
                fmt_in("{w} workers: data wait + copy + compute per batch", w=w),
                d.value + c.value,
                "ms",
                "measured",
                n=n,
            ),
        )

    shares = say(
        "With the median data wait and the median copy + compute added as a batch"
        + (
            ""
            if disjoint
            else " (on this GPU, without a synchronize after each step, the two can overlap, so their sum is "
            "not the batch's wall time)"
        )
        + ", data wait is {p0} and {pn}.",
        p0=part(w0, d0, c0, share0, len(b0), " of a batch"),
        pn=part(wn, dn, cn, sharen, len(bn), ""),
    )
    first = say(
        "Each run's first batch of the epoch is left out of these medians and verdicts, since with workers "
        "it also waits for them to start: it waited {f0} with {w0} and {fn} with {wn}; the whole last epoch, "
        "that batch included, took {e0} and {en} (one epoch each, no verdict).",
        f0=_first_wait(r0, w0),
        fn=_first_wait(rn, wn),
        e0=_epoch_s(r0, w0),
        en=_epoch_s(rn, wn),
        w0=_workers(w0),
        wn=_workers(wn),
    )
    w0f, wnf = _workers(w0), _workers(wn)
    # the headline: where the bottleneck is, in words, from each run's own part verdict; why not, where one
    # cannot tell; the shares and the verdicts behind it: the details
    at0, atn = _bottleneck(p0), _bottleneck(pn)
    if at0 is None and atn is None and _why_part(p0) != _why_part(pn):  # each run's own reason, short
        head = say(
            "This run cannot tell where the bottleneck is: with {w0}, {r0}; with {wn}, {rn}",
            w0=w0f,
            r0=SHORT_WHY.get(_why_part(p0), _why_part(p0)),
            wn=_setting_workers(wn),
            rn=SHORT_WHY.get(_why_part(pn), _why_part(pn)),
        )
    elif at0 is None:
        head = say(
            "This run cannot tell where the bottleneck is with {whom}: {why}",
            whom=say("{w0} or {wn}", w0=w0f, wn=wnf) if atn is None else w0f,
            why=_why_part(p0),
        )
    elif at0 == "compute":
        if atn == "compute":
            head = say("Loading is not the bottleneck here, even with {w}", w=w0f)
        elif atn == "loading":
            head = say("Loading is the bottleneck with {wn}, not with {w0}", wn=wnf, w0=w0f)
        else:
            head = say(
                "Loading is not the bottleneck with {w0}; with {wn}, this run cannot tell: {why}",
                w0=w0f,
                wn=wnf,
                why=_why_part(pn),
            )
    elif atn == "loading":
        head = say("The bottleneck did not move from loading to compute in this run")
    elif atn is None:
        head = say(
            "Loading is the bottleneck with {w0}; with {wn}, this run cannot tell: {why}",
            w0=w0f,
            wn=wnf,
            why=_why_part(pn),
        )
    else:
        head = say("With {wn} the bottleneck moves from loading to copy and compute", wn=wnf)
        if vt is not None and vt.outcome in ("better", "worse"):  # the whole batch, in the verdict's word
            # one run each, one after the other: said where the direction is, since the interval holds each
            # run's own spread (grade22: "whole batches are slower" went slower, tie, slower in 3 renders)
            head = say(
                "{head}, but whole batches are {word} (one run each)"
                if vt.outcome == "worse"
                else "{head}; whole batches are {word} (one run each)",
                head=head,
                word=say("{w}", w=vt.words()[0 if vt.outcome == "better" else 1]).marked(whole),
            )
    verdicts = [(vd, "data wait per batch"), (vc, "copy + compute per batch")]
    if vt is not None:
        verdicts.append((vt, whole))
    return Answer(
        "Where is the bottleneck with no loader workers and with N workers?",
        head,
        [shares, _part_finding(p0, w0, b0), _part_finding(pn, wn, bn), first]
        + [
            # the design said once: a tie for the load's sake says it in its own words
            say("{v}" + after_sequential(v, "batches"), v=v.finding(what, label_a=wnf, label_b=w0f))
            for v, what in verdicts
        ],
        [
            Background(
                "Without workers the training process decodes and augments every image itself, so the loop "
                "waits for each batch; workers prepare batches in other processes, which on a machine with "
                "few cores also take cores from the training step."
            )
        ],
        verdict={
            "parts_0": sample_record(p0, b0.data_s, b0.train_s),
            "parts_n": sample_record(pn, bn.data_s, bn.train_s),
            "data": sample_record(vd, bn.data_s, b0.data_s),
            "compute": sample_record(vc, bn.train_s, b0.train_s),
            **({"batch": sample_record(vt, bn.data_s + bn.train_s, b0.data_s + b0.train_s)} if vt else {}),
        },
    )


def checkpoint_verdict(res) -> Verdict:
    """The baseline's copy + compute per batch (A) against checkpointing's (B), over the last epoch's batches
    after its first; the runs were made one after the other."""
    wn = max(res.workers)
    return compare(
        list(_steady(res.workers[wn]).train_s),
        list(_steady(res.variants["checkpointing"]).train_s),
        "the baseline",
        "checkpointing",
        what="copy + compute per batch",
        interleaved=False,
        load_a=_load(res.workers[wn]),
        load_b=_load(res.variants["checkpointing"]),
    )


def checkpoint_answer(res) -> Answer:
    """Checkpointing's time per batch against the baseline's (runs one after the other) and its batch gain."""
    wn = max(res.workers)
    bn, bc = _steady(res.workers[wn]), _steady(res.variants["checkpointing"])
    vt = checkpoint_verdict(res)
    m = res.memory.set_index("variant")
    gain = Number(
        "largest batch, checkpointing / baseline",
        float(
            m.loc["checkpointing", "largest batch (predicted)"]
            / m.loc["baseline", "largest batch (predicted)"]
        ),
        "x",
        "predicted",
        source=fmt_in("activation bytes per image and the stated budget of {note}", note=res.budget_note),
    )
    said_gain = say(
        "It allows a {gain} larger batch (predicted from bytes per image), "
        + ("its pay-off." if gain.value >= 1.1 else "too little to call a pay-off."),
        gain=gain,
    )
    name = "checkpointing vs baseline: copy + compute per batch"
    return Answer(
        "What does checkpointing cost in time, and what does it buy in batch size?",
        # a tie says why right there (the table of batch times beside it may look decided)
        say("{v}" + (" (one run each)." if vt.outcome != "tie" else "."), v=vt.short(name).up())
        if vt.outcome != "tie" or vt.undecided  # too few samples: said by short() itself
        else say("{v}: {why}.", v=vt.short(name).up(), why=_why_not(vt)),
        [
            # how the samples were taken, said once: a tie for the load's sake says it in its own words
            say("{v}" + after_sequential(vt, "batches"), v=vt.finding(name).up()),
            said_gain,
        ],
        [
            Background(
                "Checkpointing recomputes each segment's forward pass during backward, so a step usually "
                "costs about one extra forward; what it buys is activation memory, hence a larger batch."
            )
        ],
        verdict=sample_record(vt, bn.train_s, bc.train_s),
    )


def bound_verdict(res, variant: str, procs: int, t: pd.DataFrame) -> dict | None:
    """Whether a parallel variant's images per second lie beyond `procs` times the baseline's: `procs` times
    its time per image against the baseline's, batch by batch over the samples the timing table's medians
    are of (each run's steady batches); the runs were made one after the other. The verdict with its samples
    (sample_record); its interval alone (Verdict.statistical "better") shows the excess, where two medians
    alone do not (a grader: 2.01x with 2 processes, a tie batch by batch, was said to exceed what 2 can
    give). None where the variant has no record."""
    rv, rb = res.variants.get(variant), res.workers[max(res.workers)]
    if rv is None:
        return None
    bv, bb = _steady(rv), _steady(rb)
    gv, gb = float(t.loc[variant, "global batch"]), float(t.loc["baseline", "global batch"])
    a = [procs * x / gv for x in bv.data_s + bv.train_s]
    b = [x / gb for x in bb.data_s + bb.train_s]
    v = compare(
        a,
        b,
        fmt_in("{v} x {p}", v=variant, p=procs),
        "the baseline",
        what="time per image",
        interleaved=False,
        load_a=_load(rv),
        load_b=_load(rb),
    )
    return {"verdict": v, "record": sample_record(v, a, b)}


def throughput_findings(res, records: dict | None = None) -> list[Finding]:
    """Each run variant's images per second against the baseline's, from the timing table's median batch time
    and global batch. A ratio beyond the processes a variant used cannot come from them: said so, with both
    runs' load, where the batches show it (bound_verdict, whose record goes into `records` by variant)."""
    t = res.timing.dropna(subset=["s/batch"]).set_index("variant")
    if "baseline" not in t.index:
        return []
    base_ips = float(t.loc["baseline", "global batch"] / t.loc["baseline", "s/batch"])
    out = []
    for variant in t.index:
        procs_v = t.loc[variant, "processes"] if "processes" in t else 1
        if (
            variant == "baseline" or not procs_v > 1
        ):  # a one-process variant is compared by its verdict, not a ratio
            continue
        ratio = Number(
            f"{variant}: throughput vs baseline",
            float(t.loc[variant, "global batch"] / t.loc[variant, "s/batch"]) / base_ips,
            "x",
            "measured",
            n=1,
            source="(global batch / median time per batch) over the baseline's",
        )
        procs = (
            int(t.loc[variant, "processes"])
            if "processes" in t and t.loc[variant, "processes"] == t.loc[variant, "processes"]
            else 1
        )
        checked = bound_verdict(res, variant, procs, t) if procs > 1 and ratio.value > procs else None
        bound = checked["verdict"] if checked else None
        if checked and records is not None:
            records[f"bound {variant}"] = checked["record"]
        p = Number(f"{variant}: processes", procs, "", "setting", source="the run's processes")
        bound_name = fmt_in("{v}: {p} x time per image vs baseline", v=variant, p=procs)
        # a parallel method's gain is bounded by its processes: beyond them by the interval, whatever the
        # sequential runs' load (which the sentence states as the excess's likely cause)
        if bound is not None and bound.statistical == "better":
            loads = [x for r in (res.workers[max(res.workers)], res.variants.get(variant)) for x in _load(r)]
            text = (
                "{v} ran at {ratio} the baseline's images per second by their median batches (not whole "
                "epochs) with {p} processes: more than {p} processes can give by running side by side (the "
                "baseline's time per image over {p} times its own, batch by batch: {br}, {conf} CI {lo} to "
                "{hi}), so the excess is not the method's doing; the runs were made one after the other"
            )
            x = bound.numbers(bound_name)
            slots = {"v": variant, "ratio": ratio, "p": p, "br": x["ratio"], "conf": x["conf"]}
            slots |= {"lo": x["low"], "hi": x["high"]}
            if len(loads) == 2:
                text += " (load per core {la} and {lb} at their starts)"
                lsrc = "the machine's load average per core when each run started"
                slots |= {
                    "la": Number(
                        "baseline: load per core at start", loads[0], "", "measured", n=1, source=lsrc
                    ),
                    "lb": Number(
                        f"{variant}: load per core at start", loads[1], "", "measured", n=1, source=lsrc
                    ),
                }
            more, tslots = _thread_clause(res, variant)
            text += more
            slots |= tslots
            out.append(say(text + ".", **slots).up())
        # one run each, one after the other: no verdict, and both runs' loader workers share their cores
        else:
            run_v = res.variants.get(variant)
            wv = ((run_v.meta or {}).get("config") or {}).get("num_workers") if run_v is not None else None
            text = (
                "{v} ran at {ratio} the baseline's images per second by their median batches (not whole "
                "epochs), one run each, made one after the other"
                + (" (no verdict)" if bound is None else "")  # else the verdict on its batches follows
                + "; the baseline ran with {w} loader workers"
            )
            slots = {
                "v": variant,
                "ratio": ratio,
                "w": Number(
                    "baseline: loader workers",
                    int(max(res.workers)),
                    "",
                    "setting",
                    source="the run's config",
                ),
            }
            if isinstance(wv, int):
                text += " and {v} with {wv} in each of its {p} processes"
                slots |= {
                    "wv": Number(f"{variant}: loader workers", wv, "", "setting", source="the run's config"),
                    "p": p,
                }
            text += ", which take cores from the training steps, so the ratio is not the method's alone"
            more, tslots = _thread_clause(res, variant)
            out.append(say(text + more + ".", **{**slots, **tslots}).up())
            if bound is not None:  # above its processes by the medians, not by a verdict over its batches
                f = bound.finding(
                    bound_name,
                    label_a=say("{v}'s time per image times {p}", v=variant, p=p),
                    label_b="the baseline's",
                )
                out.append(
                    say(
                        # true of every reason its bound names no direction for (review39)
                        "By its batches, that is not clearly beyond what {p} processes can give: {f}.",
                        p=p,
                        f=f,
                    )
                )
    slow = _slow_baseline(res, t, base_ips) if out else None
    return out + ([slow] if slow is not None else [])


def _slow_baseline(res, t, base_ips: float) -> Finding | None:
    """When checkpointing, which does more work per batch in the same one process, ran at more images per
    second than the baseline: where its verdict (checkpoint_verdict) finds checkpointing's batches faster, the
    baseline's own batches were slow in this run and every ratio against it is inflated; where it cannot tell
    them apart, the ratio rests on medians of batches that spread too widely to say so."""
    if "checkpointing" not in t.index or res.variants.get("checkpointing") is None:
        return None
    c = float(t.loc["checkpointing", "global batch"] / t.loc["checkpointing", "s/batch"]) / base_ips
    if c <= 1:
        return None
    # shown on its side of 1 (grade34b: 1.004 read "1x", beside a sentence about running at more than it)
    ratio = beside(
        Number(
            "checkpointing: throughput vs baseline",
            c,
            "x",
            "measured",
            n=1,
            source="(global batch / median time per batch) over the baseline's",
        ),
        1.0,
    )
    v = checkpoint_verdict(res)
    if v.outcome == "worse":
        return say(
            "Checkpointing, one process that recomputes part of each forward pass, ran at {c} the "
            "baseline's images per second: the baseline's own batches were slow in this run, so every ratio "
            "against the baseline is inflated by it.",
            c=ratio,
        )
    if v.outcome == "tie":
        return say(
            "Checkpointing, one process that recomputes part of each forward pass, ran at {c} the "
            "baseline's images per second by their median batches, though their comparison on copy + compute "
            "per batch names no winner: a ratio against the baseline's median batch carries that "
            "spread.",
            c=ratio,
        )
    return None


SLOW_BATCH = 2.0  # a batch over this many median batches is named where an epoch's time went
NAMED_SLOW = 3  # at most this many slow batches are named one by one; more are counted


def _said(variant: str) -> str:
    """A variant as a sentence names it ('the baseline', 'checkpointing', 'DDP')."""
    return "the baseline" if variant == "baseline" else variant


def where_the_epoch_went(variant: str, rec, median_s: float, actual: Number) -> tuple[Finding, bool]:
    """What a variant's record shows of its last epoch beyond the median batch: its batches' time against the
    epoch (where data wait and step are disjoint, the rest lying outside the batches), the batches over
    SLOW_BATCH median batches (data wait + step) and the first batch's wait for the loader. Returns the
    sentence and whether it named slow batches (whose cause the record does not hold)."""
    last = _last_epoch(rec)
    t = (last.data_s + last.train_s).reset_index(drop=True)
    n = len(t)
    src = "the batches table: data wait + step, last epoch"
    median = Number(
        f"{variant}: time per batch",
        median_s,
        "s",
        "measured",
        n=max(1, n - 1),
        source="the median of the last epoch's batches after its first (the timing table's)",
    )
    wait = Number(
        f"{variant}: first batch's data wait, last epoch", float(last.data_s.iloc[0]), "s", "measured", n=1
    )
    slow = [k for k in range(n) if t[k] > SLOW_BATCH * median_s]

    def batch(k: int) -> Finding:
        took = Number(
            fmt_in("{v}: batch {k}, last epoch", v=variant, k=k + 1),
            float(t[k]),
            "s",
            "measured",
            n=1,
            source=src,
        )
        if k == 0:
            return say("{t} for the first ({w} of it waiting for the loader)", t=took, w=wait)
        if k == n - 1:
            return say("{t} for the last", t=took)
        place = fmt_in("{v}: batch {k}, last epoch: its place", v=variant, k=k + 1)
        return say("{t} for batch {k}", k=Number(place, k + 1, "", "counted", source=src), t=took)

    first_apart = say(" (its first batch waited {w} for the loader)", w=wait)
    if not slow:
        which = say("none took over twice the median batch of {m}{first}", m=median, first=first_apart)
    elif len(slow) <= NAMED_SLOW:
        which = say(
            "{list}, against a median batch of {m}{first}",
            list=join([batch(k) for k in slow], ", ", last=" and "),
            m=median,
            first=first_apart if 0 not in slow else say(""),
        )
    else:
        which = say(
            "{k} took over twice the median batch of {m}, {sum} together{first}",
            k=Number(f"{variant}: slow batches, last epoch", len(slow), "", "counted", source=src),
            m=median,
            sum=Number(
                f"{variant}: slow batches' time, last epoch",
                float(t[slow].sum()),
                "s",
                "measured",
                n=len(slow),
                source=src,
            ),
            first=first_apart,
        )
    name = _said(variant)
    if timing_disjoint(((rec.meta or {}).get("config") or {}).get("sync_each_step", False), rec.meta):
        total = float(t.sum())
        f = say(
            "{v}'s batches took {sum} of its {act} epoch: {which}; the remaining {out} of the epoch lies "
            "outside its batches.",
            v=name,
            sum=Number(f"{variant}: the last epoch's batches", total, "s", "measured", n=n, source=src),
            act=actual,
            which=which,
            out=Number(
                f"{variant}: the last epoch outside its batches",
                max(0.0, actual.value - total),
                "s",
                "measured",
                n=1,
                source="the epoch's total time less its batches' data wait + step",
            ),
        )
    else:
        f = say(
            "On this GPU {v}'s data wait and step can overlap, so its batches do not add up to its epoch; "
            "with the two added per batch: {which}.",
            v=name,
            which=which,
        )
    return f.up(), bool(slow)


def _reference_misses() -> Finding | None:
    """The reference's estimates against its actual epochs (study.REFERENCE), said by direction."""
    from .study import REFERENCE

    short, over = [], []
    for row in REFERENCE:
        est, act = row["estimated (s)"], row["actual (s)"]
        if est is None or act is None:
            continue
        pair = say(
            "{est} estimated, {act} actual",
            est=Number(
                f"reference: {row['variant']}: estimated epoch",
                est,
                "s",
                "reference",
                source="the reference's table",
            ),
            act=Number(
                f"reference: {row['variant']}: actual epoch",
                act,
                "s",
                "reference",
                source="the reference's table",
            ),
        )
        (short if est < act else over).append((_said(row["variant"]), pair))
    if not short and not over:
        return None

    def group(rows, verb):
        return say(
            verb + " for {names} ({pairs})",
            names=join([say("{n}", n=n) for n, _ in rows], ", ", last=" and "),
            pairs=join([p for _, p in rows], "; "),
        )

    parts = ([group(short, "the estimate falls short")] if short else []) + (
        [group(over, "exceeds the actual epoch" if short else "the estimate exceeds the actual epoch")]
        if over
        else []
    )
    return say("In the reference's table, {parts}.", parts=join(parts, " and "))


def epochs_answer(res) -> Answer:
    """Estimated (N / B x median time per batch) against actual epoch time per variant: the headline says
    which way the estimates miss and by how much, each variant's ratio follows, then what its record shows of
    where the epoch went (where_the_epoch_went: its batches' time, the slow ones, the first batch's wait for
    the loader, the time outside the batches) and what it cannot say; the reference's own misses for
    comparison."""
    t = res.timing.dropna(subset=["s/batch"]).set_index("variant")
    # N / B is the batches the epoch ran: the whole set's, or max_batches where the run stops there
    src = "N / B x median time per batch, N / B the batches the epoch ran"
    runs = {
        "baseline": res.workers[max(res.workers)],
        **{k: v for k, v in res.variants.items() if v is not None},
    }
    items, went, pairs = [], [], []
    named_slow = outside = False
    for variant in t.index:
        est = Number(
            f"{variant}: estimated epoch",
            float(t.loc[variant, "estimated epoch (s)"]),
            "s",
            "predicted",
            source=src,
        )
        act = Number(
            f"{variant}: actual epoch", float(t.loc[variant, "actual epoch (s)"]), "s", "measured", n=1
        )
        if est.value <= 0 or act.value <= 0:
            continue
        pairs.append((est.value, act.value))
        slots = {
            "n": variant,
            "est": est,
            "act": act,
            "r": Number(
                f"{variant}: actual epoch / estimate",
                act.value / est.value,
                "x",
                "measured",
                n=1,
                source="the actual epoch over its estimate",
            ),
        }
        text = "{n}: estimate {est}, actual {act} ({r} the estimate)"
        rec = runs.get(variant)
        if rec is not None:
            last = _last_epoch(rec)
            full = int(t.loc[variant, "global batch"])
            if "images" in last and int(last.images.iloc[-1]) < full:
                slots["part"] = Number(
                    f"{variant}: images in the last batch",
                    int(last.images.iloc[-1]),
                    "",
                    "counted",
                    source="the batches table",
                )
                text = text[:-1] + "; its last batch held {part} images)"
            if act.value > est.value:
                f, slow = where_the_epoch_went(variant, rec, float(t.loc[variant, "s/batch"]), act)
                went.append(f)
                named_slow |= slow
                outside |= timing_disjoint(
                    ((rec.meta or {}).get("config") or {}).get("sync_each_step", False), rec.meta
                )
        items.append(say(text, **slots))
    skipped = res.timing[res.timing["s/batch"].isna()] if "s/batch" in res.timing else res.timing.iloc[0:0]
    # the headline: which way the estimates miss and the largest miss (one number); each variant: the details
    if pairs and all(a > e for e, a in pairs):
        head = say(
            "Every estimate from the median batch falls short: the actual epoch is up to {r} the estimate.",
            r=Number(
                "largest actual epoch over its estimate",
                max(a / e for e, a in pairs),
                "x",
                "measured",
                n=1,
                source="actual / estimated epoch, over the variants",
            ),
        )
    elif pairs and all(a < e for e, a in pairs):
        head = say(
            "Every estimate from the median batch exceeds its actual epoch, by up to {r} the actual.",
            r=Number(
                "largest estimate over its actual epoch",
                max(e / a for e, a in pairs),
                "x",
                "measured",
                n=1,
                source="estimated / actual epoch, over the variants",
            ),
        )
    elif pairs:
        head = say(
            "Estimates from the median batch miss the actual epochs by up to {gap}.",
            gap=Number(
                "largest gap between an estimated and an actual epoch",
                100 * max(abs(a - e) / a for e, a in pairs),
                "%",
                "measured",
                n=1,
                source="|actual - estimated| / actual, over the variants",
            ),
        )
    else:
        head = say("No variant ran.")
    unsaid = [
        *(
            ["why those batches took so long beyond the first batch's wait for the loader"]
            if named_slow
            else []
        ),
        *(["what the time outside the batches went to"] if outside else []),
    ]
    reference = _reference_misses()
    bounds: dict = {}
    throughput = throughput_findings(res, bounds)
    return Answer(
        "Estimated (N / B x time per batch) vs actual epoch time, per variant",
        head,
        ([say("{items}.", items=join(items, "; ")).up()] if items else [])
        + went
        + ([say("The record does not say {what}.", what=", nor ".join(unsaid))] if unsaid else [])
        + ([reference] if reference is not None else [])
        + throughput,
        [
            Background(
                "An epoch estimated from the median batch leaves out what happens outside the batches, such "
                "as the loader's start and a partial last batch, and any batch that takes longer than the "
                "median."
            )
        ],
        status="partial" if len(skipped) else "answered",
        missing="; ".join(
            f"{r.variant}: {SKIPPED_NEEDS.get(r.variant, 'a run')}" for r in skipped.itertuples()
        ),
        verdict=bounds or None,
    )


# what a skipped variant needs, in words (its table row's note says why it was skipped, with its numbers)
SKIPPED_NEEDS = {
    "DataParallel": "a run on two or more GPUs",
    "DDP": "a run with two or more worker processes",
}


def learning_flags(res) -> list[sanity.Flag]:
    """Each run's own 'did not learn' record (meta.json's did_not_learn, decided at the run's end) as its
    flag, as c4's, c6's and c7's pages say of theirs: the worker runs by their count, the variants by name (a
    grader found all four runs' records at chance and no word of it on the page)."""
    runs = [(_workers(w), r) for w, r in sorted(res.workers.items())]
    runs += [(name, r) for name, r in (res.variants or {}).items() if name != "baseline"]
    seen, named = set(), []
    for label, run in runs:
        if run is None or id(run) in seen:  # the baseline variant is a worker run: said once
            continue
        seen.add(id(run))
        named.append((label, getattr(run, "meta", None)))
    return learned_flags(named)


def conclude(cfg, res) -> tuple[list[Answer], list[sanity.Flag]]:
    """Bottleneck (0 vs N workers), checkpointing's cost in time and gain in batch, estimated vs actual
    epochs."""
    # the stand-in's parameters counted for the 200 classes it trained on (it said 78,002, a 10-class model's)
    flags = [sanity.stand_in(cfg, num_classes=CLASSES_TIN), busy_flag(res)]
    for name, rec in [*res.workers.items(), ("checkpointing", res.variants.get("checkpointing"))]:
        if rec is not None:
            flags.append(sanity.diverged(rec.table("batches")["loss"], CLASSES_TIN, label=str(name)))
    flags += learning_flags(res)
    a2, a3 = checkpoint_answer(res), epochs_answer(res)
    a2.details.insert(0, memory_note(cfg, res))  # shown in the body too: the record holds its numbers
    a3.details.insert(0, setup(cfg, res))
    return [bottleneck_answer(res), a2, a3], dedupe(flags)


def runs_read(res) -> dict[str, object]:
    """Every run this page reads, once each, by its folder (its meta's run_id, else its label here): the two
    worker runs and each variant that ran (the baseline is the worker run with N workers, read once)."""
    out: dict[str, object] = {}
    seen: set[int] = set()
    labelled = [(f"{w} workers", r) for w, r in sorted(res.workers.items())]
    labelled += [(str(k), r) for k, r in (getattr(res, "variants", None) or {}).items()]
    for label, rec in labelled:
        if rec is None or id(rec) in seen:
            continue
        seen.add(id(rec))
        out.setdefault(str(((getattr(rec, "meta", None) or {}).get("run_id")) or label), rec)
    return out


def busy_flag(res) -> sanity.Flag | None:
    """'machine busy' from the busiest of every run the page reads (runs_read: the worker runs, checkpointing,
    DataParallel and DDP), named by its folder, the count of runs being all of them."""
    loads = [
        {**rec.meta["machine"], "run": run}
        for run, rec in runs_read(res).items()
        if (getattr(rec, "meta", None) or {}).get("machine")
    ]
    return sanity.busiest_seen(loads)


REFERENCE_FIRST_BYTES = 112 * 112 * 64 * 4  # the reference's ImageNet stem output at 224 x 224, fp32


def setup(cfg, res) -> Finding:
    """The training set the run had, its stem and batch."""
    capped = (
        say(
            " Each epoch stops after {m} batches (max_batches): the estimates below count those, not "
            "the set.",
            m=Number("batches per epoch", int(cfg.max_batches), "", "setting", source="max_batches"),
        )
        if cfg.max_batches
        else say("")
    )
    return say(
        "Training set here: {n} images ({classes} classes{partial}); stem {stem}, batch {b}.{capped}",
        n=Number("training images", int(res.n_train), "", "counted", source="the dataset read"),
        classes=Number("classes", CLASSES_TIN, "", "setting", source="Tiny ImageNet"),
        # a partial copy of the real set, or no copy at all: synthetic data in its on-disk format
        partial=", synthetic"
        if _data_kind(res) == "synthetic"
        else ", a partial copy"
        if res.partial_copy
        else "",
        stem=cfg.stem,
        b=Number("batch size", int(cfg.batch_size), "", "setting", source="the run's config"),
        capped=capped,
    )


def _data_kind(res) -> str:
    """The kind of data the page's runs read ('synthetic', 'real'), from their records."""
    for run in (res.workers or {}).values():
        kind = (((run.meta or {}).get("dataset") or {}) if run is not None else {}).get("kind")
        if kind:
            return str(kind)
    return ""


def memory_note(cfg, res) -> Finding:
    """Static memory, the budget, and the first activation here and at the reference's 224 x 224."""
    first = res.first_activation
    return say(
        "Static memory (weights, gradients, optimizer state, buffers) {static}; budget {budget} ({note}). "
        "First activation with the {stem} stem: {f64} per image here, {f224} with this network's stem at the "
        "reference's input size, and all activations {all224} per image there; the reference's own first "
        "activation, for comparison: {ref}.",
        ref=Number(
            "reference: first activation per image",
            REFERENCE_FIRST_BYTES / 1e6,
            "MB",
            "reference",
            source="the reference's back-of-envelope: 112 x 112 x 64 floats of 4 bytes at 224 x 224",
        ),
        static=Number(
            "static memory",
            res.static_bytes / 1e6,
            "MB",
            "counted",
            source="parameters, gradients, optimizer state, buffers (memory.state_bytes)",
        ),
        budget=Number("memory budget", res.budget_bytes / 2**30, "GiB", "setting", source=res.budget_note),
        note=res.budget_note,
        stem=cfg.stem,
        f64=Number(
            "first activation per image", first["64"] / 1e6, "MB", "counted", source="its output bytes"
        ),
        f224=Number(
            "first activation per image at 224",
            first["224"] / 1e6,
            "MB",
            "counted",
            source="its output bytes",
        ),
        all224=Number(
            "all activations per image at 224",
            first["224_all"] / 1e6,
            "MB",
            "counted",
            source="saved for backward",
        ),
    )


def reference_note() -> Finding:
    """What the reference's table (study.REFERENCE) was measured on, above it on the page: its GPUs a
    Number of the record, their model a name."""
    from .study import REFERENCE_GPUS

    gpus, model = REFERENCE_GPUS
    return say(
        "The reference's table, full epochs on {gpus} {model} GPUs (its checkpointing comparison was "
        "invalid, see below):",
        gpus=Number("reference: GPUs", gpus, "", "reference", source="the Tiny ImageNet reference's table"),
        model=Ident(model),
    )


def worker_times_disjoint(res) -> bool:
    """Whether the worker runs' data wait and copy + compute are disjoint (_conclude.timing_disjoint of each
    run's sync_each_step and device), so that their sum is a batch's time and the figure may stack them."""
    return all(
        timing_disjoint(((rec.meta or {}).get("config") or {}).get("sync_each_step", False), rec.meta)
        for rec in res.workers.values()
    )


def worker_table(res) -> pd.DataFrame:
    """Per worker count: the median data wait and copy + compute per batch (ms) of the last epoch's batches
    after its first (_steady), the medians the bottleneck answer uses (epoch 1 is warm-up)."""
    rows = []
    for w, rec in res.workers.items():
        b = _steady(rec)
        rows.append(
            {
                "workers": w,
                "data ms/batch": summarize(1000 * b.data_s)["median"],
                "copy + compute ms/batch": summarize(1000 * b.train_s)["median"],
            }
        )
    return pd.DataFrame(rows)
