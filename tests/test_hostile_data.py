"""Issue 22, the data layer: hostile and faulty datasets and `hpml-lab data` options, driven through the real
CLI where a user would meet them. Each case ends in one line on stderr and exit status 2 (or the documented
behaviour), before any compute, with nothing that was complete changed."""
import io
import os
import pickle
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
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
            for p in sorted(root.rglob("*"))}


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
    "labels a 2-d array": (lambda e: {**e, b"labels": np.zeros((_n(e), 2), np.int64)}, "not a list of integers"),
    "pixels 1000 (int64)": (lambda e: {**e, b"data": e[b"data"].astype(np.int64) + 1000}, "outside 0..255"),
    "pixels negative": (lambda e: {**e, b"data": e[b"data"].astype(np.int16) - 1}, "outside 0..255"),
    "NaN pixels": (lambda e: {**e, b"data": np.full((_n(e), 3072), np.nan)}, "dtype float64"),
    "label 10": (lambda e: {**e, b"labels": [10] + list(e[b"labels"][1:])}, "label 10 is not a class 0..9"),
    "label -1": (lambda e: {**e, b"labels": [-1] + list(e[b"labels"][1:])}, "label -1 is not a class"),
    "label True": (lambda e: {**e, b"labels": [True] + list(e[b"labels"][1:])}, "label True is not a class"),
    "label 3.0": (lambda e: {**e, b"labels": [3.0] + list(e[b"labels"][1:])}, "label 3.0 is not a class"),
    "empty batch": (lambda e: {**e, b"data": np.zeros((0, 3072), np.uint8), b"labels": []}, "holds no images"),
    "not a dict": (lambda e: [e], "holds a list, not a batch dictionary"),
}


@pytest.mark.parametrize("case", list(BATCH_EDITS))
def test_malformed_cifar_batch_is_refused_before_compute(cifar_copy, capsys, case):
    edit, message = BATCH_EDITS[case]
    _edit_batch(cifar_copy / cifar.FOLDER / "data_batch_1", edit)
    before = _snapshot(cifar_copy)
    _one_line_exit_2(["run", "c1", "--profile", "tiny", "-p", f"data_root={cifar_copy}"], capsys,
                     "data_batch_1", message)
    after = _snapshot(cifar_copy)
    after.pop(f"{cifar.FOLDER}/{cifar.VERIFIED}", None)  # the md5 cache may say 'unverified': true
    assert after == before  # no file changed, no cache claims the contents passed


def test_all_batches_empty_is_refused(cifar_copy, capsys):
    for name in cifar.TRAIN_FILES + cifar.TEST_FILES:
        _edit_batch(cifar_copy / cifar.FOLDER / name, lambda e: {**e, b"data": np.zeros((0, 3072), np.uint8),
                                                                 b"labels": []})
    from hpml_lab.training import main as train_main

    rc = train_main(["--data-root", str(cifar_copy), "--epochs", "1", "--max-batches", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and "holds no images" in err and err.strip().count("\n") == 0


META_EDITS = {
    "no label_names": (lambda e: {k: v for k, v in e.items() if k != b"label_names"}, "label_names is missing"),
    "label_names a number": (lambda e: {**e, b"label_names": 7}, "label_names is int"),
    "three label_names": (lambda e: {**e, b"label_names": e[b"label_names"][:3]}, "not a list of 10 class names"),
    "label_names of ints": (lambda e: {**e, b"label_names": list(range(10))}, "not a list of 10 class names"),
}


@pytest.mark.parametrize("case", list(META_EDITS))
def test_malformed_batches_meta_is_refused(cifar_copy, capsys, case):
    edit, message = META_EDITS[case]
    _edit_batch(cifar_copy / cifar.FOLDER / cifar.META_FILE, edit)
    _one_line_exit_2(["run", "c1", "--profile", "tiny", "-p", f"data_root={cifar_copy}"], capsys,
                     "batches.meta", message)


HUGE = 2**62
RAW_PICKLES = {  # bytes written as data_batch_2, what the one line says
    "declared length 2^62 (BINBYTES8)": (b"\x80\x04\x8e" + struct.pack("<Q", HUGE) + b"abc", "more data than memory"),
    "declared length 2^62 (BINUNICODE8)": (b"\x80\x04\x8d" + struct.pack("<Q", HUGE) + b"abc", "more data than"),
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
    _one_line_exit_2(["run", "c1", "--profile", "tiny", "-p", f"data_root={cifar_copy}"], capsys,
                     "data_batch_2", message)


def test_batch_file_that_is_a_folder_or_a_link_outside(cifar_copy, tmp_path_factory, capsys):
    folder = cifar_copy / cifar.FOLDER
    outside = tmp_path_factory.mktemp("elsewhere") / "data_batch_3"
    shutil.move(folder / "data_batch_3", outside)
    (folder / "data_batch_3").symlink_to(outside)
    _one_line_exit_2(["run", "c1", "--profile", "tiny", "-p", f"data_root={cifar_copy}"], capsys,
                     "is a link to", "outside")
    (folder / "data_batch_3").unlink()
    (folder / "data_batch_3").mkdir()
    _one_line_exit_2(["run", "c1", "--profile", "tiny", "-p", f"data_root={cifar_copy}"], capsys,
                     "data_batch_3 is not a regular file")


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
        _one_line_exit_2(["run", "c1", "--profile", "tiny", "-p", f"data_root={cifar_copy}"], capsys, "cannot be read")
    finally:
        target.chmod(0o755)


def test_valid_batches_pass_and_the_pass_is_cached(cifar_copy):
    assert cifar.check(cifar_copy) == "unverified"
    assert (cifar_copy / cifar.FOLDER / cifar.CHECKED).is_file()
    _edit_batch(cifar_copy / cifar.FOLDER / "test_batch", lambda e: {**e, b"labels": [11] * _n(e)})
    with pytest.raises(cifar.DatasetError, match="label 11"):  # a changed file is checked again
        cifar.check(cifar_copy)
