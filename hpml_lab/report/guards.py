"""Guards a task run passes before its kernel starts, and the report files' replacement as one set.

    from hpml_lab.report import guards
    params = guards.read_params_file("params.yaml")   # YAML without aliases, at most 1 MiB
    guards.preflight(task, cfg)         # output folders writable with space, device, compile backend
    guards.land_report("c1", outcome)   # the run's staged report in place, as one set
    guards.recover_reports()            # what killed runs left, put back or removed

Every refusal is a ConfigError with one line, shown as it is by the CLI with exit status 2.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..config import ConfigError, RunConfig, output_path
from ..io import LockBusy, alive, held_lock, signals_deferred  # noqa: F401  (alive: the one liveness check, re-exported)
from . import answer_box, tasks


def reports_dir() -> Path:
    return output_path("reports")


PARAMS_FILE_MAX = 1 << 20  # a parameters file is a few lines; more is a mistake or an attack


class _NoAliases(yaml.SafeLoader):
    """YAML without anchors and aliases: a parameters file never needs them, and nested aliases (an alias
    bomb) expand to gigabytes from a few lines."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.events.AliasEvent):
            mark = self.peek_event().start_mark
            raise ConfigError(
                f"uses a YAML alias (line {mark.line + 1}); aliases and anchors are not allowed "
                "in a parameters file: write each value out"
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        """A key given twice is refused: YAML keeps the last silently, and which one a user meant is
        unknown."""
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise ConfigError(
                    f"sets {key!r} twice (line {key_node.start_mark.line + 1}); give each parameter once"
                )
            if isinstance(key, (str, int, float, bool)):
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_params_file(path: str | os.PathLike) -> dict[str, Any]:
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"parameters file {p} not found")
    if not p.is_file():  # a folder, /dev/zero, a FIFO: reading it would fail or never end
        raise ConfigError(f"parameters file {p} is not a regular file")
    if p.stat().st_size > PARAMS_FILE_MAX:
        raise ConfigError(
            f"parameters file {p} is {p.stat().st_size} bytes; a parameters file holds at most "
            f"{PARAMS_FILE_MAX} bytes"
        )
    try:
        data = yaml.load(p.read_text(encoding="utf-8"), Loader=_NoAliases) or {}  # noqa: S506 (safe, no aliases)
    except UnicodeDecodeError:
        raise ConfigError(f"parameters file {p} is not UTF-8 text (a binary file?)") from None
    except ConfigError as e:
        raise ConfigError(f"parameters file {p} {e}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"parameters file {p} is not valid YAML: {str(e).splitlines()[0][:200]}") from None
    except RecursionError:
        raise ConfigError(f"parameters file {p} is nested too deeply") from None
    if not isinstance(data, dict):
        raise ConfigError(f"parameters file {p} must hold a mapping of name: value")
    return data


MIN_FREE_BYTES = 64 << 20  # an executed notebook, its page and a run's CSVs: a full disk is refused up front


def check_writable(folder: Path) -> None:
    """A ConfigError (one line naming the folder) unless `folder` can be made, written to and has
    MIN_FREE_BYTES free: a read-only, unwritable or full output folder is refused before any kernel starts."""
    import shutil
    import tempfile

    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder, prefix=".hpml-write-check-") as f:
            f.write(b"x")
            f.flush()
        free = shutil.disk_usage(folder).free
    except OSError as e:
        raise ConfigError(
            f"output folder {folder} is not writable: {e.strerror or e}"
            + (f" ({e.filename})" if e.filename and str(e.filename) != str(folder) else "")
        ) from None
    if free < MIN_FREE_BYTES:
        raise ConfigError(
            f"output folder {folder} has {free // (1 << 20)} MiB free; a run needs at least "
            f"{MIN_FREE_BYTES >> 20} MiB: free some space or set HPML_OUTPUT_DIR elsewhere"
        )


def preflight(task: tasks.Task, cfg: RunConfig) -> None:
    """What can be known before a kernel starts and would otherwise fail inside it (exit 1 after minutes):
    the output folders, a device that is not here, a compile backend torch does not know or cannot build."""
    for need, why in task.needs:  # what the task's config must satisfy (its TASK's needs)
        if not need(cfg):
            raise ConfigError(f"task {task.id} {why}")
    check_writable(reports_dir() / "executed")
    check_writable(output_path(cfg.results_dir) / cfg.task)
    if cfg.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(
                "parameter 'device' is 'cuda' but no CUDA device is visible here; "
                "use device=auto or device=cpu"
            )
    if cfg.compile or cfg.compile_backend != "inductor":
        from ..fastpath import check_backend, compile_available

        check_backend(cfg.compile_backend)
        why_not = compile_available(cfg.compile_backend, cfg.device) if cfg.compile else ""
        if why_not:
            raise ConfigError(f"compile=true cannot run: {why_not}; or set compile=false")


def checked(task: tasks.Task, cfg: RunConfig, given_root: bool, log=print) -> str:
    """Every check a run passes before its kernel starts, in one call: the arguments and output folders
    (preflight), then the dataset, the default synthetic one written first where it is missing and no
    data_root was given (dataprep.ready). Returns the data's kind ('synthetic' or 'real')."""
    from . import dataprep

    preflight(task, cfg)
    return dataprep.ready(cfg, given_root, log)


@dataclass(frozen=True)
class Stage:
    """A run's place in the reports folder while it runs: the data's kind, and where its notebook, page and
    answer record are written hidden (staged()) until land() puts them in place as one set."""

    task_id: str
    kind: str
    notebook: Path
    page: Path
    answer: Path

    def land(self, outcome: dict) -> str:
        """land_report for this run: '' when its report is the one in place now, else the line saying which
        report stays."""
        return land_report(self.task_id, outcome)


@contextlib.contextmanager
def stage(task: tasks.Task, cfg: RunConfig, given_root: bool, log=print):
    """A run's one pass through the guards: checked (checked()), then the task's lock held while it runs, what
    killed runs left put back or removed (recover_reports), and its files staged hidden beside the report in
    place, which stays whole until Stage.land."""
    kind = checked(task, cfg, given_root, log)
    with task_lock(task.id):
        recover_reports()
        files = staged(task.id)
        for f in files.values():  # left by a run of this pid's (a process that ran before in this session)
            f.unlink(missing_ok=True)
        yield Stage(task.id, kind, **files)


def _report_files(task_id: str) -> list[Path]:
    """The files that make one task's report, replaced together: page, answer record, executed notebook,
    outcome."""
    out = reports_dir()
    return [
        out / f"{task_id}.html",
        answer_box.path_for(task_id, stage=""),
        out / "executed" / f"{task_id}.ipynb",
        out / "executed" / f"{task_id}.json",
    ]


def staged(task_id: str) -> dict[str, Path]:
    """Where a run writes its report while it runs (hidden, per process), beside the report in place, which
    stays whole until the new one is complete: the notebook papermill writes, the page, the answer record its
    kernel writes (answer_box.path_for under HPML_REPORT_STAGE). land_report puts them in place as one set."""
    pid = str(os.getpid())
    return {
        "notebook": partial_notebook(task_id),
        "page": reports_dir() / f".{task_id}.running-{pid}.html",
        "answer": answer_box.path_for(task_id, stage=pid),
    }


def rerun_files(task_id: str) -> dict[str, Path]:
    """Where a rerun that did not end ok keeps its notebook and page when a complete report stays in place."""
    return {
        "notebook": reports_dir() / "executed" / f"{task_id}.rerun.ipynb",
        "page": reports_dir() / f"{task_id}.rerun.html",
    }


def complete_report(task_id: str) -> dict | None:
    """The outcome record of the report in place when it is a complete one (its notebook ran through: status
    ok, and its page and executed notebook are there), else None."""
    data, _ = read_outcome(reports_dir() / "executed" / f"{task_id}.json")
    if not data or data["status"] != "ok":
        return None
    page, executed = reports_dir() / f"{task_id}.html", reports_dir() / "executed" / f"{task_id}.ipynb"
    return data if page.is_file() and executed.is_file() else None


def land_report(task_id: str, record: dict) -> str:
    """The run's staged report (staged()) and its outcome `record` in place of the task's report, as one set:
    the files in place are set aside, the new ones moved in, the outcome written, the set-aside ones dropped
    (a kill in between: recover_reports puts back the previous set, or keeps the new one once its outcome is
    written). Except when this run did not end ok and the report in place is complete: that one stays as it is
    (a rerun never costs the report it replaces), this run's notebook and page go to <task>.rerun.* beside it,
    and the line saying so is returned ('' otherwise). A full disk while the outcome is written puts the
    previous set back (write_outcome)."""
    new = staged(task_id)
    kept = complete_report(task_id) if record["status"] != "ok" else None
    with signals_deferred():
        if kept:
            new["answer"].unlink(missing_ok=True)
            moved = []
            for kind, there in rerun_files(task_id).items():
                there.unlink(missing_ok=True)  # an earlier rerun's: not this one
                if new[kind].is_file():
                    os.replace(new[kind], there)
                    moved.append(there.name)
            return f"the complete report of {kept.get('finished_at', 'an earlier run')} is kept" + (
                f"; this run's: {', '.join(moved)}" if moved else ""
            )
        aside = set_aside(task_id)
        for kind, there in zip(("page", "answer", "notebook"), _report_files(task_id)):
            if new[kind].is_file():
                os.utime(new[kind])  # newer than `aside`: recover_reports tells it from the set it replaced
                os.replace(new[kind], there)
        write_outcome(reports_dir() / "executed" / f"{task_id}.json", record, aside)
        import shutil

        shutil.rmtree(aside, ignore_errors=True)  # the new report is whole: the previous one goes
        for there in rerun_files(task_id).values():  # a rerun that did not end ok was of the report replaced
            there.unlink(missing_ok=True)
    return ""


def set_aside(task_id: str) -> Path:
    """Move a task's report files into reports/.<task>.previous-<pid>/ while a new report is put in place
    (land_report): one killed meanwhile (-9) has them put back by recover_reports, one that ends drops
    them."""
    aside = reports_dir() / f".{task_id}.previous-{os.getpid()}"
    aside.mkdir(parents=True, exist_ok=True)
    for i, p in enumerate(_report_files(task_id)):
        if p.exists():
            os.replace(p, aside / f"{i}-{p.name}")
    return aside


def partial_notebook(task_id: str) -> Path:
    """Where papermill writes a task's executed notebook while it runs (hidden, per process): on a full disk
    it is cut short there, never over the executed notebook of the report."""
    return reports_dir() / "executed" / f".{task_id}.running-{os.getpid()}.ipynb"


def whole_notebook(partial: Path, executed: Path) -> str:
    """'' when the notebook papermill wrote at `partial` reads as a whole notebook (or none was written); else
    it is removed and one line says why (a full disk, a file-size limit cut it short), naming `executed`, the
    file the user knows."""
    import nbformat

    if not partial.exists():  # papermill stopped before writing (no kernel, bad notebook): nothing to land
        return ""
    try:
        nbformat.read(str(partial), as_version=4)
        return ""
    except Exception as e:  # noqa: BLE001 (NotJSONError, a cut-short file, an OSError: all mean not whole)
        partial.unlink(missing_ok=True)
        why = (
            e.strerror
            if isinstance(e, OSError) and e.strerror
            else "cut short: the disk filled or a limit hit"
        )
        return f"the executed notebook {executed} could not be written whole ({why}); nothing of it is kept"


def write_outcome(path: Path, record: dict, aside: Path) -> None:
    """The outcome record, written atomically; if even that fails (a full disk), the previous report's files
    are put back from `aside` and the error is one line naming the path."""
    from ..io import atomic_write_json

    try:
        atomic_write_json(path, record)
    except OSError as e:
        _put_back(record["task"], aside)
        raise ConfigError(
            f"cannot write {path} ({e.strerror or e}); the task ended {record['status']} and its "
            "previous report is kept: free some space and run it again"
        ) from None


def _put_back(task_id: str, aside: Path, only_newer: bool = False) -> None:
    """The report files set aside in `aside` back in place; a file of this run with no previous one to pair
    with is removed. only_newer (a killed run's folder, found later): a file with no previous one is removed
    only when it was written after the folder was made (an empty folder planted in reports/, or left by a run
    that had no previous report, never removes an older, complete report); and when the task's outcome record
    is whole and newer than the folder, the report in place is a later complete one (another run that ended
    after this one was killed): it is kept and the folder dropped."""
    import shutil

    if only_newer and _completed_after(task_id, aside):
        shutil.rmtree(aside, ignore_errors=True)
        return
    made = aside.lstat().st_mtime_ns if only_newer else 0
    with signals_deferred():
        for i, p in enumerate(_report_files(task_id)):
            kept = aside / f"{i}-{p.name}"
            if kept.is_file() and not kept.is_symlink():
                os.replace(kept, p)
            elif p.is_file() and not p.is_symlink() and p.lstat().st_mtime_ns >= made:
                p.unlink()
    shutil.rmtree(aside, ignore_errors=True)


def _completed_after(task_id: str, aside: Path) -> bool:
    """Whether the task's outcome record in place is a whole JSON object written after `aside` was made."""
    import json

    from ..io import read_own

    outcome = reports_dir() / "executed" / f"{task_id}.json"
    try:
        newer = outcome.lstat().st_mtime_ns > aside.lstat().st_mtime_ns
        return newer and isinstance(json.loads(read_own(outcome, OUTCOME_MAX) or "null"), dict)
    except (OSError, ValueError, RecursionError):
        return False


OUTCOME_MAX = 1 << 20  # an outcome record is a few hundred bytes


def recover_reports() -> None:
    """Put back the report files of reruns that were killed while they replaced a report (their process is
    gone): the previous report comes back whole, with nothing the killed run half-wrote beside it; the files
    killed runs staged (their notebook, page and answer record, hidden) are removed. Every command that reads
    the reports calls it first (the index, the bundle, a run)."""
    folder = reports_dir()
    for partial in [*(folder / "executed").glob(".*.running-*"), *folder.glob(".*.running-*")]:
        pid = partial.name.rsplit(".running-", 1)[-1].split(".")[0]
        if pid.isdigit() and not alive(int(pid)) and (partial.is_file() or partial.is_symlink()):
            partial.unlink(missing_ok=True)
    for aside in reports_dir().glob(".*.previous-*"):
        task_id, _, pid = aside.name[1:].rpartition(".previous-")
        if not pid.isdigit() or alive(int(pid)) or not aside.is_dir() or aside.is_symlink():
            continue
        _put_back(task_id, aside, only_newer=True)


@contextlib.contextmanager
def task_lock(task_id: str):
    """Held while one task runs with these reports: a second `hpml-lab run` of the same task in the same
    output folder is refused with one line, instead of the two runs setting each other's report files aside
    (one killed run's set-aside folder, put back later, deleted the other's finished report). An flock: it
    ends with the process, also when the process is killed with -9."""
    folder = reports_dir() / "executed"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f".{task_id}.lock"
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(held_lock(path))
        except OSError as e:
            raise ConfigError(f"cannot open the lock file {path} ({e.strerror or e}): remove it") from None
        except LockBusy:
            raise ConfigError(
                f"task {task_id} is already running with the reports in {reports_dir()} (another hpml-lab "
                "run or report); wait for it to end, or set HPML_OUTPUT_DIR to another folder"
            ) from None
        yield


RECORD_MAX = (
    8 << 20
)  # an answer record is a few kB; a larger one was not written by a run (read it whole: no)
OUTCOMES = ("ok", "failed", "interrupted")


def read_record(task_id: str, path: Path | None = None) -> tuple[dict | None, str]:
    """A task's answer record as the index and the bundle show it, and '' ; or None and one line naming the
    file and what is wrong with it ('' when there is none): read capped in size, never through a link or from
    a FIFO or device, and only when it has the shape a run writes (answers, statuses, numbers) and its box
    renders. `path`: another copy of it (a run's staged record), else the one in place."""
    import json

    from ..io import PlantedFile, read_own

    p = path or answer_box.path_for(task_id, stage="")
    try:
        text = read_own(p, RECORD_MAX)
    except PlantedFile as e:
        return None, f"{p} {e.strerror}"
    except ValueError as e:
        return None, str(e)
    except OSError as e:
        return None, f"{p} cannot be read ({e.strerror or e})"
    if text is None:
        return None, ""
    try:
        rec = json.loads(text)
    except RecursionError:
        return None, f"{p} is nested too deeply to be an answer record"
    except ValueError as e:
        return None, f"{p} is not JSON ({str(e)[:80]})"
    problem = _record_problem(rec)
    if not problem:
        try:
            answer_box.box_html(rec)
        except Exception as e:  # noqa: BLE001 (any shape the box cannot show is a damaged record)
            problem = f"cannot be shown ({type(e).__name__}: {str(e)[:80]})"
    return (None, f"{p} {problem}") if problem else (rec, "")


def _record_problem(rec: Any) -> str:
    from ..answers import STATUSES

    if not isinstance(rec, dict):
        return f"holds a {type(rec).__name__}, not an answer record"
    if not isinstance(rec.get("answers"), list) or not all(isinstance(a, dict) for a in rec["answers"]):
        return "has no list of answers"
    if rec.get("status") not in STATUSES or any(a.get("status") not in STATUSES for a in rec["answers"]):
        return f"has a status that is not one of {', '.join(STATUSES)}"
    if not isinstance(rec.get("summary"), str) or not isinstance(rec.get("flags", []), list):
        return "has no one-line summary"
    return ""


def read_outcome(path: Path) -> tuple[dict | None, str]:
    """A task's outcome record (reports/executed/<task>.json) as a dict of Outcome's fields with their types,
    or None and one line naming the file and what is wrong with it."""
    import json
    import math

    from ..io import PlantedFile, read_own

    try:
        text = read_own(path, OUTCOME_MAX)
        data = json.loads(text or "null")
    except PlantedFile as e:
        return None, f"{path} {e.strerror}"
    except RecursionError:
        return None, f"{path} is nested too deeply to be an outcome record"
    except (OSError, ValueError) as e:
        return None, f"{path} cannot be read ({type(e).__name__}: {str(e)[:80]})"
    if text is None:
        return None, ""
    if not isinstance(data, dict):
        return None, f"{path} holds a {type(data).__name__}, not an outcome record"
    texts = ("task", "title", "status", "profile", "hardware", "dataset", "html", "executed")
    bad = [k for k in texts if not isinstance(data.get(k), str)]
    sec = data.get("seconds")
    if isinstance(sec, bool) or not isinstance(sec, (int, float)) or not math.isfinite(sec) or sec < 0:
        bad.append("seconds")
    if not isinstance(data.get("parameters"), dict):
        bad.append("parameters")
    bad += [k for k in ("error", "finished_at") if k in data and not isinstance(data[k], str)]
    if bad:
        return None, f"{path} is damaged ({', '.join(bad)} missing or of the wrong type)"
    if data["status"] not in OUTCOMES:
        return None, f"{path} has status {data['status'][:40]!r}, not one of {', '.join(OUTCOMES)}"
    return data, ""


def page_link(name: str) -> str:
    """`name` if it is a plain page name inside reports/ (c1.html), else '': an outcome's link is never a URL
    (javascript:, http:), an absolute path or a path out of the folder."""
    import re

    return name if re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\.html", name or "") else ""
