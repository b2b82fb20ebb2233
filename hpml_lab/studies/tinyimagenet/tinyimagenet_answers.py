"""What the Tiny ImageNet report concludes, computed from tinyimagenet.TinResult: where the bottleneck is with 0 and
N workers (shares from the same medians the table shows), what checkpointing costs and buys (a tie said as a tie),
and the estimated against the actual epoch time (a prediction, tagged so).
"""

from __future__ import annotations

import pandas as pd

from ... import sanity
from ...answers import Answer, Number
from ...profiling import summarize
from ...verdict import compare, sample_record
from .._conclude import dedupe, num


def conclude(cfg, res) -> tuple[list[Answer], list[sanity.Flag]]:
    """Bottleneck (0 vs N workers), checkpointing's cost in time and gain in batch, estimated vs actual epochs."""
    (w0, r0), (wn, rn) = sorted(res.workers.items())

    def last_epoch(rec):
        b = rec.table("batches")
        return b[b.epoch == b.epoch.max()]

    b0, bn = last_epoch(r0), last_epoch(rn)
    vd = compare(
        list(bn.data_s), list(b0.data_s), f"{wn} workers", f"{w0} workers", what="data wait per batch"
    )
    vc = compare(
        list(bn.train_s), list(b0.train_s), f"{wn} workers", f"{w0} workers", what="copy + compute per batch"
    )
    nums = [
        num(f"{w0} workers: data wait per batch", b0.data_s, "ms", 1000),
        num(f"{wn} workers: data wait per batch", bn.data_s, "ms", 1000),
        num(f"{w0} workers: copy + compute per batch", b0.train_s, "ms", 1000),
        num(f"{wn} workers: copy + compute per batch", bn.train_s, "ms", 1000),
    ]
    # the share from the same medians the table shows, so the sentence and the table agree
    share0 = nums[0].value / (nums[0].value + nums[2].value)
    sharen = nums[1].value / (nums[1].value + nums[3].value)
    moved = vd.outcome == "better" and share0 > 0.5 > sharen
    per_batch = [
        (w0, nums[0].value + nums[2].value, share0, len(b0)),
        (wn, nums[1].value + nums[3].value, sharen, len(bn)),
    ]
    for w, total, share, n in per_batch:  # what the sentence states, from the medians above
        nums += [
            Number(f"{w} workers: data wait + copy + compute per batch", total, "ms", "measured", n=n),
            Number(f"{w} workers: data wait share of a batch", 100 * share, "%", "measured", n=n),
        ]
    a1 = Answer(
        "Where is the bottleneck with 0 and with N workers?",
        f"From the per-batch medians, data wait is {share_pct(share0)} of a batch with {w0} workers "
        f"({ms(nums[0].value)} of {ms(nums[0].value + nums[2].value)} ms) and {share_pct(sharen)} with {wn} "
        f"({ms(nums[1].value)} of {ms(nums[1].value + nums[3].value)} ms). "
        + vd.sentence()
        + (
            " The bottleneck moves from loading to the copy and compute."
            if moved
            else f" Loading is not the bottleneck here even with {w0} workers."
            if share0 <= 0.5
            else f" Loading is the bottleneck with {w0} workers; whether {wn} move it to compute, this "
            "run cannot tell (its data-wait verdict is a tie)."
            if vd.outcome == "tie"
            else " The bottleneck did not move from loading to compute in this run."
        ),
        "answered",
        nums,
        verdict={
            "data": sample_record(vd, bn.data_s, b0.data_s),
            "compute": sample_record(vc, bn.train_s, b0.train_s),
        },
    )
    ck = res.variants.get("checkpointing")
    bc = last_epoch(ck)
    vt = compare(
        list(bn.train_s), list(bc.train_s), "the baseline", "checkpointing", what="copy + compute per batch"
    )
    m = res.memory.set_index("variant")
    gain = (
        m.loc["checkpointing", "largest batch (predicted)"] / m.loc["baseline", "largest batch (predicted)"]
    )
    slow = summarize(bc.train_s)["median"] / summarize(bn.train_s)["median"]
    a2 = Answer(
        "What does checkpointing cost in time, and what does it buy in batch size?",
        (
            f"Checkpointing's time per batch cannot be told apart from the baseline's: {vt.sentence()} "
            if vt.outcome == "tie"
            else f"{vt.sentence()} (one extra forward predicts about 1.33x.) "
        )
        + f"It allows a {gain:.2f}x larger batch (predicted from bytes per image)"
        + (": that is its pay-off." if gain >= 1.1 else ": too little to call a pay-off."),
        "answered",
        [
            Number("checkpointing / baseline time per batch", slow, "x", "measured", n=len(bc)),
            Number(
                "expected from one extra forward",
                1.33,
                "x",
                "predicted",
                source="step = forward + backward of about 2x forward; +1 forward",
            ),
            Number(
                "largest batch, checkpointing / baseline",
                gain,
                "x",
                "predicted",
                source=f"activation bytes per image, budget {res.budget_bytes / 2**30:.0f} GiB",
            ),
        ],
        verdict=sample_record(vt, bn.train_s, bc.train_s),
    )
    t = res.timing.dropna(subset=["s/batch"]).set_index("variant")
    src = "N / B x median time per batch"
    est = [
        x
        for n in t.index
        for x in (
            Number(
                f"{n}: estimated epoch", float(t.loc[n, "estimated epoch (s)"]), "s", "predicted", source=src
            ),
            Number(f"{n}: actual epoch", float(t.loc[n, "actual epoch (s)"]), "s", "measured", n=1),
            Number(
                f"{n}: estimated / actual epoch",
                float(t.loc[n, "estimated epoch (s)"] / t.loc[n, "actual epoch (s)"]),
                "x",
                "predicted",
                source=f"estimate {src}, over one measured epoch",
            ),
        )
    ]
    skipped = res.timing[res.timing["s/batch"].isna()] if "s/batch" in res.timing else res.timing.iloc[0:0]
    a3 = Answer(
        "Estimated (N / B x time per batch) vs actual epoch time, per variant",
        "; ".join(
            f"{n}: estimate {t.loc[n, 'estimated epoch (s)']:.2f} s vs actual {t.loc[n, 'actual epoch (s)']:.2f} s"
            for n in t.index
        )
        + ".",
        "partial" if len(skipped) else "answered",
        est,
        missing="; ".join(f"{r.variant}: {r.note}" for r in skipped.itertuples()),
    )
    flags = [sanity.stand_in(cfg)] + [
        sanity.busy(getattr(r, "meta", {}).get("machine")) for r in res.workers.values()
    ]
    for rec in list(res.workers.values()) + [ck]:
        flags.append(sanity.diverged(rec.table("batches")["loss"], CLASSES_TIN))
    return [a1, a2, a3], dedupe(flags)


CLASSES_TIN = 200


def ms(x: float) -> str:
    """Milliseconds for a sentence: 3 significant digits, whole thousands with a separator."""
    return f"{x:,.0f}" if x >= 1000 else f"{x:.3g}"


def share_pct(x: float) -> str:
    """A share as a percentage with 2 significant digits (4.6%, 0.34%), never rounded to 0%."""
    return f"{100 * x:.2g}%"


def worker_table(res) -> pd.DataFrame:
    """Per worker count: the last epoch's median data wait and copy + compute per batch (ms), the medians the
    bottleneck answer uses (epoch 1 is warm-up)."""
    rows = []
    for w, rec in res.workers.items():
        b = rec.table("batches")
        b = b[b.epoch == b.epoch.max()]
        rows.append(
            {
                "workers": w,
                "data ms/batch": 1000 * b.data_s.median(),
                "copy + compute ms/batch": 1000 * b.train_s.median(),
            }
        )
    return pd.DataFrame(rows)
