"""Issue 22, the classes left after the first pass: sweeps where every run fails, a full disk mid-notebook,
failed downloads, killed data commands, the atomic write's signal window, argparse errors, and the dataset's
content in a run's identity. Each ends in one line on stderr and exit 2, or in the documented behaviour,
with nothing complete changed."""

import json
import os
import time

import pytest

from hpml_lab.config import RunConfig
from hpml_lab.report import cli


@pytest.fixture
def out(tmp_path, monkeypatch):
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path / "out"))
    return tmp_path / "out"


def _no_cuda():
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is here: device=cuda would not fail")


# ---- every run of a sweep fails: one line per run, never a KeyError from an empty table
@pytest.mark.parametrize("study, field, n", [("c6_optimizers", "optimizer", 5), ("c7_batchnorm", "norm", 2)])
def test_a_sweep_where_every_run_fails_says_why_per_run(study, field, n, cifar_root, tmp_path):
    from hpml_lab.studies import lab2
    from hpml_lab.sweeps import SweepFailed

    _no_cuda()
    cfg = RunConfig(
        task=study[:2],
        data_root=str(cifar_root),
        results_dir=str(tmp_path / "r"),
        model="resnet_tiny",
        batch_size=8,
        epochs=1,
        max_batches=1,
        num_workers=0,
        device="cuda",
        progress="none",
    )
    with pytest.raises(SweepFailed) as err:
        getattr(lab2, study)(cfg, log=None)
    lines = str(err.value).splitlines()
    assert lines[0].startswith(f"every run of {study[:2]} failed ({n} of {n})")
    assert len(lines) == n + 1 and all(
        ln.startswith(f"{field}=") and "CUDA is not available" in ln for ln in lines[1:]
    )


@pytest.mark.slow
@pytest.mark.parametrize("task", ["c6", "c7"])
def test_a_report_whose_every_run_fails_renders_and_says_why(task, cifar_root, out, monkeypatch):
    """The kernel reaches the all-failed path (the up-front device check is bypassed so that every run fails
    inside it): the task ends failed with the sweep's own lines, the page renders, no KeyError anywhere."""
    from hpml_lab.report import runner

    _no_cuda()
    monkeypatch.setattr(runner, "preflight", lambda task, cfg: None)
    o = runner.run_task(
        task, "tiny", cli_params={"data_root": str(cifar_root), "device": "cuda"}, log=lambda s: None
    )
    assert o.status == "failed" and o.error.startswith(f"SweepFailed: every run of {task} failed"), o.error
    page = (out / "reports" / f"{task}.html").read_text()
    assert "every run of" in page and "CUDA is not available" in page and "KeyError:" not in page
    rec = json.loads((out / "reports" / "executed" / f"{task}.json").read_text())
    assert rec["status"] == "failed"


# ---- io.atomic_file: a signal right after mkstemp leaves no temporary file
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_right_after_mkstemp_leaves_no_temporary_file(sig, tmp_path, monkeypatch):
    import signal
    import tempfile

    from hpml_lab import io, results

    real = tempfile.mkstemp

    def mkstemp_then_signal(*a, **k):
        made = real(*a, **k)
        os.kill(
            os.getpid(), getattr(signal, sig)
        )  # arrives as mkstemp returns: before the caller records the name
        return made

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp_then_signal)
    with results.sigterm_interrupts(), pytest.raises(KeyboardInterrupt):
        io.atomic_write_text(tmp_path / "x.json", "{}")
    assert list(tmp_path.iterdir()) == []


# ---- argparse errors: one line and exit 2, never the usage block
@pytest.mark.parametrize(
    "argv, prog, needle",
    [
        (["run"], "hpml-lab run", "required: task"),
        (["run", "c1", "--profile", "bogus"], "hpml-lab run", "invalid choice: 'bogus'"),
        (["run", "c1", "-p"], "hpml-lab run", "expected one argument"),
        (["data"], "hpml-lab data", "required: action, dataset"),
        (["data", "unpack", "cifar10"], "hpml-lab data", "invalid choice: 'unpack'"),
        (["data", "synth", "cifar10", "--source", "ftp"], "hpml-lab data", "invalid choice: 'ftp'"),
        (["bench"], "hpml-lab bench", "required: NAME"),
        (["bench", "loader", "--repeats", "x"], "hpml-lab bench", "invalid int value: 'x'"),
        (["bench", "loader", "--device", "tpu"], "hpml-lab bench", "invalid choice: 'tpu'"),
        (["slurm", "c1", "--gpus", "1.5"], "hpml-lab slurm", "invalid int value: '1.5'"),
        (["report", "--only"], "hpml-lab report", "expected one argument"),
        ([], "hpml-lab", "required: command"),
        (["bogus"], "hpml-lab", "invalid choice: 'bogus'"),
        (["tasks", "extra"], "hpml-lab", "unrecognized arguments: extra"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_argument_errors_are_one_line(argv, prog, needle, capsys):
    with pytest.raises(SystemExit) as ex:
        cli.main(argv)
    err = capsys.readouterr().err
    assert ex.value.code == 2 and err.count("\n") == 1 and "usage:" not in err, err
    assert err.startswith(f"{prog}: error: ") and needle in err, err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--epochs"], "--epochs: expected one argument"),
        (["--save-model"], "--save-model: expected one argument"),
        (["--if-missing"], "--if-missing: expected one argument"),
    ],
)
def test_training_cli_argument_errors_are_one_line(argv, needle, capsys):
    from hpml_lab.__main__ import main

    with pytest.raises(SystemExit) as ex:
        main(argv)
    err = capsys.readouterr().err
    assert ex.value.code == 2 and err.count("\n") == 1 and "usage:" not in err and needle in err, err


def test_a_newline_in_an_argparse_value_stays_one_line(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "c1", "--profile", "a\nb"])
    assert capsys.readouterr().err.count("\n") == 1


# ---- the dataset's content is part of a run's identity
def _set_first_label(folder, label=None):
    """The first label of data_batch_1 changed in place (to `label`, or to the next class), the file's size and
    modification time kept, as an edit followed by `touch -r` leaves them: only its bytes and change time differ.
    The synthesizer writes protocol-2 pickles: the labels list is `(` then one `K <byte>` per label."""
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
    the change time, reads it again and refuses it up front (one line, exit 2) instead of every run failing."""
    import shutil

    from hpml_lab.data import cifar

    data = tmp_path / "data"
    shutil.copytree(cifar_root, data)
    cifar.check(data)  # cached as good
    _set_first_label(data, 10)
    assert cli.main(["run", "c6", "--profile", "tiny", "-p", f"data_root={data}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "label 10 is not a class" in err, err


# ---- a full disk mid-notebook: no cut-short executed notebook, no broken report, the task ends failed
def _limited(limit):
    """For a subprocess: files can grow to `limit` bytes, then a write fails with EFBIG (RLIMIT_FSIZE, SIGXFSZ
    ignored). This is the real write path failing as on a full disk (ENOSPC) without root or a small mount."""
    import resource
    import signal

    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.slow
def test_a_full_disk_while_the_notebook_is_written_keeps_nothing_cut_short(cifar_root, out):
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "hpml_lab.report.cli",
            "run",
            "c1",
            "--profile",
            "tiny",
            "-p",
            f"data_root={cifar_root}",
        ],
        preexec_fn=_limited(30_000),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 1, r.stderr[-2000:]
    executed = out / "reports" / "executed"
    rec = json.loads((executed / "c1.json").read_text())
    assert (
        rec["status"] == "failed"
        and f"executed notebook {executed / 'c1.ipynb'} could not be written" in rec["error"]
    )
    assert sorted(p.name for p in executed.iterdir()) == [
        "c1.json"
    ]  # no cut-short notebook, no hidden partial
    assert not (out / "reports" / "c1.html").exists()
    metas = [json.loads(p.read_text()) for p in (out / "results").rglob("meta.json")]
    assert metas and all(m["status"] != "running" for m in metas)


def test_a_cut_short_notebook_is_not_landed(tmp_path):
    from hpml_lab.report import guards

    partial, executed = tmp_path / ".c1.running-1.ipynb", tmp_path / "c1.ipynb"
    executed.write_text("previous")
    partial.write_text('{\n "cells": [\n  {\n   "cell_type": "m')
    assert "could not be written whole" in guards.land_executed(partial, executed)
    assert not partial.exists() and executed.read_text() == "previous"
    assert guards.land_executed(partial, executed) == ""  # nothing written at all: nothing to land


def test_a_killed_runs_partial_notebook_is_removed(out):
    import subprocess

    from hpml_lab.report import guards

    dead = subprocess.Popen(["true"])
    dead.wait()
    folder = out / "reports" / "executed"
    folder.mkdir(parents=True)
    (folder / f".c1.running-{dead.pid}.ipynb").write_text("{")
    (folder / f".c2.running-{os.getpid()}.ipynb").write_text("{")  # a live run's: kept
    guards.recover_reports()
    assert [p.name for p in folder.iterdir()] == [f".c2.running-{os.getpid()}.ipynb"]


def test_an_outcome_that_cannot_be_written_puts_the_previous_report_back(out, monkeypatch):
    import errno

    from hpml_lab import io
    from hpml_lab.config import ConfigError
    from hpml_lab.report import guards

    reports = out / "reports"
    (reports / "executed").mkdir(parents=True)
    (reports / "c1.html").write_text("old page")
    (reports / "executed" / "c1.json").write_text('{"old": 1}')
    aside = guards.set_aside("c1")
    (reports / "c1.html").write_text("new page")

    def full(path, obj):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(io, "atomic_write_json", full)
    with pytest.raises(ConfigError) as err:
        guards.write_outcome(reports / "executed" / "c1.json", {"task": "c1", "status": "ok"}, aside)
    assert "No space left on device" in str(err.value) and str(reports / "executed" / "c1.json") in str(
        err.value
    )
    assert (reports / "c1.html").read_text() == "old page" and not aside.exists()
    assert (reports / "executed" / "c1.json").read_text() == '{"old": 1}'


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
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    return subprocess.Popen(
        [sys.executable, "-m", "hpml_lab.report.cli", "data", *map(str, args)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


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
        ["download", "tinyimagenet", "--root", root, "--url", server.url], preexec_fn=_limited(1 << 20)
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
        ["download", "tinyimagenet", "--root", root, "--url", server.url], preexec_fn=_limited(1 << 20)
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

    from hpml_lab.data.guards import remove_stale, temp_prefix

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


# ---- variants found by hand (issue 22's closing note lists them)
@pytest.mark.parametrize(
    "argv, needle",
    [
        (["data", "synth", "cifar10", "--root", ""], "--root needs a folder, got ''"),
        (
            [
                "data",
                "download",
                "tinyimagenet",
                "--root",
                "R",
                "--url",
                "http://user:secret@127.0.0.1:9/x.zip",
            ],
            "user name or password is refused",
        ),
        (
            ["data", "download", "cifar10", "--root", "R", "--url", "https://:pw@example.org/c.tgz"],
            "user name or password is refused",
        ),
    ],
)
def test_data_option_variants_are_one_line(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "secret" not in err.replace("http://user:secret", ""), (
        err
    )
    assert list(tmp_path.iterdir()) == []  # nothing written into the current folder


@pytest.mark.parametrize(
    "text, needle",
    [
        ("epochs: 1\nepochs: 2\n", "sets 'epochs' twice (line 2)"),
        ("data_root: a\nx:\n  k: 1\n  k: 2\n", "sets 'k' twice (line 4)"),
    ],
)
def test_a_parameter_given_twice_in_a_params_file_is_refused(text, needle, tmp_path, capsys, out):
    (tmp_path / "p.yaml").write_text(text)
    assert cli.main(["run", "c1", "-f", str(tmp_path / "p.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err


def test_a_broken_synthetic_marker_is_one_line(tmp_path, cifar_root):
    import shutil

    from hpml_lab.data import DatasetError, cifar

    shutil.copytree(cifar_root, tmp_path / "d")
    (tmp_path / "d" / cifar.FOLDER / cifar.MARKER).write_text("{bad")
    with pytest.raises(DatasetError, match="not a readable synthetic-data record"):
        cifar.check(tmp_path / "d", verify_md5=True)


def test_a_results_folder_under_a_file_names_the_run_folder_not_the_attempt(tmp_path):
    from hpml_lab import results

    (tmp_path / "f").write_text("x")
    with pytest.raises(OSError) as err:
        with results.RunFolder(tmp_path / "f" / "t" / "run"):
            pass
    assert err.value.filename == str(tmp_path / "f" / "t" / "run") and ".attempt-" not in str(err.value)


@pytest.mark.parametrize(
    "what", ["meta is /dev/zero", "epochs.csv is a FIFO", "meta too big", "answer is a FIFO"]
)
def test_result_files_that_would_block_or_never_end_are_refused(what, tmp_path, monkeypatch):
    """Each read here used to block (a FIFO) or grow without end (/dev/zero); a worker thread bounds the wait."""
    import threading

    from hpml_lab import results
    from hpml_lab.report import answers

    run = tmp_path / "t" / "r"
    run.mkdir(parents=True)
    meta = {"status": "complete", "epochs_done": 1, "config": {}}
    if what == "meta is /dev/zero":
        (run / "meta.json").symlink_to("/dev/zero")
    elif what == "meta too big":
        (run / "meta.json").write_text(json.dumps({**meta, "pad": "x" * (17 << 20)}))
    else:
        (run / "meta.json").write_text(json.dumps(meta))
        os.mkfifo(run / "epochs.csv")
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path / "out"))
    if what == "answer is a FIFO":
        answers.path_for("c1").parent.mkdir(parents=True)
        os.mkfifo(answers.path_for("c1"))
    got = {}
    t = threading.Thread(
        target=lambda: got.update(
            complete=results.is_complete(run),
            runs=results.load_runs("t", tmp_path),
            answer=answers.load("c1"),
        ),
        daemon=True,
    )
    t.start()
    t.join(30)
    assert not t.is_alive(), f"{what}: still reading after 30 s"
    assert got == {"complete": False, "runs": [], "answer": None}


# ---- SIGHUP (a closed terminal) ends a run like SIGTERM; an attempt whose process was killed says so
@pytest.mark.slow
def test_sighup_ends_a_training_run_interrupted_not_running(tmp_path, cifar_root):
    import signal
    import subprocess
    import sys
    import time

    env = {
        **os.environ,
        "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        "HPML_OUTPUT_DIR": str(tmp_path),
    }
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hpml_lab",
            "--data-root",
            str(cifar_root),
            "--model",
            "resnet_tiny",
            "--epochs",
            "200",
            "--batch-size",
            "8",
            "--num-workers",
            "0",
            "--progress",
            "none",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not list(tmp_path.rglob("epochs.csv")):
        assert p.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    p.send_signal(signal.SIGHUP)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 128 + signal.SIGHUP and "interrupted (signal SIGHUP)" in err, err
    metas = [json.loads(m.read_text()) for m in tmp_path.rglob("meta.json")]
    assert [m["status"] for m in metas] == ["interrupted"]


def test_an_attempt_left_running_by_a_killed_process_is_marked_failed(tmp_path):
    import subprocess

    from hpml_lab import results

    dead = subprocess.Popen(["true"])
    dead.wait()
    run = tmp_path / "t" / "r"
    stale = tmp_path / "t" / f".r.attempt-{dead.pid}"
    stale.mkdir(parents=True)
    (stale / "meta.json").write_text(json.dumps({"task": "t", "run_id": "r", "status": "running"}))
    live = tmp_path / "t" / f".r.attempt-{os.getppid()}"  # a live process's attempt (made after it started)
    live.mkdir()
    (live / "meta.json").write_text(json.dumps({"task": "t", "run_id": "r", "status": "running"}))
    # another node's attempt in a results/ shared by Slurm nodes: its pid (dead here) says nothing about it
    dead_here = subprocess.Popen(["true"])
    dead_here.wait()
    elsewhere = tmp_path / "t" / f".r.attempt-{dead_here.pid}"
    elsewhere.mkdir()
    (elsewhere / "meta.json").write_text(
        json.dumps({"status": "running", "environment": {"hostname": "node-b"}})
    )
    with results.RunFolder(run) as rf:
        rf.complete({"task": "t", "status": "running", "config": {}})
    meta = json.loads((stale / "meta.json").read_text())
    assert meta["status"] == "failed" and f"process {dead.pid} ended" in meta["error"]
    assert json.loads((live / "meta.json").read_text())["status"] == "running"
    assert json.loads((elsewhere / "meta.json").read_text())["status"] == "running"


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
        "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
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


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["data", "synth", "cifar10", "--root", "a\nb"], "--root 'a\\nb' holds a control character"),
        (
            ["run", "c1", "--profile", "tiny", "-p", "data_root=/nowhere/x\ny"],
            "CIFAR-10 not found in /nowhere/x\\ny",
        ),
    ],
)
def test_a_newline_in_a_path_keeps_the_error_one_line(argv, needle, capsys, out, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err
    assert not (tmp_path / "a\nb").exists()


def test_one_line_escapes_control_characters_only():
    from hpml_lab.cliargs import one_line

    assert one_line("a\nb\tc\x1b[31m é ✓\n") == "a\\nb\\tc\\x1b[31m é ✓"


# ---- an atomic write never renames a file over a link into /dev or /proc (it once replaced /dev/stdout)
def test_an_atomic_write_through_a_link_keeps_the_link(tmp_path):
    from hpml_lab.io import atomic_write_text

    (tmp_path / "real.txt").write_text("old")
    (tmp_path / "link.txt").symlink_to(tmp_path / "real.txt")
    atomic_write_text(tmp_path / "link.txt", "new", follow_links=True)  # a file the user named (-o)
    assert (tmp_path / "link.txt").is_symlink() and (tmp_path / "real.txt").read_text() == "new"


@pytest.mark.parametrize("target", ["/dev/stdout", "/proc/self/fd/1", "/dev/hpml-test-new-file", "linked"])
def test_an_atomic_write_to_a_device_or_kernel_file_is_refused(target, tmp_path):
    from hpml_lab.io import atomic_write_text

    if target == "linked":
        (tmp_path / "l").symlink_to("/dev/stdout")
        target = tmp_path / "l"
    before = os.readlink("/dev/stdout") if os.path.islink("/dev/stdout") else None
    with pytest.raises(OSError, match="device or a kernel file") as err:
        atomic_write_text(target, "x")
    assert err.value.filename == str(target)
    assert (os.readlink("/dev/stdout") if os.path.islink("/dev/stdout") else None) == before
    assert not os.path.exists("/dev/hpml-test-new-file")


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["slurm", "c1", "-o", "/dev/stdout"], "is a device or a kernel file"),
    ],
)
def test_cli_outputs_into_dev_are_one_line(argv, needle, capsys, out):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err


def test_save_model_to_dev_stdout_is_refused_before_training(tmp_path, cifar_root, capsys):
    from hpml_lab.__main__ import main

    assert (
        main(["--data-root", str(cifar_root), "--save-model", "/dev/stdout", "--results-dir", str(tmp_path)])
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--save-model /dev/stdout is a device or a kernel file" in err, err
    assert not any(tmp_path.iterdir())


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


# ---- issue 30: values that can run only in a range, refused before compute; the cheap checks first
@pytest.mark.parametrize(
    "argv, needle",
    [
        (
            ["run", "memory", "-p", "rev_stages=3,1000000"],
            "'rev_stages' 1000000 is out of range: use 1 to 200",
        ),
        (["run", "memory", "-p", "cpu_threads=1000000000"], "'cpu_threads' 1000000000 is out of range"),
        (["run", "memory", "-p", "budget_gb=1e-300"], "'budget_gb' 1e-300 is out of range"),
        (["run", "c2", "-p", "epochs=1"], "task c2 needs epochs of 2 or more"),
        (["run", "c5", "-p", "epochs=1"], "task c5 needs epochs of 2 or more"),
        (["run", "tinyimagenet", "-p", "dataset=cifar10"], "runs on dataset=tinyimagenet only"),
    ],
)
def test_values_that_cannot_run_are_refused_before_compute(argv, needle, capsys, out, tmp_path):
    """rev_stages=1e6 ended in a MemoryError after 86 s in the kernel, cpu_threads=1e9 killed it, budget_gb=1e-300
    a ZeroDivisionError; c2 and c5 with one epoch described a warm-up epoch as measured; cifar10 in the Tiny
    ImageNet task was a BatchNorm ValueError. Each is one line before the dataset is even looked at."""
    t0 = time.monotonic()
    assert cli.main([*argv, "-p", f"data_root={tmp_path / 'no-data-here'}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "not found" not in err, err
    assert time.monotonic() - t0 < 30 and not (out / "reports" / "executed").exists()


def test_save_model_pointing_at_a_folder_is_refused_before_the_dataset_check(tmp_path, capsys):
    from hpml_lab.__main__ import main

    rc = main(
        [
            "--data-root",
            str(tmp_path / "no-data"),
            "--save-model",
            str(tmp_path),
            "--results-dir",
            str(tmp_path),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "is a folder" in err and "CIFAR-10" not in err, err


def test_a_bench_batch_larger_than_the_dataset_is_one_line(tmp_path, capsys):
    """Issue 30: `bench loader --batch-size 600` on 500 images was a StopIteration traceback."""
    from hpml_lab.data import cifar

    cifar.synthesize(tmp_path, n_train=500, n_test=100)
    assert cli.main(["bench", "loader", "--data-root", str(tmp_path), "--batch-size", "600"]) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]  # after the '[bench] loader on cpu' line
    assert "Traceback" not in err and "--batch-size 600 is larger than the 500 training images" in last, err


def test_a_benchmark_asking_for_more_batches_than_an_epoch_has_starts_another_epoch():
    from hpml_lab.studies.bench_measure import _take

    drawn = []

    class OneBatch:
        def __iter__(self):
            drawn.append(1)
            return iter([0])

    _take(OneBatch(), 3)
    assert len(drawn) == 3
