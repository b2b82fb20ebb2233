"""The GPU check kit's archives for the trip home: a folder's new files into tar.gz archives within the device
tool's limits (16 MiB a file, 8 files in $OUT), traces only where room is left, each written whole and
atomically.

    from hpml_lab.gpu import pack
    archives, left_out = pack.pack(folder, Path(os.environ["OUT"]) / "H100.part1.tar.gz", prefix="H100")
"""

from __future__ import annotations

import os
import re
import tarfile
from pathlib import Path

from ..config import ConfigError

ARCHIVE_LIMIT = 16 * 1024**2  # one file the device tool brings back


ARCHIVE_FILES = 8  # files it brings back from $OUT


TRACE_SUFFIXES = (".json.gz", ".pickle", ".pt.trace.json", "trace.json")


LOCK_FILE = re.compile(r"\.[\w.-]+\.lock")


def _gz_size(f: Path) -> int:
    """About what `f` adds to a tar.gz: its gzip size and a tar header's 1 KiB."""
    import zlib

    z, n = zlib.compressobj(6, zlib.DEFLATED, 31), 1024
    with open(f, "rb") as fh:
        while chunk := fh.read(1 << 20):
            n += len(z.compress(chunk))
    return n + len(z.flush())


def _is_trace(f: Path) -> bool:
    return f.name.endswith(TRACE_SUFFIXES) or "snapshot" in f.name


def _bins(
    files: list[Path], size: dict[Path, int], cap: float, most: int
) -> tuple[list[list[Path]], list[Path]]:
    """(files per archive, files left out): the others first, largest first, into the first archive with room
    (a new one while fewer than `most`), then traces and snapshots, smallest first, only where room is
    left."""
    bins: list[list[Path]] = []
    loads: list[int] = []
    dropped: list[Path] = []
    others = sorted((f for f in files if not _is_trace(f)), key=lambda f: -size[f])
    traces = sorted((f for f in files if _is_trace(f)), key=lambda f: size[f])
    for f in others + traces:
        k = next((i for i, load in enumerate(loads) if load + size[f] <= cap), None)
        if k is None and not _is_trace(f) and len(bins) < most and size[f] <= cap:
            bins.append([])
            loads.append(0)
            k = len(bins) - 1
        if k is None:
            dropped.append(f)
        else:
            bins[k].append(f)
            loads[k] += size[f]
    return bins or [[]], dropped


def pack(
    folder: Path,
    archive: Path,
    since: float = 0.0,
    prefix: str = "",
    limit: int | None = None,
    most: int | None = None,
    log=print,
) -> tuple[list[Path], list[str]]:
    """The files under `folder` modified since `since` into tar.gz archives at `archive` (and, where one would
    exceed `limit` bytes, default ARCHIVE_LIMIT, `<name>-2.tar.gz` and on, at most `most` of them: by default
    as many as the device tool's 8 files leave in `archive`'s folder), each file under `prefix/`, each archive
    with manifest.json, each written whole and atomically (a kill while they are written leaves the previous
    ones). Traces and snapshots go only where room is left; what fits in none is left out and named. The
    per-command reports/index.html is left out: unpack writes one index of everything that came home. Returns
    (the archives, what was left out)."""
    limit = limit or ARCHIVE_LIMIT
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file()
        and not p.is_symlink()
        and p.relative_to(folder).as_posix() != "reports/index.html"
        and not LOCK_FILE.fullmatch(p.name)  # a run's flock (guards.task_lock): a process's, not a result
        and (p.stat().st_mtime >= since - 1 or p.name == "manifest.json")
    )
    head = [f for f in files if f.relative_to(folder).as_posix() == "manifest.json"]
    rest = [f for f in files if f not in head]
    parent = archive.parent
    parent.mkdir(parents=True, exist_ok=True)
    base = archive.name.removesuffix(".tar.gz")
    ours = re.compile(re.escape(base) + r"(-\d+)?\.tar\.gz(\.tmp)?")
    if most is None:  # the device tool's file count, less what else is in $OUT
        most = ARCHIVE_FILES - sum(1 for p in parent.iterdir() if p.is_file() and not ours.fullmatch(p.name))
    if most < 1:
        raise ConfigError(f"{parent} already holds {ARCHIVE_FILES} files: no room for {archive.name}")
    name = [archive] + [archive.with_name(f"{base}-{k}.tar.gz") for k in range(2, most + 1)]
    bins, dropped, size, cap = [rest], [], None, float(limit)
    tmps: list[Path] = []
    try:
        for _ in range(30):
            tmps = []
            for k, b in enumerate(bins):
                tmps.append(name[k].with_name(name[k].name + ".tmp"))
                with tarfile.open(tmps[-1], "w:gz") as tar:
                    for f in head + b:
                        tar.add(f, arcname=str(Path(prefix) / f.relative_to(folder)), recursive=False)
            sizes = [t.stat().st_size for t in tmps]
            if max(sizes) <= limit:
                break
            for t in tmps:
                t.unlink()
            if (
                size is None
            ):  # more than one archive holds, or something must go: plan by each file's gzip size
                size = {f: _gz_size(f) for f in rest}
                cap = limit - sum(_gz_size(f) for f in head)
            else:  # the estimate was short: plan again with less room
                cap *= 0.9
            bins, dropped = _bins(rest, size, cap, most)
        else:
            raise ConfigError(f"{archive.name}: nothing fits {limit} bytes, not even the manifest")
        for t in tmps:
            with open(t, "rb") as fh:
                os.fsync(fh.fileno())
    except BaseException:  # $OUT full, gone or read-only: no cut-short .tmp is left there; the archives stay
        for t in tmps:
            t.unlink(missing_ok=True)
        raise
    for k, t in enumerate(tmps):
        os.replace(t, name[k])
    for stale in name[len(tmps) :]:
        stale.unlink(missing_ok=True)
    left = [f.relative_to(folder).as_posix() for f in dropped]
    log(
        f"[gpu-check] packed {sum(map(len, bins))} files, {sum(sizes) / 1024**2:.1f} MiB, into "
        + ", ".join(str(n) for n in name[: len(tmps)])
        + (f" (left out to fit: {', '.join(left)})" if left else "")
    )
    return name[: len(tmps)], left
