"""Issue 43, the GPU check kit under hostile input: archives and manifests that came home (paths out of the
destination, links, a flipped byte, a cut-short or damaged tar, manifests of the wrong shape), two unpacks at
once, and a command given unknown units, a bad --limit or an $OUT it cannot write, or an $OUT that fills
mid-job. Each case ends in one line (exit status 2 from the command line) and loses nothing: a refused archive
writes nothing, and nothing outside the destination is written or removed."""

import gzip
import io
import json
import os
import select
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from test_guard_reports import NO_BYTECODE, _limited  # the file-size limit a full disk is simulated with

from hpml_lab.config import ConfigError
from hpml_lab.gpu import __main__ as kit
from hpml_lab.gpu import unpack
from hpml_lab.io import held_lock

TREE = str(Path(__file__).resolve().parents[2])
GPU = "GPU-X"
QUIET = {"log": lambda *a: None}


def _snapshot(root: Path) -> dict:
    """Every file and link under root with its bytes (a link: where it points): what 'nothing changed'
    compares."""
    if not root.exists():
        return {}
    return {
        p.relative_to(root).as_posix(): (
            ("link", os.readlink(p)) if p.is_symlink() else p.read_bytes() if p.is_file() else "folder"
        )
        for p in sorted(root.rglob("*"))
    }


def _record(t: float, files: list, status: str = "ok") -> dict:
    return {"status": status, "finished_at": t, "seconds": 1.0, "part": 1, "files": files}


def _manifest(t: float, units: dict) -> dict:
    return {"gpu": GPU, "packed_at": t, "units": units, "commands": {f"part1@{t}": {"part": 1, "units": {}}}}


def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _archive(path: Path, manifest, files: dict[str, bytes], extra=()) -> Path:
    """A tar.gz as the kit packs one: GPU/manifest.json (a dict as JSON, or the bytes given) and GPU/<rel>
    files; `extra`: more members as (TarInfo, bytes)."""
    data = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
    members = [_file(f"{GPU}/manifest.json", data)] + [_file(f"{GPU}/{r}", b) for r, b in files.items()]
    path.write_bytes(gzip.compress(_tar(members + list(extra))))
    return path


def _unpacked_once(tmp_path: Path) -> tuple[Path, dict]:
    """reports/gpu as a first good archive leaves it: c1 ok with its page; returns (dest, its snapshot)."""
    dest = tmp_path / "home"
    good = _archive(
        tmp_path / "good.tar.gz",
        _manifest(100.0, {"c1": _record(100.0, ["reports/c1.html"])}),
        {"reports/c1.html": b"<html>c1, first</html>"},
    )
    unpack.unpack(good, dest, **QUIET)
    return dest, _snapshot(dest)


def _refused(argv, capsys, *needles) -> str:
    rc = kit.main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("gpu-check: error: ") and err.strip().count("\n") == 0, err
    for needle in needles:
        assert needle in err, err
    return err


# ---- paths out of the destination, in an archive's members or its manifest's file lists
@pytest.mark.parametrize("rel", ["../../../victim.txt", "/ABS/victim.txt", "reports/../../../victim.txt"])
def test_a_manifest_listing_a_file_outside_its_folder_is_refused_and_removes_nothing(tmp_path, capsys, rel):
    """The issue's case: a manifest listing GPU-X/../../../victim.txt as a unit's file, then a newer record
    for that unit, printed 'removed' and the file outside the destination was gone."""
    victim = tmp_path / "victim.txt"
    victim.write_text("a classmate's file")
    rel = rel.replace("/ABS", str(tmp_path))
    dest, before = _unpacked_once(tmp_path)
    hostile = _archive(
        tmp_path / "hostile.tar.gz",
        _manifest(200.0, {"c1": _record(200.0, ["reports/c1.html", rel], status="failed")}),
        {"reports/c1.html": b"<html>hostile</html>"},
    )
    _refused(
        ["unpack", hostile, "--dest", dest], capsys, "hostile.tar.gz", "not a plain path inside its folder"
    )
    # and the same list planted in the destination's manifest: the next (newer, good) archive removes nothing
    m = json.loads((dest / GPU / "manifest.json").read_text())
    m["units"]["c1"]["files"].append(rel)
    (dest / GPU / "manifest.json").write_text(json.dumps(m))
    before = _snapshot(dest)
    newer = _archive(
        tmp_path / "newer.tar.gz",
        _manifest(300.0, {"c1": _record(300.0, ["reports/c1.html"])}),
        {"reports/c1.html": b"<html>c1, newer</html>"},
    )
    _refused(
        ["unpack", newer, "--dest", dest], capsys, f"{dest / GPU / 'manifest.json'}", "nothing was unpacked"
    )
    assert victim.read_text() == "a classmate's file" and _snapshot(dest) == before


def _link(name: str, target: str, kind=tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


def _special(name: str, kind) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    return info, None


@pytest.mark.parametrize(
    "member",
    [
        _file("../escaped.txt", b"x"),
        _file("/tmp/hpml-absolute-escape.txt", b"x"),
        _file(f"{GPU}/reports/../../../escaped.txt", b"x"),
        _link(f"{GPU}/reports/c2.html", "/etc/passwd"),
        _link(f"{GPU}/reports/c2.html", "../../../../victim.txt", tarfile.LNKTYPE),
        _special(f"{GPU}/fifo", tarfile.FIFOTYPE),
        _special(f"{GPU}/dev", tarfile.CHRTYPE),
        _file("other-gpu/reports/c2.html", b"x"),
        _file(f"{GPU}/reports/c1.html", b"twice"),
    ],
    ids=["dotdot", "absolute", "dotdot-inside", "symlink", "hardlink", "fifo", "device", "two-gpus", "twice"],
)
def test_an_archive_with_a_member_that_is_not_a_plain_file_inside_is_refused_whole(tmp_path, capsys, member):
    dest, before = _unpacked_once(tmp_path)
    bad = _archive(
        tmp_path / "bad.tar.gz",
        _manifest(200.0, {"c1": _record(200.0, ["reports/c1.html"])}),
        {"reports/c1.html": b"<html>new</html>"},
        extra=[member],
    )
    _refused(["unpack", bad, "--dest", dest], capsys, "bad.tar.gz", "refused, nothing of it is written")
    assert _snapshot(dest) == before
    assert not (tmp_path / "escaped.txt").exists() and not Path("/tmp/hpml-absolute-escape.txt").exists()


def test_a_destination_that_is_not_a_folder_is_one_line(tmp_path, capsys):
    a = _archive(tmp_path / "a.tar.gz", _manifest(100.0, {}), {})
    (tmp_path / "afile").write_text("mine")
    for dest in (tmp_path / "afile", tmp_path / "afile" / "sub"):
        _refused(["unpack", a, "--dest", dest], capsys, "cannot unpack into", "give --dest a folder")
    assert (tmp_path / "afile").read_text() == "mine"


def test_a_link_in_the_destination_is_never_written_through(tmp_path, capsys):
    """reports/gpu/GPU-X/reports as a link to a folder elsewhere: the kit writes nothing there."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    dest = tmp_path / "home"
    (dest / GPU).mkdir(parents=True)
    (dest / GPU / "reports").symlink_to(elsewhere)
    a = _archive(
        tmp_path / "a.tar.gz",
        _manifest(100.0, {"c1": _record(100.0, ["reports/c1.html"])}),
        {"reports/c1.html": b"<html>c1</html>"},
    )
    _refused(["unpack", a, "--dest", dest], capsys, "is a link")
    assert not list(elsewhere.iterdir()) and not (dest / GPU / "manifest.json").exists()


# ---- the gzip stream and the tar checked whole before anything is written
def _flipped(path: Path, at: int) -> Path:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("damage", ["crc", "length", "data", "cut"])
def test_an_archive_whose_gzip_stream_does_not_check_is_refused(tmp_path, capsys, damage):
    """The issue's case: one flipped byte (gzip -t reports a CRC error) unpacked with exit 0 and a file of
    another sha256. Now the stream is read to its end, CRC and length checked, before anything is written."""
    dest, before = _unpacked_once(tmp_path)
    a = _archive(
        tmp_path / "a.tar.gz",
        _manifest(200.0, {"c1": _record(200.0, ["reports/c1.html"])}),
        {"reports/c1.html": b"<html>c1, second: " + os.urandom(2000).hex().encode() + b"</html>"},
    )
    size = a.stat().st_size
    if damage == "cut":
        a.write_bytes(a.read_bytes()[: size // 2])
    else:
        _flipped(a, {"crc": size - 8, "length": size - 2, "data": size // 2}[damage])
    _refused(["unpack", a, "--dest", dest], capsys, "a.tar.gz", "refused, nothing of it is written")
    assert _snapshot(dest) == before


def _regzipped(path: Path, edit) -> Path:
    path.write_bytes(gzip.compress(edit(gzip.decompress(path.read_bytes()))))
    return path


def test_a_tar_whose_member_is_cut_short_or_whose_header_is_damaged_is_refused(tmp_path, capsys):
    """A valid gzip stream around a damaged tar: a member shorter than its header says, or a later header
    whose checksum fails (tarfile ends its listing there without a word, and the members after it were
    dropped)."""
    dest, before = _unpacked_once(tmp_path)
    files = {"reports/c1.html": b"<html>c1</html>" * 100, "results/c1/metrics.csv": b"1,2\n" * 400}
    m = _manifest(200.0, {"c1": _record(200.0, sorted(files))})
    cut = _regzipped(_archive(tmp_path / "cut.tar.gz", m, files), lambda t: t[: 512 * 4 + 700])
    _refused(["unpack", cut, "--dest", dest], capsys, "cut.tar.gz", "refused")
    name = (
        f"{GPU}/results/c1/metrics.csv".encode()
    )  # in the third header (the manifest lists it without GPU/)
    header = _regzipped(
        _archive(tmp_path / "header.tar.gz", m, files),
        lambda t: t[: t.index(name)] + b"X" + t[t.index(name) + 1 :],
    )
    _refused(["unpack", header, "--dest", dest], capsys, "header.tar.gz", "after its last readable member")
    assert _snapshot(dest) == before


# ---- damaged manifests, in an archive or at home
DAMAGED = {
    "not JSON": (b'{"units": {', "is not JSON"),
    "a list": (b"[1, 2]", "holds a list, not a manifest"),
    "units a list": (b'{"units": []}', "units of type list"),
    "record a string": (b'{"units": {"c1": "ok"}}', "record of unit c1 that is a str"),
    "no status": (b'{"units": {"c1": {"files": []}}}', "no status for unit c1"),
    "finished_at text": (b'{"units": {"c1": {"status": "ok", "finished_at": "x"}}}', "not a number"),
    "NaN": (b'{"units": {"c1": {"status": "ok", "finished_at": NaN}}}', "not a number JSON allows"),
    "files a string": (b'{"units": {"c1": {"status": "ok", "files": "a"}}}', "files of unit c1 that are not"),
    "file a number": (b'{"units": {"c1": {"status": "ok", "files": [1]}}}', "not a plain path"),
    "unit a path": (b'{"units": {"../c1": {"status": "ok"}}}', "not a plain name"),
    "commands a list": (b'{"units": {}, "commands": [1]}', "commands that are not"),
    "packed_at text": (b'{"packed_at": "x"}', "packed_at that is not a number"),
    "bad UTF-8": (b'{"gpu": "\xff\xfe"}', "is not UTF-8 text"),
    "deep": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
}


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_a_damaged_manifest_in_an_archive_is_one_line_and_writes_nothing(tmp_path, capsys, case):
    data, said = DAMAGED[case]
    dest, before = _unpacked_once(tmp_path)
    a = _archive(tmp_path / "a.tar.gz", data, {"reports/c1.html": b"<html>c1, other</html>"})
    err = _refused(["unpack", a, "--dest", dest], capsys, f"a.tar.gz: {GPU}/manifest.json", said)
    assert "copy it home again" in err
    assert _snapshot(dest) == before


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_a_damaged_manifest_at_home_is_one_line_and_nothing_is_unpacked(tmp_path, capsys, case):
    data, said = DAMAGED[case]
    dest, _ = _unpacked_once(tmp_path)
    (dest / GPU / "manifest.json").write_bytes(data)
    before = _snapshot(dest)
    a = _archive(
        tmp_path / "a.tar.gz",
        _manifest(200.0, {"c2": _record(200.0, ["reports/c2.html"])}),
        {"reports/c2.html": b"<html>c2</html>"},
    )
    err = _refused(["unpack", a, "--dest", dest], capsys, str(dest / GPU / "manifest.json"), said)
    assert "nothing was unpacked" in err and "move it aside" in err
    assert _snapshot(dest) == before


def test_a_manifest_at_home_that_is_a_fifo_or_a_link_is_refused(tmp_path, capsys):
    dest, _ = _unpacked_once(tmp_path)
    real = dest / GPU / "manifest.json"
    real.rename(tmp_path / "moved.json")
    real.symlink_to(tmp_path / "moved.json")
    a = _archive(tmp_path / "a.tar.gz", _manifest(200.0, {}), {})
    _refused(["unpack", a, "--dest", dest], capsys, "is a link")
    real.unlink()
    os.mkfifo(real)
    _refused(["unpack", a, "--dest", dest], capsys, "not a regular file")


# ---- two unpacks at once
UNPACK = "import sys\nfrom hpml_lab.gpu import unpack\nunpack.unpack(sys.argv[1], sys.argv[2])\n"


def test_two_unpacks_at_once_both_end_listed(tmp_path):
    """The issue's case: two unpacks at once both exited 0, c2's page was on disk, the manifest listed only c1
    and the index said c2 'not run'. Now an unpack holds a lock on the destination: while one holds it (here
    the test), the others wait and write nothing; then each merges what the one before it wrote."""
    dest = tmp_path / "home"
    dest.mkdir()
    archives = [
        _archive(
            tmp_path / f"{u}.tar.gz",
            _manifest(100.0 + i, {u: _record(100.0 + i, [f"reports/{u}.html"])}),
            {f"reports/{u}.html": f"<html>{u}</html>".encode()},
        )
        for i, u in enumerate(("c1", "c2"))
    ]
    env = {**os.environ, "PYTHONPATH": TREE}
    with held_lock(dest / ".gpu-unpack.lock"):
        procs = [
            subprocess.Popen(
                [sys.executable, "-u", "-c", UNPACK, str(a), str(dest)],
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )
            for a in archives
        ]
        for p in (
            procs
        ):  # each has checked its archive and says it waits (before, the first line said it unpacked)
            assert select.select([p.stdout], [], [], 120)[0], "no line within 120 s"
            assert "waiting for it" in p.stdout.readline()
        assert all(p.poll() is None for p in procs) and not (dest / GPU).exists()
    for p in procs:
        out = p.communicate(timeout=60)[0]
        assert p.returncode == 0 and "1 files into" in out, out
    m = json.loads((dest / GPU / "manifest.json").read_text())
    assert sorted(m["units"]) == ["c1", "c2"]
    index = (dest / GPU / "reports" / "index.html").read_text()
    assert "<a href='c1.html'>" in index and "<a href='c2.html'>" in index


# ---- a command checks what it is given before anything is written
@pytest.fixture
def node_tree(tmp_path, monkeypatch):
    """A tree as the GPU machine gets it, here: HPML_LAB_HOME a folder of the test's (its data/ and
    reports/gpu/)."""
    home = tmp_path / "tree"
    home.mkdir()
    monkeypatch.setenv("HPML_LAB_HOME", str(home))
    monkeypatch.delenv("OUT", raising=False)
    monkeypatch.chdir(home)  # where a command starts on the node: no .whl of the developer's checkout is read
    return home


@pytest.mark.parametrize(
    "args, said",
    [
        (["--units", "nosuch"], "--units: no unit nosuch (units: "),
        (["--units", "c1,bench,c99"], "--units: no unit c99"),
        (["--units", "c1", "--limit", "1e300"], "--limit must be a positive number of seconds up to"),
        (["--units", "c1", "--limit", "-5"], "--limit must be a positive number of seconds up to"),
        (["--units", "c1", "--pack", "{file}"], "is not a folder this command can write"),
        (["--units", "c1", "--pack", "{file}/OUT"], "is not a folder this command can write"),
        (["--part", "9"], "--part must be 1 to"),
    ],
    ids=["unknown", "one-unknown", "limit-1e300", "limit-negative", "out-a-file", "out-under-a-file", "part"],
)
def test_run_refuses_what_it_cannot_use_before_any_data_is_written(node_tree, tmp_path, capsys, args, said):
    """The issue's case: `run --units nosuch` wrote 50,000 images into data/, ran 99 s, recorded KeyError and
    exited 0; an $OUT that was a file ended in an OSError traceback; --limit 1e300 overflowed the watchdog."""
    a_file = tmp_path / "afile"
    a_file.write_text("not a folder")
    args = [x.replace("{file}", str(a_file)) for x in args]
    _refused(["run", "--device", "cpu", *args], capsys, said)
    assert not list(node_tree.iterdir())  # no data/, no reports/gpu/
    assert a_file.read_text() == "not a folder"


def test_run_refuses_an_out_it_cannot_write_a_byte_to(node_tree, tmp_path):
    """$OUT full (a file-size limit of 0 bytes stands in for a full disk): one line before any data."""
    env = {**os.environ, **NO_BYTECODE, "PYTHONPATH": TREE, "HPML_LAB_HOME": str(node_tree)}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "hpml_lab.gpu",
            "run",
            "--device",
            "cpu",
            "--units",
            "c1",
            "--pack",
            tmp_path / "OUT",
        ],
        preexec_fn=_limited(0),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "is not a folder this command can write (File too large)" in r.stderr
    assert not list(node_tree.iterdir()) and not list((tmp_path / "OUT").iterdir())


def test_a_damaged_manifest_on_the_node_is_one_line_before_anything_runs(node_tree, tmp_path, capsys):
    out = tmp_path / "node-out"
    out.mkdir()
    (out / "manifest.json").write_text('{"units": {"c1": {"status": "ok", "files": "x"}}}')
    _refused(["run", "--device", "cpu", "--units", "bench", "--out", out], capsys, str(out / "manifest.json"))
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json"] and not list(node_tree.iterdir())


# ---- an $OUT that fills mid-job: recorded, and the next units still run
FILLS = """
import os, sys
from hpml_lab.gpu import node, run

def fake(unit, out, device, data_root, log):
    (out / "reports").mkdir(exist_ok=True)
    (out / "reports" / f"{unit}.html").write_bytes(os.urandom(60_000))  # incompressible
    return {"status": "ok"}

node.run_unit = fake
run.run(None, "cpu", sys.argv[1], ["c1", "c2", "c3"], pack_to=sys.argv[2])
"""


def test_an_out_that_fills_mid_job_is_recorded_and_the_next_units_run(tmp_path):
    """Files may grow to 100 kB (a full disk as the fault tests make one): c1's archive fits, the archive with
    c2 does not. The command records the error, leaves no cut-short .tmp in $OUT and the last whole archive in
    place, runs c3, and ends as usual (before: an OSError traceback from pack, a 0-byte .tar.gz.tmp, c3 never
    ran)."""
    node_out, out = tmp_path / "node" / "cpu-dry-run", tmp_path / "OUT"
    env = {**os.environ, **NO_BYTECODE, "PYTHONPATH": TREE, "HPML_LAB_HOME": str(tmp_path / "node")}
    r = subprocess.run(
        [sys.executable, "-c", FILLS, node_out, out],
        preexec_fn=_limited(100_000),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout[-2000:] + r.stderr[-2000:]
    assert "not packed: File too large" in r.stdout and "the next unit runs" in r.stdout
    m = json.loads((node_out / "manifest.json").read_text())
    assert {u: x["status"] for u, x in m["units"].items()} == {"c1": "ok", "c2": "ok", "c3": "ok"}
    (command,) = m["commands"].values()
    assert "File too large" in command["pack_error"]
    assert [p.name for p in out.iterdir()] == ["cpu-dry-run.partx.tar.gz"]  # no .tmp left
    home = tmp_path / "home"
    unpack.unpack(out, home, **QUIET)  # what came home is whole: c1, as packed after it
    units = json.loads((home / "cpu-dry-run" / "manifest.json").read_text())["units"]
    assert list(units) == ["c1"]
    assert (home / "cpu-dry-run" / "reports" / "c1.html").read_bytes() == (
        node_out / "reports" / "c1.html"
    ).read_bytes()


def test_an_unpack_that_cannot_write_is_one_line_and_keeps_the_manifest(tmp_path, monkeypatch):
    dest, _ = _unpacked_once(tmp_path)
    manifest = (dest / GPU / "manifest.json").read_bytes()
    a = _archive(
        tmp_path / "a.tar.gz",
        _manifest(200.0, {"c2": _record(200.0, ["reports/c2.html"])}),
        {"reports/c2.html": b"<html>c2</html>"},
    )
    import errno

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dest / GPU / "reports" / "c2.html"))

    monkeypatch.setattr(unpack.shutil, "copyfileobj", full)
    with pytest.raises(ConfigError, match="No space left on device.*the manifest there is unchanged"):
        unpack.unpack(a, dest, **QUIET)
    assert (dest / GPU / "manifest.json").read_bytes() == manifest


def test_one_refused_archive_in_a_folder_writes_nothing_of_the_others(tmp_path, capsys):
    """Every archive of the call is checked whole before anything of any is written."""
    dest, before = _unpacked_once(tmp_path)
    folder = tmp_path / "came-home"
    folder.mkdir()
    _archive(
        folder / "a-good.tar.gz",
        _manifest(200.0, {"c2": _record(200.0, ["reports/c2.html"])}),
        {"reports/c2.html": b"<html>c2</html>"},
    )
    _flipped(
        _archive(folder / "b-bad.tar.gz", _manifest(300.0, {}), {"reports/c3.html": b"<html>c3</html>" * 50}),
        -8,
    )
    _refused(["unpack", folder, "--dest", dest], capsys, "b-bad.tar.gz")
    assert _snapshot(dest) == before
