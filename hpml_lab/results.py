"""Results: tidy CSV rows and a metadata JSON per run, each file written atomically.

Layout: results/<task>/<run-id>/{meta.json, batches.csv, epochs.csv, ...}.
meta.json carries the resolved config, environment (versions, hardware,
commit), dataset kind, seed, start time and a status ("running", "complete",
"failed"), so a sweep can skip what is complete and a reader knows what made
every number.

    from hpml_lab import results
    results.load_runs("c1")          # list of Run, newest first
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .io import atomic_write_json, regular_file, signals_deferred


def now() -> str:
    """UTC time, to the second, as every meta.json records it."""
    import datetime as _dt

    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


# The runs this process made or read for the report it renders, by run folder: each one's commit and start,
# so that a page (and the index from its record) can say which commit made its numbers and whether an earlier
# render made some of them. new_meta notes a run made here; sweeps.run_sweep one it reuses; a study notes a
# run made by a process it launched (lab5's torchrun ranks); the environment table the run it shows.
_USED: dict[str, dict[str, Any]] = {}


def note_run(meta: Mapping[str, Any] | None) -> None:
    """Remember a run this report uses: its folder (run_id), commit, uncommitted changes and start time."""
    if not isinstance(meta, Mapping) or not meta.get("run_id"):
        return
    env = meta.get("environment") if isinstance(meta.get("environment"), Mapping) else {}
    _USED[str(meta["run_id"])] = {
        "run": str(meta["run_id"]),
        "commit": str(env.get("commit") or "unknown"),
        "dirty": bool(env.get("dirty")),
        "started_at": str(meta.get("started_at") or ""),
    }


def runs_used() -> list[dict[str, Any]]:
    """The runs noted since forget_runs(), oldest first."""
    return sorted((dict(r) for r in _USED.values()), key=lambda r: (r["started_at"], r["run"]))


def forget_runs() -> None:
    """Start a new report's list of runs (a notebook's config() does, through page_record.new_page)."""
    _USED.clear()


def new_meta(cfg, device, **extra: Any) -> dict[str, Any]:
    """The provenance every run records: task, run id, status "running", start time, resolved config and
    its hash, seed, device, dataset (name, real or synthetic, folder) and environment (versions,
    hardware, commit). `extra` adds or overrides fields."""
    from .data import dataset_info
    from .envinfo import environment
    from .sanity import machine_load

    run_id = extra.get("run_id") or cfg.resolved_run_id()  # the folder a busy flag from its load names
    # a load the caller read before the work it records (a trace's), or chose for a record of other runs (a
    # sweep's summary): kept as given, not read again now, when it would describe the time after that work
    machine = extra.pop("machine") if "machine" in extra else machine_load(run=str(run_id))
    meta = {
        "task": cfg.task,
        "run_id": run_id,
        "status": "running",
        "started_at": now(),
        "config": cfg.to_dict(),
        "config_hash": cfg.config_hash(),
        "seed": cfg.seed,
        "device": str(device),
        "dataset": dataset_info(cfg),
        "environment": environment(device),
        "machine": machine,
        **extra,
    }
    note_run(meta)
    return meta


@dataclass
class Run:
    """A run: its folder, its meta.json and its tables. The one type for a run, fresh or read back:
    train() returns one holding its tables and model in memory; read_run and load_runs read one from disk
    (tables read from the folder when asked for).

        run.path, run.status, run.meta["config"]
        run.epochs, run.batches           # the tables (DataFrames); run.table("epochs") likewise
        run.model                         # the trained model of a run train() returned (None read back)
    """

    path: Path
    meta: dict[str, Any]
    model: Any = field(default=None, compare=False, repr=False)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict, compare=False, repr=False)

    @property
    def status(self) -> str:
        return self.meta.get("status", "unknown")

    @property
    def run_dir(self) -> Path:
        return self.path

    def table(self, name: str) -> pd.DataFrame:
        if name in self.tables:
            return self.tables[name]
        return pd.read_csv(regular_file(self.path / f"{name}.csv"))

    @property
    def epochs(self) -> pd.DataFrame:
        return self.table("epochs")

    @property
    def batches(self) -> pd.DataFrame:
        return self.table("batches")


def write_meta(run_dir: Path, meta: Mapping[str, Any]) -> None:
    atomic_write_json(run_dir / "meta.json", dict(meta))


def write_derived(folder: Path, tables: Mapping[str, pd.DataFrame], meta: Mapping[str, Any]) -> None:
    """A folder computed from runs (a summary, a trace's table): its CSVs, then meta.json with status
    complete, written together (signals held) so the meta never describes other tables."""
    from .io import atomic_write_csv

    with signals_deferred():
        for name, df in tables.items():
            atomic_write_csv(Path(folder) / f"{name}.csv", df.to_dict("records"), list(df.columns))
        write_meta(
            folder,
            {
                **meta,
                "run_id": Path(folder).name,
                "status": "complete",
                "finished_at": meta.get("finished_at") or now(),
            },
        )


def read_run(run_dir: str | os.PathLike) -> Run:
    """The run in a folder; a meta.json that is not a JSON object (a list, null, cut short) is a
    ValueError."""
    run_dir = Path(run_dir)
    meta = json.loads(regular_file(run_dir / "meta.json", META_MAX).read_text())
    if not isinstance(meta, dict) or not isinstance(meta.get("config", {}), dict):
        raise ValueError(
            f"{run_dir / 'meta.json'} does not hold a run's record (a JSON object with a config)"
        )
    return Run(run_dir, meta)


META_MAX = 16 << 20  # a run's meta.json is kilobytes; more is not one (and /dev/zero never ends)


def is_complete(run_dir: str | os.PathLike) -> bool:
    """Status complete and its files agree (see disagreement); a folder whose files do not is said so on
    stderr, in one line naming it, and is not complete: a sweep runs it again."""
    try:
        run = read_run(run_dir)
    except (OSError, ValueError):
        return False
    if run.status != "complete":
        return False
    problem = disagreement(run)
    if problem:
        import sys

        print(
            f"hpml-lab: warning: {run.path} is marked complete but {problem}; it is not reused",
            file=sys.stderr,
        )
        return False
    return True


def disagreement(run: Run) -> str:
    """'' when a run folder's files agree with its meta.json, else what disagrees: a run that records
    epochs_done must hold an epochs.csv with that many rows (a file cut short, or cut to its header, is not
    a complete run)."""
    done = run.meta.get("epochs_done")
    if not isinstance(done, int) or isinstance(done, bool):
        return ""
    path = run.path / "epochs.csv"
    try:
        with open(regular_file(path), "rb") as f:
            rows = sum(1 for line in f if line.strip()) - 1
    except OSError as e:
        return f"its epochs.csv cannot be read ({e.strerror or e})"
    except ValueError:
        return "its epochs.csv is not a regular file"
    if rows != done:
        return f"its epochs.csv holds {max(rows, 0)} epoch rows where meta.json says {done}"
    return ""


def load_runs(
    task: str, results_dir: str | os.PathLike = "results", status: str | None = "complete"
) -> list[Run]:
    """Runs filed under a task, newest first; by default only complete ones."""
    from .config import output_path

    base = output_path(results_dir) / task
    runs = []
    for meta in base.glob("[!.]*/meta.json"):  # hidden folders are attempts in progress or set aside
        try:
            rec = read_run(meta.parent)
        except (OSError, ValueError):
            continue
        if status == "complete" and rec.status == "complete" and not is_complete(rec.path):
            continue  # files that disagree (said on stderr): not a complete run
        if status is None or rec.status == status:
            runs.append(rec)
    return sorted(runs, key=lambda r: r.meta.get("started_at", ""), reverse=True)


def drop_warmup(epochs: pd.DataFrame) -> pd.DataFrame:
    """Epochs after the first (warm-up) of each run (per run_id when the table has several runs);
    a run of a single epoch is kept as it is, having nothing else."""
    if "run_id" not in epochs:
        return epochs[epochs["epoch"] > epochs["epoch"].min()] if epochs["epoch"].nunique() > 1 else epochs
    parts = [
        g[g["epoch"] > g["epoch"].min()] if g["epoch"].nunique() > 1 else g
        for _, g in epochs.groupby("run_id", sort=False)
    ]
    return pd.concat(parts) if parts else epochs


def concat_tables(runs: Iterable[Run], name: str, with_config: Sequence[str] = ()) -> pd.DataFrame:
    """One table from many runs, each row tagged with run_id and the chosen config fields."""
    frames = []
    for r in runs:
        df = r.table(name)
        df.insert(0, "run_id", r.path.name)
        for k in with_config:
            df[k] = r.meta["config"][k]
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


# ------------------------------------------------------------------ the run lifecycle
class Interrupted(KeyboardInterrupt):
    """SIGTERM (what Slurm sends at a time limit, or with --signal before it) or SIGHUP, raised like Ctrl-C;
    `signum` says which (the exit status is 128 + signum)."""

    signum = signal.SIGTERM


@contextlib.contextmanager
def sigterm_interrupts():
    """While the block runs, SIGTERM (and SIGHUP: the terminal closed, an ssh session dropped) raises
    Interrupted in the main thread, so it ends a run like Ctrl-C: files consistent, status "interrupted",
    never left "running". Elsewhere (another thread) the block runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        e = Interrupted(f"signal {signal.Signals(signum).name}")
        e.signum = signum
        raise e

    caught = [signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    previous = {s: signal.signal(s, handler) for s in caught}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def same_data(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Two runs' dataset records name the same data: same name, kind, folder and content fingerprint (a run
    recorded before fingerprints existed is compared without one; the class count follows from the
    content)."""
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return False
    keys = set(new) if "fingerprint" in old else set(new) - {"fingerprint"}
    keys -= {"classes"}  # follows from the content (and runs recorded before it have none)
    return all(old.get(k) == new.get(k) for k in keys)


def end_status(e: BaseException) -> str:
    return "interrupted" if isinstance(e, KeyboardInterrupt) else "failed"


def root_cause(e: BaseException) -> BaseException:
    """The error a run ended on: a held signal delivered while an error was on its way out
    (io.signals_deferred) raises Interrupted on top of it, and the error it interrupted is the one to
    record."""
    while (
        isinstance(e, KeyboardInterrupt)
        and e.__context__ is not None
        and not isinstance(e.__context__, KeyboardInterrupt)
    ):
        e = e.__context__
    return e


def _remove(folder: Path | None) -> None:
    if folder is not None and folder.exists():
        shutil.rmtree(folder, ignore_errors=True)


def _overwrite_in_place(path: Path, record: Mapping[str, Any]) -> None:
    """Write a short record over an existing file's bytes (no new blocks are needed, so it works on a full
    disk) where an atomic write cannot: the run ends "failed", never left "running". Silent if even that
    fails."""
    try:
        with open(path, "r+b") as f:
            f.write(json.dumps(dict(record), default=str).encode()[: max(os.fstat(f.fileno()).st_size, 2)])
            f.truncate()
    except OSError:
        pass


class RunFolder:
    """Where a run writes while it runs, and how it lands: a fresh attempt folder next to the run folder
    (.<name>.attempt-<pid>), renamed over the run folder only when the run completes. A complete run is never
    overwritten by a rerun that fails or is interrupted: that attempt stays beside it, hidden, with its own
    status; when there was no complete run, the failed attempt takes the run folder so its state is visible.

        with results.RunFolder(cfg.run_dir()) as rf:
            rf.write_meta(meta)                      # status running, in the attempt folder
            atomic_write_csv(rf.path / "epochs.csv", rows)
            rf.complete(meta)                        # status complete; the attempt becomes the run folder
    """

    def __init__(self, run_dir: Path):
        self.final = Path(run_dir)
        self.path = self.final.parent / f".{self.final.name}.attempt-{os.getpid()}"
        self.done = False
        self.where: Path | None = None  # after the block: where this attempt's files are, and their status
        self.status: str | None = None

    def __enter__(self) -> RunFolder:
        self._end_abandoned()
        try:
            if self.path.exists():
                shutil.rmtree(self.path)
            self.path.mkdir(parents=True)
        except (
            OSError
        ) as e:  # a results folder under a file, read-only: said about the run folder, not the attempt
            raise type(e)(e.errno, e.strerror, str(self.final)) from None
        return self

    def _end_abandoned(self) -> None:
        """This host's attempts whose process ended unrecorded (kill -9) say "failed"; other nodes' pids mean
        nothing."""
        from .io import made_by_a_live_process

        for other in self.final.parent.glob(f".{self.final.name}.attempt-*"):
            pid = other.name.rsplit("-", 1)[-1]
            if other == self.path or not pid.isdigit() or made_by_a_live_process(other, int(pid)):
                continue
            try:
                meta = json.loads(regular_file(other / "meta.json", META_MAX).read_text())
                host = (meta.get("environment") or {}).get("hostname") if isinstance(meta, dict) else "?"
                if (
                    host in (None, socket.gethostname()) and meta.get("status") == "running"
                ):  # not another node's
                    write_meta(
                        other,
                        {
                            **meta,
                            "status": "failed",
                            "finished_at": now(),
                            "error": f"process {pid} ended without recording its end (killed with -9?)",
                        },
                    )
            except (OSError, ValueError):
                continue

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        write_meta(self.path, meta)

    def complete(self, meta: Mapping[str, Any]) -> None:
        with signals_deferred():  # a signal now lands the run first: complete means complete
            write_meta(self.path, {**meta, "status": "complete", "run_id": self.final.name})
            replaced = self._land()
            self.done, self.where, self.status = True, self.final, "complete"
        _remove(replaced)

    def _land(self) -> Path | None:
        """The attempt becomes the run folder; returns the folder it replaced (set aside), to be removed. A
        complete run made from other data (another content fingerprint) is kept, renamed <name>.data-<its
        fingerprint>: the same settings on other data is another run, and a complete run is never lost."""
        old = self.final.parent / f".{self.final.name}.replaced-{os.getpid()}"
        if not self.final.exists():
            os.replace(self.path, self.final)
            return None
        kept = self._other_data_home()
        os.replace(self.final, kept or old)
        os.replace(self.path, self.final)
        return None if kept else old

    def _other_data_home(self) -> Path | None:
        """Where the complete run now in the final folder goes when it was made from other data, else None."""
        try:
            mine = json.loads((self.path / "meta.json").read_text()).get("dataset")
            theirs = read_run(self.final).meta.get("dataset") if is_complete(self.final) else None
        except (OSError, ValueError, AttributeError):
            return None
        if not isinstance(mine, dict) or not isinstance(theirs, dict) or same_data(theirs, mine):
            return None
        return data_home(self.final, theirs)

    def __exit__(self, kind, e, tb) -> None:
        if self.done or not self.path.exists():
            return
        with signals_deferred():  # a second Ctrl-C or SIGTERM waits until this run's end is recorded
            replaced = self._record_end(e)
        _remove(replaced)

    def _record_end(self, e: BaseException | None) -> Path | None:
        cause = root_cause(e) if e is not None else None
        if cause is not None:
            try:
                meta = json.loads((self.path / "meta.json").read_text())
            except (OSError, ValueError):
                meta = {}
            error = f"{type(cause).__name__}: {cause}" + (
                f" (then {type(e).__name__}: {e})" if cause is not e else ""
            )
            self.status = end_status(cause)
            end = {"status": self.status, "error": error, "finished_at": now()}
            # the run's folder names it even where the signal came before its record was first written (a
            # CI run: a Slurm warning between an attempt's mkdir and its meta left a record without run_id)
            try:
                write_meta(self.path, {"run_id": self.final.name, **meta, **end})
            except (
                OSError
            ) as e:  # a full disk: no room for a new file, so the old one is overwritten in place
                _overwrite_in_place(
                    self.path / "meta.json",
                    {
                        **{k: meta[k] for k in ("task", "run_id") if k in meta},
                        **end,
                        "error": f"{error} (then {e.strerror or e})",
                    },
                )
        if is_complete(self.final):  # the attempt stays beside the complete run, hidden from load_runs
            self.where = self.path
            return None
        self.where = self.final  # nothing complete to protect: the failed run is the one to show
        return self._land()


def data_home(final: Path, dataset: Mapping[str, Any]) -> Path:
    """Where a complete run in `final` made from other data is kept: <name>.data-<its fingerprint> (a free
    name: -2, -3 ... after it when taken)."""
    tag = "".join(c for c in str(dataset.get("fingerprint") or "unknown") if c.isalnum())[:16] or "unknown"
    home, n = final.parent / f"{final.name}.data-{tag}", 1
    while home.exists() or home.is_symlink():
        n += 1
        home = final.parent / f"{final.name}.data-{tag}-{n}"
    return home


def restore_kept(final: Path, matches: Callable[[Path], bool]) -> Path | None:
    """Switching back to data a run was made from earlier: the complete run kept as <name>.data-<fingerprint>
    whose data and settings `matches` takes comes back into `final` (and returns the folder it came from); the
    complete run in `final`, made from other data, is kept in its own .data- folder in exchange. Nothing is
    computed again and no further copy piles up. None when no kept run matches."""
    import shutil

    for kept in sorted(final.parent.glob(f"{final.name}.data-*")):
        if kept.is_symlink() or not kept.is_dir() or not is_complete(kept):
            continue
        try:
            if not matches(kept):
                continue
        except (OSError, ValueError, KeyError, TypeError):
            continue
        with signals_deferred():
            if final.exists() and is_complete(final):
                theirs = read_run(final).meta.get("dataset")
                os.replace(final, data_home(final, theirs if isinstance(theirs, dict) else {}))
            elif final.exists():  # a failed or interrupted run: nothing complete is lost
                aside = final.parent / f".{final.name}.replaced-{os.getpid()}"
                os.replace(final, aside)
                shutil.rmtree(aside, ignore_errors=True)
            os.replace(kept, final)
        return kept
    return None
