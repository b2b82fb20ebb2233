"""Checks the data layer runs on what a user or a file hands it, before any compute: number ranges, download
URLs, one-line exception text, and whether image files really are the images their names say.

    checks.in_range("--n-train", 5e12, 5, 100_000)   # DatasetError: one line naming the option and its range
    checks.http_url("file:///etc/passwd", "--url")   # DatasetError: only http(s) URLs with a host
    checks.verify_images(paths, size=64)            # headers of all, full decode of a sample
    checks.zip_members(zipfile.ZipFile(p), p)        # names once, safe, unencrypted, readable methods, CRCs
"""

from __future__ import annotations

import contextlib
import os
import re
import urllib.parse
import zipfile
from collections.abc import Iterable
from pathlib import Path

from ..io import LockBusy, held_lock, signals_deferred  # noqa: F401  (the data commands' name for it)
from .errors import DatasetError

SEED_MAX = 2**63 - 1  # torch.manual_seed takes a 64-bit integer
MAX_UNZIPPED = 4 * 2**30  # the official Tiny ImageNet unpacks to about 0.5 GB


def first_line(e: BaseException) -> str:
    """An exception as one short line, even when its message is empty (a MemoryError has none)."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:160]


def in_range(option: str, value, lo: int, hi: int) -> int:
    """An integer option inside lo..hi, or one DatasetError line naming the option, the value and the range.
    A bool, a float (1e23, nan, inf) or a string is refused: counts and seeds are whole numbers."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise DatasetError(f"{option} must be a whole number from {lo:,} to {hi:,}, not {value!r}")
    if not lo <= value <= hi:
        shown = f"{value:,}" if abs(value) < 10**15 else f"{value:.3g}"
        raise DatasetError(f"{option} {shown} is out of range: use {lo:,} to {hi:,}")
    return value


def http_url(url: str | None, option: str = "--url") -> str | None:
    """None, or an http(s) URL with a host. Other schemes (file://, ftp://, data:) are refused: a download
    reads from the network, never from a local path dressed as a mirror."""
    if url is None:
        return None
    if not isinstance(url, str) or not url.strip() or any(c.isspace() or ord(c) < 32 for c in url):
        raise DatasetError(f"{option} {url!r} is not a URL (no spaces or control characters)")
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018  (a port that is not a number raises ValueError here)
    except ValueError as e:
        raise DatasetError(f"{option} {url!r} is not a URL ({first_line(e)})") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise DatasetError(f"{option} {url!r} is not an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:  # shown in every message: a secret leaked
        raise DatasetError(
            f"{option}: a URL with a user name or password is refused (it would be printed in "
            "messages and logs); use a mirror that needs none"
        )
    return url


def inside(folder: Path, path: Path, what: str) -> Path:
    """path, unless it (through links) lies outside folder: data is read only from the folder the user
    named."""
    real, top = path.resolve(), folder.resolve()
    if real != top and top not in real.parents:
        raise DatasetError(
            f"{what} {path} is a link to {real}, outside {folder}; only files inside the folder "
            "you name are read"
        )
    return path


def verify_images(paths: Iterable[Path], size: int, sample: Iterable[Path] = (), where: str = "") -> int:
    """Every path's header says a JPEG of size x size pixels (cheap: PIL reads the header only, so a file that
    declares 100,000 x 100,000 pixels, a decompression bomb, is refused unread); every path in sample is fully
    decoded. Returns how many were checked. One DatasetError line names the first bad file by `where`/name."""
    from PIL import Image

    n = 0
    for path in paths:
        shown = f"{where}{path.name}" if where else str(path)
        try:
            with Image.open(path) as img:
                fmt, dims = img.format, img.size
        except Image.DecompressionBombError:
            raise DatasetError(
                f"image {shown} declares more pixels than an image may have (a decompression bomb)"
            ) from None
        except (OSError, ValueError, SyntaxError) as e:
            raise DatasetError(f"{shown} is not an image ({_named(e, path, shown)})") from None
        if fmt != "JPEG" or dims != (size, size):
            raise DatasetError(
                f"{shown} is a {fmt} of {dims[0]} x {dims[1]} pixels, not a {size} x {size} JPEG"
            )
        n += 1
    for path in sample:
        shown = f"{where}{path.name}" if where else str(path)
        try:
            with Image.open(path) as img:
                img.convert("RGB")
        except (OSError, ValueError, SyntaxError) as e:
            raise DatasetError(f"{shown} does not decode as an image ({_named(e, path, shown)})") from None
    return n


def _named(e: BaseException, path: Path, shown: str) -> str:
    """PIL's message with the file named as the user knows it (not by the temporary folder it lies in)."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0].replace(str(path), shown)[:160]


def free_space(folder: Path, need: int, what: str) -> None:
    """Refuse up front when folder's disk has less than `need` bytes free (with a 10% margin), rather than
    fill it and stop halfway."""
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    if free < need * 1.1:
        raise DatasetError(
            f"{what} needs about {need / 1e6:,.0f} MB in {folder}, which has {free / 1e6:,.0f} MB free"
        )


def copy_download(resp, part: Path, have: int, url: str, final: Path) -> int:
    """Append resp's body to `part` (which held `have` bytes; 0: write it afresh); returns the bytes it now
    holds. A network break keeps `part` (the same command resumes it: one DatasetError line says so). A write
    that fails (a full disk, a file-size limit) is no break a rerun resumes: `part` is put back as it was
    (removed when this call made it, cut back to `have` bytes when it resumed one) and the line says how much
    space is free."""
    import http.client
    import shutil

    got = have
    try:
        with open(part, "ab" if have else "wb") as f:
            while True:
                try:
                    chunk = resp.read(1 << 20)
                except (OSError, http.client.IncompleteRead) as e:
                    raise _Broke(type(e).__name__) from None
                if not chunk:
                    break
                f.write(chunk)
                got += len(chunk)
            f.flush()
            os.fsync(f.fileno())
    except _Broke as e:
        raise DatasetError(
            f"download of {url} broke off at {got:,} bytes ({e}); the partial file {part.name} is "
            "kept: run the same command again to resume"
        ) from None
    except OSError as e:
        with contextlib.suppress(OSError):
            if have:
                os.truncate(part, have)
            else:
                part.unlink()
        free = shutil.disk_usage(part.parent).free / 1e6 if part.parent.exists() else 0.0
        kept = f"the earlier partial download ({have:,} bytes) is kept" if have else "nothing of it is kept"
        raise DatasetError(
            f"cannot write {final} ({e.strerror or first_line(e)}) after {got:,} bytes; {kept}; "
            f"{part.parent} has {free:,.0f} MB free: free space, then run the command again"
        ) from None
    return got


class _Broke(Exception):
    """The network side of a download ended early (reset, cut short): a rerun can resume it."""


@contextlib.contextmanager
def undo_on_failure(root: Path, names: Iterable[str]):
    """What a download makes in ROOT goes again when it fails or is interrupted: each of `names` (files or
    folders in ROOT) that was not there before, and ROOT itself when this made it and nothing else is in it.
    What was there before is never touched; a resumable partial file not named here stays."""
    import shutil

    made_root = not root.exists()
    before = {n for n in names if (root / n).exists() or (root / n).is_symlink()}
    try:
        yield
    except BaseException:
        for n in names:
            p = root / n
            if n in before or not (p.exists() or p.is_symlink()):
                continue
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
        if made_root:
            with contextlib.suppress(OSError):
                root.rmdir()  # only when empty
        raise


TEMP_KINDS = (
    "cifar-synth",
    "tinyimagenet-extract",
    "kaggle",
)  # .<kind>-<pid>-<random>: folders only these make
# .<kind>-<pid>@<host>-<random> (temp_prefix) and .tiny-imagenet-200.zip.<pid>@<host>-<random>
# (io.atomic_file); names without @<host> were made before hosts were named, and are judged as this host's
_STALE = re.compile(
    r"\.(?:(?:%s)-|tiny-imagenet-200\.zip\.)(\d+)(?:@([A-Za-z0-9._-]+))?-[A-Za-z0-9_]+" % "|".join(TEMP_KINDS)
)
OTHER_HOST_STALE_S = (
    24 * 3600
)  # another node's temporary is removed only when untouched this long (see below)


def temp_prefix(kind: str) -> str:
    """The name a data command's temporary folder in ROOT starts with: its kind and this process's id, so the
    next command can tell a folder left by a killed one (remove_stale) from one in use."""
    assert kind in TEMP_KINDS
    from ..io import owner

    return f".{kind}-{owner()}-"


def remove_stale(root: Path) -> list[str]:
    """Remove the temporary folders and archive files in ROOT that a data command killed with -9 left (named
    by temp_prefix or io.atomic_file, made by a process that has ended); returns their names. Nothing else in
    ROOT, and nothing a running command uses, is touched.

    Each name carries the pid and host that made it. This host's are removed when that process has ended.
    Another host's (a data folder shared by cluster nodes) cannot be judged by pid here: one is removed only
    when untouched for OTHER_HOST_STALE_S (a day). The longest data command, a Tiny ImageNet download and
    extraction, takes minutes to an hour; a day leaves a slow node's live one alone, and an archive being
    downloaded is touched by every write."""
    import shutil
    import time

    from ..io import made_by_a_live_process, this_host

    gone = []
    try:
        entries = list(root.iterdir()) if root.is_dir() else []
    except OSError:
        return gone
    for p in entries:
        m = _STALE.fullmatch(p.name)
        if not m:
            continue
        if m.group(2) in (None, this_host()):
            if made_by_a_live_process(p, int(m.group(1))):
                continue
        else:
            try:
                if time.time() - p.lstat().st_mtime < OTHER_HOST_STALE_S:
                    continue
            except OSError:
                continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        gone.append(p.name)
    return gone


@contextlib.contextmanager
def one_data_command(root: Path):
    """Held while a data command writes into ROOT: a second one into the same ROOT on this host is refused
    with one line (two `data synth` at once both exited 0, and the first named a seed the folder did not
    hold). An flock on a file in the temporary folder, named by ROOT's real path (ROOT gets no file of it): it
    ends with the process, also when it is killed with -9. Commands on other nodes of a shared folder are not
    seen."""
    import hashlib
    import tempfile

    key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"hpml-data-{key}.lock"
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(held_lock(path))
        except OSError:  # no lock to be had (a read-only temporary folder): go on as before
            pass
        except LockBusy:
            raise DatasetError(
                f"another hpml-lab data command is writing into {root} now; wait for it to end, then run "
                "this one again"
            ) from None
        yield


def written_to(target: Path, e: OSError) -> DatasetError:
    """An OSError while writing into a temporary place, said about the target the user named."""
    return DatasetError(f"cannot write {target} ({e.strerror or first_line(e)}); nothing was changed there")


def plain_name(name: str, what: str) -> str:
    """A name read from an archive (a file name, a class id) must be one plain path component, so that nothing
    it names can lie outside its folder ("../../x", "/etc/x", "a/b", "..")."""
    if (
        not name
        or name in (".", "..")
        or any(c in name for c in "/\\\0")
        or name != name.strip()
        or (len(name) > 1 and name[1] == ":")
    ):
        raise DatasetError(f"{what} {name!r} is not a plain file or folder name; refusing this archive")
    return name


def stamp(folder: Path, names: list[str], what: str) -> dict:
    """Each file's size, modification time and change time: what a cached check is keyed by. The change time
    cannot be set back (`touch -r` restores the modification time only), so an edited file that kept its size
    and time is still seen as changed. Unreadable: one line."""

    def one(p: Path) -> list[int]:
        st = p.stat()
        return [st.st_size, st.st_mtime_ns, st.st_ctime_ns]

    try:
        return {n: one(folder / n) for n in names}
    except OSError as e:
        raise DatasetError(f"{what} {e.filename} cannot be read ({e.strerror})") from None


CACHE_MAX = 1 << 20  # a cache file holds a few stamps: a larger one was not written by hpml-lab


def read_cache(path: Path) -> dict | None:
    """A data folder's cache file (.hpml-checked.json, .hpml-verified.json, .hpml-fingerprint.json) as a dict,
    or None when it is missing, damaged or too large (it is then computed again). A link, FIFO, device or
    folder in its place is refused with one DatasetError line: a data folder may be shared by a class, and a
    link planted there would make the next run overwrite the file it names, a FIFO would block the run and
    /dev/zero would read until memory runs out."""
    import json

    from ..io import PlantedFile, read_own

    try:
        text = read_own(path, CACHE_MAX)
    except PlantedFile as e:
        raise planted(path, e) from None
    except (OSError, ValueError):
        return None
    try:
        data = json.loads(text) if text is not None else None
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def write_cache(path: Path, data: dict) -> None:
    """Write a data folder's cache file atomically, never through a link planted in its place (refused with
    one DatasetError line); a read-only folder or a full disk only means no cache (checked again next
    time)."""
    import json

    from ..io import PlantedFile, atomic_write_text

    try:
        atomic_write_text(path, json.dumps(data))
    except PlantedFile as e:
        raise planted(path, e) from None
    except OSError:
        pass


def no_planted_caches(folder: Path, names: list[str]) -> None:
    """Before a run: each cache file in the data folder is a regular file or absent (a link, FIFO, device or
    folder there is one DatasetError line), so a planted one stops the run before its kernel, not inside
    it."""
    import stat

    for n in names:
        try:
            st = os.lstat(folder / n)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode):
            raise DatasetError(
                f"{folder / n} is a link; hpml-lab never reads or writes its own files through a link (one "
                "planted in a shared folder could name any file): remove the link"
            )
        if not stat.S_ISREG(st.st_mode):
            raise DatasetError(f"{folder / n} is not a regular file (a FIFO, device or folder?): remove it")


def planted(path: Path, e: OSError) -> DatasetError:
    """The line for a link or special file found where hpml-lab keeps one of its own files."""
    return DatasetError(
        f"{path} {e.strerror}; it is not a file hpml-lab wrote, so nothing was read from or written to it"
    )


FINGERPRINT = ".hpml-fingerprint.json"  # cache of content_fingerprint(), keyed by the files' stamp
_FINGERPRINTS: dict = {}  # the same, in this process


def content_fingerprint(folder: Path, names: list[str], what: str, also: dict | None = None) -> str:
    """16 hex digits of a hash over the named files' contents (and `also`, e.g. folder stamps): what tells one
    dataset from another at the same path. Hashing reads every byte (CIFAR-10: 180 MB, about half a second),
    so the result is cached in the folder, keyed by the files' stamp; a read-only folder is hashed each
    time."""
    import hashlib
    import json

    now = {"files": stamp(folder, names, what), "also": also or {}}
    key = (str(folder), json.dumps(now, sort_keys=True))
    if key in _FINGERPRINTS:  # this process hashed these very files already (a read-only folder has no cache)
        return _FINGERPRINTS[key]
    cache = folder / FINGERPRINT
    cached = read_cache(cache) or {}
    if cached.get("stamp") == now and isinstance(cached.get("fingerprint"), str):
        return cached["fingerprint"]
    h = hashlib.sha256(json.dumps(also or {}, sort_keys=True).encode())
    try:
        for n in names:
            h.update(n.encode() + b"\0")
            with open(folder / n, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
    except OSError as e:
        raise DatasetError(f"{what} {e.filename} cannot be read ({e.strerror})") from None
    fp = _FINGERPRINTS[key] = h.hexdigest()[:16]
    write_cache(cache, {"stamp": now, "fingerprint": fp})
    return fp


def readable_text(path: Path, what: str) -> str:
    """A text file of an archive, as UTF-8; a non-UTF-8 byte or a read error is one line naming `what`."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DatasetError(
            f"{what} is not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start})"
        ) from None
    except OSError as e:
        raise DatasetError(f"{what} cannot be read ({e.strerror or first_line(e)})") from None


def zip_members(z: zipfile.ZipFile, archive: Path) -> list[str]:
    """The member names, checked: each once, each a safe relative path, none encrypted, every compression
    method one zipfile reads; then every member's CRC (testzip reads them all)."""
    names = z.namelist()
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise DatasetError(f"archive {archive} holds {dup!r} more than once; refusing an ambiguous archive")
    for info in z.infolist():
        n = info.filename
        if n.startswith(("/", "\\")) or "\\" in n or ".." in Path(n).parts or (len(n) > 1 and n[1] == ":"):
            raise DatasetError(f"archive {archive} has an unsafe member path {n!r}; refusing to extract")
        if info.flag_bits & 0x1:
            raise DatasetError(
                f"archive {archive}: member {n} is encrypted; use an archive without a password"
            )
        if info.compress_type not in (
            zipfile.ZIP_STORED,
            zipfile.ZIP_DEFLATED,
            zipfile.ZIP_BZIP2,
            zipfile.ZIP_LZMA,
        ):
            raise DatasetError(
                f"archive {archive}: member {n} uses compression method {info.compress_type}, "
                "which cannot be read here (stored, deflate, bzip2 and lzma can)"
            )
    total = sum(info.file_size for info in z.infolist())  # zipfile never reads past a member's declared size
    if total > MAX_UNZIPPED:
        raise DatasetError(
            f"archive {archive} declares {total / 2**30:,.1f} GiB unpacked, more than the "
            f"{MAX_UNZIPPED / 2**30:.0f} GiB a Tiny ImageNet can be (a zip bomb?); refusing to extract"
        )
    bad = z.testzip()  # reads every member and checks its CRC
    if bad is not None:
        raise DatasetError(
            f"archive {archive} is corrupted (CRC error in {bad}); delete it and download again"
        )
    return names


__all__ = [
    "SEED_MAX",
    "content_fingerprint",
    "copy_download",
    "first_line",
    "free_space",
    "http_url",
    "in_range",
    "inside",
    "plain_name",
    "readable_text",
    "remove_stale",
    "signals_deferred",
    "temp_prefix",
    "stamp",
    "undo_on_failure",
    "verify_images",
    "written_to",
    "zip_members",
]
