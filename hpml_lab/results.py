"""Results: tidy CSV rows and a metadata JSON per run, each file written atomically.

Layout: results/<task>/<run-id>/{meta.json, batches.csv, epochs.csv, ...}.
meta.json carries the resolved config, environment (versions, hardware,
commit), dataset kind, seed, start time and a status ("running", "complete",
"failed"), so a sweep can skip what is complete and a reader knows what made
every number.

    from hpml_lab import results
    results.load_runs("c1")          # list of RunRecord, newest first
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd



from .io import atomic_write_json


def now() -> str:
    """UTC time, to the second, as every meta.json records it."""
    import datetime as _dt

    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def new_meta(cfg, device, **extra: Any) -> dict[str, Any]:
    """The provenance every run records: task, run id, status "running", start time, resolved config and
    its hash, seed, device, dataset (name, real or synthetic, folder) and environment (versions,
    hardware, commit). `extra` adds or overrides fields."""
    from .data import dataset_info
    from .envinfo import environment
    from .sanity import machine_load

    return {"task": cfg.task, "run_id": cfg.resolved_run_id(), "status": "running", "started_at": now(),
            "config": cfg.to_dict(), "config_hash": cfg.config_hash(), "seed": cfg.seed, "device": str(device),
            "dataset": dataset_info(cfg), "environment": environment(device), "machine": machine_load(), **extra}


@dataclass
class RunRecord:
    path: Path
    meta: dict[str, Any]

    @property
    def status(self) -> str:
        return self.meta.get("status", "unknown")

    def table(self, name: str) -> pd.DataFrame:
        return pd.read_csv(self.path / f"{name}.csv")


def write_meta(run_dir: Path, meta: Mapping[str, Any]) -> None:
    atomic_write_json(run_dir / "meta.json", dict(meta))


def read_run(run_dir: str | os.PathLike) -> RunRecord:
    run_dir = Path(run_dir)
    return RunRecord(run_dir, json.loads((run_dir / "meta.json").read_text()))


def is_complete(run_dir: str | os.PathLike) -> bool:
    try:
        return read_run(run_dir).status == "complete"
    except (OSError, ValueError):
        return False


def load_runs(task: str, results_dir: str | os.PathLike = "results", status: str | None = "complete") -> list[RunRecord]:
    """Runs filed under a task, newest first; by default only complete ones."""
    from .config import output_path

    base = output_path(results_dir) / task
    runs = []
    for meta in base.glob("*/meta.json"):
        try:
            rec = read_run(meta.parent)
        except (OSError, ValueError):
            continue
        if status is None or rec.status == status:
            runs.append(rec)
    return sorted(runs, key=lambda r: r.meta.get("started_at", ""), reverse=True)


def drop_warmup(epochs: pd.DataFrame) -> pd.DataFrame:
    """Epochs after the first (warm-up) of each run (per run_id when the table has several runs);
    a run of a single epoch is kept as it is, having nothing else."""
    if "run_id" not in epochs:
        return epochs[epochs["epoch"] > epochs["epoch"].min()] if epochs["epoch"].nunique() > 1 else epochs
    parts = [g[g["epoch"] > g["epoch"].min()] if g["epoch"].nunique() > 1 else g
             for _, g in epochs.groupby("run_id", sort=False)]
    return pd.concat(parts) if parts else epochs


def concat_tables(runs: Iterable[RunRecord], name: str, with_config: Sequence[str] = ()) -> pd.DataFrame:
    """One table from many runs, each row tagged with run_id and the chosen config fields."""
    frames = []
    for r in runs:
        df = r.table(name)
        df.insert(0, "run_id", r.path.name)
        for k in with_config:
            df[k] = r.meta["config"][k]
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
