"""What the data-loading report concludes, computed from the study's table (dataloading.run): each loader against
the baseline at the same storage latency (verdicts over the timed passes) and the tensor-resident loader with and
without its one-time load.
"""

from __future__ import annotations

import pandas as pd

from ... import sanity
from ...answers import Answer, Number
from ...verdict import compare, sample_record
from .._conclude import first_up
from .dataloading_study import pass_times

REFERENCE_DATALOADING = (
    "resnet-50-performance reference: data loading 703 s with its baseline vs 1052 s with "
    "parallel workers (its README)"
)


def _rows(df: pd.DataFrame):
    rows = {(r["latency_ms"], r["loader"]): r for _, r in df.iterrows()}
    lats = sorted(df["latency_ms"].unique())
    return rows, lats[-1], lats[0]


def _against_baseline(rows, loader: str, lat: float):
    a, b = pass_times(rows[(lat, loader)]), pass_times(rows[(lat, "baseline")])
    return compare(a, b, loader, "the baseline", what=f"time per pass at {lat:g} ms per file"), a, b


def conclude(cfg, df: pd.DataFrame, meta: dict) -> tuple[list[Answer], list[sanity.Flag]]:
    """Loaders from high-latency storage: each against the baseline at the same latency, by verdicts over the
    timed passes; the tensor-resident loader with and without its one-time load (its prose: notes())."""
    rows, hi, lo = _rows(df)
    vt_hi, a1, b1 = _against_baseline(rows, "threads", hi)
    vw_hi, a2, b2 = _against_baseline(rows, "more workers", hi)
    vt_lo, a3, b3 = _against_baseline(rows, "threads", lo)
    tr = rows[(hi, "tensor-resident")]
    per_pass_with_load = tr["epoch_s"] + tr["one_time_s"] / tr["passes"]
    nums = [
        Number(
            f"{name} at {hi:g} ms: pass",
            rows[(hi, name)]["epoch_s"],
            "s",
            "measured",
            n=int(rows[(hi, name)]["passes"]),
        )
        for name in ("baseline", "more workers", "threads", "tensor-resident")
    ]
    nums += [
        Number(f"tensor-resident one-time load at {hi:g} ms", tr["one_time_s"], "s", "measured", n=1),
        Number(
            f"tensor-resident at {hi:g} ms incl. its load over {int(tr['passes'])} passes",
            per_pass_with_load,
            "s per pass",
            "measured",
            n=int(tr["passes"]),
        ),
        Number("reference: data loading, baseline", 703, "s", "reference", source=REFERENCE_DATALOADING),
        Number(
            "reference: data loading, parallel workers", 1052, "s", "reference", source=REFERENCE_DATALOADING
        ),
        Number(
            "simulated storage latency per file",
            float(hi),
            "ms",
            "setting",
            source="the task's latency setting (dataloading.Settings)",
        ),
    ]
    text = f"At {hi:g} ms per file: {first_up(vt_hi.sentence())} {first_up(vw_hi.sentence())}"
    few = sanity.too_few(int(df["passes"].min()), "passes per loader")
    verdicts = {
        "threads_high": sample_record(vt_hi, a1, b1),
        "workers_high": sample_record(vw_hi, a2, b2),
        "threads_low": sample_record(vt_lo, a3, b3),
    }
    ans = Answer(
        "Does fetching concurrently inside workers speed up loading from high-latency storage?",
        text,
        "answered",
        nums,
        verdict=verdicts,
    )
    return [ans], [f for f in [few, sanity.busy(meta.get("machine"))] if f]


def notes(df: pd.DataFrame) -> list[str]:
    """The report's prose beyond the answer: the tensor-resident loader's one-time load spread over the passes,
    the threads at no latency (and how much of that is start-up), and the reference's opposite finding."""
    rows, hi, lo = _rows(df)
    vt_lo = _against_baseline(rows, "threads", lo)[0]
    tr, base = rows[(hi, "tensor-resident")], rows[(hi, "baseline")]
    per_pass_with_load = tr["epoch_s"] + tr["one_time_s"] / tr["passes"]
    lines = [
        f"The tensor-resident loader reads storage once ({tr['one_time_s']:.2f} s for {int(tr['files'])} files), "
        f"then a pass takes {1000 * tr['epoch_s']:.1f} ms; with that load spread over the {int(tr['passes'])} "
        f"passes run it is {per_pass_with_load:.3f} s per pass against {base['epoch_s']:.3f} s for the baseline "
        f"({base['epoch_s'] / per_pass_with_load:.1f}x), more the more passes (epochs) share the load.",
        f"At {lo:g} ms (files at once): {first_up(vt_lo.sentence())}",
    ]
    if vt_lo.outcome == "better":
        fb_t, fb_b = rows[(lo, "threads")]["first_batch_s"], rows[(lo, "baseline")]["first_batch_s"]
        lines.append(
            f"Its first batch took {fb_t:.3f} s against {fb_b:.3f} s for the baseline (medians): "
            + (
                "most of the gain at no latency is start-up, not decoding."
                if fb_b - fb_t > 0.5 * (rows[(lo, "baseline")]["epoch_s"] - rows[(lo, "threads")]["epoch_s"])
                else "start-up explains little of it; the rest is files fetched in parallel."
            )
        )
    lines.append(
        "The reference project saw no gain from parallel workers; these numbers cannot say why (its storage "
        "latency and worker counts were not recorded)."
    )
    return lines
