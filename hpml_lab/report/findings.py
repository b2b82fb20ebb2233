"""What each report concludes, computed: one function per task turns the study's results into the answer
record's answers (report.answers.Answer, every number tagged) and the sanity flags that apply.

    from hpml_lab.report import findings, notebook as nb
    nb.answer(cfg, info, *findings.c1(cfg, run))     # at the end of the C1 notebook

No sentence here states a direction it did not compute: comparisons come from hpml_lab.verdict, flags from
hpml_lab.sanity. Tests feed canned results (a clear win, a loss, a tie, a diverged run, a trend, n = 2).
"""
from __future__ import annotations

import pandas as pd

from .. import sanity
from ..data import num_classes
from ..profiling import summarize
from ..results import drop_warmup
from ..verdict import best, compare, sample_record
from .answers import Answer, Number


def _num(name: str, values, unit: str, scale: float = 1.0) -> Number:
    """A measured median with its n and (for n >= 3) its IQR."""
    s = summarize([v * scale for v in values])
    return Number(name, s["median"], unit, "measured", n=s["n"], spread=s["iqr"] if s["n"] >= 3 else None)


def training_flags(cfg, batches: pd.DataFrame, epochs: pd.DataFrame, meta: dict | None) -> list[sanity.Flag]:
    return sanity.run_flags(cfg, batches["loss"], list(epochs["total_s"]), meta, num_classes(cfg.dataset))


def c1(cfg, run) -> tuple[list[Answer], list[sanity.Flag]]:
    """Per-batch loss and top-1: where they started and ended, and whether training learned or diverged."""
    b = run.batches
    k = max(1, len(b) // 10)
    first, last = b.head(k), b.tail(k)
    flags = training_flags(cfg, b, run.epochs, run.meta)
    diverged = any(f.kind == "diverged" for f in flags)
    batches = "batch" if k == 1 else f"{k} batches"
    v = compare(last["loss"], first["loss"], f"the last {batches}", f"the first {batches}", what="training loss")
    if diverged:
        text = (f"Training diverged: the loss ended at {last['loss'].mean():.2f}, above chance "
                f"({sanity.chance_loss(num_classes(cfg.dataset)):.2f}); these curves are not a result.")
    elif v.outcome == "better":
        text = (f"The training loss fell from {first['loss'].mean():.3f} to {last['loss'].mean():.3f} and top-1 rose from "
                f"{100 * first['acc'].mean():.1f}% to {100 * last['acc'].mean():.1f}% over {len(b)} batches.")
    else:
        text = (f"Over {len(b)} batches the training loss did not measurably fall ({v.sentence().rstrip('.')}): "
                "too short a run to show learning.")
    nums = [Number("mean loss, first batches", float(first["loss"].mean()), "", "measured", n=k),
            Number("mean loss, last batches", float(last["loss"].mean()), "", "measured", n=k),
            Number("top-1, last batches", 100 * float(last["acc"].mean()), "%", "measured", n=k)]
    return [Answer("C1: per-batch training loss and top-1 accuracy", text, "answered", nums,
                   verdict=sample_record(v, last["loss"], first["loss"]))], flags


def c2(cfg, run) -> tuple[list[Answer], list[sanity.Flag]]:
    """Data-loading, training and total time per epoch, warm-up epoch kept out of the summary."""
    ep = run.epochs
    steady = drop_warmup(ep)
    share = float(steady["data_s"].sum() / steady["total_s"].sum())
    flags = training_flags(cfg, run.batches, ep, run.meta)
    few = sanity.too_few(len(steady), "epochs after warm-up")
    if few:
        flags.append(few)
    nums = [_num("data loading per epoch", steady["data_s"], "s"), _num("training per epoch", steady["train_s"], "s"),
            _num("total per epoch", steady["total_s"], "s"),
            Number("data-loading share of the epoch", 100 * share, "%", "measured", n=len(steady))]
    fl = (run.meta or {}).get("flops")
    mfu_text = ""
    if fl and "mfu" in steady:
        nums.append(_num("training compute, share of this device's peak", steady["mfu"], "%", 100))
        mfu_text = (f" The training compute ran at {nums[-1].value:.3g}% of this device's {fl['precision']} peak "
                    f"({fl['peak_tflops']:.3g} TFLOP/s; {fl['peak_source']})"
                    + (": above 100% because the peak was measured while the machine was busier than during training, "
                       "so read it as 'near this CPU's own matrix-product speed'." if nums[-1].value > 100 else "."))
    text = (f"Per epoch (median of {len(steady)} after the warm-up epoch): data loading "
            f"{nums[0].value:.3g} s, training {nums[1].value:.3g} s, total {nums[2].value:.3g} s; waiting for data "
            f"is {100 * share:.0f}% of the epoch." + mfu_text)
    return [Answer("C2: data-loading, training and total time per epoch", text, "answered", nums)], flags


def first_step_note(batches: pd.DataFrame, cores: int) -> str:
    """Whether each epoch's first training step is slower than the rest, and by how much (computed), with
    the cause it points to on a small CPU (a loader worker starting up shares the cores)."""
    firsts = batches.groupby("epoch")["train_s"].first()
    rest = batches[batches.groupby("epoch").cumcount() > 0]["train_s"]
    if rest.empty:
        return ""
    v = compare(list(rest), list(firsts), "later steps", "first step of an epoch", what="training time")
    if v.outcome != "better":
        return f"The first training step of an epoch is not measurably slower than the others: {v.sentence()}"
    return (f"{v.sentence()} On {cores} CPU cores the loader's worker processes start at each epoch and share the "
            "cores with training, so part of the loader's start-up cost lands in 'training' here.")



def c3(cfg, sweep) -> tuple[list[Answer], list[sanity.Flag]]:
    """The best DataLoader worker count, with every count the data cannot separate from it called a tie."""
    samples = {int(n): list(g["seconds"]) for n, g in sweep.rows.groupby("num_workers")}
    b = best(samples, what="DataLoader time per epoch")
    top = samples[b.label]
    med = summarize(top)["median"]
    tied = [n for n in b.tied if n != b.label]
    if tied:
        text = (f"{b.label} worker(s) had the lowest median ({med:.3g} s per epoch) but cannot be told apart from "
                f"{', '.join(map(str, tied))} worker(s): a tie, so no single best count is shown by this run.")
    else:
        text = f"Best count: {b.label} worker(s), {med:.3g} s per epoch (median), faster than every other count tried."
    nums = [_num(f"{n} workers, epoch", v, "s") for n, v in sorted(samples.items())]
    flags = [sanity.busy(_meta_machine(sweep))]
    few = min(len(v) for v in samples.values())
    flags.append(sanity.too_few(few, "timed epochs per worker count"))
    verdicts = {str(k): v.as_dict() for k, v in b.verdicts.items()}
    ans = Answer("C3: DataLoader time per epoch against workers; the best count", text, "answered", nums,
                 verdict={"best": b.label, "tied": list(b.tied), "against": verdicts,
                          "samples": {str(k): v for k, v in samples.items()}})
    return [ans], [f for f in flags if f is not None]


def _meta_machine(sweep) -> dict | None:
    from ..results import read_run

    try:
        return read_run(sweep.items[-1].run_dir).meta.get("machine")
    except (IndexError, OSError, ValueError):
        return None


def steady_batches(items, by: str) -> pd.DataFrame:
    """Per-batch rows of a sweep's complete runs, the warm-up epoch of each run left out."""
    from ..sweeps import tables

    return drop_warmup(tables(items, "batches", with_config=(by,)))


def compare_configs(batches: pd.DataFrame, by: str, a, b, column: str, what: str, label_a: str = "",
                    label_b: str = ""):
    """Verdict of configuration `a` against `b` (values of `by`) on a per-batch column (seconds: lower is better)."""
    xa = list(batches.loc[batches[by] == a, column])
    xb = list(batches.loc[batches[by] == b, column])
    return compare(xa, xb, label_a or f"{by} {a}", label_b or f"{by} {b}", what=what), xa, xb


def c4(cfg, out) -> tuple[list[Answer], list[sanity.Flag]]:
    """Data loading vs compute per step with 1 worker and with C3's best count, each difference a verdict."""
    best_n = int(out.best)
    bt = steady_batches(out.items, "num_workers")
    flags: list = []
    for n, g in bt.groupby("num_workers"):
        flags += sanity.run_flags(cfg.replace(num_workers=int(n)), g["loss"], [], None, num_classes(cfg.dataset))
    nums = []
    for n, g in bt.groupby("num_workers"):
        nums += [_num(f"{n} worker(s): data wait per step", g["data_s"], "ms", 1000),
                 _num(f"{n} worker(s): compute per step", g["train_s"], "ms", 1000)]
    if best_n == 1:
        text = "C3's best count is 1 worker, so 1 worker is compared with nothing: " + (
            f"data wait {nums[0].value:.3g} ms and compute {nums[1].value:.3g} ms per step (medians).")
        return [Answer("C4: data loading vs compute, 1 worker vs the best", text, "answered", nums)], _dedupe(flags)
    labels = (f"{best_n} workers (C3's best)", "1 worker")
    vd, da, db = compare_configs(bt, "num_workers", best_n, 1, "data_s", "data wait per step", *labels)
    vc, ca, cb = compare_configs(bt, "num_workers", best_n, 1, "train_s", "compute per step", *labels)
    text = f"Data wait: {vd.sentence()} Compute: {vc.sentence()}"
    return [Answer("C4: data loading vs compute, 1 worker vs the best", text, "answered", nums,
                   verdict={"data": sample_record(vd, da, db), "compute": sample_record(vc, ca, cb)})], _dedupe(flags)


def _dedupe(flags) -> list[sanity.Flag]:
    seen, out = set(), []
    for f in flags:
        if f is not None and f.kind not in seen:
            seen.add(f.kind)
            out.append(f)
    return out


def c5(cfg, out) -> tuple[list[Answer], list[sanity.Flag]]:
    """Epoch time on each device present; a GPU-vs-CPU verdict only when both ran (else partial: needs a GPU)."""
    ep = out.epochs
    flags: list = []
    nums = []
    for d, g in ep.groupby("device", sort=False):
        flags.append(sanity.trend(list(g["total_s"])))
        steady = drop_warmup(g)
        flags.append(sanity.too_few(len(steady), f"{d} epochs after warm-up"))
        nums.append(_num(f"{d}: epoch time (after warm-up)", steady["total_s"], "s"))
    cpu = nums[0]
    trending = any(f is not None and f.kind == "no steady state" for f in flags)
    lead = (f"The CPU epochs never settled (see the flag), so no typical CPU epoch time can be given; their median is "
            f"{cpu.value:.3g} s." if trending else f"A CPU epoch took {cpu.value:.3g} s (median after warm-up).")
    if "cuda" not in out.devices:
        ans = Answer("C5: average epoch time on GPU vs CPU", lead + " No GPU was present: no GPU time, no speedup.",
                     "partial", nums, missing="a GPU: run this task on a CUDA machine")
        return [ans], _dedupe(flags)
    bt = steady_batches(out.items, "device")
    v, xa, xb = compare_configs(bt, "device", "cuda", "cpu", "train_s", "compute per step", "GPU", "CPU")
    if cfg.max_batches:  # e.g. the GPU kit's profile: the CPU row would otherwise take most of a lease
        lead += (f" Every epoch, on both devices, was cut at {cfg.max_batches} batches: these are partial epochs, "
                 f"and the comparison below is of compute per step.")
    ans = Answer("C5: average epoch time on GPU vs CPU", lead + " " + v.sentence(), "answered", nums,
                 verdict=sample_record(v, xa, xb))
    return [ans], _dedupe(flags)


def training_sweep(cfg, out, field: str, question: str) -> tuple[list[Answer], list[sanity.Flag], list[str]]:
    """C6/C7: which setting of `field` trains best (last-epoch batch losses, a verdict with ties), how fast each
    is per step, and which diverged or stayed at chance. Returns answers, flags and lines of prose."""
    b, s = out.batches, out.summary
    classes = num_classes(cfg.dataset)
    flags: list = [sanity.stand_in(cfg)]
    lines, nums = [], []
    ok = s[s["status"] == "complete"]
    for _, r in s[s["status"] != "complete"].iterrows():
        lines.append(f"{r[field]}: not usable ({r['status']}).")
    last = b[b["epoch"] == b["epoch"].max()]
    samples, usable = {}, []
    for v in ok[field]:
        losses = list(b.loc[b[field] == v, "loss"])
        d = sanity.diverged(losses, classes)
        if d:
            flags.append(sanity.Flag("diverged", f"{v}: {d.message}"))
            lines.append(f"{v} diverged (loss {losses[-1]:.2f} at the end): not a result.")
            continue
        if sanity.at_chance(losses, classes):
            lines.append(f"{v} ended at chance level (loss {sum(losses[-3:]) / len(losses[-3:]):.2f} against "
                         f"ln {classes} = {sanity.chance_loss(classes):.2f}): it has not learned in this run.")
        samples[v] = list(last.loc[last[field] == v, "loss"])
        usable.append(v)
        nums.append(_num(f"{v}: last-epoch batch loss", samples[v], ""))
        nums.append(_num(f"{v}: compute per step (after warm-up)",
                         drop_warmup(b[b[field] == v])["train_s"], "ms", 1000))
    flags.append(sanity.too_few(min((len(x) for x in samples.values()), default=0), "last-epoch batches per setting"))
    if len(samples) >= 2:
        bst = best(samples, what="last-epoch training loss")
        tied = [str(t) for t in bst.tied if t != bst.label]
        text = (f"Lowest last-epoch training loss: {bst.label}" + (
            f", but it cannot be told apart from {', '.join(tied)} (a tie)." if tied else
            ", lower than every other setting at 95% confidence.")) + (
            f" One seed, {cfg.epochs} epoch(s) of training-set statistics: early training, not which generalises best.")
        verdict = {"best": str(bst.label), "tied": [str(t) for t in bst.tied],
                   "against": {str(k): sample_record(v, samples[bst.label], samples[k]) for k, v in bst.verdicts.items()}}
        status, missing = "answered", ""
    else:
        text = f"Fewer than two settings trained without diverging, so none can be compared: {' '.join(lines)}"
        verdict, status, missing = None, "partial", "two settings that train without diverging"
    return ([Answer(question, text, status, nums, missing=missing, verdict=verdict)], _dedupe(flags),
            lines + ["Times are per training step after each run's warm-up epoch; the runs took turns on a shared "
                     "machine, so compare them only through the spreads shown."])


def c8(cfg, out) -> tuple[list[Answer], list[sanity.Flag]]:
    """Compiled vs eager per training step (compute only: the data wait is not the question), the compile cost
    from the first epoch, and after how many steps compiling pays back."""
    flags: list = [sanity.stand_in(cfg)]
    done = [it for it in out.items if it.complete]
    bt = steady_batches(done, "compile")
    if bt["compile"].nunique() < 2:
        eager = _num("eager: compute per step", bt["train_s"], "ms", 1000)
        ans = Answer("C8: does torch.compile pay off?", f"Only eager ran ({out.message or 'no compiled run'}): "
                     f"{eager.value:.3g} ms per step; no comparison.", "partial", [eager],
                     missing="a compiled run (see the notice above)")
        return [ans], _dedupe(flags)
    v, comp, eag = compare_configs(bt, "compile", True, False, "train_s", "compute per step", "compiled", "eager")
    from ..sweeps import tables

    allb = tables(done, "batches", with_config=("compile",))
    first = allb[allb["epoch"] == allb["epoch"].min()].groupby("compile")["train_s"].sum()
    med_c, med_e = summarize(comp)["median"], summarize(eag)["median"]
    n_first = int((allb["epoch"] == allb["epoch"].min()).sum() / 2)
    cost = float(first[True] - first[False] - n_first * (med_c - med_e))  # extra epoch-1 time beyond the step gap
    nums = [_num("eager: compute per step", eag, "ms", 1000), _num("compiled: compute per step", comp, "ms", 1000),
            Number("compile cost (epoch 1, beyond eager's warm-up)", cost, "s", "measured", n=1)]
    text = v.sentence() + f" Compiling cost about {cost:.3g} s in epoch 1."
    if v.outcome == "better" and cost > 0:
        steps = cost / (med_e - med_c)
        nums.append(Number("break-even", steps, "steps", "predicted",
                           source="compile cost / (eager step - compiled step), from the medians above"))
        text += f" It pays back after about {steps:,.0f} steps ({steps * cfg.batch_size:,.0f} images at batch {cfg.batch_size})."
    elif v.outcome == "better":
        text += " It pays back from the first steps."
    else:
        text += " With no measurable gain per step, compiling does not pay back at this size and setting."
    return [Answer("C8: does torch.compile pay off?", text, "answered", nums, verdict=sample_record(v, comp, eag))], \
        _dedupe(flags)


def questions(cfg, table: pd.DataFrame) -> tuple[list[Answer], list[sanity.Flag]]:
    """Q1-Q4 as answers: counts read from the model and from real optimizers after one step."""
    v = table.set_index("quantity")["value"]
    main, sc = int(v["conv layers, main path (stem + 2 per BasicBlock)"]), int(v["conv layers, 1x1 projection shortcuts"])
    sgd = {k.split(": ", 1)[1]: int(x) for k, x in v.items() if k.startswith("SGD")}
    adam = {k.split(": ", 1)[1]: int(x) for k, x in v.items() if k.startswith("Adam")}
    src = f"counted in {cfg.model}"

    def n(name, value, unit="values"):
        return Number(name, value, unit, "measured", source=src)

    def mb(x):
        return f"{x * 4 / 1e6:.1f} MB as float32"

    mom = sgd.get("optimizer state momentum_buffer", 0)
    return [
        Answer("Q1: how many convolutional layers?", f"{main + sc} counting the {sc} 1x1 projection shortcuts ({main} on the "
               "main path); the classifier is linear, not counted.", "answered",
               [n("conv layers, main path", main, "layers"), n("1x1 shortcut convs", sc, "layers")]),
        Answer("Q2: input size of the last linear layer?", f"{int(v['input features of the last linear layer'])} features.",
               "answered", [n("last linear in_features", int(v["input features of the last linear layer"]), "")]),
        Answer("Q3: trainable parameters and gradients with SGD?",
               f"{sgd['parameters']:,} parameters and {sgd['gradients']:,} gradients ({mb(sgd['parameters'])} each); "
               f"momentum 0.9 adds a {mom:,}-value momentum buffer, which is optimizer state, not gradients.",
               "answered", [n("SGD parameters", sgd["parameters"]), n("SGD gradients", sgd["gradients"]),
                            n("SGD momentum buffer", mom)]),
        Answer("Q4: the same with Adam?",
               f"{adam['parameters']:,} parameters, {adam['gradients']:,} gradients, and optimizer state of "
               f"{adam['optimizer state exp_avg']:,} (exp_avg) + {adam['optimizer state exp_avg_sq']:,} (exp_avg_sq) "
               f"values ({mb(adam['parameters'])} each), plus {adam['optimizer state step']} step counters.",
               "answered", [n("Adam parameters", adam["parameters"]), n("Adam gradients", adam["gradients"]),
                            n("Adam exp_avg", adam["optimizer state exp_avg"]),
                            n("Adam exp_avg_sq", adam["optimizer state exp_avg_sq"])]),
    ], [sanity.stand_in(cfg)] if cfg.model != sanity.LAB["model"] else []


REFERENCE_DATALOADING = ("resnet-50-performance reference: data loading 703 s with its baseline vs 1052 s with "
                         "parallel workers (its README)")


def dataloading(cfg, df: pd.DataFrame, meta: dict) -> tuple[list[Answer], list[sanity.Flag], list[str]]:
    """Loaders from high-latency storage: each against the baseline at the same latency, by verdicts over the
    timed passes; the tensor-resident loader with and without its one-time load."""
    from ..studies.dataloading import pass_times

    rows = {(r["latency_ms"], r["loader"]): r for _, r in df.iterrows()}
    lats = sorted(df["latency_ms"].unique())
    hi, lo = lats[-1], lats[0]

    def v(loader, lat):
        a, b = pass_times(rows[(lat, loader)]), pass_times(rows[(lat, "baseline")])
        return compare(a, b, loader, "the baseline", what=f"time per pass at {lat:g} ms per file"), a, b

    vt_hi, a1, b1 = v("threads", hi)
    vw_hi, a2, b2 = v("more workers", hi)
    vt_lo, a3, b3 = v("threads", lo)
    tr = rows[(hi, "tensor-resident")]
    base = rows[(hi, "baseline")]
    per_pass_with_load = tr["epoch_s"] + tr["one_time_s"] / tr["passes"]
    nums = [Number(f"{name} at {hi:g} ms: pass", rows[(hi, name)]["epoch_s"], "s", "measured", n=int(rows[(hi, name)]["passes"]))
            for name in ("baseline", "more workers", "threads", "tensor-resident")]
    nums += [Number(f"tensor-resident one-time load at {hi:g} ms", tr["one_time_s"], "s", "measured", n=1),
             Number(f"tensor-resident at {hi:g} ms incl. its load over {int(tr['passes'])} passes", per_pass_with_load,
                    "s per pass", "measured", n=int(tr["passes"])),
             Number("reference: data loading, baseline", 703, "s", "reference", source=REFERENCE_DATALOADING),
             Number("reference: data loading, parallel workers", 1052, "s", "reference", source=REFERENCE_DATALOADING)]
    text = f"At {hi:g} ms per file: {vt_hi.sentence()} {vw_hi.sentence()}"
    lines = [text,
             f"The tensor-resident loader reads storage once ({tr['one_time_s']:.2f} s for {int(tr['files'])} files), "
             f"then a pass takes {1000 * tr['epoch_s']:.1f} ms; with that load spread over the {int(tr['passes'])} "
             f"passes run it is {per_pass_with_load:.3f} s per pass against {base['epoch_s']:.3f} s for the baseline "
             f"({base['epoch_s'] / per_pass_with_load:.1f}x), more the more passes (epochs) share the load.",
             f"At {lo:g} ms (files at once): {vt_lo.sentence()}"]
    if vt_lo.outcome == "better":
        fb_t, fb_b = rows[(lo, "threads")]["first_batch_s"], rows[(lo, "baseline")]["first_batch_s"]
        lines.append(f"Its first batch took {fb_t:.3f} s against {fb_b:.3f} s for the baseline (medians): "
                     + ("most of the gain at no latency is start-up, not decoding." if fb_b - fb_t > 0.5 * (
                         rows[(lo, 'baseline')]['epoch_s'] - rows[(lo, 'threads')]['epoch_s'])
                        else "start-up explains little of it; the rest is files fetched in parallel."))
    lines.append("The reference project saw no gain from parallel workers; these numbers cannot say why (its storage "
                 "latency and worker counts were not recorded).")
    few = sanity.too_few(int(df["passes"].min()), "passes per loader")
    verdicts = {"threads_high": sample_record(vt_hi, a1, b1), "workers_high": sample_record(vw_hi, a2, b2),
                "threads_low": sample_record(vt_lo, a3, b3)}
    ans = Answer("Does fetching concurrently inside workers speed up loading from high-latency storage?",
                 text, "answered", nums, verdict=verdicts)
    return [ans], [f for f in [few, sanity.busy(meta.get("machine"))] if f], lines


def _times(row) -> list[float]:
    return [float(x) for x in str(row["times_s"]).split(";") if x and x != "nan"]


def memory(cfg, settings, res) -> tuple[list[Answer], list[sanity.Flag], list[str]]:
    """RevNet and checkpointing against the plain networks: activation memory (with the recomputation's own
    working set), the largest batch, the time it costs (verdicts over interleaved rounds), and whether both
    networks trained."""
    t = res.table.set_index("model")
    work = {r["model"]: r["recompute_MB_per_sample"] for r in res.max_batch if r["method"] == "predicted"}
    rev = res.table[res.table.family == "RevNet"].sort_values("depth")
    plain_rev = res.table[res.table.family == "RevNet, ordinary autograd"].sort_values("depth")
    r_lo, r_hi = rev.iloc[0], rev.iloc[-1]
    growth = r_hi.act_bytes_per_sample / r_lo.act_bytes_per_sample
    a1 = Answer("Does a RevNet keep activation memory flat as depth grows?",
                f"RevNet activation memory went from {r_lo.act_MB_per_sample:.3f} to {r_hi.act_MB_per_sample:.3f} MB per "
                f"sample ({growth:.2f}x) for {r_hi.depth / r_lo.depth:.1f}x the depth; under ordinary autograd the same "
                f"networks grow {plain_rev.iloc[-1].act_bytes_per_sample / plain_rev.iloc[0].act_bytes_per_sample:.1f}x.",
                "answered", [Number(f"{r.model}: saved for backward", r.act_MB_per_sample, "MB/sample", "measured")
                             for r in pd.concat([rev, plain_rev]).itertuples()])
    lines, nums, ck_parts = [], [], []
    for r in res.table[res.table.family == "ResNet + checkpointing"].itertuples():
        base = t.loc[r.baseline]
        share = (r.act_MB_per_sample + work.get(r.model, 0.0)) / base.act_MB_per_sample
        gain = res.largest[r.model] / res.largest[r.baseline]
        ck_parts.append(f"{r.baseline}: {share:.2f}x of the plain network's activation memory at the peak of backward "
                        f"(saved {r.act_MB_per_sample:.3f} + recompute working set {work.get(r.model, 0.0):.3f} MB per "
                        f"sample, against {base.act_MB_per_sample:.3f}), largest batch {gain:.2f}x")
        nums += [Number(f"{r.model}: saved + working set vs plain", share, "x", "predicted",
                        source="activation bytes measured; working set = plain / segments"),
                 Number(f"{r.model}: largest batch vs plain", gain, "x",
                        "measured" if res.cuda else "predicted",
                        source="" if res.cuda else f"budget {res.budget_bytes / 1024 ** 3:.0f} GiB, from bytes per sample")]
    a2 = Answer("What does gradient checkpointing save, its recomputation counted?",
                ("With " + f"{cfg.checkpoint_segments} segments: " + "; ".join(ck_parts) + ".") if ck_parts
                else "Checkpointing was not run (checkpoint_segments = 0).",
                "answered" if res.cuda else "partial", nums,
                missing="" if res.cuda else "a GPU: peak allocated memory and the largest batch are predicted here")
    verdicts, cost = {}, []
    for r in res.table.itertuples():
        if r.model == r.baseline:
            continue
        base = t.loc[r.baseline]
        v = compare(_times(base), _times(r._asdict()), r.baseline, r.model, what="time per training step")
        verdicts[r.model] = v.as_dict()
        cost.append(f"{r.model}: " + v.sentence())
    a3 = Answer("What does the memory saving cost in time?", f"{len(cost)} comparisons, each a verdict over "
                f"{settings.repeats} interleaved rounds; first: {cost[0] if cost else 'none'}", "answered",
                [Number(f"{r.model}: time vs plain", r.time_vs_baseline, "x", "measured", n=int(r.repeats))
                 for r in res.table.itertuples() if r.model != r.baseline], verdict=verdicts)
    classes = num_classes(cfg.dataset)
    trained, flags = [], []
    for name, run in res.runs.items():
        losses = list(run.batches["loss"])
        d = sanity.diverged(losses, classes)
        if d:
            flags.append(sanity.Flag("diverged", f"{name}: {d.message}"))
        elif not sanity.at_chance(losses, classes):
            trained.append(name)
    tail = {k: float(v.batches.tail(max(1, len(v.batches) // 5))["loss"].mean()) for k, v in res.runs.items()}
    said = ", ".join(f"{k} {x:.3f}" for k, x in tail.items())
    chance = f"chance {sanity.chance_loss(classes):.2f}"
    if len(trained) == len(res.runs):
        conv = f"Both trained (mean loss over the last fifth: {said}; {chance})."
    elif not trained:
        conv = (f"Neither got clearly below chance in this run (mean loss over the last fifth: {said}; {chance}): "
                "too few steps to show training, so no convergence comparison can be made.")
    else:
        conv = (f"Only {', '.join(trained)} got below chance (mean loss over the last fifth: {said}; {chance}); "
                f"{', '.join(sorted(set(res.runs) - set(trained)))} did not in this run.")
    a4 = Answer("Do ResNet and RevNet both train on the same steps?", conv, "answered",
                [Number(f"{k}: mean loss, last fifth", x, "", "measured",
                        n=max(1, len(res.runs[k].batches) // 5)) for k, x in tail.items()])
    lines += cost
    return [a1, a2, a3, a4], _dedupe(flags), lines


REFERENCE_MEMORY = [("resnet18_adjusted", {}, 746_436, 743, 0.3), ("resnet34_adjusted", {}, 1_393_476, 1158, 0.4),
                    ("resnet50_adjusted", {}, 1_581_700, 3494, 0.57), ("revnet", {"stages": (3, 3, 3)}, 476_020, 466, 0.4),
                    ("revnet", {"stages": (5, 5, 5)}, 796_468, 468, 0.84),
                    ("revnet", {"stages": (9, 9, 9)}, 1_437_364, 470, 0.98),
                    ("revnet", {"stages": (18, 18, 18)}, 2_879_380, 476, 1.8)]


def reference_counts() -> pd.DataFrame:
    """The resnet-50-performance reference's table (ImageNet-100, batch 8, reserved MB) beside this package's
    parameter counts at 100 classes."""
    from .. import models

    out = pd.DataFrame([{"model": name + (" {0}-{0}-{0}".format(kw["stages"][0]) if kw else ""),
                         "reference params": p,
                         "params here, 100 classes": models.count_parameters(models.build(name, num_classes=100, **kw)),
                         "reference MB (reserved)": mb, "reference s per batch": s}
                        for name, kw, p, mb, s in REFERENCE_MEMORY])
    out["same count"] = out["reference params"] == out["params here, 100 classes"]
    return out


def tinyimagenet(cfg, res) -> tuple[list[Answer], list[sanity.Flag], list[str]]:
    """Bottleneck (0 vs N workers), checkpointing's cost in time and gain in batch, estimated vs actual epochs."""
    (w0, r0), (wn, rn) = sorted(res.workers.items())

    def last_epoch(rec):
        b = rec.table("batches")
        return b[b.epoch == b.epoch.max()]

    b0, bn = last_epoch(r0), last_epoch(rn)
    vd = compare(list(bn.data_s), list(b0.data_s), f"{wn} workers", f"{w0} workers", what="data wait per batch")
    vc = compare(list(bn.train_s), list(b0.train_s), f"{wn} workers", f"{w0} workers", what="copy + compute per batch")
    share0 = b0.data_s.sum() / (b0.data_s.sum() + b0.train_s.sum())
    sharen = bn.data_s.sum() / (bn.data_s.sum() + bn.train_s.sum())
    moved = vd.outcome == "better" and share0 > 0.5 > sharen
    a1 = Answer("Where is the bottleneck with 0 and with N workers?",
                f"Data wait is {100 * share0:.0f}% of the loop with {w0} workers and {100 * sharen:.0f}% with {wn}. "
                + vd.sentence() + (" The bottleneck moves from loading to the copy and compute." if moved else
                                   " The bottleneck did not move from loading to compute in this run."),
                "answered", [_num(f"{w0} workers: data wait per batch", b0.data_s, "ms", 1000),
                             _num(f"{wn} workers: data wait per batch", bn.data_s, "ms", 1000),
                             _num(f"{w0} workers: copy + compute per batch", b0.train_s, "ms", 1000),
                             _num(f"{wn} workers: copy + compute per batch", bn.train_s, "ms", 1000)],
                verdict={"data": sample_record(vd, bn.data_s, b0.data_s), "compute": sample_record(vc, bn.train_s, b0.train_s)})
    ck = res.variants.get("checkpointing")
    bc = last_epoch(ck)
    vt = compare(list(bn.train_s), list(bc.train_s), "the baseline", "checkpointing", what="copy + compute per batch")
    m = res.memory.set_index("variant")
    gain = m.loc["checkpointing", "largest batch (predicted)"] / m.loc["baseline", "largest batch (predicted)"]
    slow = summarize(bc.train_s)["median"] / summarize(bn.train_s)["median"]
    a2 = Answer("What does checkpointing cost in time, and what does it buy in batch size?",
                f"Checkpointing takes {slow:.2f}x the baseline's time per batch (one extra forward predicts about "
                f"1.33x): {vt.sentence()} It allows a {gain:.2f}x larger batch (predicted from bytes per image)"
                + (": that is its pay-off." if gain >= 1.1 else ": too little to call a pay-off."),
                "answered", [Number("checkpointing / baseline time per batch", slow, "x", "measured", n=len(bc)),
                             Number("expected from one extra forward", 1.33, "x", "predicted",
                                    source="step = forward + backward of about 2x forward; +1 forward"),
                             Number("largest batch, checkpointing / baseline", gain, "x", "predicted",
                                    source=f"activation bytes per image, budget {res.budget_bytes / 2 ** 30:.0f} GiB")],
                verdict=sample_record(vt, bn.train_s, bc.train_s))
    t = res.timing.dropna(subset=["s/batch"]).set_index("variant")
    est = [Number(f"{n}: estimated / actual epoch", float(t.loc[n, "estimated epoch (s)"] / t.loc[n, "actual epoch (s)"]),
                  "x", "measured", n=1) for n in t.index]
    skipped = res.timing[res.timing["s/batch"].isna()] if "s/batch" in res.timing else res.timing.iloc[0:0]
    a3 = Answer("Estimated (N / B x time per batch) vs actual epoch time, per variant",
                "; ".join(f"{n}: estimate {t.loc[n, 'estimated epoch (s)']:.2f} s vs actual {t.loc[n, 'actual epoch (s)']:.2f} s"
                          for n in t.index) + ".",
                "partial" if len(skipped) else "answered", est,
                missing="; ".join(f"{r.variant}: {r.note}" for r in skipped.itertuples()))
    flags = [sanity.stand_in(cfg)]
    for rec in list(res.workers.values()) + [ck]:
        flags.append(sanity.diverged(rec.table("batches")["loss"], CLASSES_TIN))
    return [a1, a2, a3], _dedupe(flags), []


CLASSES_TIN = 200


def lab5_q1(q1: pd.DataFrame) -> Answer:
    """Lab 5 Q1: the per-worker batch with the highest throughput, a verdict over the timed steps' images/s
    (every batch the data cannot separate from it is named: a tie), each batch's epoch extrapolated."""
    ok = q1[q1.status == "ok"]
    oom = q1[q1.status == "OOM"].per_gpu_batch.tolist()
    samples = {int(r.per_gpu_batch): [r.per_gpu_batch / float(t) for t in str(r.step_times_s).split(";")]
               for r in ok.itertuples()}
    b = best(samples, lower_is_better=False, what="throughput (images/s per step)")
    row = ok.set_index("per_gpu_batch").loc[b.label]
    med = summarize(samples[b.label])["median"]
    tied = [str(k) for k in b.tied if k != b.label]
    where = (f"({med:,.0f} images/s median over {len(samples[b.label])} timed steps, epoch excluding data I/O "
             f"{row.epoch_s_excl_io:.1f} s extrapolated from {int(row.batches_timed)} timed batches)")
    text = (f"Batch {b.label} per worker had the highest median throughput {where} but cannot be told apart from "
            f"batch {', '.join(tied)}: a tie, so this run shows no single best batch" if tied else
            f"Throughput peaks at per-worker batch {b.label} {where}, higher than every other batch tried at 95% "
            "confidence")
    text += f"; out of memory at {', '.join(map(str, oom))}." if oom else "; no batch ran out of memory."
    verdict = {"best": b.label, "tied": list(b.tied),
               "against": {str(k): sample_record(v, samples[b.label], samples[k]) for k, v in b.verdicts.items()}}
    return Answer("Q1: computational efficiency on one worker", text, "answered",
                  [Number(f"batch {int(r.per_gpu_batch)}: epoch excl. I/O", r.epoch_s_excl_io, "s", "predicted",
                          source=f"step time x steps, from {int(r.batches_timed)} timed batches")
                   for r in ok.itertuples()], verdict=verdict)


def lab5(cfg, settings, res) -> tuple[list[Answer], list[sanity.Flag], list[str]]:
    """Lab 5 Q1-Q4 from the study: measured where workers exist, predicted (and said so) elsewhere."""
    import math

    backend = res.allreduce.backend.iloc[0]
    src_model = (f"ring all-reduce model, busbw {res.fit['busbw_Bps'] / 1e9:.2f} GB/s and latency "
                 f"{1e6 * res.fit['latency_s']:.0f} us from this machine's all-reduce ({backend}, "
                 f"{res.fit['world_size']} processes; {res.fit['method']})")
    q1 = lab5_q1(res.q1)
    t = res.table
    nums = [Number(f"{int(r.workers)} workers x {int(r.per_gpu_batch)}: epoch", r.epoch_s, "s", r.source,
                   source="" if r.source == "measured" else src_model)
            for r in t[t.workers > 1].itertuples()]
    text2 = ("Speedup at a fixed per-worker batch: " + "; ".join(
        f"{int(r.workers)} workers x {int(r.per_gpu_batch)}: {r.speedup:.2f}x ({r.source})"
        for r in t[t.workers > 1].itertuples()) + ".")
    missing = "" if (t.workers > 1).eq(t.source == "measured").all() else \
        f"workers beyond the {res.workers_here} here are predicted by the model, not measured"
    q2 = Answer("Q2: speedup with 2 and 4 workers (strong vs weak scaling)", text2, "partial" if missing else "answered",
                nums, missing=missing)
    comm = t[t.workers > 1]
    q3 = Answer("Q3: compute vs communication",
                "All-reduce time per epoch from the fitted model: " + "; ".join(
                    f"{int(r.workers)} x {int(r.per_gpu_batch)}: {r.comm_s:.2f} s of {r.epoch_s:.2f} s "
                    f"({100 * r.comm_s / r.epoch_s:.0f}%)" for r in comm.itertuples()) + ".",
                "answered", [Number("busbw (fit)", res.fit["busbw_Bps"] / 1e9, "GB/s", "measured",
                                    n=int(res.allreduce.n.min())),
                             Number("all-reduce latency (fit)", 1e6 * res.fit["latency_s"], "us", "measured",
                                    n=int(res.allreduce.n.min()))])
    steps_ratio = math.ceil(settings.n_images / 128) / math.ceil(settings.n_images / 32768)
    ran = [(r.meta.get("distributed", {}).get("global_batch", r.meta["config"]["batch_size"]), r) for r in res.runs]
    if ran:
        gb, rec = max(ran, key=lambda x: x[0])
        ep = rec.table("epochs").iloc[-1]
        q4_text = (f"Largest global batch that ran here: {gb:,} for {int(ep.epoch)} epoch(s): loss {ep.loss:.3f}, "
                   f"top-1 {100 * ep.acc:.1f}%. At 32,768 a fixed number of epochs takes {steps_ratio:.0f}x fewer "
                   "optimizer steps than at 128; remedy: linear lr scaling with warm-up (Goyal et al. 2017).")
        q4_nums = [Number(f"global batch {gb}: loss", float(ep.loss), "", "measured"),
                   Number("optimizer steps, batch 128 vs 32,768", steps_ratio, "x", "predicted",
                          source="ceil(50,000 / 128) / ceil(50,000 / 32,768)")]
    else:
        q4_text, q4_nums = f"No multi-worker run here; at 32,768 training takes {steps_ratio:.0f}x fewer steps.", []
    q4 = Answer("Q4: 5th-epoch loss and accuracy at the largest batch on 4 GPUs", q4_text, "partial", q4_nums,
                missing="4 GPUs at per-GPU batch 8192 (global 32,768) for 5 epochs")
    flags = [sanity.too_few(int(res.q1[res.q1.status == "ok"].batches_timed.min()), "timed batches per Q1 size")]
    if res.on_gpu and backend != "nccl":
        flags.append(sanity.Flag("settings differ", f"only {res.workers_here} GPU here: the multi-GPU rows are "
                                 "predicted with the all-reduce bandwidth of gloo between CPU processes on this host, "
                                 "not of a GPU link (NVLink or PCIe with NCCL), so their communication time is a "
                                 "poor guide to a real multi-GPU run"))
    for rec in res.runs:
        flags.append(sanity.diverged(rec.table("batches")["loss"], num_classes(cfg.dataset)))
    return [q1, q2, q3, q4], _dedupe(flags), []
