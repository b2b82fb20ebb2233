"""What the Lab 5 report concludes, computed from scaling.Lab5Result: Q1 (best per-worker batch, a verdict),
Q2 (speedups, measured or predicted and said which), Q3 (compute vs communication), Q4 (the large batch), and
the flags that apply.
"""
from __future__ import annotations

import math

import pandas as pd

from .. import sanity
from ..answers import Answer, Number
from ..data import num_classes
from ..profiling import summarize
from ..verdict import best, sample_record
from ._conclude import dedupe


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


def conclude(cfg, settings, res) -> tuple[list[Answer], list[sanity.Flag], list[str]]:
    """Lab 5 Q1-Q4 from the study: measured where workers exist, predicted (and said so) elsewhere."""
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
    return [q1, q2, q3, q4], dedupe(flags), []
