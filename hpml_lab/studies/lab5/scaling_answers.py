"""What the Lab 5 report concludes, computed from scaling.Lab5Result: Q1 (best per-worker batch, a verdict),
Q2 (speedups, measured or predicted and said which), Q3 (compute vs communication), Q4 (the large batch), and
the flags that apply.
"""

from __future__ import annotations

import math

import pandas as pd

from ... import sanity
from ...answers import Answer, Number
from ...data import num_classes
from ...profiling import summarize
from ...verdict import best, compare, sample_record
from .._conclude import dedupe, num, share, short


def lab5_q1(q1: pd.DataFrame) -> Answer:
    """Lab 5 Q1: the per-worker batch with the highest throughput, a verdict over the timed steps' images/s
    (every batch the data cannot separate from it is named: a tie), each batch's epoch extrapolated."""
    ok = q1[q1.status == "ok"]
    oom = q1[q1.status == "OOM"].per_gpu_batch.tolist()
    samples = {
        int(r.per_gpu_batch): [r.per_gpu_batch / float(t) for t in str(r.step_times_s).split(";")]
        for r in ok.itertuples()
    }
    b = best(samples, lower_is_better=False, what="throughput (images/s per step)")
    row = ok.set_index("per_gpu_batch").loc[b.label]
    med = summarize(samples[b.label])["median"]
    tied = [str(k) for k in b.tied if k != b.label]
    where = (
        f"({med:,.0f} images/s median over {len(samples[b.label])} timed steps, epoch excluding data I/O "
        f"{row.epoch_s_excl_io:.1f} s extrapolated from {int(row.batches_timed)} timed batches)"
    )
    if len(samples) == 1:
        text = f"Only per-worker batch {b.label} ran {where}: nothing to compare it with"
    elif tied:
        text = (
            f"Batch {b.label} per worker had the highest median throughput {where} but cannot be told apart from "
            f"batch {', '.join(tied)}: a tie, so this run shows no single best batch"
        )
    else:
        text = (
            f"Throughput peaks at per-worker batch {b.label} {where}, higher than every other batch tried at 95% "
            "confidence"
        )
    text += f"; out of memory at {', '.join(map(str, oom))}." if oom else "; no batch ran out of memory."
    verdict = {
        "best": b.label,
        "tied": list(b.tied),
        "against": {str(k): sample_record(v, samples[b.label], samples[k]) for k, v in b.verdicts.items()},
    }
    return Answer(
        "Q1: computational efficiency on one worker",
        text,
        "answered",
        [num(f"batch {b.label}: throughput per step", samples[b.label], "images/s")]
        + [
            Number(
                f"batch {int(r.per_gpu_batch)}: epoch excl. I/O",
                round(float(r.epoch_s_excl_io), 1),
                "s",
                "predicted",
                source=f"step time x steps, from {int(r.batches_timed)} timed batches",
            )
            for r in ok.itertuples()
        ],
        verdict=verdict if len(samples) > 1 else None,
    )


MODEL_MARGIN = 0.25  # the scaling model "agrees" with a measurement within 25% of its epoch time


def model_misses(t: pd.DataFrame, margin: float = MODEL_MARGIN) -> list[str]:
    """Each row where the model's prediction and this machine's measurement of the same configuration differ by
    more than `margin` of the measurement, said with both numbers."""
    return [
        f"{int(r.workers)} x {int(r.per_gpu_batch)}: predicted {r.predicted_s:,.0f} s vs timed "
        f"{r.measured_s:,.0f} s ({100 * (r.predicted_s / r.measured_s - 1):+.0f}%)"
        for r in missed_rows(t, margin).itertuples()
    ]


def missed_rows(t: pd.DataFrame, margin: float = MODEL_MARGIN) -> pd.DataFrame:
    """The multi-worker rows whose model prediction misses the epoch time extrapolated from timed steps."""
    both = t[t.measured_s.notna() & t.predicted_s.notna() & (t.workers > 1)]
    return both[(both.predicted_s / both.measured_s - 1).abs() > margin]


def miss_numbers(t: pd.DataFrame, src_model: str, margin: float = MODEL_MARGIN) -> list[Number]:
    """The numbers model_misses' sentences state: the margin, and each missed row's prediction and miss."""
    rows = missed_rows(t, margin)
    if rows.empty:
        return []
    out = [Number("model margin", 100 * margin, "%", "setting", source="scaling_answers.MODEL_MARGIN")]
    for r in rows.itertuples():
        at = f"{int(r.workers)} workers x {int(r.per_gpu_batch)}"
        out += [
            Number(f"{at}: model's epoch", float(r.predicted_s), "s", "predicted", source=src_model),
            Number(
                f"{at}: timed epoch",
                float(r.measured_s),
                "s",
                "predicted",
                source="measured step time x steps",
            ),
            Number(
                f"{at}: model vs timed",
                100 * float(r.predicted_s / r.measured_s - 1),
                "%",
                "predicted",
                source="model's epoch / timed epoch - 1",
            ),
        ]
    return out


def step_samples(rec, global_batch: int) -> list[float]:
    """A DDP run's last-epoch compute times per step (forward, backward with its all-reduce, update) of full
    batches only (its `images` column counts every rank's images)."""
    b = rec.table("batches")
    return list(b[(b.epoch == b.epoch.max()) & (b.images == global_batch)].train_s)


def speedup_verdicts(res) -> dict[tuple[int, int], tuple]:
    """(workers, per-worker batch) -> (verdict, n-worker samples, 1-worker samples) for each measured multi-worker
    row: compute time per step (all-reduce included) divided by the workers against the 1-worker step's."""
    out = {}
    q1 = res.q1[res.q1.status == "ok"].set_index("per_gpu_batch")
    for r in res.table[(res.table.workers > 1) & (res.table.source == "measured")].itertuples():
        idx = getattr(r, "run", None)
        if idx is None or idx != idx or int(r.per_gpu_batch) not in q1.index:
            continue
        n, b = int(r.workers), int(r.per_gpu_batch)
        xa = [x / n for x in step_samples(res.runs[int(idx)], n * b)]
        xb = [float(x) for x in str(q1.loc[b, "step_times_s"]).split(";") if x]
        out[(n, b)] = (
            compare(xa, xb, f"{n} workers", "1 worker", what=f"compute per step and worker at batch {b}"),
            xa,
            xb,
        )
    return out


def conclude(cfg, settings, res) -> tuple[list[Answer], list[sanity.Flag]]:
    """Lab 5 Q1-Q7 from the study: every epoch time is an extrapolation (predicted, from timed steps or from the
    model, said which), each measured speedup a verdict, and a model that misses its own measurements says so."""
    backend = res.allreduce.backend.iloc[0]
    misses = model_misses(res.table)
    warn = (
        f"; WARNING: it misses its own measurements by more than {MODEL_MARGIN:.0%} ({'; '.join(misses)})"
        if misses
        else ""
    )
    src_model = (
        f"ring all-reduce model, busbw {res.fit['busbw_Bps'] / 1e9:.2f} GB/s and latency "
        f"{1e6 * res.fit['latency_s']:.0f} us from this machine's all-reduce ({backend}, "
        f"{res.fit['world_size']} processes; {res.fit['method']})" + warn
    )
    q1 = lab5_q1(res.q1)
    t = res.table
    multi = t[t.workers > 1]
    verdicts = speedup_verdicts(res)

    def timed(r) -> str:
        v = verdicts.get((int(r.workers), int(r.per_gpu_batch)))
        return f"measured step time x steps, from {len(v[1]) if v else 'the'} timed steps of a {int(r.workers)}-worker run"

    nums = [
        Number(
            f"{int(r.workers)} workers x {int(r.per_gpu_batch)}: epoch",
            round(float(r.epoch_s), 1),
            "s",
            "predicted",
            source=timed(r) if r.source == "measured" else src_model,
        )
        for r in multi.itertuples()
    ]
    nums += [
        Number(
            f"{int(r.workers)} workers x {int(r.per_gpu_batch)}: speedup",
            float(r.speedup),
            "x",
            "predicted",
            source="1-worker epoch / this epoch, both "
            + ("extrapolated from timed steps" if r.source == "measured" else "from the model"),
        )
        for r in multi.itertuples()
    ]
    nums += miss_numbers(t, src_model) if misses else []

    def one(r) -> str:
        v = verdicts.get((int(r.workers), int(r.per_gpu_batch)))
        how = (
            f"extrapolated from {len(v[1])} timed steps; {v[0].sentence().rstrip('.')}"
            if v
            else "extrapolated from timed steps, no verdict"
            if r.source == "measured"
            else "the model's prediction"
        )
        return f"{int(r.workers)} workers x {int(r.per_gpu_batch)}: {r.speedup:.2f}x ({how})"

    text2 = "Speedup at a fixed per-worker batch: " + "; ".join(one(r) for r in multi.itertuples()) + "."
    if misses:
        text2 += (
            f" The scaling model misses its own measurements here by more than {MODEL_MARGIN:.0%} "
            f"({'; '.join(misses)}), so its predictions for more workers are not reliable."
        )
    predicted_rows = (multi.source != "measured").any()
    missing = (
        f"workers beyond the {res.workers_here} here are predicted by the model, not measured"
        if predicted_rows
        else ""
    )
    q2 = Answer(
        "Q2: speedup with 2 and 4 workers (strong vs weak scaling)",
        text2,
        "partial" if missing else "answered",
        nums,
        missing=missing,
        verdict={f"{n}x{b}": sample_record(v, xa, xb) for (n, b), (v, xa, xb) in verdicts.items()} or None,
    )
    q3 = Answer(
        "Q3: compute vs communication",
        "Per epoch, compute (Q1's step time) and all-reduce (the fitted model) against the epoch time; the rest "
        "is data loading and what neither explains: "
        + "; ".join(
            f"{int(r.workers)} x {int(r.per_gpu_batch)}: compute {short(r.compute_s)} s, all-reduce "
            f"{short(r.comm_s)} s of {short(r.epoch_s)} s ({share(r.comm_s / r.epoch_s)} all-reduce, "
            f"{share(max(0.0, 1 - (r.compute_s + r.comm_s) / r.epoch_s))} unexplained)"
            for r in multi.itertuples()
        )
        + ".",
        "answered",
        [
            Number(
                "busbw (fit)", res.fit["busbw_Bps"] / 1e9, "GB/s", "measured", n=int(res.allreduce.n.min())
            ),
            Number(
                "all-reduce latency (fit)",
                1e6 * res.fit["latency_s"],
                "us",
                "measured",
                n=int(res.allreduce.n.min()),
            ),
        ]
        + q3_numbers(multi, src_model),
    )
    steps_ratio = math.ceil(settings.n_images / 128) / math.ceil(settings.n_images / 32768)
    steps_num = Number(
        "optimizer steps, batch 128 vs 32,768",
        steps_ratio,
        "x",
        "predicted",
        source=f"ceil({settings.n_images:,} / 128) / ceil({settings.n_images:,} / 32,768)",
    )
    ran = [
        (r.meta.get("distributed", {}).get("global_batch", r.meta["config"]["batch_size"]), r)
        for r in res.runs
    ]
    if ran:
        gb, rec = max(ran, key=lambda x: x[0])
        ep = rec.table("epochs").iloc[-1]
        q4_text = (
            f"Largest global batch that ran here: {gb:,} for {int(ep.epoch)} epoch(s): loss {ep.loss:.3f}, "
            f"top-1 {100 * ep.acc:.1f}%. At 32,768 a fixed number of epochs takes {steps_ratio:.0f}x fewer "
            "optimizer steps than at 128; remedy: linear lr scaling with warm-up (Goyal et al. 2017)."
        )
        q4_nums = [
            Number(f"global batch {gb}: loss", float(ep.loss), "", "measured", n=1),
            Number(f"global batch {gb}: top-1", 100 * float(ep.acc), "%", "measured", n=1),
            steps_num,
        ]
    else:
        q4_text, q4_nums = (
            f"No multi-worker run here; at 32,768 training takes {steps_ratio:.0f}x fewer steps.",
            [steps_num],
        )
    q4 = Answer(
        "Q4: 5th-epoch loss and accuracy at the largest batch on 4 GPUs",
        q4_text,
        "partial",
        q4_nums,
        missing="4 GPUs at per-GPU batch 8192 (global 32,768) for 5 epochs",
    )
    flags = [
        sanity.too_few(int(res.q1[res.q1.status == "ok"].batches_timed.min()), "timed batches per Q1 size"),
        sanity.busy((getattr(res, "meta", None) or {}).get("machine")),
    ]
    if res.on_gpu and backend != "nccl":
        flags.append(
            sanity.Flag(
                "settings differ",
                f"only {res.workers_here} GPU here: the multi-GPU rows are "
                "predicted with the all-reduce bandwidth of gloo between CPU processes on this host, "
                "not of a GPU link (NVLink or PCIe with NCCL), so their communication time is a "
                "poor guide to a real multi-GPU run",
            )
        )
    for rec in res.runs:
        flags.append(sanity.diverged(rec.table("batches")["loss"], num_classes(cfg.dataset)))
    if misses:
        flags.append(
            sanity.Flag(
                "model disagrees",
                f"the scaling model misses its own measurements by more than "
                f"{MODEL_MARGIN:.0%} ({'; '.join(misses)}): its predictions carry that warning",
            )
        )
    return [q1, q2, q3, q4, *SHORT_ANSWERS], dedupe(flags)


def q3_numbers(multi: pd.DataFrame, src_model: str) -> list[Number]:
    """Q3's per-row compute, all-reduce and epoch times and the shares its sentence states (all extrapolated)."""
    out = []
    for r in multi.itertuples():
        at = f"{int(r.workers)} workers x {int(r.per_gpu_batch)}"
        out += [
            Number(
                f"{at}: compute per epoch",
                float(r.compute_s),
                "s",
                "predicted",
                source="Q1's measured step time x steps",
            ),
            Number(f"{at}: all-reduce per epoch", float(r.comm_s), "s", "predicted", source=src_model),
            Number(f"{at}: epoch", float(r.epoch_s), "s", "predicted", source="as in Q2"),
            Number(
                f"{at}: all-reduce share",
                100 * float(r.comm_s / r.epoch_s),
                "%",
                "predicted",
                source="all-reduce / epoch",
            ),
            Number(
                f"{at}: unexplained share",
                100 * max(0.0, 1 - float((r.compute_s + r.comm_s) / r.epoch_s)),
                "%",
                "predicted",
                source="1 - (compute + all-reduce) / epoch",
            ),
        ]
    return out


SHORT_ANSWERS = [
    Answer(
        "Q5: why DistributedSampler.set_epoch?",
        "The sampler shuffles with seed + epoch; without set_epoch every "
        "epoch reuses epoch 0's permutation, so each rank sees the same shard in the same order every epoch "
        "(hpml_lab.training.train calls it before every epoch).",
        "answered",
    ),
    Answer(
        "Q6: are gradients the only thing communicated?",
        "No: DDP broadcasts parameters and buffers from rank 0 "
        "at construction and, with broadcast_buffers=True (the default), buffers such as BatchNorm's running "
        "statistics before every forward; our loss and accuracy are all-reduced once per epoch.",
        "answered",
    ),
    Answer(
        "Q7: is that enough?",
        "For identical models yes: the same initial weights, the same averaged gradients "
        "and a deterministic optimizer keep the replicas identical (a test checks 2 ranks x B/2 against 1 x B "
        "without BatchNorm); with BatchNorm each rank normalises with its own batch statistics, which "
        "SyncBatchNorm all-reduces if that matters.",
        "answered",
    ),
]


def lr_table(n_images: int, batches=(128, 512, 2048, 8192, 32768)) -> pd.DataFrame:
    """Q4.2's remedy in numbers: the linearly scaled lr (0.1 x B / 128), steps per epoch and 5 warm-up epochs."""
    return pd.DataFrame(
        [
            {
                "global batch": B,
                "scaled lr": 0.1 * B / 128,
                "steps per epoch": math.ceil(n_images / B),
                "warm-up steps (5 epochs)": 5 * math.ceil(n_images / B),
            }
            for B in batches
        ]
    )


def setup_note(cfg, settings, res) -> str:
    """What ran: batch sizes, workers here, gradient size, and whether epochs are extrapolated."""
    return (
        f"Per-worker batch sizes: {', '.join(map(str, res.sizes))}; DataLoader workers per process: "
        f"{cfg.num_workers}. Workers available here: **{res.workers_here}** "
        f"({'GPUs' if res.on_gpu else 'CPU processes of one thread each'}). Gradient size of {cfg.model}: "
        f"{res.grad_bytes / 1e6:.1f} MB (fp32)."
        + (
            f" Each epoch is cut at {cfg.max_batches} batches and extrapolated to {settings.n_images:,} images "
            "(time per step x steps per epoch): an estimate, not a measured epoch."
            if cfg.max_batches
            else ""
        )
    )


def fit_note(res) -> str:
    """The all-reduce fit in one sentence: latency, bus bandwidth, backend and processes."""
    return (
        f"Fit over the {len(res.allreduce)} measured sizes: latency {1e6 * res.fit['latency_s']:.0f} us, busbw "
        f"{res.fit['busbw_Bps'] / 1e9:.2f} GB/s ({res.allreduce.backend.iloc[0]}, {res.fit['world_size']} processes)."
    )


SOURCE_SHOWN = {"measured": "predicted: timed steps x steps", "predicted": "predicted: scaling model"}


def shown(df: pd.DataFrame) -> pd.DataFrame:
    """A Lab 5 table (res.table, res.strong, res.weak) as the report shows it: every epoch time is an extrapolation,
    so no row says "measured"; a row from a run's timed steps says so, a row from the model says that."""
    out = df.copy()
    if "source" in out:
        out["source"] = [SOURCE_SHOWN.get(x, x) for x in out["source"]]
    return out.rename(columns={"measured_s": "from timed steps (s)", "predicted_s": "model (s)"})


def allreduce_table(res) -> pd.DataFrame:
    """The measured all-reduce per size, in MB and ms."""
    ar = res.allreduce
    return ar.assign(MB=ar.bytes / 1e6, time_ms=1e3 * ar.time_s, iqr_ms=1e3 * ar.iqr_s)[
        ["world_size", "backend", "MB", "time_ms", "iqr_ms", "n", "algbw_GBps", "busbw_GBps"]
    ]


def reference_note(res) -> str:
    """The model fitted to the reference's 1- and 2-GPU times, and its prediction of the reference's 4-GPU row."""
    e4, f = res.reference.iloc[-1], res.reference_fit
    return (
        f"The reference's 1- and 2-GPU times imply {1e3 * f['t_step_512_s']:.0f} ms of compute per step at batch "
        f"512 and an all-reduce of {1e3 * f['t_comm2_s']:.0f} ms, i.e. busbw {f['busbw_Bps'] / 1e9:.2f} GB/s. The "
        f"model then predicts {e4['model (s)']:.2f} s for the unfitted 4-GPU row against the reference's 5.02 s "
        f"({e4['error (%)']:+.0f}%)."
    )
