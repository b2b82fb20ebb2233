"""What the speed ladder concludes: per rung a verdict against the rung before it, and how far the fastest rung is
from the device's ideal.

    from hpml_lab.studies.speed import conclude
    answers, flags = conclude(cfg, result)      # result: ladder.Ladder

Every comparison is a verdict (hpml_lab.verdict.compare) on the images/s of interleaved timed runs; a rung that
ran slower than the one before says so, a rung the data cannot separate from the one before says it cannot tell,
and a rung that did not run here says why.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ... import sanity
from ...answers import Answer, Number
from ...verdict import best, compare, sample_record
from .._conclude import short

QUESTION_TOP = "How fast does this machine train, and how far is that from the hardware?"


def neighbours(table: pd.DataFrame) -> list[tuple[dict, dict | None]]:
    """(rung, the last measured rung before it) for every rung after the first; None when none before it ran."""
    out, prev = [], None
    for i, row in enumerate(table.to_dict("records")):
        if i:
            out.append((row, prev))
        if row["status"] == "measured":
            prev = row
    return out


def images_number(row: dict, samples: list[float]) -> Number:
    s = pd.Series(samples)
    spread = float(s.quantile(0.75) - s.quantile(0.25)) if len(s) >= 3 else None
    return Number(
        f"{row['rung']} images/s", float(row["images_per_s"]), "images/s", "measured", n=len(s), spread=spread
    )


def rung_verdict(row: dict, prev: dict, samples: dict[str, list[float]]):
    """This rung's images/s against the previous measured rung's (higher is better): 'better' = it helped."""
    return compare(
        samples[row["rung"]],
        samples[prev["rung"]],
        row["label"],
        prev["label"],
        lower_is_better=False,
        what="images/s",
    )


def rung_answer(row: dict, prev: dict | None, samples: dict[str, list[float]], device: str) -> Answer:
    question = f"What does {row['change']} buy?"
    if row["status"] != "measured":
        return Answer(
            question,
            f"{row['label']}: not run here ({row['reason']}).",
            "not answered",
            missing=row["reason"],
        )
    if prev is None:
        return Answer(
            question,
            f"{row['label']}: no rung before it ran, so there is nothing to compare with.",
            "not answered",
            missing="the rungs before it did not run",
        )
    v = rung_verdict(row, prev, samples)
    nums = [images_number(row, samples[row["rung"]]), images_number(prev, samples[prev["rung"]])]
    text = v.sentence()
    if v.outcome == "worse":
        text += f" This rung does not help on {device}."
    elif v.outcome == "tie":
        text += " This run cannot tell whether the rung helps."
    return Answer(
        question,
        text,
        "answered",
        nums,
        verdict=sample_record(v, samples[row["rung"]], samples[prev["rung"]]),
    )


def top_answer(table: pd.DataFrame, samples: dict[str, list[float]]) -> Answer:
    rows = {r["rung"]: r for r in table.to_dict("records")}
    measured = [k for k in rows if rows[k]["status"] == "measured"]
    if not measured:
        return Answer(QUESTION_TOP, "No rung ran.", "not answered", missing="every rung")
    b = best({k: samples[k] for k in measured}, lower_is_better=False, what="images/s")
    top, base = rows[b.label], rows[measured[0]]
    nums = [images_number(top, samples[top["rung"]])]
    nums += [
        Number(f"{top['rung']} MFU", float(top["mfu"]), "", "measured", n=len(samples[top["rung"]])),
        Number(
            f"{top['rung']} ideal images/s",
            float(top["ideal_images_per_s"]),
            "images/s",
            "predicted",
            source=f"FLOPs per image at the {top['peak_precision']} peak ({top['peak_source']})",
        ),
    ]
    text = (
        f"Most images/s: {top['label']}, {short(top['images_per_s'])} images/s at MFU "
        f"{100 * top['mfu']:.3g}% of the device's {top['peak_precision']} peak (ideal "
        f"{short(top['ideal_images_per_s'])} images/s)"
    )
    others = [rows[k]["label"] for k in b.tied if k != b.label]
    text += f"; it cannot be told apart from {', '.join(others)}." if others else "."
    verdict = None
    if top["rung"] != base["rung"]:
        v = compare(
            samples[top["rung"]],
            samples[base["rung"]],
            top["label"],
            base["label"],
            lower_is_better=False,
            what="images/s",
        )
        text += " " + v.sentence()
        nums.append(images_number(base, samples[base["rung"]]))
        verdict = sample_record(v, samples[top["rung"]], samples[base["rung"]])
    return Answer(QUESTION_TOP, text, "answered", nums, verdict=verdict)


def conclude(cfg, result) -> tuple[list[Answer], list[Any]]:
    """(answers, flags): the top answer, then one per rung after the baseline; flags for few repeats and a busy
    machine."""
    table, samples = result.table, result.samples
    device = str(result.meta.get("device", cfg.device))
    answers = [top_answer(table, samples)]
    answers += [rung_answer(row, prev, samples, device) for row, prev in neighbours(table)]
    flags = [
        sanity.too_few(int(result.meta.get("repeats", 0)), "timed repeats per rung"),
        sanity.busiest_seen([result.meta.get("load_before"), result.meta.get("load_after")]),
    ]
    return answers, [f for f in flags if f is not None]
