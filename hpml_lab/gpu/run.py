"""One command of the GPU check: its units in order, each recorded in the manifest and packed for the trip
home as it finishes, the rest of the check's units while its --limit allows, and at the limit a stop as a
job's time limit would make (SIGTERM).

    from hpml_lab.gpu import run
    run.run(1, "cuda", pack_to=os.environ["OUT"])    # python3 -m hpml_lab.gpu run --part 1 --limit 420
"""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback
from pathlib import Path

from ..config import ConfigError, project_root
from ..io import atomic_write_json, signals_deferred
from ..report import gpuplan
from ..results import sigterm_interrupts
from . import node
from .manifest import ON_NODE
from .manifest import read as read_manifest
from .pack import LOCK_FILE, pack


def _units_of(part: int | None, units: list[str] | None) -> tuple[list[str], list[str]]:
    """(this command's own units, those to run after them while its --limit allows: every other unit of the
    check, in priority order). Which of them came home is the caller's to check, in the manifest the tree
    carries: a command that never started, or was cut off before a unit, left no `ok` for it there, so any
    later command picks it up, and a command whose own units came home goes on down the list. `units`
    (--units): those alone."""
    if units:
        return list(units), []
    cmds, _ = gpuplan.parts()
    if not part or not 1 <= part <= len(cmds):
        raise ConfigError(f"--part must be 1 to {len(cmds)} (python3 -m hpml_lab.gpu plan)")
    own = list(cmds[part - 1])
    return own, [u for u in gpuplan.units() if u not in own]


# the longest --limit taken: a week, more than any job a cluster grants; past it a number is a mistake (1e300
# once overflowed the watchdog's timer in its thread, and the limit was silently dropped)
MAX_LIMIT_S = 7 * 24 * 3600.0


def check(
    part: int | None,
    units: list[str] | None,
    rerun: list[str] | tuple[str, ...] = (),
    limit: float | None = None,
    pack_to: str | os.PathLike | None = None,
) -> None:
    """What a command is given, checked before anything is written (no data, no wheels, no record): --part or
    --units, every unit named one the check has, --limit a finite number of seconds up to MAX_LIMIT_S, and
    $OUT a folder this process can write. Else one ConfigError line."""
    if not units and not part:
        raise ConfigError("say --part N (see the plan) or --units a,b")
    if part and not units:
        _units_of(part, None)  # a part the plan has
    if limit is not None and not (isinstance(limit, (int, float)) and 0 < limit <= MAX_LIMIT_S):
        raise ConfigError(
            f"--limit must be a positive number of seconds up to {MAX_LIMIT_S:.0f} (a week), not {limit:g}"
        )
    known = gpuplan.units()
    for flag, names in (("--units", units or []), ("--rerun", rerun)):
        unknown = sorted(set(names) - set(known))
        if unknown:
            raise ConfigError(f"{flag}: no unit {', '.join(unknown)} (units: {', '.join(known)})")
    if pack_to is not None:
        import tempfile

        folder = Path(pack_to)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=folder, prefix=".gpu-check-write-") as f:
                f.write(b"x")
                f.flush()
        except OSError as e:
            raise ConfigError(
                f"$OUT {folder} is not a folder this command can write ({e.strerror or e}): give --pack "
                "(or OUT) a writable folder, where the archives for the trip home go"
            ) from None


KIT_FILES = ("manifest.json", "reports/index.html")  # the kit's own, rewritten by every command


def _stamps(folder: Path) -> dict[str, tuple[int, int]]:
    """{path under folder: (mtime ns, size)} of every plain file but the kit's own."""
    return {
        rel: (st.st_mtime_ns, st.st_size)
        for p in folder.rglob("*")
        if p.is_file()
        and not p.is_symlink()
        and (rel := p.relative_to(folder).as_posix()) not in KIT_FILES
        and not rel.startswith("node-part")
        and not LOCK_FILE.fullmatch(p.name)
        and (st := p.stat())
    }


def run(
    part: int | None = None,
    device: str = "cuda",
    out: str | os.PathLike | None = None,
    units: list[str] | None = None,
    log=print,
    pack_to: str | os.PathLike | None = None,
    limit: float | None = None,
    rerun: list[str] | tuple[str, ...] = (),
    started: float | None = None,
) -> Path:
    """One command of the check: the node record, then `rerun`'s units (each after the unit whose results it
    reads, where that has not come home), then each unit of plan part `part` (or `units`) that has not already
    come home (status ok in the manifest the tree carried, run by this code: gpuplan.came_home), then the
    check's other units not home while `limit` (seconds from `started`, default now; for a part, the plan's)
    allows; at `limit` a SIGTERM stops it, and that is recorded. Outputs (HPML_OUTPUT_DIR) and manifest.json
    go under reports/gpu/<gpu-name>/; with pack_to ($OUT), that folder's new files are packed into
    pack_to/<gpu-name>.part<N>.tar.gz after every unit, so a command killed at its limit still brings home
    every unit it finished."""
    import torch

    from ..envinfo import code_root, environment, tree_digest

    check(part, units, rerun, limit, pack_to)  # what it is given, before anything is written
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("gpu-check: no CUDA device here; use --device cpu for the dry run")
    t_start, wall0 = (time.monotonic() if started is None else started), time.time()
    name = node.gpu_name(device)
    out = Path(out) if out else project_root() / "reports" / "gpu" / name
    manifest = read_manifest(out / "manifest.json", ON_NODE)  # a damaged one is one line, before any write
    out.mkdir(parents=True, exist_ok=True)
    os.environ["HPML_OUTPUT_DIR"] = str(out)
    root = str(project_root())  # the kernels papermill starts import hpml_lab from the tree
    if root not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    data_root = project_root() / "data"
    manifest_path = out / "manifest.json"
    manifest.setdefault("units", {})
    manifest.setdefault("commands", {})
    own, others = _units_of(part, units)  # others: the check's other units, in priority order
    label = part if part else "x"
    key = f"part{label}@{wall0:.3f}"
    env = environment(torch.device(device))
    tree = tree_digest(code_root())  # the code each unit runs, kept in its record: what 'came home' means
    manifest.update(
        gpu=(env.get("gpu") or {}).get("name", "none"),
        gpu_dir=name,
        driver=node._driver(),
        device=device,
        python=env["python"],
        torch=env["torch"],
        torchvision=env["torchvision"],
        cuda=env["cuda"],
        commit=env["commit"],
        dirty=env["dirty"],
    )
    if limit is None and part and not units:
        limit = gpuplan.run_limit(part)
    command = manifest["commands"][key] = {"part": part, "started_at": wall0, "limit_s": limit, "units": {}}
    archive = Path(pack_to) / f"{name}.part{label}.tar.gz" if pack_to else None

    def save() -> None:
        command["seconds"] = round(time.monotonic() - t_start, 1)
        command["packed_at"] = manifest["packed_at"] = time.time()
        atomic_write_json(manifest_path, manifest)
        if archive:
            try:
                left = pack(out, archive, since=wall0, prefix=name, log=log)[1]
                if left != command.get("left_out_of_archive", []):  # said in what comes home, packed again
                    command["left_out_of_archive"] = left
                    atomic_write_json(manifest_path, manifest)
                    pack(out, archive, since=wall0, prefix=name, log=log)
            except (ConfigError, OSError) as e:  # $OUT full or gone: the archives before this unit stay
                said = f"{e.strerror}: {e.filename}" if isinstance(e, OSError) and e.strerror else str(e)
                command["pack_error"] = (
                    said  # in the node's manifest, and in the next archive that is written
                )
                log(f"[gpu-check] not packed: {said}; the next unit runs")

    # a job's time limit (SIGTERM, SIGHUP) or Ctrl-C: the unit it cut off is recorded and packed, then it is
    # raised
    stop: KeyboardInterrupt | None = None
    # at `limit` (counted from `started`: the command's start, the wheels' install included) the command stops
    # itself as a job's time limit would, so the unit it cuts off is recorded
    watchdog = None
    if limit:
        watchdog = threading.Timer(
            max(0.0, limit - (time.monotonic() - t_start)), os.kill, (os.getpid(), signal.SIGTERM)
        )
        watchdog.daemon = True
        watchdog.start()
    try:
        with sigterm_interrupts():
            command["node"] = node.record_node(out, label)
            save()
            budget = limit if limit else float("inf")
            together = {} if units else gpuplan.together()  # --units: the units named, as named
            # home: ok, run by this code; an ok from other code (an earlier commit's) is no page of this one
            home, stale = gpuplan.came_home(manifest["units"], tree)
            home -= set(rerun)
            if stale - set(rerun):
                log(
                    "[gpu-check] came home from other code (ok in the manifest, but run by code that differs "
                    f"from this tree's): {', '.join(sorted(stale - set(rerun)))}; they run again"
                )
            # --rerun first, each after the unit whose results it reads where that has not come home
            first: list[str] = []
            order = gpuplan.units()  # priority order; a unit the check does not know goes last
            for u in sorted(set(rerun), key=lambda u: order.index(u) if u in order else len(order)):
                if together.get(u) and together[u] not in home and together[u] not in first:
                    first.append(together[u])
                first.append(u)
            mine = first + [u for u in own if u not in first]  # run whatever the time: asked for by name
            queue = mine + [u for u in others if u not in mine]
            todo = [u for u in queue if u not in home]
            log(
                f"[gpu-check] came home before this command (ok in {manifest_path}):"
                f" {', '.join(sorted(home)) or 'nothing'};"
                f" to run: {', '.join(u for u in mine if u not in home) or 'nothing'} of its own"
                + (
                    f", then as time allows: {', '.join(u for u in todo if u not in mine)}"
                    if set(todo) - set(mine)
                    else ""
                )
            )
            for unit in queue:
                try:
                    if unit in home:
                        log(f"[gpu-check] {unit}: came home already (ok in the manifest), skipped")
                        command["units"][unit] = "skipped: came home"
                        continue
                    if (
                        unit not in mine
                        and time.monotonic() - t_start + gpuplan.unit_estimate(unit)[0] > budget
                    ):
                        command["units"][unit] = "deferred: would not fit this command"
                        continue
                    # a unit that reads another's results runs after it (C4 after C3)
                    before_it = together.get(unit)
                    if before_it and before_it not in home and command["units"].get(before_it) != "ok":
                        command["units"][unit] = f"deferred: runs after {before_it}, which has not come home"
                        continue
                    log(f"[gpu-check] {unit} on {device}")
                    t0, before = time.monotonic(), _stamps(out)
                    try:
                        result = node.run_unit(unit, out, device, data_root, log)
                    except KeyboardInterrupt as e:  # results.Interrupted or Ctrl-C: cut off, not failed
                        stop = e
                        result = {"status": "interrupted", "error": str(e) or "Ctrl-C"}
                        log(
                            f"[gpu-check] {unit} cut off after {time.monotonic() - t0:.0f} s: "
                            f"{result['error']}"
                        )
                    except Exception as e:  # recorded; the next unit runs
                        result = {
                            "status": "failed",
                            "error": f"{type(e).__name__}: {e}",
                            "traceback": traceback.format_exc(limit=8),
                        }
                        log(f"[gpu-check] {unit} failed: {result['error']}")
                    with signals_deferred():  # a signal waits until the record and its archive are written
                        manifest["units"][unit] = {
                            **result,
                            "seconds": round(time.monotonic() - t0, 1),
                            "part": command["part"],
                            "finished_at": time.time(),
                            "commit": env["commit"],
                            "tree": tree,
                            # what this unit wrote: unpack keeps these files from the record it keeps, so
                            # pages and manifest agree
                            "files": sorted(f for f, stamp in _stamps(out).items() if before.get(f) != stamp),
                        }
                        command["units"][unit] = result["status"]
                        save()
                except KeyboardInterrupt as e:  # between units, or held during the record and raised after it
                    stop = stop or e
                if stop is not None:
                    for rest in [u for u in queue if u not in command["units"]]:
                        command["units"][rest] = "not started: the command was stopped"
                    break
            try:
                with signals_deferred():
                    save()  # what was skipped, deferred or not started after the last unit
            except KeyboardInterrupt as e:
                stop = stop or e
    finally:
        if watchdog:
            watchdog.cancel()
    if stop is not None:
        raise stop
    return out
