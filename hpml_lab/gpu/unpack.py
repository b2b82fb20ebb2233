"""The GPU check kit at home: archives that came back merged, in any order and any number of calls, into
reports/gpu/<gpu-name>/: one manifest.json (each unit's best record) and one reports/index.html per GPU.

    make gpu-unpack ARCHIVE=DIR             # python3 -m hpml_lab.gpu unpack DIR
    from hpml_lab.gpu import unpack
    unpack.unpack("gpu-out")
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tarfile
import time
from pathlib import Path

from ..config import ConfigError, project_root
from ..io import LockBusy, atomic_file, atomic_write_json, held_lock
from ..report import gpuplan
from . import manifest

ARCHIVE_BYTES_MAX = 2 << 30  # an archive's content unpacked: the kit's hold at most 8 x 16 MiB of mostly text


def _refuse(a: Path, why: str) -> ConfigError:
    return ConfigError(
        f"{a.name} {why}; refused, nothing of it is written: copy it home again from the command's $OUT, "
        "or unpack the other archives without it"
    )


def _member_problem(m: tarfile.TarInfo) -> str:
    """Why member `m` cannot be unpacked ('' when it can): only plain files and folders, each under one plain
    GPU folder name, by a plain relative path (no '..', no absolute path, no link, device or sparse file)."""
    if not (m.isreg() or m.isdir()) or m.issparse():
        return "is not a plain file or folder (a link, device, FIFO or sparse file)"
    name = m.name.rstrip("/") if m.isdir() else m.name
    if not manifest.safe_path(name):
        return "is not a plain relative path (an absolute path, '..', or an empty part)"
    if not manifest.NAME.fullmatch(name.split("/")[0]):
        return "is not under a plain GPU folder name"
    if m.isreg() and "/" not in name:
        return "is not inside a GPU folder"
    return ""


def _check_archive(a: Path) -> tuple[str, dict, list[tarfile.TarInfo]]:
    """(its GPU folder, its manifest, its file members but the manifest), the whole archive checked before any
    of it is written: the gzip stream read to its end (its CRC and length, which the gzip module checks
    there), every member a plain file or folder by a plain path under one GPU folder, each read whole at the
    size its header says, nothing but zeros after the last one (tarfile ends its listing quietly at a damaged
    header), and the manifest's shape and file list (gpu.manifest). Else one ConfigError line naming the
    archive."""
    import gzip
    import zlib

    total = 0
    try:
        with gzip.open(a, "rb") as gz:
            while chunk := gz.read(1 << 20):
                total += len(chunk)
                if total > ARCHIVE_BYTES_MAX:
                    raise _refuse(
                        a, f"unpacks to more than {ARCHIVE_BYTES_MAX >> 20} MiB, more than the kit packs"
                    )
    except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile (a CRC or length error) is an OSError
        raise _refuse(a, f"is damaged: its gzip stream does not check ({e})") from None
    gpu, data, files, seen = "", None, [], set()
    try:
        with tarfile.open(a, "r:gz") as tar:
            members = tar.getmembers()
            tar.fileobj.seek(tar.offset)
            while chunk := tar.fileobj.read(1 << 20):
                if chunk.count(0) != len(chunk):
                    raise _refuse(a, "holds data after its last readable member (a damaged header?)")
            for m in members:
                why = _member_problem(m)
                if why:
                    raise _refuse(a, f"member {m.name[:120]!r} {why}")
                top = m.name.split("/")[0]
                if gpu and top != gpu:
                    raise _refuse(a, f"holds more than one GPU folder ({gpu}, {top})")
                gpu = top
                if m.name.rstrip("/") in seen:
                    raise _refuse(a, f"holds {m.name[:120]!r} twice")
                seen.add(m.name.rstrip("/"))
                if m.isdir():
                    continue
                n, keep = 0, []
                with tar.extractfile(m) as f:
                    while chunk := f.read(1 << 20):
                        n += len(chunk)
                        if m.name == f"{gpu}/manifest.json" and n <= manifest.MANIFEST_MAX:
                            keep.append(chunk)
                if n != m.size:
                    raise _refuse(
                        a, f"member {m.name[:120]!r} holds {n} bytes, not the {m.size} its header says"
                    )
                if m.name == f"{gpu}/manifest.json":
                    if n > manifest.MANIFEST_MAX:
                        raise _refuse(a, f"holds a manifest of {n:,} bytes, more than a manifest can be")
                    data = b"".join(keep)
                else:
                    files.append(m)
    except (tarfile.TarError, OSError, EOFError) as e:
        raise _refuse(a, f"is not a readable tar archive ({e})") from None
    if data is None:
        raise _refuse(a, "holds no <gpu>/manifest.json: it is not an archive the GPU check kit packed")
    return gpu, manifest.parse(data, f"{a.name}: {gpu}/manifest.json", manifest.IN_ARCHIVE), files


def merge_manifests(manifests: list[dict], tree: str = "") -> dict:
    """One manifest from every command's (in any order): each unit's record is its best one (run by the code
    whose digest is `tree` before run by other code, so a rerun of this code replaces an earlier commit's page
    even where it failed; then ok before not ok; then the latest finished), the machine's facts are the latest
    command's, and every stage (plan part) lists each of its units with its status, `not run` where nothing
    came home."""
    ordered = sorted(manifests, key=lambda m: (m.get("packed_at", 0), json.dumps(m, sort_keys=True)))
    merged: dict = {}
    for m in ordered:
        merged.update({k: v for k, v in m.items() if k not in ("units", "commands", "stages")})
    commands = {k: v for m in ordered for k, v in m.get("commands", {}).items()}

    def rank(rec: dict) -> tuple:
        return (bool(tree) and rec.get("tree") == tree, rec.get("status") == "ok", rec.get("finished_at", 0))

    units: dict = {}
    for m in ordered:
        for u, r in m.get("units", {}).items():
            old = units.get(u)
            if old is None or rank(r) >= rank(old):
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
    """reports/index.html under a GPU's folder: every stage and unit with its status, linking every report
    that came home (the report pages link back to it)."""
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
        f"<h1>GPU check: {html.escape(str(manifest.get('gpu', '?')))}</h1><p>commit "
        f"{html.escape(str(manifest.get('commit')))} (dirty: {html.escape(str(manifest.get('dirty')))}), "
        f"torch {html.escape(str(manifest.get('torch')))}, CUDA {html.escape(str(manifest.get('cuda')))}, "
        f"driver {html.escape(str(manifest.get('driver')))}</p>"
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


def _inside(root: Path, rel: str) -> Path:
    """root/rel, when no folder or file on the way from root is a link and it resolves inside root; else a
    ConfigError (nothing is written or removed through a link, or outside root)."""
    p = root
    for part in rel.split("/"):
        p = p / part
        if p.is_symlink():
            raise ConfigError(
                f"{p} is a link: the kit never writes or removes through a link; remove it, then unpack again"
            )
    if root.resolve() not in p.resolve().parents:
        raise ConfigError(f"{p} is outside {root}; refused")
    return p


@contextlib.contextmanager
def _holding(root: Path, log):
    """An flock on root/.gpu-unpack.lock for the whole read, merge and write: a second unpack into the same
    folder waits for the first, then merges what the first wrote (two at once lost a unit's record)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot unpack into {root} ({e.strerror or e}): give --dest a folder") from None
    path, said = root / ".gpu-unpack.lock", False
    while True:
        lock = held_lock(path)
        try:
            lock.__enter__()
            break
        except LockBusy:
            if not said:
                log(f"[gpu-unpack] another unpack is writing into {root}: waiting for it")
                said = True
            time.sleep(0.2)
        except OSError as e:
            raise ConfigError(f"cannot open the lock file {path} ({e.strerror or e})") from None
    try:
        yield
    finally:
        lock.__exit__(None, None, None)


def unpack(path: str | os.PathLike, dest: str | os.PathLike | None = None, log=print) -> list[Path]:
    """Every archive at `path` (a .tar.gz or a folder of them, any number, in any order, from any GPU) into
    dest/<gpu-name>/ (dest: reports/gpu/), merged with what earlier calls unpacked there: one manifest.json
    (each unit's record the best one: ok before not ok, then the latest finished) and one reports/index.html
    per GPU. A unit's files (those its record lists) are written only from the archive whose record the
    manifest keeps, and the files of a record it no longer keeps are removed, so the pages always show the
    result the manifest lists, whatever order the archives come in, in one call or many. Other files (the
    machine records): the newest command's.

    Archives and manifests are read as hostile: every archive is checked whole (_check_archive) and every path
    it or a manifest names resolved inside its GPU's folder, with no link on the way, before anything is
    written or removed; a refusal is one line and writes nothing. The destination is locked while it is
    written, so two unpacks at once end with both their units listed."""
    path = Path(path)
    dest = Path(dest) if dest else project_root() / "reports" / "gpu"
    archives = sorted(path.glob("*.tar.gz")) if path.is_dir() else [path]
    if not archives or not all(a.is_file() for a in archives):
        raise ConfigError(f"no archive at {path}")
    root = dest.resolve()
    read = [(a, *_check_archive(a)) for a in archives]  # (archive, gpu, manifest, file members)
    read.sort(key=lambda r: (r[2].get("packed_at", 0), r[0].name))
    gpus = sorted({g for _a, g, _m, _f in read})
    for g in gpus:  # the GPU folder itself: never a link out of dest
        _inside(root, g)
    from ..envinfo import code_root, tree_digest

    tree = tree_digest(code_root())  # this tree's code: a record it ran is kept before another code's
    with _holding(root, log):
        before = {g: manifest.read(root / g / "manifest.json", manifest.AT_HOME) for g in gpus}
        before = {g: m for g, m in before.items() if m}
        merged = {}
        for g in gpus:
            ms = [m for _a, gg, m, _f in read if gg == g]
            merged[g] = merge_manifests([*ms, *([before[g]] if g in before else [])], tree)
            merged[g]["packed_at"] = max(m.get("packed_at", 0) for m in [*ms, before.get(g, {})])
        # what to write and what to remove, every path checked, before the first write
        writes: list[tuple[Path, Path, tarfile.TarInfo]] = []
        for a, gpu, m, files in read:
            owner = {}  # file -> the unit whose record lists it (the latest finished, where two do)
            for u, r in sorted(m.get("units", {}).items(), key=lambda x: x[1].get("finished_at", 0)):
                owner.update({f: u for f in r.get("files", [])})
            for member in files:
                rel = member.name.split("/", 1)[1]
                target = _inside(root / gpu, rel)
                if target.exists() and not target.is_file():
                    raise ConfigError(
                        f"{target} is in the way of {a.name}'s file (not a plain file): move it aside"
                    )
                unit = owner.get(rel)
                if unit is not None:
                    keep = m["units"][unit] == merged[gpu]["units"].get(unit)
                else:  # not a unit's: the newest command's copy
                    keep = not target.exists() or m.get("packed_at", 0) >= before.get(gpu, {}).get(
                        "packed_at", 0
                    )
                if keep:
                    writes.append((target, a, member))
        targets = {t for t, _a, _m in writes}
        stale: list[tuple[str, str, Path]] = []
        for gpu, m in merged.items():
            # a record no longer kept: its files go
            for u, old in before.get(gpu, {}).get("units", {}).items():
                new = m["units"].get(u, {})
                for f in sorted(set(old.get("files", [])) - set(new.get("files", []))) if new != old else ():
                    p = _inside(root / gpu, f)
                    if p not in targets and p.is_file() and not p.is_symlink():
                        stale.append((gpu, f, p))
        return _write(read, writes, stale, merged, root, dest, log)


def _write(read, writes, stale, merged, root: Path, dest: Path, log) -> list[Path]:
    """unpack's writes and removals, checked before: the files kept, the stale ones removed, then each GPU's
    manifest and index. A write that fails (a full disk) is one line; unpacking the same archives again, once
    there is room, ends as one unpack would have."""
    written: list[Path] = []
    phase = "the manifest there is unchanged"
    try:
        for a, _gpu, _m, _f in read:
            mine = [(t, member) for t, aa, member in writes if aa == a]
            with tarfile.open(a, "r:gz") as tar:
                for target, member in mine:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with atomic_file(target) as tmp, tar.extractfile(member.name) as src:
                        with open(tmp, "wb") as out:
                            shutil.copyfileobj(src, out)
                    written.append(target)
            log(f"[gpu-unpack] {a.name}: {len(mine)} files into {dest}")
        for gpu, f, p in stale:
            p.unlink()
            log(f"[gpu-unpack] {gpu}/{f}: removed, its unit's kept result is a newer one")
        phase = "a manifest or index may be the one from before"
        for gpu, m in merged.items():
            atomic_write_json(root / gpu / "manifest.json", m)
            write_gpu_index(root / gpu, m)
    except OSError as e:
        raise ConfigError(
            f"cannot write {e.filename or dest} ({e.strerror or e}); {phase}: free some space and unpack the "
            "same archives again"
        ) from None
    return written
