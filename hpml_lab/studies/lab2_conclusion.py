"""What several Lab 2 tasks' conclusions share: how train() timed a run, said only as far as its settings make
it true (timing_method, timing_disjoint), what a run's first epoch, left out as warm-up, showed
(first_epoch_finding), every verdict of a best-of-several as a finding (best_findings), and the conclusion of
a training sweep, one run per value of a setting (training_sweep). Each task's own conclusion is its folder's
conclusion.py (hpml_lab/studies/<task_id>/).

    from hpml_lab.studies import lab2_conclusion
    nb.said(*lab2_conclusion.timing_method(cfg, run.meta))     # the method sentences of a run's timing
    lab2_conclusion.first_epoch_finding([5.6, 6.6, 6.6])       # 'The first epoch took 5.6 s, shorter ...'
    answers, flags = lab2_conclusion.training_sweep(cfg, out, "optimizer", "Which optimizer trains best?")

No sentence here states a direction it did not compute: comparisons come from hpml_lab.verdict, flags from
hpml_lab.sanity. tests/studies/test_conclusions.py feeds canned results to every branch.
"""

from __future__ import annotations

from .. import sanity
from ..answers import Answer, Number
from ..data import classes_of
from ..findings import Background, Finding, join, say
from ..results import drop_warmup
from ..verdict import best, sample_record
from ._conclude import (
    busy_of,
    counted,
    dedupe,
    metas_by,
    num,
    on_gpu,
    setting,
    step_times,
    too_few_epochs,
    trend_flags,
    twin_noise,
)
from ._conclude import span as spanned
from ._conclude import timing_disjoint as _timing_disjoint


def timing_disjoint(cfg, meta) -> bool:
    """_conclude.timing_disjoint for a run of `cfg` (its sync_each_step) whose meta is `meta`."""
    return _timing_disjoint(cfg.sync_each_step, meta)


def data_method(cfg, meta) -> Finding:
    """What a run's data-loading time holds, said only as far as its settings make it true (worker start-up
    only with workers; a device-resident loader's queued work), as a clause starting in lower case ('data
    loading is ...'): timing_method's first sentence, and C4's for each kind of worker count it ran."""
    gpu, synced = on_gpu(meta), bool(cfg.sync_each_step)
    if cfg.loader == "tensor":
        return say(
            "data loading is the time next(loader) takes to crop, flip and normalise a batch of the dataset "
            "held on the device"
            + (
                ": on the GPU, without a synchronize after each step, that is only the time to queue the "
                "work, whose run time falls in neither interval, only in the total"
                if gpu and not synced
                else ", its work waited for before the step starts"
                if gpu
                else ""
            )
        )
    if cfg.num_workers > 0:  # workers kept between epochs start once (review39), else at every epoch
        return say(
            "data loading is the host's wait in next(loader), the start of the loader's worker processes on "
            + ("the first epoch's" if cfg.persistent_workers else "each epoch's")
            + " first batch included; the host-to-device copy is not data loading but part of training"
        )
    return say(
        "data loading is the time next(loader) takes, the training process reading and augmenting each batch "
        "itself (no worker processes); the host-to-device copy is not data loading but part of training"
    )


def timing_method(cfg, meta) -> list[Finding]:
    """How train() timed this run, said only as far as its settings make it true: what data loading holds
    (worker start-up only with workers; a device-resident loader's queued work), how training is timed on this
    device, whether the two intervals can overlap (sync_each_step, the device), and what the rest of the epoch
    is."""
    gpu, synced = on_gpu(meta), bool(cfg.sync_each_step)
    data = data_method(cfg, meta).up()
    if not gpu:
        timed = say(
            "Training (copy, forward, backward, optimizer step) is timed with perf_counter: on the CPU the "
            "work runs as it is issued, so the two intervals never overlap and data loading + training is "
            "at most the total"
        )
    elif synced:
        timed = say(
            "Training (copy, forward, backward, optimizer step) is timed with CUDA events, and the device is "
            "synchronized after every step (sync_each_step on), so the two intervals never overlap and data "
            "loading + training is at most the total"
        )
    else:
        timed = say(
            "Training (copy, forward, backward, optimizer step) is timed with CUDA events read at the "
            "epoch's end, and the device is not synchronized between steps (sync_each_step off): the host "
            "fetches the next batch while the GPU still works, so the two intervals can overlap and data "
            "loading + training can exceed the total"
        )
    total = say(
        "The total is the synchronized wall time of the whole epoch; "
        + (
            "the rest of it is the loop's own work (metrics, Python)"
            if timing_disjoint(cfg, meta)
            else "where the two intervals overlap, total minus data loading minus training is not the loop's "
            "own work, and it is not shown"
        )
    )
    # shown on their own (nb.said), each a sentence
    return [say("{x}.", x=f) for f in (data, timed, total)]


# DataLoader workers started again at every epoch, said as background only where the settings make it true:
# persistent_workers off and some run with workers (c2, c4, c5: grade34a, grade38a)
WORKER_RESTART = (
    "DataLoader workers that are not kept between epochs (persistent_workers off) start again at every "
    "epoch, and their start-up competes with the first training steps for the cores: part of what loading "
    "costs can then show in the steps' own time, not in the data wait."
)


def worker_restart(cfg, worker_counts) -> list[Background]:
    """WORKER_RESTART where the runs' settings make it true: persistent_workers off, and at least one of
    `worker_counts` (the runs' num_workers) above 0; else nothing (no worker process: nothing restarts)."""
    if cfg.persistent_workers or not any(int(n) > 0 for n in worker_counts):
        return []
    return [Background(WORKER_RESTART)]


STEADY_SPREAD = 1.1  # epochs whose longest is more than this times the shortest are not steady
# a rise from one kept epoch to the next that counts toward a drift: the least difference a verdict clears
# (verdict.compare's min_effect); less is noise between single epochs
DRIFT_STEP = 0.02
# a first epoch counts as longer than the epochs kept only beyond this share of the longest of them: one epoch
# against one, 2.7931 s against 2.7902 s, was said to be "longer" and a warm-up (a grader: 0.1% is noise)
FIRST_MARGIN = 0.05


def first_epoch_finding(
    totals, who: str | Finding = "", name: str = "", repeats: bool = False
) -> Finding | None:
    """What a run's whole epochs (`totals`, seconds, in order) show of its first epoch, which every summary
    leaves out as warm-up by rule: that it was longer than each epoch kept; or why this run cannot tell (the
    epochs grew longer through the run, the epochs kept were not steady, or the first was clearly shorter than
    each of them: something slowed the later epochs, and it would hide a warm-up; beside unsteady epochs kept,
    said shorter where it was); or that it was shorter than them by more than FIRST_MARGIN, no longer, among
    them or within the margin above them, with no one-time cost showing. None for a run of one epoch (it is
    reported as is).

    `who` names the run in the sentence (' on the CPU'), `name` starts its Numbers' names ('cpu: ');
    `repeats`: each epoch's first step was found to hold a start-up of its own (C2's first-step verdict),
    which every epoch repeats, so that whole epochs cannot set it apart and 'no one-time cost' must not deny
    it."""
    totals = [float(x) for x in totals]
    if len(totals) < 2:
        return None
    later = totals[1:]
    first = Number(f"{name}first epoch", totals[0], "s", "measured", n=1)
    if len(later) == 1:
        lo = hi = Number(f"{name}epoch kept", later[0], "s", "measured", n=1)
        span = say("{x}", x=hi)
    else:
        lo = Number(f"{name}shortest epoch kept", min(later), "s", "measured", n=1)
        hi = Number(f"{name}longest epoch kept", max(later), "s", "measured", n=1)
        span = spanned([lo, hi])  # one value where the two ends print alike
    kept = "the epoch kept" if len(later) == 1 else "each epoch kept"
    by_rule = "; it is left out by rule, as every run's first epoch is"
    margin = Number(
        "warm-up margin", 100 * FIRST_MARGIN, "%", "setting", source="lab2_conclusion.FIRST_MARGIN"
    )
    if first.value > hi.value * (1 + FIRST_MARGIN):  # single values side by side, no verdict: "longer than"
        return say(
            "The first epoch{who} took {first}, longer than " + kept + " ({span}): it is left out as warm-up",
            who=who,
            first=first,
            span=span,
        )
    # a drift: every epoch longer than the one before, and either the epochs kept spread past what steady
    # epochs do, or three or more of them climb past it from the first; two kept epochs a hair apart after
    # one step up are no drift (grade32a: 6.87, 8.22 and 8.26 s were called one a rising load can cause)
    # (grade33a: with a fourth epoch, 6.87, 8.22, 8.23 and 8.24 s still read as one, so three or more kept
    # epochs climb only where each rises past DRIFT_STEP over the one before)
    rising = all(b > a for a, b in zip(totals, totals[1:]))
    kept_climb = len(later) >= 3 and all(b > a * (1 + DRIFT_STEP) for a, b in zip(later, later[1:]))
    climbing = rising and (
        later[-1] > STEADY_SPREAD * later[0] or (kept_climb and totals[-1] > STEADY_SPREAD * totals[0])
    )
    if len(totals) >= 3 and climbing:
        last = Number(f"{name}last epoch", totals[-1], "s", "measured", n=1)
        return say(
            "The epochs{who} grew longer through the run, each longer than the one before ({first} to "
            "{last}): a drift, which a rising machine load can cause and which would hide a warm-up of the "
            "first epoch, so this run cannot show whether the first held one" + by_rule,
            who=who,
            first=first,
            last=last,
        )
    if len(later) > 1 and hi.value > STEADY_SPREAD * lo.value:
        # the first clearly the shortest: said (grade39a: C5's first epoch, the shortest by far, read only as
        # "the epochs kept were not steady")
        shorter = lo.value > first.value * (1 + FIRST_MARGIN)
        return say(
            "The first epoch{who} took {first}, "
            + ("shorter than each epoch kept, and those were" if shorter else "but the epochs kept were")
            + " not steady ({span}), so this run cannot show whether the first held a warm-up"
            + by_rule,
            who=who,
            first=first,
            span=span,
        )
    if lo.value > STEADY_SPREAD * first.value:
        return say(
            "The first epoch{who} took {first}, shorter than "
            + kept
            + " ({span}): the epochs got longer after the first, which a warm-up does not do, so this run "
            "cannot show whether the first held one" + by_rule + ", and the median of the epochs kept is the "
            "higher for it",
            who=who,
            first=first,
            span=span,
        )
    beyond = " beyond the start-up an epoch's first step typically holds" if repeats else ""
    # how it stands against the epochs kept, each said as it is: no longer than any of them; among them
    # (longer than the shortest, no longer than the longest); or above the longest by no more than the margin
    # (not "no longer": it was, by a little; and not a warm-up)
    if first.value * (1 + FIRST_MARGIN) < lo.value:  # grade40a: 8.5% shorter read "no longer than"
        where = "shorter than " + kept
    elif first.value <= lo.value:
        where = "no longer than " + kept
    elif first.value <= hi.value:
        where = "within the span of the epochs kept"
    else:
        where = "within {margin} of " + ("the epoch kept" if len(later) == 1 else "the longest epoch kept")
    return say(
        "The first epoch{who} took {first}, "
        + where
        + " ({span}): whole epochs show no one-time cost of the first epoch"
        + beyond
        + by_rule,
        who=who,
        first=first,
        span=span,
        **({"margin": margin} if "{margin}" in where else {}),
    )


def best_findings(b, labels: dict, name: str) -> list[Finding]:
    """Each verdict of a verdict.best() (the best against every other label) as a Finding: a summary over
    several comparisons states them all, never only the first."""
    return [
        say(
            "Against {other}: {v}", other=labels[k], v=v.finding(f"{name} vs {k}", labels[b.label], labels[k])
        )
        for k, v in b.verdicts.items()
    ]


def training_sweep(
    cfg,
    out,
    field: str,
    question: str,
    shown: dict | None = None,
    twin: tuple[str, str] | None = None,
    first_notes: list[Finding] | None = None,
) -> tuple[list[Answer], list[sanity.Flag]]:
    """A training sweep's answer: which setting of `field` trains best (last-epoch batch losses, a verdict
    with ties), how fast each is per step, and which diverged or did not learn (sweep_notes; whether a run
    did not learn is its own record, meta.json's did_not_learn, read by run_metas, and each such run gets its
    flag). A winner is named first only when it is separated and has learned: when the lowest-loss setting
    did not learn the headline says so; a tie opens as a tie. The stand-in flag gives each run's parameter
    count from its record (one count where the networks agree). `shown`: each value as a sentence names it
    (shown_setting);
    `twin`: the task whose sweep shares a configuration with this one, and the field it sweeps (its TASK's
    twin): a run of it with the same configuration whose epochs differ a lot flags the machine as noisy;
    `first_notes`: the task's own findings, said before sweep_notes'."""
    b = out.batches
    metas = run_metas(out, field)
    counts = {shown_setting(v, shown): m["parameters"] for v, m in metas.items() if "parameters" in m}
    flags: list = [
        sanity.stand_in(cfg, counts=counts or None),
        busy_of(out),
        twin_noise(cfg, getattr(out, "items", None), field, twin),
    ]
    raw = _usable(cfg, out, field, flags, shown)
    samples = {
        shown_setting(v, shown): x for v, x in raw.items()
    }  # a task's own names: "no BatchNorm", not "none"
    # which settings did not learn is each run's own record (meta.json's did_not_learn, written by training
    # by sanity's one rule), never decided again here: the flag, the table and the answer say the same
    flags += [sanity.learning_flag(metas.get(v), label=shown_setting(v, shown)) for v in raw]
    # each run's epoch times after its warm-up, as a single run's page reads them (sanity.trend; grade34a:
    # c7's no-BatchNorm epochs of 1.32 and 0.141 s stood as a 'median' without a word)
    flags += trend_flags(getattr(out, "epochs", None), field, {v: shown_setting(v, shown) for v in raw})
    per_step = []
    for v in raw:
        name = shown_setting(v, shown)
        kept = drop_warmup(b[b[field] == v])
        # one sample a timed interval where the run timed the device every log_every steps (grade40g)
        step = num(f"{name}: compute per step (after warm-up)", step_times(kept, metas.get(v)), "ms", 1000)
        per_step.append(say("{name} {step}", name=name, step=step))
    flags.append(
        sanity.too_few(min((len(x) for x in samples.values()), default=0), "last-epoch batches per setting")
    )
    # the summary table's epoch medians, over each run's timed epochs: no spread below three (grade26: c6 and
    # c7 showed 2-epoch medians without a flag, where c2 flags its own)
    flags.append(too_few_epochs(getattr(out, "summary", None), "timed epochs per setting"))
    notes = [*(first_notes or []), *sweep_notes(cfg, out, field, shown)]
    stuck = [shown_setting(v, shown) for v in raw if "did_not_learn" in metas.get(v, {})]
    epochs = setting("epochs", int(cfg.epochs))
    background = [
        Background(
            "One seed and a few epochs of training-set statistics show early training, not which setting "
            "generalises best."
        ),
    ]
    sequential = say(
        "The settings ran one after the other, so their per-step times are listed, not compared: a change of "
        "the machine's load between runs would show up as a difference"
    )
    if len(samples) < 2:
        head = say("Fewer than two settings trained without diverging, so none can be compared")
        return [
            Answer(
                question,
                head,
                notes,
                background,
                status="partial",
                missing="two settings that train without diverging",
            )
        ], dedupe(flags)
    bst = best(samples, what="last-epoch training loss", interleaved=False)  # runs one after the other
    tied = [t for t in bst.tied if t != bst.label]
    finals = {name: num(f"{name}: last-epoch batch loss", x, "") for name, x in samples.items()}
    if len(stuck) == len(samples) or (not tied and bst.label in stuck):
        head = (
            say("No winner: no setting learned; each run's record says it stayed at chance")
            if len(stuck) == len(samples)
            else say(
                "No winner: the lowest-loss setting, {best}, did not learn (its run's record: still at "
                "chance)",
                best=bst.label,
            )
        )
        lead = say(
            "No winner can be named: {names} in {e} epochs (each run's record: its last epoch still at "
            "chance), so which setting trains best is not shown by this run",
            names=not_learned(stuck),
            e=epochs,
        )
    elif tied:  # the leaders tie: that is why no winner, whatever the others did
        head = say(
            # true of every tie's reason, as C3's
            "No winner: {best} had the lowest last-epoch loss but is not clearly ahead of {n} other settings"
            if len(tied) > 1
            else "No winner: {best} had the lowest last-epoch loss but is not clearly ahead of {n} other "
            "setting",
            best=bst.label,
            n=counted("settings tied with the lowest loss", len(tied)),
        )
        lead = say(
            "No winner can be named: {best} had the lowest median batch loss of the last epoch ({loss}) but "
            "is not clearly ahead of {tied}: a tie",
            best=bst.label,
            loss=finals[bst.label],
            tied=join([say("{t}", t=t) for t in tied], ", ", " and "),
        )
    else:
        head = say(
            "Lowest last-epoch training loss: {best}, separated from each other setting", best=bst.label
        )
        lead = say(
            "Lowest last-epoch training loss: {best} (median batch loss {loss}), separated from each other "
            "setting after {e} epochs",
            best=bst.label,
            loss=finals[bst.label],
            e=epochs,
        )
    labels = {k: k for k in samples}
    details = [
        lead,
        say(
            "Median batch loss of the last epoch (the table's loss is each epoch's mean): {all}",
            all=join([say("{k} {x}", k=k, x=x) for k, x in finals.items()], ", "),
        ),
    ]
    details += best_findings(bst, labels, "last-epoch loss")
    details.append(say("Compute per step after warm-up: {all}", all=join(per_step, ", ")))
    details.append(sequential)
    details += notes
    verdict = {
        "best": str(bst.label),
        "tied": [str(t) for t in bst.tied],
        "against": {
            str(k): sample_record(v, samples[bst.label], samples[k]) for k, v in bst.verdicts.items()
        },
    }
    return [Answer(question, head, details, background, verdict=verdict)], dedupe(flags)


def not_learned(names: list[str]) -> Finding:
    """'A did not learn' / 'neither A nor B learned' / 'A, B and C did not learn': the settings whose runs
    recorded that they did not learn, read as a sentence for any count."""
    if len(names) == 1:
        return say("{a} did not learn", a=names[0])
    if len(names) == 2:
        return say("neither {a} nor {b} learned", a=names[0], b=names[1])
    return say("{all} did not learn", all=join([say("{n}", n=n) for n in names], ", ", " and "))


def run_metas(out, field: str) -> dict:
    """Setting -> its complete run's record (meta.json), by the value of `field` in the run's config: what
    the run itself recorded (its parameters, whether it did not learn). Runs whose record cannot be read
    are left out."""
    return metas_by(getattr(out, "items", None), field)


# the summary's columns as a training sweep's page names them
SUMMARY_COLUMNS = {
    "final_loss": "last-epoch loss",
    "final_acc": "last-epoch top-1",
    "mean_loss": "mean loss (all epochs)",
    "mean_acc": "mean top-1 (all epochs)",
    "n": "n epochs (timed)",
    "median_s": "epoch median (s)",
    "iqr_s": "IQR (s)",
    "min_s": "min (s)",
    "max_s": "max (s)",
    "mean_s": "mean (s)",
}


def summary_table(out, field: str, shown: dict | None = None):
    """The sweep's summary as its page shows it, with whether each run did not learn as the run recorded it
    (meta.json's did_not_learn: 'yes'; 'no' for a complete run of two epochs or more without that record;
    '-' where it was not judged: a run that failed or diverged, or one epoch), the record the answer and the
    flags read; each setting as the sentences name it (`shown`, shown_setting: C7's 'no BatchNorm')."""
    metas = run_metas(out, field)
    s = out.summary.copy()

    def judged(row) -> str:
        meta = metas.get(row[field])
        if row.get("status") != "complete" or meta is None:
            return "-"
        if "did_not_learn" in meta:
            return "yes"
        return "no" if row.get("epochs", 2) >= 2 else "-"

    s.insert(s.columns.get_loc("status") + 1, "did not learn", [judged(r) for _, r in s.iterrows()])
    s[field] = [shown_setting(v, shown) for v in s[field]]
    return s.rename(columns=SUMMARY_COLUMNS)


def shown_setting(value, shown: dict | None = None) -> str:
    """A setting's value as a sentence names it: its entry in `shown` (a task's own names for its values, such
    as 'no BatchNorm' for a norm of 'none', not 'none' of them), else the value itself."""
    return (shown or {}).get(value, str(value))


def _usable(cfg, out, field: str, flags: list | None = None, shown: dict | None = None) -> dict:
    """Setting -> its last-epoch batch losses, for each complete setting that did not diverge (a diverged one
    adds its flag to `flags`)."""
    b, s = out.batches, out.summary
    classes = classes_of(cfg)
    last = b[b["epoch"] == b["epoch"].max()]
    samples = {}
    for v in s[s["status"] == "complete"][field]:
        losses = list(b.loc[b[field] == v, "loss"])
        d = sanity.diverged(losses, classes, label=shown_setting(v, shown))
        if d:
            if flags is not None:
                flags.append(d)
            continue
        samples[v] = list(last.loc[last[field] == v, "loss"])
    return samples


def sweep_notes(cfg, out, field: str, shown: dict | None = None) -> list[Finding]:
    """A training sweep's findings beyond the verdict: which settings failed, diverged, or did not learn (as
    each run recorded it: meta.json's did_not_learn, by sanity's one rule, stated with its numbers)."""
    b, s = out.batches, out.summary
    classes = classes_of(cfg)
    chance = Number(
        "chance loss", sanity.chance_loss(classes), "", "predicted", source="ln(classes): a uniform guess"
    )
    metas = run_metas(out, field)
    lines = [
        say("{name}: not usable ({status})", name=shown_setting(r[field], shown), status=str(r["status"]))
        for _, r in s[s["status"] != "complete"].iterrows()
    ]
    stuck = []
    for v in s[s["status"] == "complete"][field]:
        losses = list(b.loc[b[field] == v, "loss"])
        name = shown_setting(v, shown)
        if sanity.diverged(losses, classes):
            end = Number(f"{name}: last batch loss", float(losses[-1]), "", "measured", n=1)
            lines.append(
                say(
                    "{name}'s loss ended far above chance ({end} at the end against the chance loss "
                    "{chance}): it diverged or has not settled, so it is not a result",
                    name=name,
                    end=end,
                    chance=chance,
                )
            )
        elif "did_not_learn" in metas.get(v, {}):
            stuck.append(name)
    if stuck:
        lines.append(
            say(
                # the names do not start the sentence: 'sgd' stays lower-case
                "By each run's own record (meta.json's did_not_learn), {names}: after its last epoch a run's "
                "loss and top-1 were still at chance ({rule}); the flags give each run's values",
                names=not_learned(stuck),
                rule=sanity.chance_rule(classes, chance=chance),  # the chance loss the figure draws
            )
        )
    return lines
