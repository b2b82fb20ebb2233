"""CIFAR-10 on disk: one parser for real and synthetic copies, the synthesizer, the download.

On-disk format (the one the CIFAR-10 site documents, and torchvision downloads):
ROOT/cifar-10-batches-py/{data_batch_1..5, test_batch, batches.meta}, each a
pickled dict with bytes keys: b'data' (10000 x 3072 uint8: the R, G and B
planes of a 32 x 32 image, row-major), b'labels', b'filenames', b'batch_label';
batches.meta holds b'label_names'. Read with pickle.load(f, encoding="bytes").

    hpml-lab data synth cifar10 --root data      # offline, seconds, same format
    hpml-lab data download cifar10 --root data   # the real one, md5-checked

A synthetic copy carries SYNTHETIC.json (generator, seed, md5 of each file):
its integrity record and the marker that makes every result say "synthetic".
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..io import atomic_file, publish_dir, temp_folder
from .checks import (
    SEED_MAX,
    first_line,
    free_space,
    http_url,
    in_range,
    inside,
    read_cache,
    stamp,
    temp_prefix,
    undo_on_failure,
    write_cache,
    written_to,
)
from .errors import DatasetError

if TYPE_CHECKING:
    import torch

FOLDER = "cifar-10-batches-py"
TRAIN_FILES = [f"data_batch_{i}" for i in range(1, 6)]
TEST_FILES = ["test_batch"]
META_FILE = "batches.meta"
MARKER = "SYNTHETIC.json"
CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2023, 0.1994, 0.2010)
MAX_TRAIN, MAX_TEST = 100_000, 20_000  # synth: twice the real counts (the renderer holds a batch in memory)
PREPARE_HINT = (
    "prepare it with `hpml-lab data synth cifar10 --root {root}` (synthetic, offline) "
    "or `hpml-lab data download cifar10 --root {root}` (the real one)"
)


def md5(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _load_pickle(path: Path) -> dict:
    """One batch file, unpickled. Any failure (unreadable, truncated, a declared length of 2^62 bytes, a
    pickle that raises while it is built) is one DatasetError line naming the file."""
    try:
        with open(path, "rb") as f:
            entry = pickle.load(f, encoding="bytes")
    except OSError as e:
        raise DatasetError(f"CIFAR-10 file {path} cannot be read ({e.strerror or first_line(e)})") from None
    except MemoryError:
        raise DatasetError(
            f"CIFAR-10 file {path} declares more data than memory holds (corrupted or hostile); "
            "delete it and prepare the data again"
        ) from None
    except Exception as e:  # a pickle can raise anything while it is built: it is not a batch file
        raise DatasetError(
            f"CIFAR-10 file {path} is not a readable batch file ({type(e).__name__}: "
            f"{first_line(e)}); delete it and prepare the data again"
        ) from None
    if not isinstance(entry, dict):
        raise DatasetError(f"CIFAR-10 file {path} holds a {type(entry).__name__}, not a batch dictionary")
    # Real (Python 2) and synthetic files both give bytes keys; normalise to str.
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in entry.items()}


def _batch(path: Path) -> tuple[np.ndarray, list[int]]:
    """Images (N x 3 x 32 x 32 uint8) and labels of one batch file, checked: one line naming what is wrong.
    Pixels must be integers 0..255 (int64 1000 would wrap to 232 as uint8; floats may be NaN), labels a
    sequence of N integers 0..9, N at least 1."""
    entry = _load_pickle(path)
    if "data" not in entry or "labels" not in entry:
        raise DatasetError(f"CIFAR-10 file {path} has no 'data' or no 'labels' entry")
    data, labels = entry["data"], entry["labels"]
    if not isinstance(data, np.ndarray):
        raise DatasetError(
            f"CIFAR-10 file {path}: data is a {type(data).__name__}, not an N x 3072 uint8 array"
        )
    if data.dtype.kind not in "ui":
        raise DatasetError(
            f"CIFAR-10 file {path}: data has dtype {data.dtype}, not uint8 pixel values 0..255"
        )
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise DatasetError(f"CIFAR-10 file {path}: data has shape {data.shape}, not N x 3072")
    if data.shape[0] == 0:
        raise DatasetError(f"CIFAR-10 file {path} holds no images; delete it and prepare the data again")
    if data.dtype != np.uint8 and (int(data.min()) < 0 or int(data.max()) > 255):
        raise DatasetError(
            f"CIFAR-10 file {path}: pixel values {int(data.min())}..{int(data.max())} lie outside 0..255"
        )
    if isinstance(labels, np.ndarray) and (labels.ndim != 1 or labels.dtype.kind not in "ui"):
        raise DatasetError(
            f"CIFAR-10 file {path}: labels are a {labels.dtype} array of shape {labels.shape}, "
            "not a list of integers"
        )
    if not isinstance(labels, (list, tuple, np.ndarray)):
        raise DatasetError(
            f"CIFAR-10 file {path}: labels are a {type(labels).__name__}, not a list of integers"
        )
    if len(labels) != data.shape[0]:
        raise DatasetError(f"CIFAR-10 file {path}: {len(labels)} labels for {data.shape[0]} images")
    bad = [
        x
        for x in labels
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or not 0 <= int(x) <= 9
    ]
    if bad:
        raise DatasetError(f"CIFAR-10 file {path}: label {bad[0]!r} is not a class 0..9")
    return data.astype(np.uint8, copy=False).reshape(-1, 3, 32, 32), [int(x) for x in labels]


def _label_names(path: Path) -> list[str]:
    """batches.meta's label_names: ten names (bytes in the official file)."""
    names = _load_pickle(path).get("label_names")
    if (
        not isinstance(names, (list, tuple))
        or len(names) != 10
        or not all(isinstance(n, (str, bytes)) for n in names)
    ):
        what = type(names).__name__ if names is not None else "missing"
        raise DatasetError(f"CIFAR-10 file {path}: label_names is {what}, not a list of 10 class names")
    return [n.decode("latin1") if isinstance(n, bytes) else n for n in names]


CHECKED = ".hpml-checked.json"  # cache of validate(): the files' sizes and times when their contents passed


def validate(root: str | os.PathLike) -> None:
    """Read every batch file and check its contents (shapes, dtypes, pixel and label ranges, counts, class
    names) before any compute; the pass is cached by the files' sizes and times. Batch files that are links
    to outside the folder are refused: a pickle can run code when it is loaded, so only files inside the
    folder the user named are read."""
    folder = Path(root) / FOLDER
    names = TRAIN_FILES + TEST_FILES + [META_FILE]
    for n in names:
        inside(folder, folder / n, "CIFAR-10 file")
    now = stamp(folder, names, "CIFAR-10 file")
    if (read_cache(folder / CHECKED) or {}).get("stamp") == now:
        return
    for n in TRAIN_FILES + TEST_FILES:
        _batch(folder / n)
    _label_names(folder / META_FILE)
    write_cache(folder / CHECKED, {"stamp": now})  # a read-only shared copy: checked again next time


VERIFIED = ".hpml-verified.json"  # cache of the md5 check of a copy without the synthetic marker


def kind(root: str | os.PathLike) -> str:
    """'synthetic' when the folder carries the synthesizer's marker; 'real' only when every file's md5 matches
    the published CIFAR-10 (checked once, cached by file size and time); else 'unverified'."""
    folder = Path(root) / FOLDER
    if (folder / MARKER).is_file():
        return "synthetic"
    names = TRAIN_FILES + TEST_FILES + [META_FILE]
    now = stamp(folder, [n for n in names if (folder / n).is_file()], "CIFAR-10 file")
    cached = read_cache(folder / VERIFIED) or {}
    if cached.get("stamp") == now and cached.get("kind") in ("real", "unverified"):
        return cached["kind"]
    expected = _expected_md5(folder, "real")
    result = (
        "real"
        if len(now) == len(names) and all(md5(folder / n) == expected[n] for n in names)
        else "unverified"
    )
    write_cache(folder / VERIFIED, {"kind": result, "stamp": now})  # read-only: verified again next time
    return result


def check(root: str | os.PathLike, verify_md5: bool = False) -> str:
    """Raise DatasetError (one line, naming the command that prepares it) unless ROOT holds CIFAR-10.

    Returns the kind. With verify_md5, every file is checked against the
    synthetic marker's record or torchvision's list of the official md5s.
    """
    folder = Path(root) / FOLDER
    names = TRAIN_FILES + TEST_FILES + [META_FILE]
    missing = [n for n in names if not (folder / n).exists()]
    if missing:
        what = "not found" if len(missing) == len(names) else f"incomplete (missing {', '.join(missing)})"
        raise DatasetError(f"CIFAR-10 {what} in {folder}; " + PREPARE_HINT.format(root=root))
    odd = [n for n in names if not (folder / n).is_file()]
    if odd:
        raise DatasetError(
            f"CIFAR-10 file {folder / odd[0]} is not a regular file (a folder or a device?); "
            f"delete {folder} and " + PREPARE_HINT.format(root=root)
        )
    k = kind(root)
    if verify_md5:
        expected = _expected_md5(folder, k)
        for name in names:
            if md5(folder / name) != expected[name]:
                raise DatasetError(
                    f"CIFAR-10 file {folder / name} is corrupted (md5 mismatch); delete {folder} and "
                    + PREPARE_HINT.format(root=root)
                )
    validate(root)  # contents, before any compute
    return k


def _expected_md5(folder: Path, k: str) -> dict[str, str]:
    if k == "synthetic":
        try:
            return {n: str(v) for n, v in json.loads((folder / MARKER).read_text())["md5"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise DatasetError(
                f"{folder / MARKER} is not a readable synthetic-data record; delete {folder}"
            ) from None
    from torchvision.datasets import CIFAR10

    return {name: digest for name, digest in CIFAR10.train_list + CIFAR10.test_list} | {
        META_FILE: CIFAR10.meta["md5"]
    }


def read(root: str | os.PathLike, train: bool = True) -> tuple[np.ndarray, list[int], list[str], str]:
    """(images uint8 N x 32 x 32 x 3, labels, class names, kind 'real' or 'synthetic') of the training or the
    test batches, checked first (hpml_lab.data.cifar_files.CIFAR10Files is the Dataset over them)."""
    root = Path(root)
    kind = check(root)
    folder = root / FOLDER
    datas, labels = [], []
    for name in TRAIN_FILES if train else TEST_FILES:
        images, batch_labels = _batch(folder / name)
        datas.append(images)
        labels.extend(batch_labels)
    data = np.ascontiguousarray(np.concatenate(datas).transpose(0, 2, 3, 1))  # N, H, W, C
    return data, labels, _label_names(folder / META_FILE), kind


# ---------------------------------------------------------------- synthesis
def _render_images(labels: np.ndarray, gen: torch.Generator, protos: dict) -> np.ndarray:
    """Images of the given classes: a class stripe pattern (frequency, angle, colour)
    at a random phase, on a smooth random background, with brightness jitter and noise.
    Learnable but not trivial, so loss and accuracy curves move over epochs."""
    import torch  # here, not at the top: the data commands that only check or fetch do without it

    n = len(labels)
    lab = torch.as_tensor(labels)
    yy, xx = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")
    freq, angle, color = protos["freq"][lab], protos["angle"][lab], protos["color"][lab]
    phase = torch.rand(n, generator=gen) * 2 * torch.pi
    coord = xx[None] * torch.cos(angle)[:, None, None] + yy[None] * torch.sin(angle)[:, None, None]
    stripe = torch.sin(2 * torch.pi * freq[:, None, None] * coord / 32 + phase[:, None, None])
    img = 0.16 * stripe[:, None] * color[:, :, None, None]
    coarse = torch.rand(n, 3, 4, 4, generator=gen) - 0.5
    img += 0.45 * torch.nn.functional.interpolate(coarse, size=32, mode="bilinear", align_corners=False)
    img *= 0.7 + 0.6 * torch.rand(n, 1, 1, 1, generator=gen)
    img += 0.5 + 0.08 * torch.randn(n, 3, 32, 32, generator=gen)
    return (img.clamp(0, 1) * 255).round().to(torch.uint8).reshape(n, 3072).numpy()


class _Py2Str(bytes):
    """A Python 2 `str`: pickled with the (SHORT_)BINSTRING opcode, as the official files are."""


class _Py2Pickler(pickle._Pickler):  # the pure-Python pickler lets us add one opcode writer
    dispatch = dict(pickle._Pickler.dispatch)

    def _save_py2str(self, obj: bytes) -> None:
        n = len(obj)
        if n < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([n]) + bytes(obj))
        else:
            self.write(pickle.BINSTRING + n.to_bytes(4, "little") + bytes(obj))
        self.memoize(obj)

    dispatch[_Py2Str] = _save_py2str


def _py2(value):
    if isinstance(value, str):
        return _Py2Str(value.encode("latin1"))
    if isinstance(value, list):
        return [_py2(v) for v in value]
    return value


def _atomic_pickle(obj: dict, path: Path) -> None:
    """Pickle like the official (Python 2) files: str keys and names load as bytes with
    encoding="bytes" and as str with encoding="latin1" (what torchvision uses)."""
    with atomic_file(path) as tmp, open(tmp, "wb") as f:
        _Py2Pickler(f, protocol=2).dump({_py2(k): _py2(v) for k, v in obj.items()})
        f.flush()
        os.fsync(f.fileno())


def synthesize(
    root: str | os.PathLike,
    seed: int = 0,
    n_train: int = 50_000,
    n_test: int = 10_000,
    force: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
) -> Path:
    """Write a synthetic CIFAR-10 in the real format under ROOT/cifar-10-batches-py.

    Deterministic from `seed`. Written into a temporary folder then renamed, so an
    interrupted run leaves nothing half-written. Refuses to overwrite a real copy.
    `progress(n, total, what)` is called as each of the six batch files is written.
    """
    import torch

    in_range("--seed", seed, 0, SEED_MAX)
    in_range("--n-train", n_train, 5, MAX_TRAIN)
    in_range("--n-test", n_test, 1, MAX_TEST)
    root = Path(root)
    target = root / FOLDER
    if target.exists():
        if not (target / MARKER).is_file() and (not target.is_dir() or any(target.iterdir())):
            raise DatasetError(
                f"{target} holds data that is not a synthetic copy (real CIFAR-10?); refusing to "
                "overwrite it with synthetic data"
            )
        if not force:
            raise DatasetError(f"{target} exists; pass --force to rewrite it")
    if n_train % 5:
        raise DatasetError(f"--n-train {n_train} is not a multiple of 5 (five batch files of equal size)")
    gen = torch.Generator().manual_seed(seed)
    protos = {
        "freq": torch.tensor([2.0, 3.0, 4.0, 5.0, 2.5, 3.5, 4.5, 1.5, 5.5, 3.0])[
            torch.randperm(10, generator=gen)
        ],
        "angle": torch.rand(10, generator=gen) * torch.pi,
        "color": torch.nn.functional.normalize(torch.rand(10, 3, generator=gen) * 2 - 1, dim=1),
    }
    free_space(root, (n_train + n_test) * 3200, "synthetic CIFAR-10")
    with temp_folder(temp_prefix("cifar-synth"), root) as tmpdir:
        try:
            per_batch = n_train // 5
            batches = [
                (name, per_batch, f"training batch {i + 1} of 5") for i, name in enumerate(TRAIN_FILES)
            ]
            batches.append(("test_batch", n_test, "testing batch 1 of 1"))
            for n, (name, count, label) in enumerate(batches, 1):
                labels = (torch.arange(count) % 10)[torch.randperm(count, generator=gen)].numpy()
                data = _render_images(labels, gen, protos)
                _atomic_pickle(
                    {
                        "batch_label": label,
                        "labels": [int(x) for x in labels],
                        "data": data,
                        "filenames": [f"synthetic_{CLASSES[c]}_{name}_{i}.png" for i, c in enumerate(labels)],
                    },
                    tmpdir / name,
                )
                if progress is not None:
                    progress(n, len(batches), f"{label} written")
            _atomic_pickle(
                {"num_cases_per_batch": per_batch, "label_names": CLASSES, "num_vis": 3072},
                tmpdir / META_FILE,
            )
            record = {
                "generator": "hpml-lab synthetic CIFAR-10 v1",
                "seed": seed,
                "n_train": n_train,
                "n_test": n_test,
                "md5": {p.name: md5(p) for p in sorted(tmpdir.iterdir())},
                "note": "Synthetic images with learnable class structure; not the real CIFAR-10.",
            }
            (tmpdir / MARKER).write_text(json.dumps(record, indent=2))
            if target.exists():
                shutil.rmtree(target)
            publish_dir(tmpdir, target)
        except OSError as e:  # a full disk: name the target, not the temporary folder
            raise written_to(target, e) from None
    return target


# ---------------------------------------------------------------- download
def download(root: str | os.PathLike, url: str | None = None, timeout: float = 60.0, tries: int = 2) -> Path:
    """Fetch the real CIFAR-10 with torchvision (download=True; archive and files md5-checked).

    `url` points at a mirror serving the same cifar-10-python.tar.gz. Every network read gives up after
    `timeout` seconds without data (a stalled mirror), and the download is tried `tries` times.
    """
    import socket

    from torchvision.datasets import CIFAR10

    http_url(url)
    root = Path(root)
    if (root / FOLDER / MARKER).exists():
        raise DatasetError(f"{root / FOLDER} holds synthetic data; choose another --root or delete it first")
    cls = CIFAR10 if url is None else type("CIFAR10Mirror", (CIFAR10,), {"url": url})
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(timeout)  # torchvision's urlopen sets none of its own
    try:
        with undo_on_failure(root, [cls.filename, FOLDER]):  # a failure leaves no archive or ROOT it made
            for attempt in range(1, tries + 1):
                try:
                    cls(str(root), train=True, download=True)
                    break
                except RuntimeError as e:  # torchvision: "Dataset not found or corrupted..."
                    raise DatasetError(f"CIFAR-10 download into {root} failed the md5 check: {e}") from None
                except TimeoutError:
                    if attempt == tries:
                        raise DatasetError(
                            f"CIFAR-10 download from {cls.url}: no data for {timeout:g} s, {tries} "
                            "tries (a stalled server); try later or pass --url with a mirror"
                        ) from None
                except OSError as e:
                    raise DatasetError(f"CIFAR-10 download from {cls.url} failed: {e}") from None
                except (http.client.HTTPException, ValueError) as e:  # not HTTP, a Content-Length of 'abc'
                    raise DatasetError(
                        f"CIFAR-10 download from {cls.url} failed: the server's answer is not valid HTTP "
                        f"({type(e).__name__}: {first_line(e)[:80]})"
                    ) from None
    finally:
        socket.setdefaulttimeout(previous)
    check(root, verify_md5=True)
    return root / FOLDER
