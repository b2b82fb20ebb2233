"""Guards a task run passes before its kernel starts, and the report files' replacement as one set.

    from hpml_lab.report import guards
    params = guards.read_params_file("params.yaml")   # YAML without aliases, at most 1 MiB
    guards.preflight(task, cfg)                        # output folders writable with space, device, compile backend
    aside = guards.set_aside("c1"); ...; guards.recover_reports()

Every refusal is a ConfigError with one line, shown as it is by the CLI with exit status 2.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from ..config import ConfigError, RunConfig, output_path
from ..io import alive, signals_deferred  # noqa: F401  (alive: the one liveness check, re-exported)
from . import answers, tasks


def reports_dir() -> Path:
    return output_path("reports")


PARAMS_FILE_MAX = 1 << 20  # a parameters file is a few lines; more is a mistake or an attack


class _NoAliases(yaml.SafeLoader):
    """YAML without anchors and aliases: a parameters file never needs them, and nested aliases (an alias bomb)
    expand to gigabytes from a few lines."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.events.AliasEvent):
            mark = self.peek_event().start_mark
            raise ConfigError(
                f"uses a YAML alias (line {mark.line + 1}); aliases and anchors are not allowed "
                "in a parameters file: write each value out"
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        """A key given twice is refused: YAML keeps the last silently, and which one a user meant is unknown."""
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


def _report_files(task_id: str) -> list[Path]:
    """The files that make one task's report, replaced together: page, answer record, executed notebook, outcome."""
    out = reports_dir()
    return [
        out / f"{task_id}.html",
        answers.path_for(task_id),
        out / "executed" / f"{task_id}.ipynb",
        out / "executed" / f"{task_id}.json",
    ]


def set_aside(task_id: str) -> Path:
    """Move a task's report files into reports/.<task>.previous-<pid>/ before a rerun: a rerun that fails shows
    its failure, one that is killed (-9) has them put back by recover_reports, one that ends drops them."""
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


def land_executed(partial: Path, executed: Path) -> str:
    """Move the notebook papermill wrote onto `executed` when it reads as a whole notebook, and return '';
    else remove it and return one line saying why (a full disk, a file-size limit cut it short)."""
    import nbformat

    if not partial.exists():  # papermill stopped before writing (no kernel, bad notebook): nothing to land
        return ""
    try:
        nbformat.read(str(partial), as_version=4)
        os.replace(partial, executed)
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


def _put_back(task_id: str, aside: Path) -> None:
    """The report files set aside in `aside` back in place; a file of this run with no previous one to pair
    with is removed."""
    import shutil

    with signals_deferred():
        for i, p in enumerate(_report_files(task_id)):
            kept = aside / f"{i}-{p.name}"
            if kept.exists():
                os.replace(kept, p)
            elif p.exists():
                p.unlink()
    shutil.rmtree(aside, ignore_errors=True)


def recover_reports() -> None:
    """Put back the report files of reruns that were killed before they ended (their process is gone): the
    previous report comes back whole, with nothing the killed run half-wrote beside it; their partial
    executed notebooks are removed."""
    for partial in (reports_dir() / "executed").glob(".*.running-*.ipynb"):
        pid = partial.name.rsplit("-", 1)[-1].split(".")[0]
        if pid.isdigit() and not alive(int(pid)):
            partial.unlink(missing_ok=True)
    for aside in reports_dir().glob(".*.previous-*"):
        task_id, _, pid = aside.name[1:].rpartition(".previous-")
        if not pid.isdigit() or alive(int(pid)):
            continue
        _put_back(task_id, aside)
