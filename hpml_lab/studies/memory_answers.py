"""What the memory report concludes, computed from memory.MemoryResult: activation memory against depth (RevNet),
what checkpointing saves with its recomputation's working set counted, what each saving costs in time (verdicts
over interleaved rounds), whether both networks trained; and the tables the report shows, built the same way.
"""

from __future__ import annotations

import pandas as pd

from .. import sanity
from ..answers import Answer, Number
from ..data import num_classes
from ..verdict import compare
from ._conclude import dedupe

# the memory task's lab settings: the reference's table is at batch 8 with its adjusted ResNet-18; the rest as Lab 2
COUNTED = "bytes of the tensors autograd saves for backward, counted over one forward pass"
LAB = {**sanity.LAB, "model": "resnet18_adjusted", "batch_size": 8}


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
    return t[
        [
            "model",
            "params",
            "act_MB_per_sample",
            "working_MB_per_sample",
            "peak_vs_plain",
            "peak_MB",
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
            "s_per_batch": "s per batch (median)",
            "s_iqr": "IQR (s)",
            "time_vs_baseline": "time vs plain",
        }
    )


def fits_table(res) -> pd.DataFrame:
    """The largest batch per model, measured (CUDA) or predicted, with the bytes per sample it comes from."""
    measured = {r["model"] for r in res.max_batch if r["method"] == "measured"}
    saved = res.table.set_index("model").act_MB_per_sample
    return pd.DataFrame(
        {
            "model": list(res.largest),
            "largest batch": list(res.largest.values()),
            "how": ["measured" if m in measured else "predicted" for m in res.largest],
            "saved (MB/sample)": [saved[m] for m in res.largest],
            "recompute working set (MB/sample)": [working_set(res).get(m, 0.0) for m in res.largest],
        }
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
    """The loss of a uniform guess over the run's classes: the line the convergence answer and figure judge by."""
    return sanity.chance_loss(num_classes(cfg.dataset))


def _times(row) -> list[float]:
    return [float(x) for x in str(row["times_s"]).split(";") if x and x != "nan"]


def conclude(cfg, settings, res) -> tuple[list[Answer], list[sanity.Flag]]:
    """RevNet and checkpointing against the plain networks: activation memory (with the recomputation's own
    working set), the largest batch, the time it costs (verdicts over interleaved rounds), and whether both
    networks trained."""
    t = res.table.set_index("model")
    work = working_set(res)
    rev = res.table[res.table.family == "RevNet"].sort_values("depth")
    plain_rev = res.table[res.table.family == "RevNet, ordinary autograd"].sort_values("depth")
    r_lo, r_hi = rev.iloc[0], rev.iloc[-1]
    growth = r_hi.act_bytes_per_sample / r_lo.act_bytes_per_sample
    deeper = r_hi.depth / r_lo.depth
    plain_growth = plain_rev.iloc[-1].act_bytes_per_sample / plain_rev.iloc[0].act_bytes_per_sample
    a1 = Answer(
        "Does a RevNet keep activation memory flat as depth grows?",
        f"RevNet activation memory went from {r_lo.act_MB_per_sample:.3f} to {r_hi.act_MB_per_sample:.3f} MB per "
        f"sample ({growth:.2f}x) for {deeper:.1f}x the depth; under ordinary autograd the same "
        f"networks grow {plain_growth:.1f}x.",
        "answered",
        [
            Number(
                f"{r.model}: saved for backward", r.act_MB_per_sample, "MB/sample", "counted", source=COUNTED
            )
            for r in pd.concat([rev, plain_rev]).itertuples()
        ]
        + [
            Number(
                "RevNet: deepest vs shallowest, saved for backward", growth, "x", "counted", source=COUNTED
            ),
            Number("RevNet: deepest vs shallowest, depth", deeper, "x", "setting", source="the depths run"),
            Number(
                "ordinary autograd: deepest vs shallowest, saved for backward",
                plain_growth,
                "x",
                "counted",
                source=COUNTED,
            ),
        ],
    )
    nums, ck_parts = [], []
    for r in res.table[res.table.family == "ResNet + checkpointing"].itertuples():
        base = t.loc[r.baseline]
        share = (r.act_MB_per_sample + work.get(r.model, 0.0)) / base.act_MB_per_sample
        gain = res.largest[r.model] / res.largest[r.baseline]
        ck_parts.append(
            f"{r.baseline}: {share:.2f}x of the plain network's activation memory at the peak of backward "
            f"(saved {r.act_MB_per_sample:.3f} + recompute working set {work.get(r.model, 0.0):.3f} MB per "
            f"sample, against {base.act_MB_per_sample:.3f}), largest batch {gain:.2f}x"
        )
        nums += [
            Number(
                f"{r.model}: saved for backward", r.act_MB_per_sample, "MB/sample", "counted", source=COUNTED
            ),
            Number(
                f"{r.model}: recompute working set",
                work.get(r.model, 0.0),
                "MB/sample",
                "predicted",
                source="plain network's saved bytes / segments",
            ),
            Number(
                f"{r.baseline}: saved for backward",
                base.act_MB_per_sample,
                "MB/sample",
                "counted",
                source=COUNTED,
            ),
            Number(
                f"{r.model}: saved + working set vs plain",
                share,
                "x",
                "predicted",
                source="activation bytes measured; working set = plain / segments",
            ),
            Number(
                f"{r.model}: largest batch vs plain",
                gain,
                "x",
                "counted" if res.cuda else "predicted",  # a search's outcome on this GPU: exact, no n
                source="the largest batches that fitted on this GPU, each network alone"
                if res.cuda
                else f"budget {res.budget_bytes / 1024**3:.0f} GiB, from bytes per sample",
            ),
        ]
    a2 = Answer(
        "What does gradient checkpointing save, its recomputation counted?",
        ("With " + f"{cfg.checkpoint_segments} segments: " + "; ".join(ck_parts) + ".")
        if ck_parts
        else "Checkpointing was not run (checkpoint_segments = 0).",
        "answered" if res.cuda else "partial",
        nums,
        missing="" if res.cuda else "a GPU: peak allocated memory and the largest batch are predicted here",
    )
    cost = cost_lines(res)
    verdicts = {m: v.as_dict() for m, v in cost_verdicts(res).items()}
    a3 = Answer(
        "What does the memory saving cost in time?",
        f"{len(cost)} comparisons, each a verdict over "
        f"{settings.repeats} interleaved rounds; first: {cost[0] if cost else 'none'}",
        "answered",
        [
            Number(f"{r.model}: time vs plain", r.time_vs_baseline, "x", "measured", n=int(r.repeats))
            for r in res.table.itertuples()
            if r.model != r.baseline
        ],
        verdict=verdicts,
    )
    classes = num_classes(cfg.dataset)
    trained, flags = [], [sanity.busy((getattr(res, "meta", None) or {}).get("machine"))]
    tail = {k: float(v.batches.tail(max(1, len(v.batches) // 5))["loss"].mean()) for k, v in res.runs.items()}
    for name, run in res.runs.items():
        d = sanity.diverged(list(run.batches["loss"]), classes)
        if d:
            flags.append(sanity.Flag("diverged", f"{name}: {d.message}"))
        elif not sanity.at_chance(
            list(run.batches["loss"]), classes
        ):  # clearly below chance: above it is no training
            trained.append(name)
    said = ", ".join(f"{k} {x:.3f}" for k, x in tail.items())
    chance = f"chance {sanity.chance_loss(classes):.2f}"
    if len(trained) == len(res.runs):
        conv = f"Both trained (mean loss over the last fifth: {said}; {chance})."
    elif not trained:
        conv = (
            f"Neither got clearly below chance in this run (mean loss over the last fifth: {said}; {chance}): "
            "too few steps to show training, so no convergence comparison can be made."
        )
    else:
        conv = (
            f"Only {', '.join(trained)} got below chance (mean loss over the last fifth: {said}; {chance}); "
            f"{', '.join(sorted(set(res.runs) - set(trained)))} did not in this run."
        )
    a4 = Answer(
        "Do ResNet and RevNet both train on the same steps?",
        conv,
        "answered",
        [
            Number(f"{k}: mean loss, last fifth", x, "", "measured", n=max(1, len(res.runs[k].batches) // 5))
            for k, x in tail.items()
        ]
        + [
            Number(
                "chance loss",
                sanity.chance_loss(classes),
                "",
                "predicted",
                source=f"ln {classes}: the loss of a uniform guess",
            )
        ],
    )
    return [a1, a2, a3, a4], dedupe(flags)


def cost_verdicts(res) -> dict:
    """Each memory-saving network -> the verdict of its time per training step against its plain network's
    (interleaved rounds)."""
    t = res.table.set_index("model")
    return {
        r.model: compare(
            _times(t.loc[r.baseline]), _times(r._asdict()), r.baseline, r.model, what="time per training step"
        )
        for r in res.table.itertuples()
        if r.model != r.baseline
    }


def cost_lines(res) -> list[str]:
    """One sentence per memory-saving network: what it costs in time, its verdict's own words."""
    return [f"{m}: " + v.sentence() for m, v in cost_verdicts(res).items()]
