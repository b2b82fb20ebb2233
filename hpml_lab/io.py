"""Atomic file writes: readers see the old file or the whole new one, never half of it. Also the small
guards every layer shares: signals held across a step that must not be cut in two, whether a process is
alive, whether a path is a regular file of a sane size.

    from hpml_lab.io import atomic_file, atomic_write_json
    with atomic_file("model.pt") as tmp:
        torch.save(state, tmp)
    atomic_write_json("results/c1/run/meta.json", meta)
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, follow_links: bool = False) -> Iterator[Path]:
    """A temporary path in the target's folder to write to; renamed over `path` when the block
    ends without error, deleted otherwise, so readers see the old file or the whole new one.

    A link at `path` is refused (an OSError naming it), unless follow_links: hpml-lab's own files (reports,
    results, data-folder caches) lie in folders others may write to, and a link planted there would make the
    write land on whatever file it names. follow_links is for a file the user named on the command line
    (--save-model, -o): the file the link leads to is written and the link kept.

        with atomic_file("model.pt") as tmp:
            torch.save(state, tmp)
    """
    path = plain_target(Path(path)) if follow_links else own_target(Path(path))
    tmp = ""
    if (
        path.exists() and not path.is_file()
    ):  # a rename over /dev/null or a folder would replace it, not write to it
        raise (
            IsADirectoryError(21, "exists and is not a regular file", str(path))
            if path.is_dir()
            else FileExistsError(17, "exists and is not a regular file", str(path))
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with signals_deferred():  # a signal between mkstemp and this assignment would leave the file behind
            fd, tmp = tempfile.mkstemp(
                prefix=f".{path.name}.{owner()}-", dir=path.parent
            )  # data.checks.remove_stale
            os.close(fd)
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; the file should be as readable as any other
        os.replace(tmp, path)
    except (
        OSError
    ) as e:  # a full disk or a read-only folder: the error names the target, not the temporary file
        if e.filename in (None, tmp) or (tmp and str(e.filename).startswith(tmp)):
            raise type(e)(e.errno, e.strerror, str(path)) from e
        raise
    finally:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)


_SPECIAL = ("/dev", "/proc", "/sys")  # devices and kernel views: never a place to rename a file over


def plain_target(path: Path) -> Path:
    """The file an atomic write replaces: `path`, or for a link the file it leads to (the link stays a link; a
    rename over it would have replaced the link itself, e.g. /dev/stdout, with a file). Anything under /dev,
    /proc or /sys, named or reached through a link, is refused with an OSError naming `path`."""
    p, hops = Path(os.path.abspath(path)), 0
    while True:
        if any(p == Path(s) or Path(s) in p.parents for s in _SPECIAL):
            raise FileExistsError(
                17, "is a device or a kernel file, or a link to one; give a plain file name", str(path)
            )
        if not p.is_symlink() or hops > 40:
            return p
        target, hops = Path(os.readlink(p)), hops + 1
        p = Path(os.path.abspath(p.parent / target))


class PlantedFile(FileExistsError):
    """A link, FIFO, device or folder where hpml-lab writes or reads one of its own files."""


def own_target(path: Path) -> Path:
    """`path` for a write of one of hpml-lab's own files: a link there (even a dangling one), or anything but
    a regular file, is refused with one line (PlantedFile, an OSError naming `path`). Devices are refused as
    plain_target does."""
    p = Path(os.path.abspath(path))
    if any(p == Path(s) or Path(s) in p.parents for s in _SPECIAL):
        raise PlantedFile(
            17, "is a device or a kernel file, or a link to one; give a plain file name", str(path)
        )
    if p.is_symlink():
        plain_target(path)  # a link into /dev or /proc says so first
        raise PlantedFile(
            17,
            "is a link; hpml-lab never writes its own files through a link (one planted in a shared folder "
            "would make it overwrite the file it names): remove the link",
            str(path),
        )
    return p


def read_own(path: Path, limit: int = 1 << 20) -> str | None:
    """The text of one of hpml-lab's own small files (a cache, a record), read without following a link or
    blocking: None when it is missing. A link, FIFO, device or folder there is refused (PlantedFile naming
    it): a FIFO would block the read forever, /dev/zero would read until memory runs out. A file larger than
    `limit` bytes is refused as well (ValueError naming it)."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == 40 or os.path.islink(path):  # ELOOP: O_NOFOLLOW met a link
            raise PlantedFile(
                17,
                "is a link; hpml-lab never reads or writes its own files through a link (one planted in a "
                "shared folder could name any file): remove the link",
                str(path),
            ) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PlantedFile(17, "is not a regular file (a FIFO, device or folder?): remove it", str(path))
        if st.st_size > limit:
            raise ValueError(
                f"{path} is {st.st_size:,} bytes, more than this file can be (at most {limit:,})"
            )
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # grew while read
        raise ValueError(f"{path} is more than {limit:,} bytes, more than this file can be")
    return data.decode("utf-8", errors="replace")


def this_host() -> str:
    """This machine's name as temporary names carry it: letters, digits, '.', '_' and '-' (anything else
    becomes '_'), at most 64 characters."""
    import re
    import socket

    return re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname())[:64] or "host"


def owner() -> str:
    """'<pid>@<host>': who made a temporary file or folder, in its name. On a folder shared by nodes (a
    cluster's data folder) a pid says nothing about another node's processes: the host says whose pid it
    is."""
    return f"{os.getpid()}@{this_host()}"


def alive(pid: int) -> bool:
    """Whether process `pid` still runs: a zombie (ended, not reaped yet) has ended."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:  # gone in between; where there is no /proc, kill's answer stands
        return not Path("/proc/self").exists()


def made_by_a_live_process(path: Path, pid: int) -> bool:
    """Whether the temporary `path`, named with the pid of the process that made it, may still be in use: that
    process runs and started before `path` was made (a pid reused by a younger process does not count)."""
    if not alive(pid):
        return False
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[19])
        boot = next(
            int(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        started = boot + ticks / os.sysconf("SC_CLK_TCK")
        return started <= path.lstat().st_mtime + 1  # btime has 1 s resolution
    except (OSError, ValueError, IndexError, StopIteration):
        return True  # cannot tell: leave it


def regular_file(path: Path, limit: int | None = None) -> Path:
    """path, if it is a regular file (through links) of at most `limit` bytes: a FIFO, a device or a folder
    put where a result file belongs would block or never end when read. Else a ValueError naming it."""
    import stat

    st = path.stat()  # FileNotFoundError as before when it is missing
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{path} is not a regular file (a FIFO, device or folder?)")
    if limit is not None and st.st_size > limit:
        raise ValueError(f"{path} is {st.st_size:,} bytes, more than a run's record can be")
    return path


def atomic_write_text(path: str | os.PathLike, text: str, follow_links: bool = False) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over the target (a link there: see
    atomic_file)."""
    with atomic_file(path, follow_links=follow_links) as tmp, open(tmp, "w", newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def atomic_write_csv(
    path: str | os.PathLike, rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None
) -> None:
    cols = list(columns) if columns else (list(rows[0].keys()) if rows else [])
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="raise", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(path, buf.getvalue())


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGTERM, SIGHUP and Ctrl-C that arrive inside the block are delivered as it ends, to the handler in
    place before: files that belong together are written together (an epoch's CSVs and its meta.json, a run's
    landing). Held by swapping Python handlers, not by a signal mask: a mask is per thread, and torch's
    threads would take the signal. The main thread only (elsewhere the block runs unchanged): Python runs
    handlers there."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    # a handler installed from C (getsignal() is None) cannot be put back from Python: such a signal is not
    # held
    held = [s for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP) if signal.getsignal(s) is not None]
    previous = {s: signal.signal(s, lambda signum, frame: pending.append(signum)) for s in held}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for s in dict.fromkeys(pending):
            signal.raise_signal(s)


@contextlib.contextmanager
def temp_folder(prefix: str, dir: str | os.PathLike) -> Iterator[Path]:
    """A fresh folder in `dir`, removed with everything in it when the block ends, however it ends. Made with
    signals held and named inside the `try`: a Ctrl-C that arrives while it is being made is delivered once
    the name is held for clean-up, so the folder never outlives the process."""
    import shutil

    tmp = ""
    try:
        with signals_deferred():
            tmp = tempfile.mkdtemp(prefix=prefix, dir=dir)
        yield Path(tmp)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


class LockBusy(Exception):
    """Another process holds the lock (not an OSError: a file that cannot be opened is one)."""


@contextlib.contextmanager
def held_lock(path: str | os.PathLike) -> Iterator[None]:
    """An exclusive flock on `path` (made if missing, never followed as a link) held until the block ends. The
    kernel ends it with the process, also one killed with -9, so a crash leaves no stale lock to clear by
    hand. LockBusy at once when another process holds it; OSError when the file cannot be opened."""
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LockBusy(str(path)) from None
        yield
    finally:
        os.close(fd)


def _umask() -> int:
    """The process umask (read by setting and restoring it: the only portable way)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def publish_dir(tmp: str | os.PathLike, target: str | os.PathLike) -> None:
    """Rename a folder built aside (tempfile.mkdtemp makes it 0700) into place, with the mode any folder made
    under the umask has, so a group that shares data on a cluster can read it."""
    os.chmod(tmp, 0o777 & ~_umask())
    os.replace(tmp, target)
