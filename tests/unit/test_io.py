"""Atomic writes: whole files or none, and readable as the umask says (not mkstemp's 0600)."""

import os
import stat

import pytest

from hpml_lab import io
from hpml_lab.io import atomic_file, atomic_write_text


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_written_files_follow_the_umask(tmp_path, mask, mode):
    old = os.umask(mask)
    try:
        atomic_write_text(tmp_path / "a" / "report.html", "<p>x</p>")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a" / "report.html").stat().st_mode) == mode


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "meta.json"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_file(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("interrupted")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["meta.json"]


@pytest.mark.parametrize("mask, mode", [(0o022, 0o755), (0o002, 0o775)])
def test_synthesized_dataset_folder_follows_the_umask(tmp_path, mask, mode):
    from hpml_lab.data import cifar

    old = os.umask(mask)
    try:
        folder = cifar.synthesize(tmp_path, n_train=20, n_test=10)
    finally:
        os.umask(old)
    assert stat.S_IMODE(folder.stat().st_mode) == mode  # not mkdtemp's 0700


def test_a_ctrl_c_while_a_temporary_folder_is_made_leaves_no_folder(tmp_path, monkeypatch):
    """The signal lands inside the held block (as it did in CI, sent the moment the folder appeared): it is
    delivered once the folder's name is held for clean-up, so the folder goes with the interruption."""
    import signal
    import tempfile

    made = tempfile.mkdtemp

    def mkdtemp_then_interrupted(**kw):
        path = made(**kw)
        signal.raise_signal(signal.SIGINT)
        return path

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        with io.temp_folder(".x-", tmp_path):
            raise AssertionError("the block must not start: the interruption comes first")
    assert list(tmp_path.iterdir()) == []


def test_a_temporary_folder_goes_however_its_block_ends(tmp_path):
    with io.temp_folder(".x-", tmp_path) as d:
        (d / "a").write_text("x")
    with pytest.raises(ValueError):
        with io.temp_folder(".y-", tmp_path) as d:
            (d / "b").mkdir()
            raise ValueError
    assert list(tmp_path.iterdir()) == []
