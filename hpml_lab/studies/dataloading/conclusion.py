"""What the data-loading report concludes, computed from the study's table (dataloading.study): each loader
against the baseline at the same storage latency (verdicts over the passes, taken in turns where the record
says so) and the
tensor-resident loader with and without its one-time load. Every number a sentence states is a Number of the
record, bound to a template (hpml_lab.findings); what usually happens is Background, apart.
"""

from __future__ import annotations

import pandas as pd

from ... import sanity
from ...answers import Answer, Number
from ...findings import Background, Finding, fmt_in, say
from ...verdict import compare, sample_record
from .study import concurrency, pass_times

DEFAULT_PREFETCH = 2  # torch.utils.data.DataLoader's prefetch_factor with workers

REFERENCE_DATALOADING = (
    "resnet-50-performance reference: data loading 703 s with its baseline vs 1052 s with "
    "parallel workers (its README)"
)


def _rows(df: pd.DataFrame):
    rows = {(r["latency_ms"], r["loader"]): r for _, r in df.iterrows()}
    lats = sorted(df["latency_ms"].unique())
    return rows, lats[-1], lats[0]


def latency(lat: float) -> Number:
    return Number(
        fmt_in("simulated storage latency {lat} ms", lat=lat),
        float(lat),
        "ms",
        "setting",
        source="the task's latency setting (dataloading.LATENCIES_MS)",
    )


def in_turns(meta: dict) -> bool:
    """Whether the record says its file-based loaders took their passes in turns (A B C, B C A, ...): its
    passes_in_turns, or, in a record from before that field (review36: from 6b476af on they did take turns),
    its timing note's own words. A record from before they took turns says neither, and its verdicts do not
    claim it."""
    note = " ".join(str(meta.get("timing_note") or "").split())
    return meta.get("passes_in_turns") is True or "taking turns pass by pass" in note


def _against_baseline(rows, loader: str, lat: float, turns: bool):
    """The loader against the baseline at one latency, as the record says the passes were taken: in turns
    (interleaved, each round's passes paired), else how is not known (neither interleaved nor paired)."""
    a, b = pass_times(rows[(lat, loader)]), pass_times(rows[(lat, "baseline")])
    v = compare(
        a, b, loader, "the baseline", what="time per pass", interleaved=True if turns else None, paired=turns
    )
    return v, a, b


def _said(v, name: str, lat: float) -> Finding:
    return say("At {lat}: {v}.", lat=latency(lat), v=v.finding(name))


LOADERS = ("baseline", "more workers", "threads")


def _pass(rows, lat, name) -> Number:
    r = rows[(lat, name)]
    return Number(
        fmt_in("{name} at {lat} ms: pass", name=name, lat=lat),
        float(r["epoch_s"]),
        "s",
        "measured",
        n=int(r["passes"]),
    )


def conclude(cfg, df: pd.DataFrame, meta: dict) -> tuple[list[Answer], list[sanity.Flag]]:
    """Loaders from high-latency storage: each against the baseline at the same latency, by verdicts over the
    passes (interleaved where the record says they took turns: in_turns); the tensor-resident loader with and
    without its one-time load (its prose: notes())."""
    rows, hi, lo = _rows(df)
    turns = in_turns(meta)
    vt_hi, a1, b1 = _against_baseline(rows, "threads", hi, turns)
    vw_hi, a2, b2 = _against_baseline(rows, "more workers", hi, turns)
    vt_lo, a3, b3 = _against_baseline(rows, "threads", lo, turns)
    name = fmt_in("threads vs baseline at {lat} ms", lat=hi)
    ans = Answer(
        "Does fetching concurrently inside workers speed up loading from high-latency storage?",
        # the verdict in words (its ratio the one number; the latency a setting); the interval and counts next
        say("At {lat}: {v}.", lat=latency(hi), v=vt_hi.short(name)),
        [
            _said(vt_hi, name, hi),
            _said(vw_hi, fmt_in("more workers vs baseline at {lat} ms", lat=hi), hi),
            in_flight(df, meta),
            say(
                ("Median pass" if min(int(rows[(hi, k)]["passes"]) for k in LOADERS) > 1 else "One pass each")
                + " at {lat}: baseline {base}, more workers {more}, threads {threads}.",
                lat=latency(hi),
                base=_pass(rows, hi, "baseline"),
                more=_pass(rows, hi, "more workers"),
                threads=_pass(rows, hi, "threads"),
            ),
            floors(df, meta, hi),
            *notes(df, turns),
            setup(cfg, meta),
        ],
        [
            Background(
                "Concurrent fetches inside a worker overlap the waits on storage, which is why they help "
                "when each file waits on slow storage; when files come at once there is no wait to overlap, "
                "and only the threads' own cost remains."
            ),
            *BACKGROUND,
        ],
        verdict={
            "threads_high": sample_record(vt_hi, a1, b1),
            "workers_high": sample_record(vw_hi, a2, b2),
            "threads_low": sample_record(vt_lo, a3, b3),
        },
    )
    few = sanity.too_few(int(df["passes"].min()), "passes per loader")
    busy = sanity.busy(meta.get("machine"), run=str(meta.get("run_id") or ""))  # named: the table's run
    return [ans], [f for f in [few, busy] if f]


def prefetch(meta: dict) -> Number:
    """The batches each DataLoader worker keeps in flight, as the run recorded it (the DataLoader's default
    where an older run did not)."""
    pf = meta.get("prefetch_factor")
    return Number(
        "prefetch_factor",
        int(pf or DEFAULT_PREFETCH),
        "",
        "setting",
        source="the run's DataLoaders" if pf else "the DataLoader's default (this run did not record it)",
    )


def concurrency_table(df: pd.DataFrame, meta: dict) -> pd.DataFrame:
    """Per file-based loader, from the run's settings: its workers, the threads each uses for a batch's files,
    the files it reads at once and the batches it keeps in flight (study.concurrency; the same at every
    latency)."""
    _, hi, _ = _rows(df)
    c = concurrency(df[df["latency_ms"] == hi], prefetch(meta).value).set_index("loader")
    d = df[df["latency_ms"] == hi].set_index("loader").loc[list(c.index)]
    return pd.DataFrame(
        {
            "loader": list(c.index),
            "workers": list(d["workers"].astype(int)),
            "threads per worker": list(d["threads"].astype(int)),
            "files read at once": list(c["files at once"]),
            "batches in flight": list(c["batches in flight"]),
        }
    )


def in_flight(df: pd.DataFrame, meta: dict) -> Finding:
    """How much each file-based loader has in flight, from the run's settings (concurrency_table's numbers):
    the files it reads at once and the batches it keeps in flight, and who reads them (workers, threads)."""
    t = concurrency_table(df, meta).set_index("loader")
    pf = prefetch(meta)

    def n(loader: str, column: str, what: str) -> Number:
        return Number(
            fmt_in("{loader}: {what}", loader=loader, what=what),
            int(t.loc[loader, column]),
            "",
            "setting",
            source="from the run's workers, threads and prefetch_factor (dataloading.study.concurrency)",
        )

    def how(loader: str) -> Finding:  # who reads the files, and how many at a time
        w = n(loader, "workers", "workers")
        if loader == "threads":
            t = n(loader, "threads per worker", "threads per worker")
            return (
                say("{w} workers, each on {t} threads", w=w, t=t)
                if w.value
                else say("the training process, on {t} threads", t=t)
            )
        return (
            say("{w} workers, one file at a time each", w=w)
            if w.value
            else say("the training process, one file at a time")
        )

    def held(loader: str) -> Finding:  # '16 files at once, 4 batches in flight', singular for one
        f, b = (
            n(loader, "files read at once", "files read at once"),
            n(loader, "batches in flight", "batches in flight"),
        )
        return say(
            "{f} "
            + ("file" if f.value == 1 else "files")
            + " at once, {b} "
            + ("batch" if b.value == 1 else "batches")
            + " in flight",
            f=f,
            b=b,
        )

    return say(
        "From the run's settings, what each loader reads at once and keeps in flight: baseline {b} ({hb}); "
        "more workers {m} ({hm}); threads {t} ({ht}). Batches in flight are workers x prefetch_factor "
        "({pf}), one batch without workers.",
        b=held("baseline"),
        hb=how("baseline"),
        m=held("more workers"),
        hm=how("more workers"),
        t=held("threads"),
        ht=how("threads"),
        pf=pf,
    )


def floors(df: pd.DataFrame, meta: dict, lat: float) -> Finding:
    """The least time the storage's sleeps alone take per pass at `lat`, per file-based loader
    (study.sleep_floor): predicted from the settings, beside the measured passes."""
    c = concurrency(df[df["latency_ms"] == lat], prefetch(meta).value).set_index("loader")

    def fl(loader: str) -> Number:
        return Number(
            fmt_in("{loader} at {lat} ms: sleep floor per pass", loader=loader, lat=lat),
            float(c.loc[loader, "sleep floor (s)"]),
            "s",
            "predicted",
            source="dataloading.study.sleep_floor: each worker's batches in turn, each batch's files in "
            "rounds of those read at once, times the latency; the sleeps alone",
        )

    return say(
        "At {lat} the sleeps alone take at least {b}, {m} and {t} per pass (each worker's batches in turn, "
        "each batch's files in rounds of those read at once).",
        lat=latency(lat),
        b=fl("baseline"),
        m=fl("more workers"),
        t=fl("threads"),
    )


def notes(df: pd.DataFrame, turns: bool) -> list[Finding]:
    """The report's findings beyond the answer: the tensor-resident loader's one-time load spread over the
    passes, the threads at no latency (and how much of that is start-up, measured by the first batch), and the
    reference's own numbers."""
    rows, hi, lo = _rows(df)
    vt_lo = _against_baseline(rows, "threads", lo, turns)[0]
    tr = rows[(hi, "tensor-resident")]
    with_load = Number(
        fmt_in("tensor-resident at {lat} ms incl. its load over {n} passes", lat=hi, n=int(tr["passes"])),
        float(tr["epoch_s"] + tr["one_time_s"] / tr["passes"]),
        "s",
        "measured",
        n=int(tr["passes"]),
    )
    lines = [
        say(
            "At {lat} the tensor-resident loader reads storage once ({once} for {files} files), then a pass "
            "takes {tr_pass}; with that load spread over the {passes} passes run it is {with_load} per "
            "pass. The baseline's pass took {base}.",
            lat=latency(hi),
            once=Number(
                fmt_in("tensor-resident one-time load at {lat} ms", lat=hi),
                float(tr["one_time_s"]),
                "s",
                "measured",
                n=1,
            ),
            files=Number("files", int(tr["files"]), "", "setting", source="the run's subset"),
            tr_pass=_pass(rows, hi, "tensor-resident"),
            passes=Number(
                "tensor-resident passes", int(tr["passes"]), "", "setting", source="dataloading.study"
            ),
            with_load=with_load,
            base=_pass(rows, hi, "baseline"),
        ),
        _said(vt_lo, fmt_in("threads vs baseline at {lat} ms", lat=lo), lo),
    ]
    if vt_lo.outcome == "better":
        fb_t, fb_b = rows[(lo, "threads")]["first_batch_s"], rows[(lo, "baseline")]["first_batch_s"]
        gain = rows[(lo, "baseline")]["epoch_s"] - rows[(lo, "threads")]["epoch_s"]
        n_lo = int(
            min(rows[(lo, "threads")]["passes"], rows[(lo, "baseline")]["passes"])
        )  # medians of passes
        first = {
            "t": Number(
                fmt_in("threads at {lat} ms: first batch", lat=lo), float(fb_t), "s", "measured", n=n_lo
            ),
            "b": Number(
                fmt_in("baseline at {lat} ms: first batch", lat=lo), float(fb_b), "s", "measured", n=n_lo
            ),
            "gain": Number(
                fmt_in("threads vs baseline at {lat} ms: pass time saved", lat=lo),
                float(gain),
                "s",
                "measured",
                n=n_lo,
            ),
        }
        lines.append(
            say(
                "Its first batch took {t} against {b} for the baseline (medians), "
                + (
                    "so most of the {gain} it saves per pass at no latency is start-up."
                    if fb_b - fb_t > 0.5 * gain
                    else "so start-up explains little of the {gain} it saves per pass at no latency."
                ),
                **first,
            )
        )
    lines.append(
        say(
            "The reference project measured {ref_base} of data loading with its baseline and {ref_par} with "
            "parallel workers; its storage latency and worker counts were not recorded, so these numbers "
            "cannot say why.",
            ref_base=Number(
                "reference: data loading, baseline", 703, "s", "reference", source=REFERENCE_DATALOADING
            ),
            ref_par=Number(
                "reference: data loading, parallel workers",
                1052,
                "s",
                "reference",
                source=REFERENCE_DATALOADING,
            ),
        )
    )
    return lines


def setup(cfg, meta: dict) -> Finding:
    """What ran: files, batch, passes per loader (in turns where the record says so), and where the results
    are."""
    order = "taking turns" if in_turns(meta) else "in an order the record does not say"
    return say(
        "{files} files, batch {b}, {passes} {word} per file-based loader (" + order + "), each pass from a "
        "fresh iterator so worker start-up is inside it, as in an epoch without persistent workers.",
        files=Number("files", int(meta["files"]), "", "setting", source="the run's subset"),
        b=Number("batch size", int(cfg.batch_size), "", "setting", source="the run's config"),
        passes=Number(
            "passes per file-based loader", int(meta["passes"]), "", "setting", source="the run's epochs"
        ),
        word="pass" if int(meta["passes"]) == 1 else "passes",
    )


BACKGROUND = [
    Background(
        "Latency is simulated with a sleep per file: waiting without CPU work, as on remote storage. With "
        "that, a single process that decodes and augments every image waits on each file in turn; more "
        "workers or threads overlap the waits, and a dataset held in memory waits once."
    )
]
