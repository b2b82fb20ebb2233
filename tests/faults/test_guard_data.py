"""Issue 22, the data layer: hostile and faulty datasets and `hpml-lab data` options, driven through the real
CLI where a user would meet them. Each case ends in one line on stderr and exit status 2 (or the documented
behaviour), before any compute, with nothing that was complete changed."""

import io
import os
import pickle
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from test_guard_reports import NO_BYTECODE, _limited  # the file-size limit a full disk is simulated with

from hpml_lab.config import RunConfig
from hpml_lab.data import cifar
from hpml_lab.data import tinyimagenet as tin
from hpml_lab.report import cli


def _one_line_exit_2(argv, capsys, *needles):
    rc = cli.main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("hpml-lab: error: ") and err.strip().count("\n") == 0, err
    for needle in needles:
        assert needle in err, err
    assert "Traceback" not in err and "/.cifar-synth-" not in err and "/.tinyimagenet-extract-" not in err
    return err


def _snapshot(root: Path) -> dict:
    """Every file under root (hidden ones included) with its bytes: what 'nothing changed' compares."""
    return {
        p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
        for p in sorted(root.rglob("*"))
    }


# ------------------------------------------------------------------ malformed CIFAR-10 batches
@pytest.fixture
def cifar_copy(cifar_root, tmp_path):
    """A copy of the session's synthetic CIFAR-10 without its marker: what a user's 'real' copy looks like."""
    shutil.copytree(cifar_root / cifar.FOLDER, tmp_path / cifar.FOLDER)
    (tmp_path / cifar.FOLDER / cifar.MARKER).unlink()
    for cache in (tmp_path / cifar.FOLDER).glob(".hpml-*"):
        cache.unlink()
    return tmp_path


def _edit_batch(path: Path, edit) -> None:
    entry = pickle.loads(path.read_bytes(), encoding="bytes")
    path.write_bytes(pickle.dumps(edit(entry)))


def _n(e):
    return len(e[b"labels"])


BATCH_EDITS = {
    "data of strings": (lambda e: {**e, b"data": np.full((_n(e), 3072), "x")}, "dtype <U1"),
    "data of objects": (lambda e: {**e, b"data": np.empty((_n(e), 3072), dtype=object)}, "dtype object"),
    "data a list": (lambda e: {**e, b"data": e[b"data"].tolist()}, "data is a list"),
    "data a string": (lambda e: {**e, b"data": "pixels"}, "data is a str"),
    "labels an int": (lambda e: {**e, b"labels": 5}, "labels are a int"),
    "labels a dict": (lambda e: {**e, b"labels": {0: 1}}, "labels are a dict"),
    "labels bytes": (lambda e: {**e, b"labels": bytes(_n(e))}, "labels are a bytes"),
    "labels a 2-d array": (
        lambda e: {**e, b"labels": np.zeros((_n(e), 2), np.int64)},
        "not a list of integers",
    ),
    "pixels 1000 (int64)": (lambda e: {**e, b"data": e[b"data"].astype(np.int64) + 1000}, "outside 0..255"),
    "pixels negative": (lambda e: {**e, b"data": e[b"data"].astype(np.int16) - 1}, "outside 0..255"),
    "NaN pixels": (lambda e: {**e, b"data": np.full((_n(e), 3072), np.nan)}, "dtype float64"),
    "label 10": (lambda e: {**e, b"labels": [10] + list(e[b"labels"][1:])}, "label 10 is not a class 0..9"),
    "label -1": (lambda e: {**e, b"labels": [-1] + list(e[b"labels"][1:])}, "label -1 is not a class"),
    "label True": (lambda e: {**e, b"labels": [True] + list(e[b"labels"][1:])}, "label True is not a class"),
    "label 3.0": (lambda e: {**e, b"labels": [3.0] + list(e[b"labels"][1:])}, "label 3.0 is not a class"),
    "empty batch": (
        lambda e: {**e, b"data": np.zeros((0, 3072), np.uint8), b"labels": []},
        "holds no images",
    ),
    "not a dict": (lambda e: [e], "holds a list, not a batch dictionary"),
}


@pytest.mark.parametrize("case", list(BATCH_EDITS))
def test_malformed_cifar_batch_is_refused_before_compute(cifar_copy, capsys, case):
    edit, message = BATCH_EDITS[case]
    _edit_batch(cifar_copy / cifar.FOLDER / "data_batch_1", edit)
    before = _snapshot(cifar_copy)
    _one_line_exit_2(
        ["run", "c1", "--profile", "tiny", "-p", f"data_root={cifar_copy}"], capsys, "data_batch_1", message
    )
    after = _snapshot(cifar_copy)
    after.pop(f"{cifar.FOLDER}/{cifar.VERIFIED}", None)  # the md5 cache may say 'unverified': true
    assert after == before  # no file changed, no cache claims the contents passed


def test_all_batches_empty_is_refused(cifar_copy, capsys):
    for name in cifar.TRAIN_FILES + cifar.TEST_FILES:
        _edit_batch(
            cifar_copy / cifar.FOLDER / name,
            lambda e: {**e, b"data": np.zeros((0, 3072), np.uint8), b"labels": []},
        )
    from hpml_lab.__main__ import main as train_main

    rc = train_main(["--data-root", str(cifar_copy), "--epochs", "1", "--max-batches", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and "holds no images" in err and err.strip().count("\n") == 0


META_EDITS = {
    "no label_names": (
        lambda e: {k: v for k, v in e.items() if k != b"label_names"},
        "label_names is missing",
    ),
    "label_names a number": (lambda e: {**e, b"label_names": 7}, "label_names is int"),
    "three label_names": (
        lambda e: {**e, b"label_names": e[b"label_names"][:3]},
        "not a list of 10 class names",
    ),
    "label_names of ints": (lambda e: {**e, b"label_names": list(range(10))}, "not a list of 10 class names"),
}


@pytest.mark.parametrize("case", list(META_EDITS))
def test_malformed_batches_meta_is_refused(cifar_copy, capsys, case):
    edit, message = META_EDITS[case]
    _edit_batch(cifar_copy / cifar.FOLDER / cifar.META_FILE, edit)
    _one_line_exit_2(
        ["run", "c1", "--profile", "tiny", "-p", f"data_root={cifar_copy}"], capsys, "batches.meta", message
    )


HUGE = 2**62
RAW_PICKLES = {  # bytes written as data_batch_2, what the one line says
    "declared length 2^62 (BINBYTES8)": (
        b"\x80\x04\x8e" + struct.pack("<Q", HUGE) + b"abc",
        "more data than memory",
    ),
    "declared length 2^62 (BINUNICODE8)": (
        b"\x80\x04\x8d" + struct.pack("<Q", HUGE) + b"abc",
        "more data than",
    ),
    "truncated": (None, "not a readable batch file"),
    "empty file": (b"", "EOFError"),
    "a reduce that raises": (b"cbuiltins\nint\n(S'x'\ntR.", "ValueError"),
    "unknown global": (b"cno_such_module\nthing\n.", "not a readable batch file"),
    "200,000 nested lists": (b"(" * 200_000 + b"l" * 200_000 + b".", "holds a list"),
}


@pytest.mark.parametrize("case", list(RAW_PICKLES))
def test_hostile_pickle_is_one_line(cifar_copy, capsys, case):
    raw, message = RAW_PICKLES[case]
    path = cifar_copy / cifar.FOLDER / "data_batch_2"
    path.write_bytes(path.read_bytes()[:5000] if raw is None else raw)
    _one_line_exit_2(
        ["run", "c1", "--profile", "tiny", "-p", f"data_root={cifar_copy}"], capsys, "data_batch_2", message
    )


def test_batch_file_that_is_a_folder_or_a_link_outside(cifar_copy, tmp_path_factory, capsys):
    folder = cifar_copy / cifar.FOLDER
    outside = tmp_path_factory.mktemp("elsewhere") / "data_batch_3"
    shutil.move(folder / "data_batch_3", outside)
    (folder / "data_batch_3").symlink_to(outside)
    _one_line_exit_2(
        ["run", "c1", "--profile", "tiny", "-p", f"data_root={cifar_copy}"], capsys, "is a link to", "outside"
    )
    (folder / "data_batch_3").unlink()
    (folder / "data_batch_3").mkdir()
    _one_line_exit_2(
        ["run", "c1", "--profile", "tiny", "-p", f"data_root={cifar_copy}"],
        capsys,
        "data_batch_3 is not a regular file",
    )


def test_a_link_inside_the_folder_is_read(cifar_copy):
    folder = cifar_copy / cifar.FOLDER
    shutil.move(folder / "data_batch_4", folder / "kept")
    (folder / "data_batch_4").symlink_to("kept")
    assert cifar.check(cifar_copy) == "unverified"


@pytest.mark.skipif(os.geteuid() == 0, reason="runs as root (CI): chmod 000 does not stop root from reading")
@pytest.mark.parametrize("what", ["file", "folder"])
def test_unreadable_cifar_is_one_line(cifar_copy, capsys, what):
    target = cifar_copy / cifar.FOLDER / ("data_batch_1" if what == "file" else "")
    target.chmod(0)
    try:
        _one_line_exit_2(
            ["run", "c1", "--profile", "tiny", "-p", f"data_root={cifar_copy}"], capsys, "cannot be read"
        )
    finally:
        target.chmod(0o755)


def test_valid_batches_pass_and_the_pass_is_cached(cifar_copy):
    assert cifar.check(cifar_copy) == "unverified"
    assert (cifar_copy / cifar.FOLDER / cifar.CHECKED).is_file()
    _edit_batch(cifar_copy / cifar.FOLDER / "test_batch", lambda e: {**e, b"labels": [11] * _n(e)})
    with pytest.raises(cifar.DatasetError, match="label 11"):  # a changed file is checked again
        cifar.check(cifar_copy)


# ------------------------------------------------------------------ Tiny ImageNet archives
@pytest.fixture(scope="module")
def small_zip(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("tin") / tin.ARCHIVE
    tin.synthesize_archive(path, classes=3, per_class=3, val_per_class=2, n_test=1, seed=0)
    return path.read_bytes()


def _rewrite(data: bytes, edit, extra=()) -> bytes:
    """The archive with each member passed through edit(name, blob) -> (name, blob) or None (dropped)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            got = edit(info.filename, src.read(info))
            if got is not None:
                dst.writestr(got[0], got[1])
        for name, blob in extra:
            dst.writestr(name, blob)
    return out.getvalue()


def _patch_central(data: bytes, member: str, offset: int, value: bytes) -> bytes:
    """Overwrite bytes of one member's central-directory record (what zipfile trusts)."""
    buf = bytearray(data)
    at = buf.find(b"PK\x01\x02")
    while at >= 0:
        n = struct.unpack("<H", buf[at + 28 : at + 30])[0]
        if buf[at + 46 : at + 46 + n].decode() == member:
            buf[at + offset : at + offset + len(value)] = value
            return bytes(buf)
        at = buf.find(b"PK\x01\x02", at + 4)
    raise AssertionError(member)


def _jpeg_with_size(w: int, h: int) -> bytes:
    """A real JPEG whose frame header (SOF0) is rewritten to declare w x h pixels."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (9, 9, 9)).save(buf, format="JPEG")
    raw = bytearray(buf.getvalue())
    sof = raw.find(b"\xff\xc0")
    raw[sof + 5 : sof + 9] = struct.pack(">HH", h, w)
    return bytes(raw)


def _png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (64, 64)).save(buf, format="PNG")
    return buf.getvalue()


T = "tiny-imagenet-200/"


def _first_train(name):
    return name.endswith("_1.JPEG") and "/train/" in name


ARCHIVE_CASES = {  # crafted archive, what the one line says
    "non-UTF-8 wnids.txt": (
        lambda d: _rewrite(d, lambda n, b: (n, b"\xff" + b) if n.endswith("wnids.txt") else (n, b)),
        "wnids.txt is not UTF-8",
    ),
    "non-UTF-8 val_annotations": (
        lambda d: _rewrite(
            d,
            lambda n, b: (
                (n, b.replace(b"\t0\t", b"\t\xe9\t", 1)) if n.endswith("val_annotations.txt") else (n, b)
            ),
        ),
        "not UTF-8",
    ),
    "encrypted member": (lambda d: _patch_central(d, T + "wnids.txt", 8, struct.pack("<H", 1)), "encrypted"),
    "deflate64 member": (
        lambda d: _patch_central(d, T + "wnids.txt", 10, struct.pack("<H", 9)),
        "compression method 9",
    ),
    "text named .JPEG": (
        lambda d: _rewrite(d, lambda n, b: (n, b"not an image") if _first_train(n) else (n, b)),
        "is not an image",
    ),
    "PNG named .JPEG": (
        lambda d: _rewrite(d, lambda n, b: (n, _png()) if _first_train(n) else (n, b)),
        "is a PNG",
    ),
    "truncated JPEG": (
        lambda d: _rewrite(d, lambda n, b: (n, b[: len(b) // 3]) if _first_train(n) else (n, b)),
        "does not decode",
    ),
    "decompression bomb": (
        lambda d: _rewrite(d, lambda n, b: (n, _jpeg_with_size(60000, 60000)) if _first_train(n) else (n, b)),
        "decompression bomb",
    ),
    "JPEG of 4096 x 4096": (
        lambda d: _rewrite(d, lambda n, b: (n, _jpeg_with_size(4096, 4096)) if _first_train(n) else (n, b)),
        "not a 64 x 64 JPEG",
    ),
    "duplicated wnid": (
        lambda d: _rewrite(
            d, lambda n, b: (n, b + b.split(b"\n")[0] + b"\n") if n.endswith("wnids.txt") else (n, b)
        ),
        "twice",
    ),
    "duplicate member names": (
        lambda d: _rewrite(d, lambda n, b: (n, b), extra=[(T + "wnids.txt", b"n1\n")]),
        "more than once",
    ),
    "zip bomb (7.5 GiB declared)": (
        lambda d: _patch_central(
            _patch_central(d, T + "wnids.txt", 24, b"\0\0\0\xf0"), T + "words.txt", 24, b"\0\0\0\xf0"
        ),
        "zip bomb",
    ),
    "a folder named .JPEG": (
        lambda d: _rewrite(d, lambda n, b: (n, b), extra=[(T + "train/n90000001/images/z.JPEG/x", b"1")]),
        "z.JPEG is not an image",
    ),
    "a 301-character wnid": (
        lambda d: _rewrite(
            d,
            lambda n, b: (
                n.replace("n90000000", "n" + "9" * 300),
                b.replace(b"n90000000", b"n" + b"9" * 300),
            ),
        ),
        "File name too long",
    ),
    "a val image annotated twice": (
        lambda d: _rewrite(
            d,
            lambda n, b: (n, b + b.split(b"\n")[0] + b"\n") if n.endswith("val_annotations.txt") else (n, b),
        ),
        "twice",
    ),
    "empty class folder": (
        lambda d: _rewrite(d, lambda n, b: None if "/train/n90000001/images/" in n else (n, b)),
        "have no training images",
    ),
}


@pytest.mark.filterwarnings("ignore:Duplicate name")
@pytest.mark.parametrize("case", list(ARCHIVE_CASES))
def test_hostile_tiny_imagenet_archive_is_refused(small_zip, tmp_path, capsys, case):
    craft, message = ARCHIVE_CASES[case]
    root = tmp_path / "root"
    root.mkdir()
    (root / tin.ARCHIVE).write_bytes(craft(small_zip))  # an archive in ROOT is prepared, not fetched
    before = _snapshot(root)
    _one_line_exit_2(
        ["data", "download", "tinyimagenet", "--root", root], capsys, message, str(root / tin.ARCHIVE)
    )
    assert _snapshot(root) == before  # nothing extracted, no hidden folder left


def test_archive_that_is_a_folder_is_one_line(tmp_path, capsys):
    (tmp_path / tin.ARCHIVE).mkdir()
    _one_line_exit_2(["data", "download", "tinyimagenet", "--root", tmp_path], capsys, tin.ARCHIVE)


@pytest.mark.parametrize("variant", ["CRLF text files", "a non-ASCII wnid"])
def test_harmless_archive_variants_prepare(small_zip, tmp_path, variant):
    if variant == "CRLF text files":
        blob = _rewrite(
            small_zip, lambda n, b: (n, b.replace(b"\n", b"\r\n")) if n.endswith(".txt") else (n, b)
        )
    else:
        blob = _rewrite(
            small_zip,
            lambda n, b: (n.replace("n90000000", "n9\u00e9"), b.replace(b"n90000000", "n9\u00e9".encode())),
        )
    (tmp_path / tin.ARCHIVE).write_bytes(blob)
    tin.download(tmp_path, log=lambda s: None)
    assert tin.record(tmp_path)["counts"] == {"classes": 3, "train": 9, "val": 6}


def test_prepared_record_counts_only_classes_that_exist(small_zip, tmp_path):
    (tmp_path / tin.ARCHIVE).write_bytes(small_zip)
    tin.download(tmp_path, log=lambda s: None)
    assert tin.record(tmp_path)["counts"] == {"classes": 3, "train": 9, "val": 6}
    assert len(tin.wnids(tmp_path)) == 3


@pytest.mark.parametrize(
    "damage",
    [
        "PREPARED.json not JSON",
        "PREPARED.json a list",
        "train/ removed",
        "no training images",
        "wnids.txt not UTF-8",
    ],
)
def test_a_prepared_copy_damaged_later_is_one_line(small_zip, tmp_path, damage):
    from hpml_lab.config import RunConfig
    from hpml_lab.data import train_dataset

    (tmp_path / tin.ARCHIVE).write_bytes(small_zip)
    folder = tin.download(tmp_path, log=lambda s: None)
    if damage == "PREPARED.json not JSON":
        (folder / tin.RECORD).write_text("{")
    elif damage == "PREPARED.json a list":
        (folder / tin.RECORD).write_text("[]")
    elif damage == "train/ removed":
        shutil.rmtree(folder / "train")
    elif damage == "no training images":
        for f in (folder / "train").glob("*/images/*.JPEG"):
            f.unlink()
    else:
        (folder / "wnids.txt").write_bytes(b"\xff\n")
    with pytest.raises(tin.DatasetError) as err:
        train_dataset(RunConfig(dataset="tinyimagenet", data_root=str(tmp_path)))
    assert str(folder) in str(err.value) and "\n" not in str(err.value)


# ------------------------------------------------------------------ synth never overwrites real data
def _real_folder(root: Path, prepared: bool) -> None:
    (root / tin.FOLDER / "train").mkdir(parents=True)
    (root / tin.FOLDER / "wnids.txt").write_text("n01443537\n")
    if prepared:
        (root / tin.FOLDER / tin.RECORD).write_text('{"counts": {}}')


@pytest.mark.parametrize("state", ["real unprepared folder", "real prepared folder", "a file in its place"])
@pytest.mark.parametrize("force", [[], ["--force"]])
def test_tiny_synth_keeps_a_real_folder(tmp_path, capsys, state, force):
    if state == "a file in its place":
        (tmp_path / tin.FOLDER).write_text("mine")
    else:
        _real_folder(tmp_path, prepared=state == "real prepared folder")
    before = _snapshot(tmp_path)
    _one_line_exit_2(
        ["data", "synth", "tinyimagenet", "--root", tmp_path, "--classes", 2, "--per-class", 1, *force],
        capsys,
        "not a synthetic copy",
        str(tmp_path / tin.FOLDER),
    )
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("archive_only", [[], ["--archive-only"]])
@pytest.mark.parametrize("force", [[], ["--force"]])
@pytest.mark.parametrize("real", ["official-like zip", "not a zip"])
def test_tiny_synth_keeps_a_real_archive(small_zip, tmp_path, capsys, archive_only, force, real):
    blob = (
        _rewrite(small_zip, lambda n, b: None if n.endswith(tin.MARKER) else (n, b))
        if real != "not a zip"
        else b"my thesis data"
    )
    (tmp_path / tin.ARCHIVE).write_bytes(blob)
    _one_line_exit_2(
        [
            "data",
            "synth",
            "tinyimagenet",
            "--root",
            tmp_path,
            "--classes",
            2,
            "--per-class",
            1,
            *archive_only,
            *force,
        ],
        capsys,
        "not a synthetic archive",
        str(tmp_path / tin.ARCHIVE),
    )
    assert (tmp_path / tin.ARCHIVE).read_bytes() == blob and not (tmp_path / tin.FOLDER).exists()


def test_tiny_synth_rewrites_a_synthetic_copy_only_with_force(tmp_path, capsys):
    argv = [
        "data",
        "synth",
        "tinyimagenet",
        "--root",
        tmp_path,
        "--classes",
        2,
        "--per-class",
        1,
        "--seed",
        1,
    ]
    assert cli.main([str(a) for a in argv]) == 0
    first = (tmp_path / tin.ARCHIVE).read_bytes()
    _one_line_exit_2(argv[:-1] + [2], capsys, "pass --force")
    _one_line_exit_2(argv[:-1] + [2, "--archive-only"], capsys, "pass --force")
    assert (tmp_path / tin.ARCHIVE).read_bytes() == first
    assert cli.main([str(a) for a in argv[:-1] + [2, "--force"]]) == 0
    assert (tmp_path / tin.ARCHIVE).read_bytes() != first and tin.check(tmp_path) == "synthetic"


def test_cifar_synth_keeps_a_real_copy(cifar_copy, capsys):
    before = _snapshot(cifar_copy)
    _one_line_exit_2(
        ["data", "synth", "cifar10", "--root", cifar_copy, "--force", "--n-train", 50, "--n-test", 10],
        capsys,
        "not a synthetic copy",
    )
    assert _snapshot(cifar_copy) == before


# ------------------------------------------------------------------ every numeric option has a range
# one case a line: the `data` arguments (shell quoting) | a part of the one-line error they get
OPTIONS = [
    (shlex.split(args), message)
    for args, message in (
        line.split(" | ", 1)
        for line in """
synth cifar10 --seed 1e23                             | --seed must be a whole number
synth cifar10 --seed 100000000000000000000000         | --seed 1e+23 is out of range
synth cifar10 --seed -1                               | --seed -1 is out of range
synth cifar10 --seed \u0663                           | --seed must be a whole number
synth cifar10 --n-train 5e12                          | --n-train must be a whole number
synth cifar10 --n-train 5000000000000                 | --n-train 5,000,000,000,000 is out of range
synth cifar10 --n-train -5                            | --n-train -5 is out of range
synth cifar10 --n-train 7                             | not a multiple of 5
synth cifar10 --n-test 0                              | --n-test 0 is out of range
synth cifar10 --n-test nan                            | --n-test must be a whole number
synth tinyimagenet --classes 0                        | --classes 0 is out of range
synth tinyimagenet --classes 201                      | --classes 201 is out of range
synth tinyimagenet --per-class 0                      | --per-class 0 is out of range
synth tinyimagenet --per-class 1000000000             | --per-class 1,000,000,000 is out of range
synth tinyimagenet --val-per-class -1                 | --val-per-class -1 is out of range
synth tinyimagenet --n-test-images -1                 | --n-test-images -1 is out of range
synth tinyimagenet --seed inf                         | --seed must be a whole number
download cifar10 --url notaurl                        | --url 'notaurl' is not an http:// or https:// URL
download cifar10 --url file:///etc/passwd             | is not an http:// or https:// URL
download tinyimagenet --url file:///etc/passwd        | is not an http:// or https:// URL
download tinyimagenet --url ftp://example.org/t.zip   | is not an http:// or https:// URL
download tinyimagenet --url http://                   | is not an http:// or https:// URL with a host
download tinyimagenet --url http://host:port/x        | is not a URL
download tinyimagenet --url 'http://a b/x'            | no spaces
synth cifar10 --url http://example.org/x              | --url applies to `data download` only
download tinyimagenet --source kaggle --dataset ../x  | needs --dataset OWNER/NAME
download tinyimagenet --source kaggle --dataset a/b/c | needs --dataset OWNER/NAME
""".strip().splitlines()
    )
]


@pytest.mark.parametrize("argv, message", OPTIONS, ids=[" ".join(a) for a, _ in OPTIONS])
def test_data_options_out_of_range_are_one_line(tmp_path, capsys, argv, message):
    root = tmp_path / "root"
    _one_line_exit_2(["data", *argv, "--root", root], capsys, message)
    assert not root.exists()  # checked before anything is written


def test_root_that_is_a_file_is_one_line(tmp_path, capsys):
    (tmp_path / "f").write_text("mine")
    _one_line_exit_2(
        ["data", "synth", "cifar10", "--root", tmp_path / "f"], capsys, "is a file, not a folder"
    )
    assert (tmp_path / "f").read_text() == "mine"


# ------------------------------------------------------------------ SIGTERM and Ctrl-C leave no temporary
# folder
def _temporaries(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith("."))


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv, appears, sig",
    [
        (["synth", "cifar10"], ".cifar-synth-", signal.SIGTERM),
        (["synth", "cifar10"], ".cifar-synth-", signal.SIGINT),
        (
            ["synth", "tinyimagenet", "--classes", "60", "--per-class", "20"],
            ".tiny-imagenet-200.zip.",
            signal.SIGTERM,
        ),
        (
            ["synth", "tinyimagenet", "--classes", "60", "--per-class", "20"],
            ".tinyimagenet-extract-",
            signal.SIGINT,
        ),
    ],
    ids=["cifar-TERM", "cifar-INT", "tin-archive-TERM", "tin-extract-INT"],
)
def test_signal_during_synth_leaves_no_temporary_folder(tmp_path, argv, appears, sig):
    root = tmp_path / "root"
    root.mkdir()
    proc = _data_cli([*argv, "--root", root], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while not any(n.startswith(appears) for n in _temporaries(root)):
        assert proc.poll() is None and time.monotonic() < deadline, f"{appears} never appeared"
        time.sleep(0.01)
    if appears == ".tiny-imagenet-200.zip.":
        time.sleep(
            0.2
        )  # past io.atomic_file's mkstemp, whose name is not yet held for clean-up (see the report)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, err
    assert err.strip().count("\n") == 0 and str(root) in err and "/." not in err, err
    assert _temporaries(root) == []
    assert not (root / cifar.FOLDER).exists() and not (root / tin.FOLDER).exists()


# ------------------------------------------------------------------ a full disk
@pytest.mark.parametrize("dataset", ["cifar10", "tinyimagenet"])
def test_too_little_free_space_is_refused_up_front(tmp_path, capsys, monkeypatch, dataset):
    import collections

    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10**9, 10**9 - 10**6, 10**6))  # 1 MB free
    _one_line_exit_2(["data", "synth", dataset, "--root", tmp_path], capsys, "MB free", str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_disk_full_mid_synth_names_the_target_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    import errno

    real = cifar._atomic_pickle

    def fill_up(obj, path):
        if path.name == "data_batch_3":  # the disk fills while the third batch is written
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real(obj, path)

    monkeypatch.setattr(cifar, "_atomic_pickle", fill_up)
    err = _one_line_exit_2(
        ["data", "synth", "cifar10", "--root", tmp_path, "--n-train", 50, "--n-test", 10],
        capsys,
        "No space left on device",
        str(tmp_path / cifar.FOLDER),
    )
    assert "data_batch_3" not in err and list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ issue 30: files planted in a shared data
# folder
def _tin_copy(small_zip, root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / tin.ARCHIVE).write_bytes(small_zip)
    tin.prepare(root / tin.ARCHIVE, root, log=lambda m: None)
    return root


def _refresh(dataset, root):
    """What a run does with its data folder: the check (contents and kind, cached) and the fingerprint."""
    from types import SimpleNamespace

    from hpml_lab.data import check_dataset, fingerprint

    cfg = SimpleNamespace(dataset=dataset, data_path=lambda: Path(root))
    check_dataset(cfg)
    return fingerprint(cfg)


CACHES = {  # dataset, cache file, folder
    "checked": ("cifar10", cifar.CHECKED),
    "verified": ("cifar10", cifar.VERIFIED),
    "cifar fingerprint": ("cifar10", ".hpml-fingerprint.json"),
    "tinyimagenet fingerprint": ("tinyimagenet", ".hpml-fingerprint.json"),
}


@pytest.mark.parametrize("case", list(CACHES))
@pytest.mark.parametrize("plant", ["link to a file", "dangling link", "fifo", "link to /dev/zero"])
def test_a_cache_file_planted_in_the_data_folder_is_refused_never_written_through(
    case, plant, cifar_copy, small_zip, tmp_path
):
    """Issue 30: a link in place of a cache made the next run overwrite the file it names with the cache's
    JSON; a FIFO blocked the run for ever; /dev/zero read until memory ran out. Each is one line, nothing
    written."""
    from hpml_lab.data import DatasetError
    from hpml_lab.data import checks as dchecks

    dataset, name = CACHES[case]
    root = cifar_copy if dataset == "cifar10" else _tin_copy(small_zip, tmp_path / "tin")
    folder = root / (cifar.FOLDER if dataset == "cifar10" else tin.FOLDER)
    _refresh(dataset, root)  # the caches exist, as in any used folder
    dchecks._FINGERPRINTS.clear()
    (folder / name).unlink()
    victim = tmp_path / "victim.txt"
    victim.write_text("a classmate's file")
    if plant == "link to a file":
        (folder / name).symlink_to(victim)
    elif plant == "dangling link":
        (folder / name).symlink_to(tmp_path / "made-by-the-run")
    elif plant == "fifo":
        os.mkfifo(folder / name)
    else:
        (folder / name).symlink_to("/dev/zero")
    (
        folder / cifar.TRAIN_FILES[0]
    ).touch() if dataset == "cifar10" else None  # the stamp moved: caches rewritten
    got = []

    def attempt():  # in a thread: a FIFO once blocked the read for ever, /dev/zero read until memory ran out
        try:
            _refresh(dataset, root)
            got.append(None)
        except DatasetError as e:
            got.append(e)

    import threading

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(30)
    assert got and isinstance(got[0], DatasetError), "no one-line refusal within 30 s"
    msg = str(got[0])
    assert "\n" not in msg and str(folder / name) in msg and ("is a link" in msg or "not a regular" in msg), (
        msg
    )
    assert victim.read_text() == "a classmate's file"
    assert not (tmp_path / "made-by-the-run").exists()
    assert (folder / name).is_symlink() or plant == "fifo"  # left as it was: the user removes it


@pytest.mark.parametrize("cache", [cifar.CHECKED, ".hpml-fingerprint.json"])
def test_the_cache_functions_themselves_never_write_through_a_link(cache, cifar_copy, tmp_path):
    """Below the run's up-front check: validate() and content_fingerprint() refuse the link on their own."""
    from hpml_lab.data import DatasetError
    from hpml_lab.data import checks as dchecks

    folder = cifar_copy / cifar.FOLDER
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (folder / cache).symlink_to(victim)
    names = cifar.TRAIN_FILES + cifar.TEST_FILES + [cifar.META_FILE]
    dchecks._FINGERPRINTS.clear()
    with pytest.raises(DatasetError, match="is a link"):
        cifar.validate(cifar_copy) if cache == cifar.CHECKED else dchecks.content_fingerprint(
            folder, names, "f"
        )
    assert victim.read_text() == "keep"


def test_a_run_with_a_planted_cache_link_stops_before_its_kernel(cifar_copy, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path / "out"))
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (cifar_copy / cifar.FOLDER / ".hpml-fingerprint.json").symlink_to(victim)
    _one_line_exit_2(
        ["run", "c1", "--profile", "tiny", "-p", f"data_root={cifar_copy}"],
        capsys,
        "is a link",
        "fingerprint",
    )
    assert victim.read_text() == "keep" and not list((tmp_path / "out" / "reports").rglob("*.ipynb"))


@pytest.mark.parametrize("damage", ["crc error", "cut short"])
def test_a_zip_the_user_put_in_root_is_never_deleted(damage, small_zip, tmp_path, capsys):
    """Issue 30: `data download --allow-partial` deleted a damaged Tiny ImageNet zip the user had put in ROOT
    (only an archive the command downloaded itself is removed so that a rerun fetches it afresh)."""
    blob = bytearray(small_zip)
    if damage == "cut short":
        blob = blob[: len(blob) * 2 // 3]
    else:
        at = blob.find(
            b"\xff\xd8\xff"
        )  # inside the first stored JPEG: the directory is intact, its CRC is not
        blob[at + 40 : at + 60] = bytes(b ^ 0xFF for b in blob[at + 40 : at + 60])
    root = tmp_path / "root"
    root.mkdir()
    (root / tin.ARCHIVE).write_bytes(bytes(blob))
    err = _one_line_exit_2(
        ["data", "download", "tinyimagenet", "--root", root, "--allow-partial"],
        capsys,
        str(root / tin.ARCHIVE),
    )
    assert "was deleted" not in err
    assert (root / tin.ARCHIVE).read_bytes() == bytes(blob)


# ------------------------------------------------------------------ issue 30: servers that do not speak HTTP
def _raw_server(answer: bytes) -> str:
    """A server on 127.0.0.1 that answers every connection with `answer`, raw, then closes (for 20 s at
    most)."""
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(20)

    def serve():
        try:
            while True:
                conn, _ = srv.accept()
                with conn:
                    conn.settimeout(5)
                    try:
                        conn.recv(65536)
                        conn.sendall(answer)
                    except OSError:
                        pass
        except OSError:
            pass
        finally:
            srv.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{srv.getsockname()[1]}/cifar-10-python.tar.gz"


@pytest.mark.parametrize(
    "dataset, answer, needle",
    [
        ("tinyimagenet", b"SSH-2.0-OpenSSH_9.6\r\n", "not HTTP"),
        ("cifar10", b"SSH-2.0-OpenSSH_9.6\r\n", "not valid HTTP"),
        ("tinyimagenet", b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\nxyz", "Content-Length 'abc'"),
    ],
    ids=[
        "tinyimagenet not http",
        "cifar10 not http",
        "content-length abc",
    ],  # cifar10: torchvision ignores it
)
def test_a_server_that_does_not_speak_http_is_one_line(dataset, answer, needle, tmp_path, capsys):
    """Issue 30: bytes that are not HTTP were a BadStatusLine traceback, a Content-Length of 'abc' a
    ValueError one. Nothing is left in a ROOT the command made."""
    root = tmp_path / "root"
    url = _raw_server(answer)
    err = _one_line_exit_2(["data", "download", dataset, "--root", root, "--url", url], capsys, "failed")
    assert needle in err or "not valid HTTP" in err, err
    assert not root.exists() or not any(root.iterdir())


def test_a_root_under_an_unknown_user_is_one_line(capsys, tmp_path, monkeypatch):
    """Issue 30: `data synth --root '~nosuchuser/x'` was a traceback."""
    monkeypatch.chdir(tmp_path)
    _one_line_exit_2(["data", "synth", "cifar10", "--root", "~nosuchuser-hpml/x"], capsys, "~nosuchuser-hpml")
    assert not any(tmp_path.iterdir())


# ==== moved from test_hostile_more.py (issue 22's second pass)
# ---- the dataset's content is part of a run's identity
def _set_first_label(folder, label=None):
    """The first label of data_batch_1 changed in place (to `label`, or to the next class), the file's size
    and modification time kept, as an edit followed by `touch -r` leaves them: only its bytes and change time
    differ. The synthesizer writes protocol-2 pickles: the labels list is `(` then one `K <byte>` per
    label."""
    p = folder / "cifar-10-batches-py" / "data_batch_1"
    st = p.stat()
    raw = bytearray(p.read_bytes())
    j = raw.index(b"(K", raw.index(b"labels")) + 2
    raw[j] = (raw[j] + 1) % 10 if label is None else label
    p.write_bytes(bytes(raw))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert p.stat().st_size == st.st_size


def test_other_data_at_the_same_path_is_a_new_run_and_the_old_one_is_kept(tmp_path, cifar_root):
    import shutil

    from hpml_lab import results
    from hpml_lab.data import dataset_info
    from hpml_lab.sweeps import run_sweep
    from hpml_lab.training import train

    data = tmp_path / "data"
    shutil.copytree(cifar_root, data)
    cfg = RunConfig(
        task="t",
        data_root=str(data),
        results_dir=str(tmp_path / "r"),
        model="resnet_tiny",
        batch_size=16,
        epochs=1,
        max_batches=2,
        num_workers=0,
        device="cpu",
        progress="none",
    )
    first = run_sweep([cfg], train, log=None)[0]
    before = {p.name: p.read_bytes() for p in first.run_dir.iterdir()}
    fp = dataset_info(cfg)["fingerprint"]
    assert run_sweep([cfg], train, log=None)[0].status == "skipped"  # same data: reused

    _set_first_label(data)
    assert dataset_info(cfg)["fingerprint"] != fp
    second = run_sweep([cfg], train, log=None)[0]
    assert second.status == "ran" and second.run_dir == first.run_dir
    assert results.read_run(second.run_dir).meta["dataset"]["fingerprint"] == dataset_info(cfg)["fingerprint"]
    kept = first.run_dir.parent / f"{first.run_dir.name}.data-{fp}"
    assert {p.name: p.read_bytes() for p in kept.iterdir()} == before  # the old complete run, byte for byte
    assert len(results.load_runs("t", tmp_path / "r")) == 2


def test_a_run_recorded_before_fingerprints_is_still_the_same_data():
    from hpml_lab.results import same_data

    new = {"name": "cifar10", "kind": "synthetic", "root": "/d", "fingerprint": "ab"}
    assert same_data({k: v for k, v in new.items() if k != "fingerprint"}, new)
    assert not same_data({**new, "fingerprint": "cd"}, new) and not same_data({**new, "root": "/e"}, new)
    assert not same_data("cifar10", new)


def test_a_stale_check_cache_does_not_pass_edited_data(tmp_path, cifar_root, capsys):
    """Bad data (a label of 10) written with the file's size and time kept: the check's cache, keyed also by
    the change time, reads it again and refuses it up front (one line, exit 2) instead of every run
    failing."""
    import shutil

    from hpml_lab.data import cifar

    data = tmp_path / "data"
    shutil.copytree(cifar_root, data)
    cifar.check(data)  # cached as good
    _set_first_label(data, 10)
    assert cli.main(["run", "c6", "--profile", "tiny", "-p", f"data_root={data}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "label 10 is not a class" in err, err


# ---- a failed download: no empty ROOT, no half archive, "resume" only where a rerun resumes
class _Blob:
    """`blob` over HTTP on 127.0.0.1, with Content-Length and Range; `slow` seconds between 64 KiB pieces."""

    def __init__(self, blob: bytes, slow: float = 0.0):
        import http.server
        import threading
        import time

        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                if not self.path.endswith(".zip"):
                    self.send_error(404)
                    return
                start = (
                    int(self.headers["Range"].split("=")[1].rstrip("-")) if self.headers.get("Range") else 0
                )
                body = blob[start:]
                self.send_response(206 if start else 200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    for i in range(0, len(body), 1 << 16):
                        self.wfile.write(body[i : i + (1 << 16)])
                        time.sleep(outer.slow)
                except OSError:
                    pass

        self.slow = slow
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/tiny-imagenet-200.zip"


@pytest.fixture
def blob_server():
    servers = []

    def start(blob, slow=0.0):
        servers.append(_Blob(blob, slow))
        return servers[-1]

    yield start
    for s in servers:
        s.httpd.shutdown()


def _data_cli(args, **kw):
    from cli_process import start

    return start(["data", *args], **kw)


@pytest.mark.parametrize("where", ["bad path", "no server"])
def test_a_download_that_fails_before_a_byte_leaves_no_root(where, tmp_path, capsys, blob_server):
    url = (
        blob_server(b"x" * 10).url.replace(".zip", ".txt")
        if where == "bad path"
        else "http://127.0.0.1:9/x.zip"
    )
    root = tmp_path / "new" / "root"
    assert cli.main(["data", "download", "tinyimagenet", "--root", str(root), "--url", url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "resume" not in err and "download of" in err, err
    assert not (tmp_path / "new").exists() or not root.exists()
    assert not root.exists()


@pytest.mark.slow
def test_a_full_disk_mid_download_leaves_no_part_file_and_no_root(tmp_path, blob_server):
    """The real write path fails (RLIMIT_FSIZE: EFBIG, what ENOSPC is to a full disk): no 'resume', the part
    file this run made is removed, and so is the ROOT it made."""
    server = blob_server(os.urandom(3 << 20))
    root = tmp_path / "root"
    p = _data_cli(
        ["download", "tinyimagenet", "--root", root, "--url", server.url],
        preexec_fn=_limited(1 << 20),
        env=NO_BYTECODE,
    )
    _, err = p.communicate(timeout=120)
    assert p.returncode == 2 and err.count("\n") == 1, err
    assert f"cannot write {root / 'tiny-imagenet-200.zip'} (File too large)" in err and "resume" not in err, (
        err
    )
    assert "MB free" in err and not root.exists()


@pytest.mark.slow
def test_a_full_disk_while_resuming_keeps_the_earlier_part_as_it_was(tmp_path, blob_server):
    blob = os.urandom(3 << 20)
    server = blob_server(blob)
    root = tmp_path / "root"
    root.mkdir()
    (root / "tiny-imagenet-200.zip.part").write_bytes(blob[:500_000])
    p = _data_cli(
        ["download", "tinyimagenet", "--root", root, "--url", server.url],
        preexec_fn=_limited(1 << 20),
        env=NO_BYTECODE,
    )
    _, err = p.communicate(timeout=120)
    assert p.returncode == 2 and "earlier partial download (500,000 bytes) is kept" in err, err
    assert (root / "tiny-imagenet-200.zip.part").read_bytes() == blob[:500_000]
    assert sorted(x.name for x in root.iterdir()) == ["tiny-imagenet-200.zip.part"]


@pytest.mark.slow
def test_sigterm_mid_download_keeps_a_part_that_really_resumes(tmp_path, blob_server):
    import signal
    import time

    blob = os.urandom(2 << 20)
    server = blob_server(blob, slow=0.05)
    root = tmp_path / "root"
    p = _data_cli(["download", "tinyimagenet", "--root", root, "--url", server.url])
    part = root / "tiny-imagenet-200.zip.part"
    deadline = time.monotonic() + 60
    while not (part.exists() and part.stat().st_size > 0):
        assert p.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGTERM and err.count("\n") == 1, err
    assert f"{part} is kept" in err and "resumes" in err, err
    have = part.stat().st_size
    assert 0 < have < len(blob) and part.read_bytes() == blob[:have]
    assert not [x for x in root.iterdir() if x.name.startswith(".")]


# ---- kill -9 of a data command: the next one removes the temporary folder it left, and only that
@pytest.mark.slow
@pytest.mark.parametrize(
    "argv, appears",
    [
        (["synth", "cifar10"], ".cifar-synth-"),
        (["synth", "tinyimagenet", "--classes", "60", "--per-class", "20"], ".tinyimagenet-extract-"),
        (["synth", "tinyimagenet", "--classes", "60", "--per-class", "20"], ".tiny-imagenet-200.zip."),
    ],
    ids=["cifar-synth", "tin-extract", "tin-archive"],
)
def test_a_data_command_killed_with_sigkill_leaves_nothing_the_next_one_keeps(argv, appears, tmp_path):
    import signal
    import time

    root = tmp_path / "root"
    root.mkdir()
    (root / ".mine").mkdir()  # the user's own hidden folder: never touched
    p = _data_cli([*argv, "--root", root])
    deadline = time.monotonic() + 240
    while not [x for x in root.iterdir() if x.name.startswith(appears)]:
        assert p.poll() is None and time.monotonic() < deadline, f"{appears} never appeared"
        time.sleep(0.01)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=60)
    left = [x.name for x in root.iterdir() if x.name.startswith(appears)]
    assert left  # kill -9 cannot clean up: the next command must
    q = _data_cli(["synth", "cifar10", "--root", root, "--n-train", 50, "--n-test", 10])
    stdout, err = q.communicate(timeout=120)
    assert q.returncode == 0, err
    assert all(f"removed {root / n}" in stdout for n in left), stdout
    assert sorted(x.name for x in root.iterdir() if x.name.startswith(".")) == [".mine"]


def test_a_temporary_folder_of_a_live_process_is_kept(tmp_path):
    import subprocess
    import time

    from hpml_lab.data.checks import remove_stale, temp_prefix

    mine = tmp_path / f"{temp_prefix('cifar-synth')}abc"
    mine.mkdir()
    young = subprocess.Popen(["sleep", "30"])  # a live process that started after the folder below was made
    try:
        reused = tmp_path / f".kaggle-{young.pid}-xyz"
        reused.mkdir()
        os.utime(reused, (time.time() - 3600, time.time() - 3600))
        other = tmp_path / ".kaggle-notapid-xyz"
        other.mkdir()
        assert remove_stale(tmp_path) == [reused.name]
        assert mine.exists() and other.exists() and not reused.exists()
    finally:
        young.kill()
        young.wait()


def test_another_hosts_temporaries_are_judged_by_age_not_by_a_pid_of_this_host(tmp_path):
    """A data folder shared by cluster nodes: another node's live temporary folder named a pid that is dead
    here, and the next data command on this node removed it. Names now carry their host: this host's are
    removed when their process ended, another host's only when untouched for a day; names from before hosts
    were named are judged as this host's."""
    import subprocess
    import time

    from hpml_lab import io
    from hpml_lab.data.checks import OTHER_HOST_STALE_S, remove_stale, temp_prefix

    assert temp_prefix("kaggle").startswith(f".kaggle-{os.getpid()}@{io.this_host()}-")
    with io.atomic_file(tmp_path / "tiny-imagenet-200.zip") as tmp:
        assert tmp.name.startswith(f".tiny-imagenet-200.zip.{os.getpid()}@{io.this_host()}-")
        tmp.write_bytes(b"")
    done = subprocess.Popen(["true"])
    done.wait()  # a pid that has ended here
    dead, host = done.pid, io.this_host()
    names = {
        "theirs": f".tinyimagenet-extract-{dead}@node-07.cluster-x1y2",
        "their_archive": f".tiny-imagenet-200.zip.{dead}@node-07-ab_c",
        "theirs_old": f".cifar-synth-{dead}@node-07-qwe",
        "mine": f".cifar-synth-{dead}@{host}-rty",
        "before_hosts": f".kaggle-{dead}-uio",
    }
    for key, name in names.items():
        (tmp_path / name).mkdir() if "archive" not in key else (tmp_path / name).write_bytes(b"PK")
    day_ago = time.time() - OTHER_HOST_STALE_S - 60
    os.utime(tmp_path / names["theirs_old"], (day_ago, day_ago))
    removed = remove_stale(tmp_path)
    assert sorted(removed) == sorted([names["theirs_old"], names["mine"], names["before_hosts"]])
    assert (tmp_path / names["theirs"]).is_dir() and (tmp_path / names["their_archive"]).is_file()


# ---- an image damaged after preparation, a worker's dataset error: one line
@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2])
def test_an_image_damaged_after_preparation_is_one_line(workers, tmp_path):
    """A JPEG emptied after preparation (a disk error, a bad copy): training ends in one line naming it, also
    when a DataLoader worker meets it (torch re-raises with the worker's traceback in the message)."""
    import subprocess
    import sys

    from hpml_lab.data import tinyimagenet as tin

    tin.synthesize(tmp_path, classes=5, per_class=8, val_per_class=2, n_test=2, seed=0)
    for img in sorted((tmp_path / tin.FOLDER / "train").glob("*/images/*.JPEG"))[:3]:
        img.write_bytes(b"")
    env = {
        **os.environ,
        "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        "HPML_OUTPUT_DIR": str(tmp_path / "out"),
    }
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "hpml_lab",
            "--dataset",
            "tinyimagenet",
            "--data-root",
            str(tmp_path),
            "--model",
            "resnet_tiny",
            "--epochs",
            "1",
            "--batch-size",
            "40",
            "--num-workers",
            str(workers),
            "--progress",
            "none",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "does not decode" in r.stderr and "delete" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_dataset_error_from_a_worker_is_its_own_line():
    from hpml_lab.data import DatasetError

    wrapped = (
        "Caught DatasetError in DataLoader worker process 0.\nOriginal Traceback (most recent call last):\n"
        '  File "x.py", line 1, in f\nhpml_lab.data.errors.DatasetError: image a.JPEG does not decode\n'
    )
    assert str(DatasetError(wrapped)) == "image a.JPEG does not decode"
    assert str(DatasetError("plain")) == "plain"


# ---- a download's .part file that is a link or a folder is refused
@pytest.mark.parametrize("kind", ["link", "folder"])
def test_a_part_file_that_is_a_link_or_folder_is_refused_not_appended_to(kind, tmp_path, capsys, blob_server):
    server = blob_server(b"z" * 1000)
    root = tmp_path / "root"
    root.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    part = root / "tiny-imagenet-200.zip.part"
    part.symlink_to(victim) if kind == "link" else part.mkdir()
    assert cli.main(["data", "download", "tinyimagenet", "--root", str(root), "--url", server.url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a plain file" in err, err
    assert victim.read_text() == "precious"


# ------------------------------------------------------------------ issue 30: unreadable files, as a user who
# is not root
def _as_nobody() -> list[str]:
    """The command prefix that runs a process as `nobody` without root's capabilities, or a skip saying why
    not (CI runs as root, and root reads every file: an unreadable-file case means nothing as root)."""
    prefix = [
        "setpriv",
        "--reuid=nobody",
        "--regid=nogroup",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
    ]
    if not shutil.which("setpriv"):
        pytest.skip("setpriv is not installed: cannot run as nobody")
    # The premise is that nobody can start this Python, import this checkout and find its root from here: a
    # clone under a folder only root may enter (as `mktemp -d` makes) breaks it, and the test then has nothing
    # to say.
    checkout = str(Path(__file__).resolve().parents[2])
    try:
        probe = subprocess.run(
            [*prefix, sys.executable, "-c", "from hpml_lab.config import project_root; project_root()"],
            capture_output=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": checkout},
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"cannot run a process as nobody here ({e})")
    if probe.returncode != 0:
        pytest.skip(
            f"nobody cannot run {sys.executable} with this checkout ({checkout}) here: the interpreter or "
            f"the checkout lies in a folder only root may enter "
            f"({(probe.stderr.decode(errors='replace').strip().splitlines() or [''])[-1][:160]})"
        )
    return prefix


@pytest.mark.slow
def test_an_unreadable_batch_file_is_one_line_for_a_user_who_is_not_root(tmp_path_factory):
    import tempfile

    prefix = _as_nobody()
    tmp_path = Path(tempfile.mkdtemp(prefix="hpml-nobody-"))  # pytest's own folders are root's alone (0700)
    tmp_path.chmod(0o777)
    root = tmp_path / "data"
    cifar.synthesize(root, n_train=100, n_test=20)
    for p in [tmp_path, *tmp_path.rglob("*")]:
        p.chmod(0o777 if p.is_dir() else 0o644)
    (root / cifar.FOLDER / cifar.TRAIN_FILES[1]).chmod(0o000)
    env = {**os.environ, "HOME": str(tmp_path), "HPML_OUTPUT_DIR": str(tmp_path / "out")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    r = subprocess.run(
        [*prefix, sys.executable, "-m", "hpml_lab.report.cli", "run", "c1", "--profile", "tiny"]
        + ["-p", f"data_root={root}"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    shutil.rmtree(tmp_path, ignore_errors=True)
    assert "Permission denied" in r.stderr and cifar.TRAIN_FILES[1] in r.stderr, r.stderr


def test_two_data_commands_into_one_root_at_once_the_second_is_refused(tmp_path, capsys):
    """Issue 30: two `data synth` at once into one folder both exited 0, and the first named a seed the folder
    does not hold. While one writes (it holds the folder's lock), the other is one line."""
    from hpml_lab.data.checks import one_data_command

    root = tmp_path / "root"
    with one_data_command(root):
        _one_line_exit_2(
            ["data", "synth", "cifar10", "--root", root, "--n-train", 50, "--n-test", 10, "--seed", 7],
            capsys,
            "another hpml-lab data command is writing into",
        )
    assert not root.exists()
    assert (
        cli.main(["data", "synth", "cifar10", "--root", str(root), "--n-train", "50", "--n-test", "10"]) == 0
    )
