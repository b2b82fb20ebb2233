"""What the memory report concludes, computed from memory.MemoryResult: activation memory against depth
(RevNet), what checkpointing saves with its recomputation's working set counted, what each saving costs in
time (verdicts over interleaved rounds), whether both networks trained; and the tables the report shows, built
the same way.

Why one module of about 700 lines: the four answers and the tables beside them share their Numbers
(peak_share, working_set, the cost verdicts), so a table cannot state a number its answer does not."""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd

from ... import sanity
from ...answers import Answer, Number
from ...data import classes_of
from ...findings import Background, Finding, beside, fmt_in, fmt_value, join, say
from ...verdict import compare
from .._conclude import dedupe, span

# the memory task's lab settings: the reference's table is at batch 8 with its adjusted ResNet-18; the rest as
# Lab 2
COUNTED = "bytes of the tensors autograd saves for backward, counted over one forward pass"
LAB = {**sanity.LAB, "model": "resnet18_adjusted", "batch_size": 8}
# One measured peak has no spread: a measured share of the plain network's peak agrees with the predicted
# share when within this fraction of it, and departs beyond it (the answer then says so first).
PEAK_MARGIN = 0.10
# What recomputation is expected to cost: one more forward pass per step, with a backward pass taken as two
# forwards' work, (forward + backward + forward) / (forward + backward).
ONE_EXTRA_FORWARD = 4 / 3
# the digits the page shows that prediction at, and its interval ends are read against: as 1.33x, an end of
# 1.3304 (below 4/3) read above it (grade20)
PREDICTION_DIGITS = 4
# Activation bytes are counted, not timed, so they have no spread: a RevNet's saved bytes are "flat" across
# the depths run when the deepest saves at most this fraction more than the shallowest.
FLAT_MARGIN = 0.10


def working_set(res) -> dict[str, float]:
    """Checkpointed model -> the recomputation's own working set (MB per sample) at the peak of backward."""
    return {r["model"]: r["recompute_MB_per_sample"] for r in res.max_batch if r["method"] == "predicted"}


def at_peak(res) -> pd.DataFrame:
    """The comparison table with what each network holds at the peak of backward: saved for backward plus, for
    checkpointing, the recompute working set (the figure and the answer use the same column)."""
    t = res.table.copy()
    t["working_MB_per_sample"] = [working_set(res).get(m, 0.0) for m in t["model"]]
    t["peak_act_MB_per_sample"] = t["act_MB_per_sample"] + t["working_MB_per_sample"]
    base = t.set_index("model")["act_MB_per_sample"]
    t["peak_vs_plain"] = t["peak_act_MB_per_sample"] / [base[b] for b in t["baseline"]]
    return t


def report_table(res) -> pd.DataFrame:
    """The comparison table as the report shows it (reader's column names; no IQR for fewer than 3 rounds)."""
    t = at_peak(res)
    t.loc[t["repeats"] < 3, "s_iqr"] = float("nan")
    # the measured share the checkpointing answer holds against the predicted one: the same Number's value
    shares = [peak_share(res, m, b) if m != b else None for m, b in zip(t["model"], t["baseline"])]
    t["measured_vs_plain"] = [x.value if x is not None else float("nan") for x in shares]
    return t[
        [
            "model",
            "params",
            "act_MB_per_sample",
            "working_MB_per_sample",
            "peak_vs_plain",
            "peak_MB",
            *(["measured_vs_plain"] if res.cuda else []),
            "s_per_batch",
            "s_iqr",
            "time_vs_baseline",
        ]
    ].rename(
        columns={
            "act_MB_per_sample": "saved for backward (MB/sample)",
            "working_MB_per_sample": "recompute working set (MB/sample)",
            "peak_vs_plain": "saved + working set vs plain",
            "peak_MB": "peak allocated (MB)" if res.cuda else "peak MB (CUDA only)",
            "measured_vs_plain": "measured peak vs plain",
            "s_per_batch": "s per batch (median)",
            "s_iqr": "IQR (s)",
            "time_vs_baseline": "time vs plain",
        }
    )


def fits_table(res) -> pd.DataFrame:
    """The largest batch per model, measured (CUDA) or predicted, with the bytes per sample it comes from. A
    measured one is the sweep's: the largest size that fitted (0 where none did) and the first that ran out of
    memory, or "none up to" the largest size tried, where the limit is only known to be at least that."""
    swept = _sweeps(res)
    saved = res.table.set_index("model").act_MB_per_sample
    top = f"none up to {fmt_value(res.sweep[-1])}" if res.sweep else None
    return pd.DataFrame(
        {
            "model": list(res.largest),
            "largest batch": list(res.largest.values()),
            "how": ["measured" if m in swept else "predicted" for m in res.largest],
            "first out of memory": [(swept[m][1] or top) if m in swept else None for m in res.largest],
            "saved (MB/sample)": [saved[m] for m in res.largest],
            "recompute working set (MB/sample)": [working_set(res).get(m, 0.0) for m in res.largest],
        }
    )


def _sweeps(res) -> dict[str, tuple[int, int | None]]:
    """Per model swept on this GPU: (the largest batch that fitted, res.largest's; the smallest that ran out
    of memory, or None). The limit lies between them, or at or above the first when every size tried
    fitted."""
    failed: dict[str, int | None] = {}
    for r in res.max_batch:
        if r["method"] == "measured":
            first = failed.get(r["model"])
            if r["status"] != "ok" and (first is None or r["batch_size"] < first):
                first = r["batch_size"]
            failed[r["model"]] = first
    return {m: (res.largest[m], first) for m, first in failed.items()}


def largest_batch(res, model: str, baseline: str) -> Finding:
    """The largest batch of a checkpointed network against its plain network's. Predicted without a GPU (a
    ratio). On a GPU each limit is known only between the last size that fitted and the first that ran out of
    memory (the sweep doubles the batch), or as a lower bound when every size fitted: a side is named only
    when its limit is above the other's whole range, else this run cannot tell."""
    swept = _sweeps(res)
    if not res.cuda or not {model, baseline} <= swept.keys():
        predicted = {r["model"]: r["batch_size"] for r in res.max_batch if r["method"] == "predicted"}
        return say(
            "largest batch {gain} the plain network's",
            gain=Number(
                f"{model}: largest batch vs plain",
                predicted[model] / predicted[baseline],
                "x",
                "predicted",
                source="from bytes per sample and the stated budget",
            ),
        )
    source = "the sweep's batch sizes, each network alone on this GPU"
    (ck, ck_out), (pl, pl_out) = swept[model], swept[baseline]
    if ck_out is None and pl_out is None:
        return say(
            "both fitted the largest batch tried, {top}: this run cannot tell which fits the larger one",
            top=Number("largest batch tried", res.sweep[-1], "", "setting", source="the sweep's batch sizes"),
        )

    def side(name: str, fitted: int, out: int | None) -> Finding:
        size = Number(f"{name}: largest batch that fitted", fitted, "", "counted", source=source)
        if out is None:
            return say("{size} (every size tried fitted)", size=size)
        first = Number(f"{name}: first batch out of memory", out, "", "counted", source=source)
        if not fitted:
            return say("none ({first}, the smallest tried, ran out of memory)", first=first)
        return say("{size} ({first} ran out of memory)", size=size, first=first)

    if ck_out is not None and pl >= ck_out:
        verdict = "the plain network fits the larger batch"
    elif pl_out is not None and ck >= pl_out:
        verdict = "the checkpointed network fits the larger batch"
    else:
        verdict = "the sweep, which doubles the batch, cannot tell which fits the larger one"
    return say(
        "largest batch that fitted {ck} against {pl} for the plain network: " + verdict,
        ck=side(model, ck, ck_out),
        pl=side(baseline, pl, pl_out),
    )


def convergence_table(res) -> pd.DataFrame:
    """The two convergence runs: parameters, steps, first loss, mean loss over the last fifth, step time."""
    return pd.DataFrame(
        [
            {
                "model": k,
                "parameters": v.meta["parameters"],
                "steps": len(v.batches),
                "first loss": v.batches.loss.iloc[0],
                "mean loss, last 20% of steps": v.batches.tail(max(1, len(v.batches) // 5)).loss.mean(),
                "train s per step (median)": v.batches.train_s.median(),
            }
            for k, v in res.runs.items()
        ]
    )


def chance_loss(cfg) -> float:
    """The loss of a uniform guess over the run's classes: the line the convergence answer and figure judge
    by."""
    return sanity.chance_loss(classes_of(cfg))


def clear_of_chance(cfg) -> float:
    """The loss a run's last fifth must get under to be 'clearly below' chance (sanity.at_chance: more than
    CHANCE_MARGIN under it): the second line the convergence answer and figure judge by."""
    return (1 - sanity.CHANCE_MARGIN) * chance_loss(cfg)


def _times(row) -> list[float]:
    """A network's seconds per step, one per timed round in round order ('nan' kept in its place: a paired
    verdict leaves that round out of both sides)."""
    return [float(x) for x in str(row["times_s"]).split(";") if x]


def _counted(name: str, value: float, unit: str = "MB/sample") -> Number:
    return Number(name, float(value), unit, "counted", source=COUNTED)


def revnet_answer(res) -> Answer:
    """Activation memory of the shallowest and deepest RevNet, with and without its memory saving."""
    rev = res.table[res.table.family == "RevNet"].sort_values("depth")
    plain = res.table[res.table.family == "RevNet, ordinary autograd"].sort_values("depth")
    lo, hi = rev.iloc[0], rev.iloc[-1]
    nums = {
        "lo": _counted(f"{lo.model}: saved for backward", lo.act_MB_per_sample),
        "hi": _counted(f"{hi.model}: saved for backward", hi.act_MB_per_sample),
        "growth": _counted(
            "RevNet: deepest vs shallowest, saved for backward",
            hi.act_bytes_per_sample / lo.act_bytes_per_sample,
            "x",
        ),
        "deeper": Number(
            "RevNet: deepest vs shallowest, depth",
            hi.depth / lo.depth,
            "x",
            "setting",
            source="the depths run",
        ),
        "plain_lo": _counted(f"{plain.iloc[0].model}: saved for backward", plain.iloc[0].act_MB_per_sample),
        "plain_hi": _counted(f"{plain.iloc[-1].model}: saved for backward", plain.iloc[-1].act_MB_per_sample),
        "plain_growth": _counted(
            "ordinary autograd: deepest vs shallowest, saved for backward",
            plain.iloc[-1].act_bytes_per_sample / plain.iloc[0].act_bytes_per_sample,
            "x",
        ),
    }
    margin = Number("flat margin", 100 * FLAT_MARGIN, "%", "setting", source="memory.conclusion.FLAT_MARGIN")
    for k in ("growth", "plain_growth"):  # each on its side of 'flat' (a growth within the margin)
        nums[k] = beside(nums[k], 1 + FLAT_MARGIN)
    flat = nums["growth"].value <= 1 + FLAT_MARGIN
    plain_flat = nums["plain_growth"].value <= 1 + FLAT_MARGIN
    # the headline: the question's yes or no in words, the growth its one number; every byte count: the
    # details
    if flat:
        head = say(
            "Yes: RevNet's activation memory stays flat as depth grows ({growth} for {deeper} the depth)"
            + ("" if plain_flat else ", unlike ordinary autograd's"),
            growth=nums["growth"],
            deeper=nums["deeper"],
        )
    else:
        head = say(
            "No: RevNet's activation memory grows with depth ({growth} for {deeper} the depth)",
            growth=nums["growth"],
            deeper=nums["deeper"],
        )
    return Answer(
        "Does a RevNet keep activation memory flat as depth grows?",
        head,
        [
            say(
                "RevNet saved {lo} for backward at the shallowest depth and {hi} at the deepest ({growth} "
                "for {deeper} the depth); the same networks under ordinary autograd: {plain_lo} and "
                "{plain_hi} ({plain_growth}). Flat means a growth within {margin}: the bytes are counted, "
                "with no spread.",
                margin=margin,
                **nums,
            )
        ],
        background=[
            Background(
                "A reversible unit recomputes its input from its output in the backward pass, so it need not "
                "keep activations for backward; ordinary autograd keeps them for every layer."
            )
        ],
    )


def checkpoint_answer(cfg, res) -> Answer:
    """What checkpointing holds at the peak of backward (saved + the recomputation's working set) against the
    plain network, and the largest batch that follows; one finding per ResNet, the range in the headline."""
    t = res.table.set_index("model")
    work = working_set(res)
    ck = res.table[res.table.family == "ResNet + checkpointing"]
    if ck.empty:
        return Answer(
            "What does gradient checkpointing save, its recomputation counted?",
            say(
                "Checkpointing was not run: checkpoint_segments was {segments}.",
                segments=Number(
                    "checkpoint segments", cfg.checkpoint_segments, "", "setting", source="the run's config"
                ),
            ),
        )
    segments = Number(
        "checkpoint segments", cfg.checkpoint_segments, "", "setting", source="the run's config"
    )
    details, shares = [], []
    for r in ck.itertuples():
        base = t.loc[r.baseline]
        share = Number(
            f"{r.model}: saved + working set vs plain",
            (r.act_MB_per_sample + work.get(r.model, 0.0)) / base.act_MB_per_sample,
            "x",
            "predicted",
            source="activation bytes counted; working set = plain / segments",
        )
        shares.append(share)
        details.append(
            say(
                "{base}: saved {saved} + recompute working set {work} against {plain} for the plain network "
                "(predicted {share} of it); {fit}.",
                base=r.baseline,
                saved=_counted(f"{r.model}: saved for backward", r.act_MB_per_sample),
                work=Number(
                    f"{r.model}: recompute working set",
                    work.get(r.model, 0.0),
                    "MB/sample",
                    "predicted",
                    source="plain network's saved bytes / segments",
                ),
                plain=_counted(f"{r.baseline}: saved for backward", base.act_MB_per_sample),
                share=share,
                fit=largest_batch(res, r.model, r.baseline),
            )
        )
    lo, hi = min(shares, key=lambda n: n.value), max(shares, key=lambda n: n.value)
    # a prediction from counted bytes (the working set taken as plain / segments), not a measured peak
    how = (
        ", its recomputation counted: predicted from the bytes autograd saves, the recomputation's working "
        "set taken as the plain network's divided by the segments"
        + ("." if res.cuda else "; no peak was measured here (no GPU).")
    )
    predicted = (
        say(
            "With {segments} segments, a checkpointed ResNet is predicted to hold {share} of its plain "
            "network's activation memory at the peak of backward" + how,
            segments=segments,
            share=lo,
        )
        if lo is hi
        else say(
            "With {segments} segments, a checkpointed ResNet is predicted to hold between {lo} and {hi} of "
            "its plain network's activation memory at the peak of backward" + how,
            segments=segments,
            lo=lo,
            hi=hi,
        )
    )
    # the headline in one breath: what was predicted (the largest share, one number) or, measured on a GPU,
    # whether the measurement departs from the prediction; the range and how it was found: the details
    short = say(
        "Predicted, not measured: with {segments} segments a checkpointed ResNet holds "
        + ("{hi}" if lo is hi else "at most {hi}")
        + " of its plain network's activation memory",
        segments=segments,
        hi=hi,
    )
    checked = peak_checks(res, ck, dict(zip(ck.model, shares)))
    headline, details = short, [predicted, *details]
    if checked:
        headline, full, measured = peak_findings(checked)
        details = [full, measured, *details]
    return Answer(
        "What does gradient checkpointing save, its recomputation counted?",
        headline,
        details,
        [
            Background(
                "Checkpointing keeps only each segment's input for backward and recomputes the segment's "
                "activations there, holding one segment's worth again while it does."
            )
        ],
        status="answered" if res.cuda else "partial",
        missing="" if res.cuda else "a GPU: peak allocated memory and the largest batch are predicted here",
    )


def peak_share(res, model: str, baseline: str) -> Number | None:
    """The measured share of the plain network's memory a network's training step used: the CUDA peak above
    what was allocated before the step (weights, gradients, optimizer state, the batch) where the study
    recorded that, else the whole peak (that state included, said in its source); None without both peaks (no
    GPU)."""
    t = res.table.set_index("model")
    if not res.cuda or "peak_MB" not in t:
        return None
    peak, base = float(t.loc[model, "peak_MB"]), float(t.loc[baseline, "peak_MB"])
    if not (math.isfinite(peak) and math.isfinite(base)) or base <= 0:
        return None
    held = (
        (float(t.loc[model, "resident_MB"]), float(t.loc[baseline, "resident_MB"]))
        if "resident_MB" in t
        else (math.nan, math.nan)
    )
    if all(math.isfinite(x) for x in held) and base > held[1]:
        value, what = (peak - held[0]) / (base - held[1]), "peak above what the step started from"
    else:
        value, what = peak / base, "whole peak, weights, gradients and optimizer state included"
    return Number(
        f"{model}: measured peak vs plain",
        value,
        "x",
        "measured",
        n=1,
        source=f"CUDA peak allocated in one training step ({what}), over the plain network's",
    )


PEAKS = "checkpointed networks whose peak and their plain network's were measured"


def peak_checks(res, ck: pd.DataFrame, predicted: dict) -> list[tuple[str, Number, Number, bool]]:
    """(plain network, predicted share, measured share, whether the measurement departs from the prediction by
    more than PEAK_MARGIN) for each checkpointed network whose peak and its plain network's were measured."""
    out = []
    for r in ck.itertuples():
        got = peak_share(res, r.model, r.baseline)
        if got is not None:
            want = predicted[r.model]
            out.append((r.baseline, want, got, abs(got.value / want.value - 1) > PEAK_MARGIN))
    return out


def peak_findings(checked: list) -> tuple[Finding, Finding, Finding]:
    """The study's question answered by its measurement first: whether the checkpointed networks' measured
    peaks departed from the predicted share by more than the margin, and which way, in words (the headline);
    how many of how many, and the margin (a detail); then each network's measured and predicted share (a
    detail)."""
    margin = Number(
        "peak margin",
        100 * PEAK_MARGIN,
        "%",
        "setting",
        source="memory.conclusion.PEAK_MARGIN (one peak, no spread)",
    )
    items = say(
        "Measured share of the plain network's peak against the predicted share: {items}.",
        items=join(
            [say("{base} {m} against {p}", base=b, m=m, p=p) for b, p, m, _ in checked], ", ", " and "
        ),
    )
    off = [(m, p) for _, p, m, departs in checked if departs]
    n = Number("checkpointed networks with a measured peak", len(checked), "", "counted", source=PEAKS)
    if not off:
        return (
            say(
                "Measured on this GPU, each checkpointed ResNet's peak memory agrees with its predicted share"
            ),
            say(
                "The peak memory of each of the {n} checkpointed ResNets agrees with the predicted share of "
                "its plain network's, within {margin}.",
                n=n,
                margin=margin,
            ),
            items,
        )
    way = (
        "saved less than predicted"
        if all(m.value > p.value for m, p in off)
        else "saved more than predicted"
        if all(m.value < p.value for m, p in off)
        else "departs from the prediction"
    )
    k = Number("checkpointed networks off the predicted peak", len(off), "", "counted", source=PEAKS)
    head = (
        say("Measured on this GPU, checkpointing " + way + " for every ResNet measured")
        if len(off) == len(checked)
        else say("Measured on this GPU, checkpointing " + way + " for {k} of the ResNets measured", k=k)
    )
    return (
        head,
        say(
            "For {k} of {n} ResNets the share of the plain network's peak memory is off the predicted one by "
            "more than {margin}.",
            k=k,
            n=n,
            margin=margin,
        ),
        items,
    )


def _load_per_core(res) -> float | None:
    m = (getattr(res, "meta", None) or {}).get("machine") or {}
    return m["load1"] / max(1, m.get("cores") or 1) if m.get("load1") is not None else None


def cost_verdicts(res) -> dict:
    """Each memory-saving network -> the verdict of its time per training step against its plain network's.
    The networks took turns in every timed round (profiling.interleaved_timed): an interleaved design."""
    t = res.table.set_index("model")
    load = _load_per_core(res)
    loads = [load] if load is not None else []  # one reading for the rounds both sides shared
    got = {
        r.model: replace(
            compare(
                _times(t.loc[r.baseline]),
                _times(r._asdict()),
                r.baseline,
                saving_label(r.model, r.baseline),
                what="time per training step",
                interleaved=True,
                paired=True,  # one step of each network per round (profiling.interleaved_timed)
                load_a=loads,
                load_b=loads,
            ),
            limits=(ONE_EXTRA_FORWARD,),  # held against the prediction: its ends show their side of it
            limit_digits=PREDICTION_DIGITS,  # as the page shows it (extra_forward)
        )
        for r in res.table.itertuples()
        if r.model != r.baseline
    }
    # the prediction at the digits that put it on its side of every interval end, and the ends read against it
    # as shown (grade32b: an end of 1.333214, below 4/3, printed 1.3332x beside a prediction shown 1.333x)
    digits = prediction_digits(got)
    return {m: replace(v, limit_digits=digits) for m, v in got.items()}


def prediction_digits(verdicts: dict) -> int:
    """The significant digits the prediction is shown at: PREDICTION_DIGITS, more where an interval end lies
    so near 4/3 that fewer would show the prediction on the end's side (findings.beside)."""
    ends = [x for v in verdicts.values() if v.has_interval for x in (v.ci_low, v.ci_high)]
    return beside(extra_forward(), *ends).digits if ends else PREDICTION_DIGITS


def saving_label(model: str, baseline: str) -> str:
    """The memory-saving network as a verdict names it: a RevNet and its plain twin share a name ('revnet38'
    and 'revnet38 (no saving)'), so the saving one is 'revnet38 (reversible)'; a checkpointed ResNet has its
    own."""
    return f"{model} (reversible)" if baseline.startswith(model + " ") else model


def tally(verdicts: dict) -> dict[str, list]:
    """The comparisons by outcome: 'slower' (the memory-saving network lost to its plain one), 'faster',
    'tie'."""
    out = {"slower": [], "faster": [], "tie": []}
    for model, v in verdicts.items():
        out[{"better": "slower", "worse": "faster"}.get(v.outcome, "tie")].append((model, v))
    return out


def _count(name: str, k: int) -> Number:
    return Number(name, k, "", "counted", source="memory-saving networks against their plain network")


def cost_answer(res) -> Answer:
    """What the memory saving costs in time: how many comparisons went which way (never only the first), the
    range of the clear slowdowns, then every comparison's own verdict."""
    verdicts = cost_verdicts(res)
    if not verdicts:
        return Answer(
            "What does the memory saving cost in time?",
            say("No memory-saving network was timed against its plain network."),
            status="not answered",
            missing="a memory-saving network and its plain network, timed in the same rounds",
        )
    groups = tally(verdicts)
    words = next(iter(verdicts.values())).words()  # ("faster", "slower"): the verdicts' own direction words
    n = _count("cost comparisons", len(verdicts))
    parts = []
    for key, word in (("slower", words[1]), ("faster", words[0])):
        got = groups[key]
        if not got:
            continue
        ratios = [
            Number(
                f"{model}: time vs plain",
                v.ratio if key == "slower" else 1 / v.ratio,
                "x",
                "measured",
                n=min(v.n_a, v.n_b),
                source="ratio of medians, the slower over the faster",
            )
            for model, v in got
        ]
        k = _count(f"cost comparisons: memory-saving network {word}", len(got))
        part = say("{k} {word} ({span})", k=k, word=word, span=span(ratios))
        # a count of the verdicts' own outcomes, in their words: the statement of those verdicts
        # (data-verdict)
        parts.append(part.marked("cost: " + ", ".join(m for m, _ in got)))
    if groups["tie"]:
        parts.append(
            # words true of every tie's reason, one whose two sides differ, perhaps negligibly, too (grade39a)
            say("{k} named no winner", k=_count("cost comparisons: cannot tell", len(groups["tie"])))
        )
    tallied = say(
        "Of {n} memory-saving networks timed against their plain network per training step: {parts}.",
        n=n,
        parts=join(parts, "; "),
    )
    details = [say("{v}.", v=v.finding(f"{m} vs {v.label_a}: time per step")) for m, v in verdicts.items()]
    against = cost_against_prediction(verdicts, methods_of(res))
    if against is None:  # no interval to hold against the prediction (too few rounds each)
        headline = say(
            "Too few timed rounds to tell what the memory saving costs: no comparison has an interval"
        )
        details = [tallied, *details]
    else:
        headline, stated = against
        details = [stated, tallied, *details]
    return Answer(
        "What does the memory saving cost in time?",
        headline,
        details,
        [
            Background(
                "Both methods redo forward work in the backward pass, so a step usually costs about one "
                "extra forward; on a busy machine the rounds' spread can hide that."
            )
        ],
        verdict={m: v.as_dict() for m, v in verdicts.items()},
    )


def extra_forward(digits: int = PREDICTION_DIGITS) -> Number:
    """The prediction, 4/3, at `digits` (the verdicts' limit_digits, prediction_digits)."""
    return Number(
        "one extra forward: predicted time vs plain",
        ONE_EXTRA_FORWARD,
        "x",
        "predicted",
        source="(forward + backward + forward) / (forward + backward), a backward taken as two forwards",
        digits=digits,
    )


# the memory-saving families as a cost headline names them (the table's family -> the method)
METHODS = {"ResNet + checkpointing": "checkpointing", "RevNet": "RevNet"}
PREDICTED = "the predicted one extra forward pass ({pred})"
NOUNS = {"checkpointing": "checkpointed ResNets", "RevNet": "RevNets"}  # a method's networks, in a headline
NOUN = {"checkpointing": "checkpointed ResNet", "RevNet": "RevNet"}  # one of them


def methods_of(res) -> dict[str, str]:
    """Each memory-saving network -> its method as a headline names it ('checkpointing', 'RevNet')."""
    return {r.model: METHODS.get(r.family, r.family) for r in res.table.itertuples() if r.model != r.baseline}


def _side_of(v, pred: Number) -> str | None:
    """Where a verdict's interval (the memory-saving network's time over its plain network's) lies against the
    prediction: 'above' or 'below' when the whole interval does, 'within' when it holds it; None without an
    interval (too few rounds)."""
    if not v.has_interval:
        return None
    return "above" if v.ci_low > pred.value else "below" if v.ci_high < pred.value else "within"


def _cost_headline(sides: dict[str, str], methods: dict[str, str], pred: Number) -> Finding:
    """The measured costs against the prediction in one breath, the verdict in words first and the prediction
    its one number. The networks off the prediction are named by their method where they are all of one
    ('Checkpointing cost more than ...; RevNet was consistent with it', 'Some checkpointed ResNets cost more
    than ...'), else counted in words (every, most, some memory savings)."""
    nets: dict[str, list[str]] = {}
    for model in sides:
        nets.setdefault(methods.get(model, ""), []).append(model)
    above = [m for m, s in sides.items() if s == "above"]
    below = [m for m, s in sides.items() if s == "below"]
    within = [m for m, s in sides.items() if s == "within"]
    if not above and not below:
        return say("Every memory saving's cost was consistent with " + PREDICTED, pred=pred)

    def method(models: list[str]) -> str | None:  # the one method all of `models` belong to, if any
        got = {methods.get(m, "") for m in models}
        return got.pop() if len(got) == 1 and "" not in got else None

    def subject(
        models: list[str],
    ) -> str | None:  # 'checkpointing', 'most RevNets', 'some checkpointed ResNets'
        m = method(models)
        if m is None:
            return None
        if len(models) == len(nets[m]):
            return m
        if len(models) == 1:  # one network is one, not "some" (a grader read "some" over exactly one)
            return "one " + NOUN.get(m, m + " network")
        return ("most " if 2 * len(models) > len(nets[m]) else "some ") + NOUNS.get(m, m + " networks")

    if above and below:
        a, b = subject(above), subject(below)
        if a and b and method(above) != method(below):  # "some" says where not every network of a method is
            return say("{a} cost more than " + PREDICTED + ", {b} less", a=a, b=b, pred=pred).up()
        return say(
            "Some memory savings cost more than "
            + PREDICTED
            + ", others less"
            + ("; some were consistent with it" if within else ""),
            pred=pred,
        )
    off, word = (above, "more") if above else (below, "less")
    if len(off) == len(sides):
        return say("Every memory saving cost " + word + " than " + PREDICTED, pred=pred)
    who = subject(off) or (
        "one memory saving"
        if len(off) == 1
        else ("most" if 2 * len(off) > len(sides) else "some") + " memory savings"
    )
    rest, slots = "all other networks were consistent with it", {}
    if method(off) and who == method(off):  # a whole method off the prediction: the others consistent with it
        others = [m for m in nets if m != method(off)]
        rest = "{others} " + ("was" if len(others) == 1 else "were") + " consistent with it"
        slots["others"] = " and ".join(others)
    return say("{who} cost " + word + " than " + PREDICTED + "; " + rest, who=who, pred=pred, **slots).up()


def cost_against_prediction(
    verdicts: dict, methods: dict[str, str] | None = None
) -> tuple[Finding, Finding] | None:
    """Each measured cost (a verdict's interval of the memory-saving network's time over its plain network's)
    held against the one extra forward predicted: above it when the whole interval lies above, below when
    below, else consistent with it. (headline, statement): the headline from _cost_headline (`methods`: each
    network's method, for a headline per method); the statement names, per side, how many of how many
    networks, which, and their measured range. None when no verdict has an interval (too few rounds)."""
    pred = extra_forward(max((v.limit_digits for v in verdicts.values()), default=PREDICTION_DIGITS))
    sides = {m: s for m, v in verdicts.items() if (s := _side_of(v, pred)) is not None}
    if not sides:
        return None
    n = Number(
        "cost comparisons with an interval", len(sides), "", "counted", source="verdicts with an interval"
    )

    def count(key: str) -> Number:
        return Number(
            fmt_in("cost comparisons {side} the prediction", side=key),
            sum(s == key for s in sides.values()),
            "",
            "counted",
            source="verdicts",
        )

    def names(key: str) -> str:
        return ", ".join(verdicts[m].label_b for m, s in sides.items() if s == key)

    parts = [
        say(
            "{k} of {n} networks " + key + " it ({names}: {span}, each whole interval " + key + " it)",
            k=count(key),
            n=n,
            names=names(key),
            span=span(
                [
                    beside(
                        Number(
                            f"{model}: time vs plain, against the prediction",
                            verdicts[model].ratio,
                            "x",
                            "measured",
                            n=min(verdicts[model].n_a, verdicts[model].n_b),
                            source="ratio of medians, the memory-saving network's time over its plain "
                            "network's",
                        ),
                        pred,
                    )
                    for model, s in sides.items()
                    if s == key
                ]
            ),
        )
        for key in ("above", "below")
        if key in sides.values()
    ]
    if "within" in sides.values():
        parts.append(
            say(
                "{k} of {n} networks whose interval holds it ({names})",
                k=count("within"),
                n=n,
                names=names("within"),
            )
        )
    stated = say(
        "Time per step over the plain network's, against " + PREDICTED + ": {parts}.",
        pred=pred,
        parts=join(parts, "; "),
    )
    return _cost_headline(sides, methods or {}, pred), stated


def convergence_answer(cfg, res) -> tuple[Answer, list[sanity.Flag]]:
    """Whether both networks got clearly below chance on the same steps (the mean loss over the last
    fifth)."""
    classes = classes_of(cfg)
    chance = Number(
        "chance loss",
        sanity.chance_loss(classes),
        "",
        "predicted",
        source="ln classes: the loss of a uniform guess",
    )
    # 'clearly below' as the rule decides it (sanity.at_chance), stated and drawn beside chance (grade19: a
    # loss of 2.205 under the drawn chance line, 2.3, was 'not clearly below' by an unstated 2.19)
    clear = Number(
        "clearly below chance: loss limit",
        clear_of_chance(cfg),
        "",
        "setting",
        source="(1 - sanity.CHANCE_MARGIN) x ln classes",
    )
    margin = Number(
        "clearly below chance: margin",
        100 * sanity.CHANCE_MARGIN,
        "%",
        "setting",
        source="sanity.CHANCE_MARGIN",
    )
    trained, flags = [], []
    tails = {}
    for name, run in res.runs.items():
        fifth = max(1, len(run.batches) // 5)
        tails[name] = Number(
            f"{name}: mean loss, last fifth",
            float(run.batches.tail(fifth)["loss"].mean()),
            "",
            "measured",
            n=fifth,
        )
        d = sanity.diverged(list(run.batches["loss"]), classes, label=name)
        if d:
            flags.append(d)
        elif not sanity.at_chance(list(run.batches["loss"]), classes):
            trained.append(name)
    # the limit, then each loss, at the digits that show their order as printed
    clear = beside(clear, *[x.value for x in tails.values()])
    tails = {k: beside(x, clear) for k, x in tails.items()}
    said = join(  # a NaN loss is no number to state (a record refuses one)
        [
            say("{name} {x}", name=k, x=x)
            if math.isfinite(x.value)
            else say("{name} diverged (the loss became NaN or infinite)", name=k)
            for k, x in tails.items()
        ],
        ", ",
    )
    others = sorted(set(res.runs) - set(trained))
    # the headline: who trained, in words, against chance (its one number); each network's loss: the details
    if len(trained) == len(res.runs):
        head = say("Both got clearly below the chance loss ({chance})", chance=chance)
    elif not trained:
        head = say(
            "Neither got clearly below the chance loss ({chance}): too few steps to show training or compare "
            "convergence",
            chance=chance,
        )
    else:
        head = say(
            "Only {ok} got clearly below the chance loss ({chance}); {rest} did not in this run",
            ok=", ".join(trained),
            rest=", ".join(others),
            chance=chance,
        )
    return (
        Answer(
            "Do ResNet and RevNet both train on the same steps?",
            head,
            [
                say(
                    "Mean loss over the last fifth: {said}; chance {chance}, and clearly below it means "
                    "under {clear}, more than {margin} below it.",
                    said=said,
                    chance=chance,
                    clear=clear,
                    margin=margin,
                )
            ],
            background=[
                Background("One seed per network: a difference within the curves' noise is no evidence.")
            ],
        ),
        flags,
    )


def budget_note(res) -> Finding:
    """The memory budget the largest batch is searched or predicted for."""
    budget = Number(
        "memory budget",
        res.budget_bytes / 1024**3,
        "GiB",
        "measured" if res.cuda else "setting",
        n=1 if res.cuda else None,
        source="" if res.cuda else "the task's budget_gb setting",
    )
    if res.cuda:
        return say(
            "Budget: {budget}, the GPU's memory. A measured value equal to the sweep's largest size ({top}) "
            "is a lower bound.",
            budget=budget,
            top=Number("largest batch tried", res.sweep[-1], "", "setting", source="the sweep's batch sizes"),
        )
    return say("Budget: {budget}, stated: no GPU here, so every largest batch is predicted.", budget=budget)


def conclude(cfg, settings, res) -> tuple[list[Answer], list[sanity.Flag]]:
    """RevNet and checkpointing against the plain networks: activation memory (with the recomputation's own
    working set), the largest batch, the time it costs (verdicts over interleaved rounds, summarised by how
    many went which way), and whether both networks trained."""
    a4, flags = convergence_answer(cfg, res)
    meta = getattr(res, "meta", None) or {}
    flags = [sanity.busy(meta.get("machine"), run=str(meta.get("run_id") or ""))] + flags  # the table's run
    a2 = checkpoint_answer(cfg, res)
    a2.details.append(budget_note(res))  # the budget the largest batches are for, shown in the body too
    return [revnet_answer(res), a2, cost_answer(res), a4], dedupe(flags)
