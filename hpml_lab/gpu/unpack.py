"""The GPU check kit at home: archives that came back merged, in any order and any number of calls, into
reports/gpu/<gpu-name>/: one manifest.json (each unit's best record) and one reports/index.html per GPU.

    make gpu-unpack ARCHIVE=DIR             # python3 -m hpml_lab.gpu unpack DIR
    from hpml_lab.gpu import unpack
    unpack.unpack("gpu-out")
"""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

from ..config import ConfigError, project_root
from ..io import atomic_file, atomic_write_json
from ..report import gpuplan


def _read_archive(a: Path, root: Path) -> tuple[dict, list[tarfile.TarInfo]]:
    """(the archive's manifest, its members), every member checked to be a plain file or folder inside root."""
    try:
        with tarfile.open(a, "r:gz") as tar:
            members = tar.getmembers()
            for m in members:
                target = (root / m.name).resolve()
                if not (m.isfile() or m.isdir()) or root not in target.parents or m.name.startswith("/"):
                    raise ConfigError(
                        f"{a.name}: member {m.name!r} is not a plain file inside {root}; refused"
                    )
            found = [m for m in members if m.isfile() and Path(m.name).parts[1:] == ("manifest.json",)]
            manifest = json.load(tar.extractfile(found[0])) if found else {}
    except (tarfile.TarError, EOFError, json.JSONDecodeError) as e:
        raise ConfigError(f"{a.name} is not a readable tar.gz archive ({e})") from e
    return manifest, members


def merge_manifests(manifests: list[dict]) -> dict:
    """One manifest from every command's (in any order): each unit's record is its best one (ok before not ok, then
    the latest finished), the machine's facts are the latest command's, and every stage (plan part) lists each of
    its units with its status, `not run` where nothing came home."""
    ordered = sorted(manifests, key=lambda m: (m.get("packed_at", 0), json.dumps(m, sort_keys=True)))
    merged: dict = {}
    for m in ordered:
        merged.update({k: v for k, v in m.items() if k not in ("units", "commands", "stages")})
    commands = {k: v for m in ordered for k, v in m.get("commands", {}).items()}
    units: dict = {}
    for m in ordered:
        for u, r in m.get("units", {}).items():
            old = units.get(u)
            if old is None or (r.get("status") == "ok", r.get("finished_at", 0)) >= (
                old.get("status") == "ok",
                old.get("finished_at", 0),
            ):
                units[u] = r
    cmds, left = gpuplan.parts()
    stages = {}
    for i, us in enumerate(cmds, 1):
        st = {u: units.get(u, {}).get("status", "not run") for u in us}
        whole = (
            "ok"
            if all(v == "ok" for v in st.values())
            else "not run"
            if all(v == "not run" for v in st.values())
            else "incomplete"
        )
        stages[f"part{i}"] = {"command": gpuplan.command_line(i), "status": whole, "units": st}
    # every unit of the check has a row: what the plan left out runs when a command has time to spare
    if left:
        st = {u: units.get(u, {}).get("status", "not run") for u in left}
        ran = any(v != "not run" for v in st.values())
        stages["not planned"] = {
            "command": "any command whose own units end early",
            "status": "ok" if all(v == "ok" for v in st.values()) else "incomplete" if ran else "not run",
            "units": st,
        }
    extra = sorted(set(units) - {u for us in cmds for u in us} - set(left))  # units the check no longer has
    if extra:
        stages["other"] = {
            "command": "--units",
            "status": "ran",
            "units": {u: units[u]["status"] for u in extra},
        }
    merged.update(
        stages=stages,
        units=dict(sorted(units.items())),
        commands=dict(sorted(commands.items())),
        left_out_of_plan=left,
    )
    merged.pop("packed_at", None)
    return merged


def write_gpu_index(folder: Path, manifest: dict) -> Path:
    """reports/index.html under a GPU's folder: every stage and unit with its status, linking every report that
    came home (the report pages link back to it)."""
    import html

    def link(unit: str) -> str:
        for rel, href in (
            (f"reports/{unit}.html", f"{unit}.html"),
            ("tests.txt" if unit == "tests" else "", "../tests.txt"),
            ("bench.json" if unit == "bench" else "", "../bench.json"),
        ):
            if rel and (folder / rel).is_file():
                return f"<a href='{html.escape(href)}'>{html.escape(unit)}</a>"
        return html.escape(unit)

    rows = []
    for sname, st in manifest.get("stages", {}).items():
        for u, status in st["units"].items():
            secs = manifest["units"].get(u, {}).get("seconds", "")
            rows.append(
                f"<tr><td>{html.escape(sname)}</td><td>{link(u)}</td><td>{html.escape(str(status))}</td>"
                f"<td>{html.escape(str(secs))}</td></tr>"
            )
    nodes = sorted(p.name for p in folder.glob("node-part*.json"))
    body = (
        f"<h1>GPU check: {html.escape(str(manifest.get('gpu', '?')))}</h1>"
        f"<p>commit {html.escape(str(manifest.get('commit')))} (dirty: {html.escape(str(manifest.get('dirty')))}),"
        f" torch {html.escape(str(manifest.get('torch')))}, CUDA {html.escape(str(manifest.get('cuda')))},"
        f" driver {html.escape(str(manifest.get('driver')))}</p>"
        "<table><tr><th>stage</th><th>unit</th><th>status</th><th>seconds</th></tr>"
        + "".join(rows)
        + "</table>"
        "<p>machine records: "
        + ", ".join(f"<a href='../{html.escape(n)}'>{html.escape(n)}</a>" for n in nodes)
        + " &middot; <a href='../manifest.json'>manifest.json</a></p>"
    )
    path = folder / "reports" / "index.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as tmp:
        Path(tmp).write_text(f"<!doctype html><meta charset='utf-8'><title>GPU check</title>{body}\n")
    return path


def unpack(path: str | os.PathLike, dest: str | os.PathLike | None = None, log=print) -> list[Path]:
    """Every archive at `path` (a .tar.gz or a folder of them, any number, in any order, from any GPU) into
    dest/<gpu-name>/ (dest: reports/gpu/), merged with what earlier calls unpacked there: one manifest.json (each
    unit's record the best one: ok before not ok, then the latest finished) and one reports/index.html per GPU.
    A unit's files (those its record lists) are written only from the archive whose record the manifest keeps, and
    the files of a record it no longer keeps are removed, so the pages always show the result the manifest lists,
    whatever order the archives come in, in one call or many. Other files (the machine records): the newest
    command's. Every member must be a plain file or folder inside dest, else the archive is refused before anything
    of it is written."""
    path = Path(path)
    dest = Path(dest) if dest else project_root() / "reports" / "gpu"
    archives = sorted(path.glob("*.tar.gz")) if path.is_dir() else [path]
    if not archives or not all(a.is_file() for a in archives):
        raise ConfigError(f"no archive at {path}")
    root = dest.resolve()
    read = [(a, *_read_archive(a, root)) for a in archives]
    read.sort(key=lambda r: (r[1].get("packed_at", 0), r[0].name))
    gpus = {Path(m.name).parts[0] for _a, _m, members in read for m in members if m.isfile()}
    before = {
        g: json.loads((root / g / "manifest.json").read_text())
        for g in gpus
        if (root / g / "manifest.json").is_file()
    }
    merged = {}
    for g in gpus:
        ms = [
            m
            for _a, m, members in read
            if m and any(Path(x.name).parts[0] == g for x in members if x.isfile())
        ]
        if ms:
            merged[g] = merge_manifests([*ms, *([before[g]] if g in before else [])])
            merged[g]["packed_at"] = max(m.get("packed_at", 0) for m in [*ms, before.get(g, {})])
    written: list[Path] = []
    for a, manifest, _members in read:
        owner = {}  # file -> the unit whose record lists it (the latest finished, where two do)
        for u, r in sorted(manifest.get("units", {}).items(), key=lambda x: x[1].get("finished_at", 0)):
            owner.update({f: u for f in r.get("files", [])})
        n = 0
        with tarfile.open(a, "r:gz") as tar:
            for m in tar.getmembers():
                parts = Path(m.name).parts
                if not m.isfile() or parts[1:] == ("manifest.json",):
                    continue
                rel, target = Path(*parts[1:]).as_posix(), root / m.name
                unit = owner.get(rel)
                if unit is not None:
                    keep = manifest["units"][unit] == merged.get(parts[0], {}).get("units", {}).get(unit)
                else:  # not a unit's: the newest command's copy
                    keep = not target.exists() or manifest.get("packed_at", 0) >= before.get(
                        parts[0], {}
                    ).get("packed_at", 0)
                if not keep:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with atomic_file(target) as tmp, tar.extractfile(m) as src:
                    Path(tmp).write_bytes(src.read())
                written.append(target)
                n += 1
        log(f"[gpu-unpack] {a.name}: {n} files into {dest}")
    for gpu, m in merged.items():
        for u, old in before.get(gpu, {}).get("units", {}).items():  # a record no longer kept: its files go
            new = m["units"].get(u, {})
            for f in set(old.get("files", [])) - set(new.get("files", [])) if new != old else ():
                stale = root / gpu / f
                if stale.is_file() and stale not in written:
                    stale.unlink()
                    log(f"[gpu-unpack] {gpu}/{f}: removed, its unit's kept result is a newer one")
        atomic_write_json(root / gpu / "manifest.json", m)
        write_gpu_index(root / gpu, m)
    return written
