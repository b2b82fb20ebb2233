"""Sweeps that resume: run a list of configurations, skipping those whose results are complete.

    from hpml_lab import train
    from hpml_lab.sweeps import run_sweep, tables
    items = run_sweep([cfg.replace(optimizer=o) for o in ("sgd", "adam")], train)
    epochs = tables(items, "epochs", with_config=("optimizer",))

Every configuration writes its results under cfg.run_dir() with a meta.json
whose status ends as "complete" (training.train and the lab2 experiments do).
Interrupted half-way (Ctrl-C, a killed job, an exception), the same call run
again skips every configuration already complete and runs the others; one that
was cut off while running is run again from the start, so nothing is lost and
nothing is counted twice. Out-of-memory is recorded as a result ("oom"), not a crash.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from . import results
from .config import RunConfig
from .device import free_cuda_memory, is_oom


@dataclass
class SweepItem:
    """One configuration of a sweep and what happened to it.

    status: "ran" (computed now), "skipped" (complete from an earlier call),
    "failed" or "oom" (recorded in meta.json; only with on_error="record" for failures).
    """

    cfg: RunConfig
    run_dir: Path
    status: str
    error: str = ""
    value: Any = None

    @property
    def complete(self) -> bool:
        return self.status in ("ran", "skipped")


_NOT_IDENTITY = ("progress", "log_every", "results_dir", "run_id")


def same_run(cfg: RunConfig, run_dir: Path) -> bool:
    """A complete run is reused only if it was made with the same settings and the same data (same folder,
    kind and content fingerprint): switching data_root to a real copy, or replacing the data under the same
    folder, never reuses the old results."""
    from .data import dataset_info

    meta = results.read_run(run_dir).meta
    old = {k: v for k, v in meta.get("config", {}).items() if k not in _NOT_IDENTITY}
    new = {k: v for k, v in cfg.to_dict().items() if k not in _NOT_IDENTITY}
    return old == new and ("dataset" not in meta or results.same_data(meta["dataset"], dataset_info(cfg)))


def _record_failure(cfg: RunConfig, status: str, error: str) -> None:
    """The failure in the run folder, unless that folder holds a complete run: a failed attempt (other data,
    a bad dataset) never touches a complete run; its record then stays in its hidden attempt folder."""
    run_dir = cfg.run_dir()
    if results.is_complete(run_dir):
        return
    try:
        meta = results.read_run(run_dir).meta
    except (OSError, ValueError):
        meta = {
            "task": cfg.task,
            "run_id": cfg.resolved_run_id(),
            "config": cfg.to_dict(),
            "config_hash": cfg.config_hash(),
            "seed": cfg.seed,
        }
    meta.update(
        status=status,
        error=error,
        finished_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    )
    run_dir.mkdir(parents=True, exist_ok=True)
    results.write_meta(run_dir, meta)


def run_sweep(
    configs: Iterable[RunConfig],
    run_one: Callable[[RunConfig], Any],
    *,
    on_error: str = "raise",
    log: Callable[[str], None] | None = print,
) -> list[SweepItem]:
    """Run `run_one(cfg)` for each configuration whose results are not complete yet.

    Args:
        configs: the configurations; two that share a run folder are an error (one would hide the other).
        run_one: computes one configuration and writes cfg.run_dir()/meta.json with status "complete".
        on_error: "raise" stops the sweep at the first failure (the finished ones are kept);
            "record" writes status "failed" and the error into meta.json and goes on.
            Out-of-memory is always recorded as "oom" and the sweep goes on.
        log: one line per configuration (None for silence).
    """
    if on_error not in ("raise", "record"):
        raise ValueError(f"on_error must be 'raise' or 'record', got {on_error!r}")
    configs = list(configs)
    dirs = [c.run_dir() for c in configs]
    if len(set(dirs)) != len(dirs):
        dup = next(d for d in dirs if dirs.count(d) > 1)
        raise ValueError(
            f"two configurations of the sweep write to the same folder {dup}; give them distinct run_id"
        )
    say = log or (lambda _msg: None)
    items: list[SweepItem] = []
    for i, (cfg, run_dir) in enumerate(zip(configs, dirs), 1):
        tag = f"[sweep {i}/{len(configs)}] {cfg.task}/{run_dir.name}"
        if results.is_complete(run_dir) and same_run(cfg, run_dir):
            say(f"{tag}: complete from an earlier run, skipped")
            results.note_run(results.read_run(run_dir).meta)  # a run of this report, made by an earlier one
            items.append(SweepItem(cfg, run_dir, "skipped"))
            continue
        kept = results.restore_kept(run_dir, lambda d, cfg=cfg: same_run(cfg, d))  # data switched back
        if kept is not None:
            say(f"{tag}: complete from an earlier run on this data, restored from {kept.name}")
            results.note_run(results.read_run(run_dir).meta)
            items.append(SweepItem(cfg, run_dir, "skipped"))
            continue
        say(f"{tag}: running")
        t0 = time.perf_counter()
        oom, msg = False, ""
        try:
            value = run_one(cfg)
        except Exception as e:  # KeyboardInterrupt and SystemExit stop the sweep as they should
            msg = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
            oom = is_oom(e)
            if not oom:
                if on_error == "raise":
                    raise
                _record_failure(cfg, "failed", msg)
                say(f"{tag}: failed, recorded ({msg})")
                items.append(SweepItem(cfg, run_dir, "failed", msg))
                continue
        if oom:  # after the except block: the exception and the failed run's frames (and tensors) are gone
            free_cuda_memory()
            _record_failure(cfg, "oom", msg)
            say(f"{tag}: out of memory, recorded")
            items.append(SweepItem(cfg, run_dir, "oom", msg))
            continue
        if not results.is_complete(run_dir):
            raise RuntimeError(f"{tag}: run_one returned but did not mark {run_dir}/meta.json complete")
        items.append(SweepItem(cfg, run_dir, "ran", value=value))
        say(f"{tag}: done in {time.perf_counter() - t0:.1f} s")  # a log that says running says how it ended
    return items


class SweepFailed(RuntimeError):
    """Every run of a sweep failed: nothing to tabulate, plot or compare."""


def require_one_complete(items: Sequence[SweepItem], task: str, field_name: str) -> None:
    """SweepFailed unless at least one item is complete. Its message says every run failed, then one line per
    run (its setting and its error), so a report shows why instead of a KeyError from an empty table."""
    if any(it.complete for it in items):
        return
    lines = [f"every run of {task} failed ({len(items)} of {len(items)}); there is nothing to compare:"]
    lines += [
        f"{field_name}={getattr(it.cfg, field_name)}: {it.status}: {it.error or 'no error recorded'}"
        for it in items
    ]
    raise SweepFailed("\n".join(lines))


def tables(items: Sequence[SweepItem], name: str, with_config: Sequence[str] = ()) -> pd.DataFrame:
    """One table (e.g. "epochs") from every complete item, tagged with run_id and chosen config fields."""
    runs = [results.read_run(it.run_dir) for it in items if it.complete]
    return results.concat_tables(runs, name, with_config=with_config)
