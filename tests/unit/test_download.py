"""The real CIFAR-10 download path (torchvision, md5-checked) against a local HTTP server."""

import functools
import http.server
import tarfile
import threading

import pytest
from torchvision.datasets import CIFAR10

from hpml_lab.data import DatasetError, cifar, cifar_files


@pytest.fixture
def served_archive(tmp_path):
    """A cifar-10-python.tar.gz (synthetic content, marker removed) served on 127.0.0.1."""
    src = tmp_path / "src"
    cifar.synthesize(src, seed=2, n_train=50, n_test=10)
    (src / cifar.FOLDER / cifar.MARKER).unlink()
    www = tmp_path / "www"
    www.mkdir()
    with tarfile.open(www / "cifar-10-python.tar.gz", "w:gz") as tar:
        tar.add(src / cifar.FOLDER, arcname=cifar.FOLDER)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(www))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.handle_error = lambda *a: None  # the client closing early (md5 refusal) is expected, not news
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/cifar-10-python.tar.gz", www / "cifar-10-python.tar.gz", src
    server.shutdown()


def test_download_checks_md5_and_refuses_a_mismatch(served_archive, tmp_path):
    url, _, _ = served_archive
    with pytest.raises(DatasetError, match="md5"):
        cifar.download(tmp_path / "dl", url=url)


def test_download_accepts_an_archive_whose_md5s_match(served_archive, tmp_path, monkeypatch):
    url, archive, src = served_archive
    folder = src / cifar.FOLDER
    monkeypatch.setattr(CIFAR10, "tgz_md5", cifar.md5(archive))
    monkeypatch.setattr(CIFAR10, "train_list", [[n, cifar.md5(folder / n)] for n in cifar.TRAIN_FILES])
    monkeypatch.setattr(CIFAR10, "test_list", [[n, cifar.md5(folder / n)] for n in cifar.TEST_FILES])
    monkeypatch.setattr(CIFAR10, "meta", {**CIFAR10.meta, "md5": cifar.md5(folder / cifar.META_FILE)})
    path = cifar.download(tmp_path / "dl", url=url)
    assert cifar.check(path.parent) == "real"
    assert len(cifar_files.CIFAR10Files(path.parent)) == 50


def test_a_stalled_mirror_times_out_with_one_line(tmp_path):
    """A server on 127.0.0.1 that accepts the connection and never answers: two short tries, then one line."""
    import socket
    import time

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    conns = []
    stop = threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conns.append(listener.accept()[0])  # hold it open, say nothing
            except OSError:
                pass

    threading.Thread(target=accept, daemon=True).start()
    t0 = time.time()
    try:
        with pytest.raises(DatasetError, match=r"no data for 0.5 s, 2 tries"):
            cifar.download(
                tmp_path, url=f"http://127.0.0.1:{listener.getsockname()[1]}/x.tar.gz", timeout=0.5
            )
    finally:
        stop.set()
        for c in conns:
            c.close()
        listener.close()
    assert time.time() - t0 < 10 and len(conns) == 2


def test_kaggle_flags_are_refused_for_cifar(tmp_path, capsys):
    from hpml_lab.report import cli

    assert cli.main(["data", "download", "cifar10", "--root", str(tmp_path), "--source", "kaggle"]) == 2
    assert "apply to tinyimagenet only" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("sig, code, word", [("SIGTERM", 143, "terminated"), ("SIGINT", 130, "interrupted")])
def test_a_signal_during_a_cifar_download_leaves_nothing_half_written(tmp_path, sig, code, word):
    """A server that trickles a 10 MB archive; the signal comes once part of it is on disk. ROOT, which held
    one file of the user's, holds only that file again, and the command's own last line says so."""
    import os
    import signal
    import subprocess
    import sys
    import time

    class Trickle(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(10_000_000))
            self.end_headers()
            try:
                for _ in range(1000):
                    self.wfile.write(b"x" * 10_000)
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:  # the client went away
                pass

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    root = tmp_path / "data"
    root.mkdir()
    (root / "notes.txt").write_text("mine")
    url = f"http://127.0.0.1:{server.server_port}/cifar-10-python.tar.gz"
    p = subprocess.Popen(
        [sys.executable, "-m", "hpml_lab.report.cli", "data", "download", "cifar10", "--root", str(root)]
        + ["--url", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    try:
        deadline = time.time() + 120
        archive = root / CIFAR10.filename
        while time.time() < deadline and not (archive.exists() and archive.stat().st_size > 0):
            time.sleep(0.05)
        assert archive.exists(), "the download never started"
        p.send_signal(getattr(signal, sig))
        err = p.communicate(timeout=60)[1]
    finally:
        server.shutdown()
    assert p.returncode == code, err[-2000:]
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]  # (above it: torchvision's progress bar)
    assert last.startswith(f"hpml-lab: error: data download cifar10 {word}; nothing half-written"), err[
        -2000:
    ]
    assert sorted(x.name for x in root.iterdir()) == ["notes.txt"]
