"""The real CIFAR-10 download path (torchvision, md5-checked) against a local HTTP server."""

import functools
import http.server
import tarfile
import threading

import pytest
from torchvision.datasets import CIFAR10

from hpml_lab.data import DatasetError, cifar


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
    assert len(cifar.CIFAR10Files(path.parent)) == 50


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
