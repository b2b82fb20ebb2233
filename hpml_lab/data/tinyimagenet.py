"""Tiny ImageNet (200 classes, 64x64): the official archive, a synthetic one, and the loaders.

    hpml-lab data synth tinyimagenet --root data                 # synthetic zip, official layout, prepared
    hpml-lab data download tinyimagenet --root data              # cs231n.stanford.edu, resumable
    hpml-lab data download tinyimagenet --root data --url URL --allow-partial
    hpml-lab data download tinyimagenet --root data --source kaggle --dataset akash2sharma/tiny-imagenet

Archive layout (tiny-imagenet-200.zip): tiny-imagenet-200/{wnids.txt, words.txt,
train/<wnid>/images/<wnid>_<i>.JPEG, train/<wnid>/<wnid>_boxes.txt,
val/images/val_<i>.JPEG, val/val_annotations.txt, test/images/test_<i>.JPEG}.
The validation labels live only in val_annotations.txt, so preparing moves every
val image into val/<wnid>/images/ (ImageFolder layout). Test images have no labels.

Preparing is all-or-nothing: the archive is CRC-checked, extracted into a hidden
temporary folder under ROOT, reorganised and counted there, and only then renamed
to ROOT/tiny-imagenet-200, so an interrupted or failed run leaves nothing
half-extracted. PREPARED.json records the counts, whether the copy is partial and
whether it is synthetic (SYNTHETIC.json, written by the synthesizer, says so too).
"""

from __future__ import annotations

import http.client
import io
import json
import os
import re
import shutil
import time
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..io import publish_dir, temp_folder
from .checks import (
    copy_download,
    first_line,
    free_space,
    http_url,
    plain_name,
    readable_text,
    temp_prefix,
    undo_on_failure,
    verify_images,
    written_to,
    zip_members,
)
from .errors import DatasetError
from .tinyimagenet_synth import FOLDER, MARKER, SIZE, check_options, is_synthetic_zip, synthesize_archive

ARCHIVE = "tiny-imagenet-200.zip"
URL = "http://cs231n.stanford.edu/tiny-imagenet-200.zip"
OFFICIAL = {"classes": 200, "train": 100_000, "val": 10_000}
RECORD = "PREPARED.json"
MEAN = (0.4802, 0.4481, 0.3975)  # Tiny ImageNet training-set statistics
STD = (0.2770, 0.2691, 0.2821)
PREPARE_HINT = (
    "prepare it with `hpml-lab data synth tinyimagenet --root {root}` (synthetic, offline) or "
    "`hpml-lab data download tinyimagenet --root {root}` (the real one, about 240 MB)"
)


# ---------------------------------------------------------------- checks
def check(root: str | os.PathLike) -> str:
    """'real' or 'synthetic' when ROOT holds a prepared copy; DatasetError naming the commands otherwise."""
    folder = Path(root) / FOLDER
    if not (folder / RECORD).is_file():
        what = "not prepared (no PREPARED.json)" if folder.exists() else "not found"
        raise DatasetError(f"Tiny ImageNet {what} in {folder}; " + PREPARE_HINT.format(root=root))
    try:  # a prepared copy edited afterwards: one line, not a crash in the loader
        rec = json.loads(readable_text(folder / RECORD, str(folder / RECORD)))
        ok = isinstance(rec, dict) and isinstance(rec.get("counts"), dict) and (folder / "train").is_dir()
    except ValueError:
        ok = False
    if not ok:
        raise DatasetError(
            f"Tiny ImageNet in {folder} is damaged (PREPARED.json unreadable or train/ missing); "
            f"delete {folder} and " + PREPARE_HINT.format(root=root)
        )
    return "synthetic" if (folder / MARKER).is_file() else "real"


def record(root: str | os.PathLike) -> dict:
    return json.loads((Path(root) / FOLDER / RECORD).read_text())


# ---------------------------------------------------------------- preparing an archive
def _archive_prefix(names: list[str]) -> str:
    """The folder inside the archive that holds wnids.txt (tiny-imagenet-200/ in the official zip)."""
    hits = sorted((n for n in names if n.endswith("wnids.txt")), key=len)
    if not hits:
        raise DatasetError("archive has no wnids.txt: it is not a Tiny ImageNet archive")
    return hits[0][: -len("wnids.txt")]


def _wnids(folder: Path) -> list[str]:
    """wnids.txt's class ids: UTF-8, plain names, each once (a duplicate would count a class that is not
    there)."""
    wnids = [
        plain_name(w, "wnids.txt names a class")
        for w in readable_text(folder / "wnids.txt", "wnids.txt").split()
    ]
    seen: set[str] = set()
    for w in wnids:
        if w in seen:
            raise DatasetError(f"wnids.txt names class {w} twice; refusing this archive")
        seen.add(w)
    return wnids


def _count(folder: Path) -> dict[str, int]:
    wnids = _wnids(folder)
    return {
        "classes": len(wnids),
        "train": sum(1 for _ in (folder / "train").glob("*/images/*.JPEG")),
        "val": sum(1 for _ in (folder / "val").glob("*/images/*.JPEG")),
    }


def _check_images(folder: Path, wnids: list[str]) -> None:
    """Every class has training images; every image's header says a 64x64 JPEG (a decompression bomb is
    refused unread) and every image decodes (measured 0.24 ms each on 2 busy cores, about 30 s for the
    official 110,000): a *.JPEG that is no image is found here, not in training."""
    empty = [w for w in wnids if not any((folder / "train" / w / "images").glob("*.JPEG"))]
    if empty:
        raise DatasetError(
            f"{len(empty)} classes of wnids.txt have no training images (e.g. train/{empty[0]}/images)"
        )
    for split in ("train", "val"):
        for w in wnids:
            images = sorted((folder / split / w / "images").glob("*.JPEG"))
            verify_images(images, SIZE, sample=images, where=f"{split}/{w}/images/")


def _reorganise_val(folder: Path) -> None:
    """val/images/val_i.JPEG -> val/<wnid>/images/val_i.JPEG, from val/val_annotations.txt."""
    wnids = set(_wnids(folder))
    val = folder / "val"
    ann = val / "val_annotations.txt"
    if not ann.is_file():
        raise DatasetError("archive has no val/val_annotations.txt; cannot label the validation images")
    seen: set[str] = set()
    for line_no, line in enumerate(readable_text(ann, "val/val_annotations.txt").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) < 2 or parts[1] not in wnids:
            raise DatasetError(
                f"val_annotations.txt line {line_no} is malformed or names an unknown class: {line!r}"
            )
        plain_name(parts[0], f"val_annotations.txt line {line_no} names the image")
        src = val / "images" / parts[0]
        if parts[0] in seen:
            raise DatasetError(f"val_annotations.txt names {parts[0]} twice (line {line_no})")
        seen.add(parts[0])
        if not src.is_file():
            raise DatasetError(f"val_annotations.txt names {parts[0]}, which the archive does not contain")
        dst = val / parts[1] / "images" / parts[0]
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dst)
    leftover = list((val / "images").iterdir()) if (val / "images").exists() else []
    if leftover:
        raise DatasetError(f"{len(leftover)} validation images have no annotation (e.g. {leftover[0].name})")
    if (val / "images").exists():
        (val / "images").rmdir()


def prepare(
    archive: str | os.PathLike,
    root: str | os.PathLike,
    allow_partial: bool = False,
    source: str = "",
    log: Callable[[str], None] = print,
) -> Path:
    """Check, extract, reorganise and count an archive; rename into ROOT/tiny-imagenet-200 only if all is
    well."""
    archive, root = Path(archive), Path(root)
    target = root / FOLDER
    if target.exists():
        raise DatasetError(f"{target} already exists; delete it first to prepare it again")
    try:
        with zipfile.ZipFile(archive) as z:
            names = zip_members(z, archive)
            prefix = _archive_prefix(names)
            root.mkdir(parents=True, exist_ok=True)
            with temp_folder(temp_prefix("tinyimagenet-extract"), root) as tmp:
                z.extractall(tmp, members=[n for n in names if n.startswith(prefix)])
                folder = tmp / prefix if prefix else tmp
                _reorganise_val(folder)
                counts = _count(folder)
                synthetic = (folder / MARKER).is_file()
                partial = any(counts[k] != OFFICIAL[k] for k in OFFICIAL)
                if counts["classes"] == 0 or counts["train"] == 0:
                    raise DatasetError(f"archive {archive} holds no training images")
                missing = [w for w in _wnids(folder) if not (folder / "train" / w).is_dir()]
                if missing:
                    raise DatasetError(
                        f"archive {archive}: {len(missing)} classes of wnids.txt have no train folder "
                        f"(e.g. {missing[0]})"
                    )
                _check_images(folder, _wnids(folder))
                if partial and not (allow_partial or synthetic):
                    raise DatasetError(
                        f"archive {archive} holds {counts['classes']} classes, {counts['train']} train and "
                        f"{counts['val']} val images, not the official {OFFICIAL['classes']}, "
                        f"{OFFICIAL['train']:,} and {OFFICIAL['val']:,}; pass --allow-partial to accept a "
                        f"smaller copy"
                    )
                rec = {
                    "counts": counts,
                    "official": OFFICIAL,
                    "partial": partial,
                    "synthetic": synthetic,
                    "source": source or str(archive),
                    "archive": archive.name,
                    "prepared_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                }
                (folder / RECORD).write_text(json.dumps(rec, indent=2))
                publish_dir(folder, target)
    except zipfile.BadZipFile as e:
        raise DatasetError(
            f"archive {archive} is not a readable zip (truncated or corrupted: {e}); "
            "delete it and download again"
        ) from None
    except (EOFError, zlib.error) as e:
        raise DatasetError(
            f"archive {archive} is truncated or corrupted ({type(e).__name__}: {e}); "
            "delete it and download again"
        ) from None
    except DatasetError as e:  # a check of the extracted copy: say which archive, never the temporary folder
        if str(archive) in str(e):
            raise
        raise DatasetError(f"archive {archive}: {e}") from None
    except (
        RuntimeError,
        NotImplementedError,
    ) as e:  # (after DatasetError, a RuntimeError) zipfile's own refusals
        raise DatasetError(f"archive {archive} cannot be extracted here ({first_line(e)})") from None
    except OSError as e:
        raise DatasetError(
            f"archive {archive} cannot be prepared into {target} ({e.strerror or first_line(e)}"
            f"{': ' + Path(e.filename).name if e.filename else ''})"
        ) from None
    if partial:
        log(
            f"note: accepted a partial Tiny ImageNet ({counts['classes']} classes, {counts['train']} train, "
            f"{counts['val']} val; official {OFFICIAL['classes']}, {OFFICIAL['train']:,}, "
            f"{OFFICIAL['val']:,})"
            + (": it is synthetic" if synthetic else " because --allow-partial was given")
        )
    return target


def synthesize(
    root: str | os.PathLike,
    classes: int = 200,
    per_class: int = 10,
    val_per_class: int = 2,
    n_test: int = 20,
    seed: int = 0,
    force: bool = False,
    archive_only: bool = False,
    log: Callable[[str], None] = print,
    progress: Callable[[int, int, str], None] | None = None,
) -> Path:
    """Write ROOT/tiny-imagenet-200.zip (synthetic) and, unless archive_only, prepare it like a download;
    `progress(1, 2, what)` is called once the archive is written.

    Like the CIFAR-10 synth: a real (not synthetic: no SYNTHETIC.json) tiny-imagenet-200 folder, prepared or
    not, or a real tiny-imagenet-200.zip is never deleted nor overwritten, --force or not; --force rewrites an
    existing synthetic copy. Every option is checked first."""
    check_options(classes=classes, per_class=per_class, val_per_class=val_per_class, n_test=n_test, seed=seed)
    root = Path(root)
    target, zpath = root / FOLDER, root / ARCHIVE
    if zpath.exists() or zpath.is_symlink():
        if not zpath.is_file() or zpath.is_symlink() or not is_synthetic_zip(zpath):
            raise DatasetError(
                f"{zpath} is not a synthetic archive (a real download?); refusing to overwrite it "
                "with synthetic data: move it away or choose another --root"
            )
        if not force:
            raise DatasetError(f"{zpath} exists; pass --force to rewrite it")
    if (target.exists() or target.is_symlink()) and not archive_only:
        if not target.is_dir() or target.is_symlink() or not (target / MARKER).is_file():
            raise DatasetError(
                f"{target} holds data that is not a synthetic copy (real Tiny ImageNet?); refusing "
                "to overwrite it with synthetic data: move it away or choose another --root"
            )
        if not force:
            raise DatasetError(f"{target} exists; pass --force to rewrite it")
    images = classes * (per_class + val_per_class) + n_test
    free_space(root, images * 2 * 3000, "synthetic Tiny ImageNet")  # the zip and its prepared copy
    try:
        synthesize_archive(zpath, classes, per_class, val_per_class, n_test, seed)
    except OSError as e:
        raise written_to(zpath, e) from None
    if progress is not None and not archive_only:
        progress(1, 2, f"{zpath.name} written ({images} images)")
    if archive_only:
        return zpath
    if target.exists():
        shutil.rmtree(target)
    return prepare(zpath, root, source="synthetic", log=log)


# ---------------------------------------------------------------- download
def fetch(url: str, dest: Path, timeout: float = 60.0, log: Callable[[str], None] = print) -> Path:
    """Download url to dest, resuming dest.part with an HTTP Range request when it exists.

    A server that ignores Range (200 instead of 206) gets a fresh download. A connection that ends before
    Content-Length bytes leaves dest.part for the next run to resume and raises DatasetError; a write that
    fails (a full disk) leaves dest.part as it found it (checks.copy_download). dest appears only when
    complete.
    """
    part = dest.with_name(dest.name + ".part")
    dest.parent.mkdir(
        parents=True, exist_ok=True
    )  # also when the server sends no Content-Length (no space check)
    if (part.exists() or part.is_symlink()) and (part.is_symlink() or not part.is_file()):  # appending would
        raise DatasetError(
            f"{part} is not a plain file (a link or a folder); remove it and run again"
        )  # go there
    have = part.stat().st_size if part.exists() else 0
    req = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        resp = urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:  # nothing left to send: the part file is already whole
            os.replace(part, dest)
            return dest
        raise DatasetError(f"download of {url} failed: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError) as e:
        raise DatasetError(f"download of {url} failed: {getattr(e, 'reason', e)}") from None
    except http.client.HTTPException as e:  # BadStatusLine and the like: bytes that are not an HTTP answer
        raise DatasetError(
            f"download of {url} failed: the server's answer is not HTTP ({type(e).__name__}); check the URL"
        ) from None
    with resp:
        length = resp.headers.get("Content-Length")
        if length is not None and not length.strip().isdigit():
            raise DatasetError(
                f"download of {url} failed: the server sent Content-Length {length[:40]!r}, not a number "
                "of bytes; check the URL or use another mirror"
            )
        if resp.status == 206:
            expected = (have + int(length)) if length else None
            log(f"resuming {dest.name} at {have:,} bytes")
        else:
            expected, have = int(length) if length else None, 0
        if expected is not None:  # the archive, then about twice its size unpacked and prepared beside it
            free_space(
                dest.parent, (expected - have) + 2 * expected, f"downloading and preparing {dest.name}"
            )
        got = copy_download(resp, part, have, url, dest)
    if expected is not None and got < expected:
        raise DatasetError(
            f"download of {url} broke off at {got:,} of {expected:,} bytes; "
            "run the same command again to resume"
        )
    os.replace(part, dest)
    return dest


def download(
    root: str | os.PathLike,
    url: str | None = None,
    allow_partial: bool = False,
    log: Callable[[str], None] = print,
) -> Path:
    """Fetch (resumably), check, extract, reorganise and count the official archive (or a mirror)."""
    http_url(url)
    root = Path(root)
    if (root / FOLDER / RECORD).is_file():
        log(f"{root / FOLDER} is already prepared ({check(root)}); nothing to do")
        return root / FOLDER
    url = url or URL
    archive = root / ARCHIVE
    with undo_on_failure(root, [FOLDER]):  # a failure leaves no ROOT it made empty (the archive lands whole)
        fetched = not (archive.exists() or archive.is_symlink())
        if fetched:
            fetch(url, archive, log=log)
        try:
            return prepare(archive, root, allow_partial=allow_partial, source=url, log=log)
        except DatasetError as e:
            # only an archive this command downloaded is deleted: one the user put in ROOT is theirs to keep
            if fetched and ("truncated or corrupted" in str(e) or "is corrupted" in str(e)):
                archive.unlink(missing_ok=True)  # a resume cannot repair it; the next run fetches afresh
                raise DatasetError(
                    str(e).replace(
                        "delete it and download again",
                        "it was deleted; run the same command to download it again",
                    )
                ) from None
            raise


def download_kaggle(
    root: str | os.PathLike, dataset: str, allow_partial: bool = False, log: Callable[[str], None] = print
) -> Path:
    """Fetch a Kaggle copy (OWNER/NAME) with the kaggle package, then prepare it like the official zip."""
    if (
        not isinstance(dataset, str)
        or dataset.count("/") != 1
        or not all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", part) for part in dataset.split("/"))
    ):
        raise DatasetError("--source kaggle needs --dataset OWNER/NAME (e.g. akash2sharma/tiny-imagenet)")
    hint = (
        "Kaggle credentials missing or invalid: run `kaggle auth login`, or set KAGGLE_API_TOKEN, "
        "or put kaggle.json in ~/.kaggle/ (or KAGGLE_CONFIG_DIR), or set KAGGLE_USERNAME and KAGGLE_KEY"
    )
    chatter = io.StringIO()  # kaggle prints pages of login help; we say it in one line instead

    def fail(what: str, e: BaseException) -> DatasetError:
        said = chatter.getvalue()
        brief = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        if isinstance(e, SystemExit) or any(
            k in said + brief for k in ("uthenticat", "401", "403", "kaggle.json")
        ):
            return DatasetError(f"{hint} ({what}: {brief})")
        return DatasetError(f"Kaggle {what} failed: {brief}")

    import contextlib

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    with temp_folder(temp_prefix("kaggle"), root) as tmp:
        with contextlib.redirect_stdout(chatter), contextlib.redirect_stderr(chatter):
            try:
                # authenticates at import: OSError (1.x) or SystemExit (2.x) without credentials
                import kaggle
            except ImportError:
                raise DatasetError(
                    "the kaggle package is not installed (pip install kaggle); "
                    "or use the official archive without --source kaggle"
                ) from None
            except (OSError, SystemExit) as e:
                raise fail("import", e) from None
            try:
                kaggle.api.dataset_download_files(dataset, path=str(tmp), unzip=False, quiet=True)
            except (OSError, SystemExit, ValueError) as e:
                raise fail(f"download of {dataset}", e) from None
        zips = sorted(tmp.glob("*.zip"))
        if not zips:
            raise DatasetError(f"Kaggle dataset {dataset} gave no zip archive")
        return prepare(zips[0], root, allow_partial=allow_partial, source=f"kaggle:{dataset}", log=log)


# ---------------------------------------------------------------- loading
def _folder_dataset(path: Path, wnids: list[str], transform):
    from torchvision.datasets import ImageFolder

    class WnidFolder(ImageFolder):
        """ImageFolder whose class list is wnids.txt (sorted), so train and val share indices
        even when a partial copy lacks some class in val."""

        def find_classes(self, directory):
            return wnids, {w: i for i, w in enumerate(wnids)}

    def load(file: str):  # an image damaged after preparation: one line naming it, also from a worker
        from torchvision.datasets.folder import default_loader

        try:
            return default_loader(file)
        except (OSError, ValueError, SyntaxError) as e:
            raise DatasetError(
                f"image {file} does not decode ({type(e).__name__}); the prepared copy is "
                f"damaged: delete {path.parent} and prepare it again"
            ) from None

    return WnidFolder(str(path), transform=transform, loader=load, allow_empty=True)


def wnids(root: str | os.PathLike) -> list[str]:
    return sorted(
        set(readable_text(Path(root) / FOLDER / "wnids.txt", f"{Path(root) / FOLDER / 'wnids.txt'}").split())
    )


def train_set(root: str | os.PathLike, transform=None):
    check(root)
    ds = _folder_dataset(Path(root) / FOLDER / "train", wnids(root), transform)
    if len(ds) == 0:
        raise DatasetError(
            f"Tiny ImageNet in {Path(root) / FOLDER} has no training images; delete it and "
            + PREPARE_HINT.format(root=root)
        )
    return ds


def val_set(root: str | os.PathLike, transform=None):
    check(root)
    return _folder_dataset(Path(root) / FOLDER / "val", wnids(root), transform)


def spread_indices(n_total: int, n: int) -> list[int]:
    """n indices spread evenly over the set: ImageFolder is sorted by class, so the first n would
    be a handful of classes only."""
    n = min(n, n_total)
    return np.linspace(0, n_total - 1, n).round().astype(int).tolist() if n else []
