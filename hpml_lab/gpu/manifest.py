"""The GPU check kit's manifest read as possibly damaged or hostile: its shape checked (every field the kit
reads, with its type), every file it lists a plain relative path inside its GPU's folder, and anything else
refused in one line that names the file and how to recover.

    from hpml_lab.gpu import manifest
    m = manifest.read(Path("reports/gpu/NVIDIA-H100/manifest.json"), manifest.AT_HOME)
    m = manifest.parse(data, "H100.part1.tar.gz: H100/manifest.json", manifest.IN_ARCHIVE)
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path, PurePosixPath
from typing import Any

from ..config import ConfigError
from ..io import PlantedFile

MANIFEST_MAX = 8 << 20  # a manifest is a few kB; one of megabytes was not written by the kit
# a GPU's folder, a unit: what gpu_name() and the task ids make; never '.', '..' or a path
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")

# how to recover, by where the manifest was read
IN_ARCHIVE = (
    "the archive is refused and nothing of it is written: copy it home again from the command's $OUT, "
    "or unpack the other archives without it"
)
AT_HOME = (
    "nothing was unpacked: put back a whole copy (git checkout -- FILE, where it is tracked), or move it "
    "aside and unpack every archive of this GPU again"
)
ON_NODE = (
    "the command ran nothing: put back a whole copy (git checkout -- FILE, where it is tracked), or move it "
    "aside to run every unit again"
)


def safe_path(rel: Any) -> bool:
    """Whether `rel` is a plain relative path that stays inside the folder it is joined to: text without a NUL
    or a backslash, no leading '/', no empty, '.' or '..' part."""
    if not isinstance(rel, str) or not rel or len(rel) > 4096 or "\0" in rel or "\\" in rel:
        return False
    if rel.startswith("/"):
        return False
    parts = rel.split("/")
    return all(p not in ("", ".", "..") for p in parts) and PurePosixPath(rel).parts == tuple(parts)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def problem(m: Any) -> str:
    """'' when `m` has the shape the kit writes (of what it reads: packed_at, units with status, finished_at,
    seconds and files, commands), else what is wrong, in a few words."""
    if not isinstance(m, dict):
        return f"holds a {type(m).__name__}, not a manifest"
    if "packed_at" in m and not _number(m["packed_at"]):
        return "has a packed_at that is not a number"
    units = m.get("units", {})
    if not isinstance(units, dict):
        return f"has units of type {type(units).__name__}, not a mapping"
    for u, r in units.items():
        if not NAME.fullmatch(u):
            return f"names a unit {u[:40]!r} that is not a plain name"
        if not isinstance(r, dict):
            return f"has a record of unit {u} that is a {type(r).__name__}"
        if not isinstance(r.get("status"), str):
            return f"has no status for unit {u}"
        if any(k in r and not _number(r[k]) for k in ("finished_at", "seconds")):
            return f"has a finished_at or seconds of unit {u} that is not a number"
        files = r.get("files", [])
        if not isinstance(files, list):
            return f"has files of unit {u} that are not a list"
        bad = next((f for f in files if not safe_path(f)), None)
        if bad is not None:
            return f"lists a file of unit {u}, {str(bad)[:80]!r}, that is not a plain path inside its folder"
    commands = m.get("commands", {})
    if not isinstance(commands, dict) or not all(isinstance(c, dict) for c in commands.values()):
        return "has commands that are not a mapping of records"
    return ""


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def parse(data: bytes, where: str, recover: str) -> dict:
    """The manifest in `data` (read from `where`), checked; else a ConfigError: where, what is wrong,
    `recover`."""
    try:
        m = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        why = "is not UTF-8 text"
    except RecursionError:
        why = "is nested too deeply to be a manifest"
    except ValueError as e:
        why = f"is not JSON ({str(e)[:80]})"
    else:
        why = problem(m)
        if not why:
            return m
    raise ConfigError(f"{where} {why}; {recover.replace('FILE', where)}")


def _read_bytes(path: Path) -> bytes | None:
    """The bytes of the file at `path`, None when it is missing; never through a link, never blocking on a
    FIFO (PlantedFile), at most MANIFEST_MAX bytes (ValueError)."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as e:
        if os.path.islink(path):
            raise PlantedFile(
                17, "is a link, not the manifest the kit writes: remove the link", str(path)
            ) from e
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PlantedFile(17, "is not a regular file (a FIFO, device or folder?)", str(path))
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MANIFEST_MAX + 1)
    finally:
        os.close(fd)
    if len(data) > MANIFEST_MAX:
        raise ValueError(f"{path} is more than {MANIFEST_MAX:,} bytes, more than a manifest can be")
    return data


def read(path: Path, recover: str) -> dict:
    """The manifest at `path` ({} when there is none), read capped in size and never through a link or from a
    FIFO or device, checked as parse() does."""
    try:
        data = _read_bytes(path)
    except PlantedFile as e:
        raise ConfigError(f"{path} {e.strerror}; {recover.replace('FILE', str(path))}") from None
    except ValueError as e:  # over the cap
        raise ConfigError(f"{e}; {recover.replace('FILE', str(path))}") from None
    except OSError as e:
        raise ConfigError(f"{path} cannot be read ({e.strerror or e})") from None
    return {} if data is None else parse(data, str(path), recover)
