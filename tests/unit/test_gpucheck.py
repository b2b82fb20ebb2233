"""The GPU check kit without a GPU: its plan for bare machines, results packed as each unit finishes (a
command killed half-way), unpacking that merges in any order, provenance without .git, the machine's record.
The kit on the GPU image's package set, command by command, is tests/notebooks/test_gpucheck_image.py."""

import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from hpml_lab import envinfo
from hpml_lab.config import ConfigError, project_root
from hpml_lab.gpu import __main__ as kit
from hpml_lab.gpu import node, pack, run, unpack, wheels
from hpml_lab.report import gpuplan

ROOT = project_root()
THIS_CODE = envinfo.tree_digest(envinfo.code_root())  # the tree digest a unit run by this code records
QUIET = {"log": lambda *a: None}


def out_within_limits(out: Path) -> list[Path]:
    """$OUT as the device tool brings it back: at most 8 files, 16 MiB each, 64 MiB together, 2 folders deep,
    plain names; returns the files."""
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= 8, files
    assert all(p.stat().st_size <= 16 * 2**20 for p in files)
    assert sum(p.stat().st_size for p in files) <= 64 * 2**20
    assert all(len(p.relative_to(out).parts) <= 3 for p in files)  # 2 folders, then the file
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+", p.name) for p in files), files
    return files


@pytest.mark.slow  # asks PyPI (the one index these machines reach)
def test_a_wheel_the_index_lacks_is_named_and_the_others_are_kept(tmp_path, monkeypatch):
    """The wheels come in one pip process; where it fails, each is asked for alone, so the error names the one
    missing and what exists is fetched."""
    wanted = [("six", "1.16.0"), ("hpml-lab-no-such-package", "1.0")]
    monkeypatch.setattr(wheels, "wheel_list", lambda python: wanted)
    with pytest.raises(
        ConfigError, match=r"^no CPython 3\.11 manylinux wheel of hpml-lab-no-such-package==1\.0: "
    ):
        wheels.download_wheels(tmp_path, log=lambda *a: None, python="3.11")
    assert [w.name for w in tmp_path.glob("*.whl")] == ["six-1.16.0-py2.py3-none-any.whl"]


def test_wheel_list_covers_the_notebook_machinery_and_skips_what_the_image_has():
    names = dict(wheels.wheel_list())
    assert {"papermill", "nbconvert", "nbformat", "nbclient", "ipykernel", "jupyter-client"} <= set(names)
    assert "pyzmq" in names and "tornado" in names  # dependencies, found through the metadata
    assert {"traceinsight", "plotly", "pydot"} <= set(
        names
    ) and "jupyterlab" not in names  # HTA, no JupyterLab
    assert not set(names) & {"torch", "numpy", "pandas", "matplotlib", "pyyaml", "tqdm"}


def test_plan_is_at_most_2_plain_commands_that_fit_a_15_minute_lease_of_bare_machines(capsys):
    p = gpuplan.plan()
    assert p["fits"] and 1 <= len(p["commands"]) <= gpuplan.MAX_COMMANDS == 2
    for i, c in enumerate(p["commands"], 1):
        # no make; the limit after which it stops itself, its start left out (the start is not its own time)
        assert (
            c["command"]
            == f"python3 -m hpml_lab.gpu run --part {i} --limit {c['limit_s'] - gpuplan.START_S:.0f}"
        )
        assert c["estimate_s"] <= c["limit_s"] and c["setup_s"] >= gpuplan.START_S + gpuplan.INSTALL_S[0]
        # every command on a bare machine
        assert "measured here" in c["basis"] and f"start {gpuplan.START_S:.0f} s" in c["basis"]
    # at worst (each call to its limit and grace, a start and the 30 s held after each) within the 15 minutes,
    # and the second may start (no machine starts with under 4 minutes left)
    worst = [gpuplan.START_S + gpuplan.run_limit(i) + gpuplan.GRACE_S + gpuplan.IDLE_S for i in (1, 2)]
    assert sum(worst) <= 900 and 900 - worst[0] >= 240 and p["total_s"] <= p["check_limit_s"]
    every = [u for c in p["commands"] for u in c["units"]] + list(p["left_out"])
    assert sorted(every) == sorted(gpuplan.units())  # each unit planned once, or named as left out
    for reader, source in (
        ("questions", "c6"),
        ("c4", "c3"),
    ):  # it reads the other's results: the same command
        assert [reader in c["units"] for c in p["commands"]] == [source in c["units"] for c in p["commands"]]
        assert gpuplan.units().index(source) < gpuplan.units().index(reader)
    assert kit.main(["plan"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line and not line.startswith("#")]
    assert lines == [c["command"] for c in p["commands"]]
    assert kit.main(["plan", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["commands"][0]["basis"]


def test_the_plans_measured_figures_are_those_the_gpu_checks_recorded():
    """gpuplan.MEASURED replaces predictions with the seconds a GPU check recorded: each must be that of the
    manifest its basis names (c4's without the C3 sweep it then ran itself, as its basis says; bench was cut
    off, at least that)."""
    checks = {
        gpu: json.loads((ROOT / path).read_text())["units"]
        for gpu, path in (("H200", gpuplan.H200_CHECK), ("H100", gpuplan.H100_CHECK))
    }
    from hpml_lab.report import tasks

    timed = {t.id: t.gpu_timed for t in tasks.TASKS.values() if t.gpu_timed}
    measured = {**{u: tb for u, tb in timed.items() if tb[1].startswith("measured")}, **gpuplan.MEASURED}
    assert {"c1", "c2", "c3", "c5", "c7", "lab5", "questions", "speed", "tests", "bench"} <= set(measured)
    for u, (seconds, basis) in measured.items():
        gpu = next(g for g in checks if f" on an {g} " in basis)
        units = checks[gpu]
        if basis.startswith("cut off after"):
            assert u not in units or units[u]["status"] != "ok"
            assert seconds > float(basis.split()[3]), u
            continue
        assert units[u]["status"] == "ok" and round(units[u]["seconds"]) == seconds, u
        assert f"measured: {round(units[u]['seconds'])} s on an {gpu}" in basis
    assert gpuplan.unit_estimate("c1") == tasks.get("c1").gpu_timed  # a task's own timing, read from its TASK
    predicted = {
        **{u: tb for u, tb in timed.items() if not tb[1].startswith("measured")},
        **gpuplan.PREDICTED,
    }
    assert {"c4", "c6", "c8", "memory"} <= set(predicted)
    for u, (seconds, basis) in predicted.items():  # changed since it was timed: a prediction, named
        assert gpuplan.unit_estimate(u) == (seconds, basis) and basis.startswith("predicted: ")
    for gpu, path in (("NVIDIA-H200", gpuplan.H200_CHECK), ("NVIDIA-H100-80GB-HBM3", gpuplan.H100_CHECK)):
        units = json.loads((ROOT / path).read_text())["units"]
        # run by an earlier commit's code (their kit recorded no tree): home, but not this code's pages
        assert gpuplan.home(ROOT)[gpu] == {
            "this code": [],
            "other code": sorted(u for u, r in units.items() if r["status"] == "ok"),
        }


def test_the_plans_flops_are_those_hpml_lab_counts():
    from hpml_lab import flops

    assert gpuplan.STEP_FLOPS == {
        "cifar10": flops.step_flops_per_image("resnet18"),
        "tinyimagenet": flops.step_flops_per_image("resnet18", 200, "imagenet", "bn", 64),
    }


def test_plan_leaves_out_what_does_not_fit_and_says_so(monkeypatch):
    monkeypatch.setitem(gpuplan.PREDICTED, "bench", (400.0, "made slow for the test"))
    p = gpuplan.plan()
    assert "bench" in p["left_out"] and all(c["estimate_s"] <= c["limit_s"] for c in p["commands"])
    assert any(x.startswith("# not planned") and "bench" in x for x in gpuplan.text(p).splitlines())
    # what the whole lab needs against what a check holds, so that a lease is planned for it
    every = sum(gpuplan.unit_estimate(u)[0] for u in gpuplan.units())
    assert p["every_unit_s"] == round(every) and p["every_unit_s"] > p["units_room_s"] > 0
    assert p["checks_for_every_unit"] == -(-every // p["units_room_s"])
    assert f"running them all takes about {p['checks_for_every_unit']} such checks" in gpuplan.text(p)


# a command in its own process whose units are fakes: `slow` sleeps (a unit the command is stopped in)
FAKE_UNITS = """
import sys, time
import torch  # imported before the command starts: its import is not the command's time, on a busy machine
from hpml_lab.gpu import node, run
from hpml_lab.gpu.__main__ import main
from hpml_lab.report import gpuplan

UNITS = gpuplan.units
gpuplan.units = lambda: [*UNITS(), "slow"]  # a unit of the check's, for this command

def fake(unit, out, device, data_root, log):
    if unit == "slow":
        time.sleep(300)
    (out / "reports").mkdir(exist_ok=True)
    (out / "reports" / f"{unit}.html").write_text(f"<html>{unit}</html>")
    (out / "reports" / f".{unit}.lock").write_text("")  # the runner's flock: not a result
    return {"status": "ok"}

node.run_unit = fake
"""
KILLED = (
    FAKE_UNITS
    + """
run.run(None, "cpu", sys.argv[1], ["c1", "c2", "slow"], pack_to=sys.argv[2])
"""
)


def _members(archive: Path) -> list[str]:
    with tarfile.open(archive) as tar:
        return sorted(tar.getnames())


def _when_packed(proc, archive: Path, member: str) -> None:
    """Wait (up to 240 s) until `member` is in the archive the process keeps rewriting, then a second more: by
    then the process is in the next unit, `slow`."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if archive.is_file() and member in _members(archive):
            break
        time.sleep(0.2)
    time.sleep(1)


def test_a_command_killed_half_way_brings_home_its_finished_units_and_the_next_skips_them(
    tmp_path, monkeypatch
):
    out, tree = tmp_path / "OUT", tmp_path / "node" / "cpu-dry-run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HPML_LAB_HOME": str(tmp_path / "node")}
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(tree), str(out)], env=env)
    archive = out / "cpu-dry-run.partx.tar.gz"
    _when_packed(proc, archive, "cpu-dry-run/reports/c2.html")
    proc.send_signal(signal.SIGKILL)  # the limit: no clean-up runs
    proc.wait()
    assert [p.name for p in out_within_limits(out)] == [archive.name]
    names = _members(archive)
    assert {"cpu-dry-run/reports/c1.html", "cpu-dry-run/reports/c2.html", "cpu-dry-run/manifest.json"} <= set(
        names
    )
    assert "cpu-dry-run/node-partx.json" in names
    assert not [n for n in names if n.endswith(".lock")]  # the H200 check brought home each task's lock file
    home = tmp_path / "home"
    unpack.unpack(out, home, **QUIET)
    units = json.loads((home / "cpu-dry-run" / "manifest.json").read_text())["units"]
    assert {u: r["status"] for u, r in units.items()} == {"c1": "ok", "c2": "ok"}  # `slow` never finished
    ran = []  # the next command, on the tree that carries what came home: finished units are skipped
    units = gpuplan.units()
    monkeypatch.setattr(gpuplan, "units", lambda: [*units, "slow"])
    monkeypatch.setattr(node, "run_unit", lambda unit, *a: ran.append(unit) or {"status": "ok"})
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    run.run(None, "cpu", home / "cpu-dry-run", ["c1", "c2", "slow"], pack_to=tmp_path / "OUT2", **QUIET)
    assert ran == ["slow"]


STOPPED = (
    FAKE_UNITS
    + """
sys.exit(main(["run", "--device", "cpu", "--units", "c1,slow,c2", "--out", sys.argv[1], "--pack",
                        sys.argv[2], "--wheels", sys.argv[3], *sys.argv[4:]]))
"""
)


def _stopped(tmp_path, *extra):
    out, tree = tmp_path / "OUT", tmp_path / "node" / "cpu-dry-run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HPML_LAB_HOME": str(tmp_path / "node")}
    argv = [sys.executable, "-c", STOPPED, str(tree), str(out), str(tmp_path / "no-wheels"), *extra]
    return out, subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)


def test_limit_stops_the_command_itself_as_a_time_limit_would(tmp_path):
    """--limit: at the limit the command SIGTERMs itself: the unit it cut off recorded, one line, 128 + 15.
    The limit leaves c1 (a fake that returns at once) several seconds beyond the command's own set-up, which
    took up to 4 s at a load of 3-6 on 2 cores."""
    out, proc = _stopped(tmp_path, "--limit", "8")
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 128 + signal.SIGTERM and err.startswith("gpu-check: stopped by SIGTERM"), err
    home = tmp_path / "home"
    unpack.unpack(out, home, **QUIET)
    m = json.loads((home / "cpu-dry-run" / "manifest.json").read_text())
    assert {u: r["status"] for u, r in m["units"].items()} == {"c1": "ok", "slow": "interrupted"}
    (command,) = m["commands"].values()
    assert command["limit_s"] == 8 and command["seconds"] < 30


def test_a_job_stopped_by_sigterm_records_the_unit_it_cut_off_and_ends_in_one_line(tmp_path):
    """The H200 check's second command was stopped by `timeout` (SIGTERM, as a Slurm time limit sends): it
    ended in a traceback, and the unit it cut off came home as "not run". Now the unit is recorded as
    interrupted and packed, the units after it as not started, and the command ends with one line and 128 +
    the signal's number."""
    out, proc = _stopped(tmp_path)
    _when_packed(proc, out / "cpu-dry-run.partx.tar.gz", "cpu-dry-run/reports/c1.html")
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 128 + signal.SIGTERM
    assert err.strip().splitlines() == [
        f"gpu-check: stopped by SIGTERM: the units finished before it are in the manifest and packed in "
        f"{out};"
        " run the command again to go on"
    ]
    home = tmp_path / "home"
    unpack.unpack(out, home, **QUIET)
    m = json.loads((home / "cpu-dry-run" / "manifest.json").read_text())
    assert {u: r["status"] for u, r in m["units"].items()} == {"c1": "ok", "slow": "interrupted"}
    assert m["units"]["slow"]["error"] == "signal SIGTERM" and m["units"]["slow"]["seconds"] >= 1
    (command,) = m["commands"].values()
    assert command["units"] == {
        "c1": "ok",
        "slow": "interrupted",
        "c2": "not started: the command was stopped",
    }


def _command(tmp_path, monkeypatch, gpu: str, part: int, units: dict[str, str], out: Path) -> None:
    """One fake command on a fresh node for GPU `gpu`: units finish with the given statuses, packed into
    out."""
    tree = tmp_path / f"node-{gpu}-{part}-{time.monotonic_ns()}"

    def fake(unit, folder, device, data_root, log):
        (folder / "reports").mkdir(exist_ok=True)
        (folder / "reports" / f"{unit}.html").write_text(f"<html>{unit} part {part}</html>")
        return {"status": units[unit]}

    monkeypatch.setattr(node, "run_unit", fake)
    monkeypatch.setattr(node, "gpu_name", lambda device: gpu)
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    run.run(part, "cpu", tree, list(units), pack_to=out, **QUIET)
    time.sleep(0.01)


def test_unpack_merges_any_archives_in_any_order_into_one_manifest_and_index(tmp_path, monkeypatch):
    plan, _ = gpuplan.parts()
    p1, p2 = plan[0], plan[1]
    out = tmp_path / "OUT"
    _command(tmp_path, monkeypatch, "NVIDIA-H100", 1, {p1[0]: "failed", p1[1]: "ok"}, out / "a")
    _command(tmp_path, monkeypatch, "NVIDIA-H100", 2, {p2[0]: "ok"}, out / "b")
    _command(tmp_path, monkeypatch, "NVIDIA-H100", 1, {p1[0]: "ok"}, out / "c")  # a rerun: now ok
    _command(tmp_path, monkeypatch, "NVIDIA-H200", 1, {p1[0]: "ok"}, out / "d")
    archives = sorted(out.rglob("*.tar.gz"))
    assert len(archives) == 4
    results = []
    for order, dest in ((archives, tmp_path / "home1"), (archives[::-1], tmp_path / "home2")):
        for a in order:  # one at a time, as they came home
            unpack.unpack(a, dest, **QUIET)
        results.append(dest)
    for gpu in ("NVIDIA-H100", "NVIDIA-H200"):
        m1, m2 = (json.loads((d / gpu / "manifest.json").read_text()) for d in results)
        assert m1 == m2
        i1, i2 = ((d / gpu / "reports" / "index.html").read_text() for d in results)
        assert i1 == i2
    m = json.loads((results[0] / "NVIDIA-H100" / "manifest.json").read_text())
    left = gpuplan.parts()[1]
    stages = [f"part{i}" for i in range(1, len(plan) + 1)] + (["not planned"] if left else [])
    assert sorted(m["stages"]) == sorted(stages)
    # every unit of the check has its row: the H200 check's index listed none of the units the plan left out
    assert sorted(u for st in m["stages"].values() for u in st["units"]) == sorted(gpuplan.units())
    assert all(m["stages"]["not planned"]["units"][u] == "not run" for u in left)
    for i, us in enumerate(plan, 1):  # every stage lists every unit of the plan, with its status
        assert sorted(m["stages"][f"part{i}"]["units"]) == sorted(us)
    assert m["stages"]["part1"]["units"][p1[0]] == "ok" and m["stages"]["part1"]["units"][p1[1]] == "ok"
    assert m["stages"]["part2"]["units"][p2[0]] == "ok" and m["stages"]["part2"]["status"] in (
        "ok",
        "incomplete",
    )
    assert m["stages"][f"part{len(plan)}"]["units"][plan[-1][-1]] in ("not run", "ok")
    assert (
        results[0] / "NVIDIA-H100" / "reports" / f"{p1[0]}.html"
    ).read_text() == f"<html>{p1[0]} part 1</html>"
    index = (results[0] / "NVIDIA-H100" / "reports" / "index.html").read_text()
    for u in (p1[0], p1[1], p2[0]):  # every report that came home is linked
        assert f"<a href='{u}.html'>" in index
    assert len(re.findall(r"<a href='[^']+\.html'>", index)) == 3
    h200 = json.loads((results[0] / "NVIDIA-H200" / "manifest.json").read_text())
    assert {u for u, r in h200["units"].items()} == {p1[0]}
    # a folder of archives at once gives the same
    unpack.unpack(out / "a", tmp_path / "home3", **QUIET)
    unpack.unpack(out / "c", tmp_path / "home3", **QUIET)
    unpack.unpack(out / "b", tmp_path / "home3", **QUIET)
    assert json.loads((tmp_path / "home3" / "NVIDIA-H100" / "manifest.json").read_text()) == m


def test_unpack_called_again_keeps_each_units_kept_result_and_its_pages(tmp_path, monkeypatch):
    out = tmp_path / "OUT"
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    monkeypatch.setattr(node, "gpu_name", lambda device: "H100")

    def command(name: str, status: str) -> None:
        def fake(unit, folder, device, data_root, log):
            (folder / "reports").mkdir(exist_ok=True)
            (folder / "reports" / "c1.html").write_text(f"<html>{name}</html>")
            (folder / "results" / "c1" / name).mkdir(parents=True)
            (folder / "results" / "c1" / name / "metrics.csv").write_text(name)
            return {"status": status}

        monkeypatch.setattr(node, "run_unit", fake)
        run.run(1, "cpu", tmp_path / f"node-{name}", ["c1"], pack_to=out / name, **QUIET)
        time.sleep(0.01)

    command("old", "ok")
    command("new", "ok")
    command("broken", "failed")  # the newest, but not ok: the manifest keeps `new`, and so must the pages

    def unpacked(order: list[str]) -> tuple[dict, dict]:
        home = tmp_path / ("home-" + "-".join(order))
        for name in order:  # one call per archive, as they came home
            unpack.unpack(out / name, home, **QUIET)
        folder = home / "H100"
        files = {p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*") if p.is_file()}
        return json.loads(files.pop("manifest.json"))["units"]["c1"], files

    for order in (["new", "old", "broken"], ["broken", "new", "old"], ["old", "broken", "new"]):
        unit, files = unpacked(order)
        assert unit["status"] == "ok" and unit["files"] == ["reports/c1.html", "results/c1/new/metrics.csv"]
        assert files["reports/c1.html"] == "<html>new</html>", order
        assert sorted(f for f in files if f.startswith("results/")) == ["results/c1/new/metrics.csv"], order
        assert "<a href='c1.html'>" in files["reports/index.html"]
    # a review: a unit brought home ok by an earlier commit's code, run again by this code and failed,
    # kept the old ok (ok beat not ok) and its page, so one GPU's pages mixed two commits. A record run by
    # this code is kept before another code's, and the other's files go
    with monkeypatch.context() as m:  # the earlier commit's code
        m.setattr(envinfo, "tree_digest", lambda root: "0" * 64)
        command("earlier", "ok")
    command("rerun", "failed")  # this code, failed
    for order in (["earlier", "rerun"], ["rerun", "earlier"]):
        unit, files = unpacked(order)
        assert unit["status"] == "failed" and unit["tree"] == THIS_CODE, order
        assert "results/c1/earlier/metrics.csv" not in files and "results/c1/rerun/metrics.csv" in files, (
            order
        )


def test_pack_drops_traces_to_fit_and_unpack_refuses_escapes(tmp_path):
    src = tmp_path / "src"
    (src / "reports").mkdir(parents=True)
    (src / "reports" / "c1.html").write_text("<html>c1</html>")
    (src / "reports" / "index.html").write_text("<html>this command's own index</html>")
    (src / "manifest.json").write_text("{}")
    (src / "trace.json.gz").write_bytes(os.urandom(300_000))  # incompressible
    (a,), left = pack.pack(src, tmp_path / "o" / "x.part1.tar.gz", prefix="H100", limit=200_000, **QUIET)
    assert _members(a) == ["H100/manifest.json", "H100/reports/c1.html"] and left == ["trace.json.gz"]
    assert [p.name for p in a.parent.iterdir()] == [a.name]
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as tar:
        tar.add(src / "manifest.json", arcname="../escaped.json")
    with pytest.raises(ConfigError, match="refused"):
        unpack.unpack(evil, tmp_path / "home2", **QUIET)
    assert not (tmp_path / "escaped.json").exists() and not (tmp_path / "home2").exists()
    assert kit.main(["unpack", str(tmp_path / "missing")]) == 2


def test_more_than_one_archive_holds_is_split_within_the_limits_and_what_fits_none_is_named(
    tmp_path, monkeypatch
):
    # a command whose results (no traces) are over one archive's limit: a second archive, not a pack error
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    monkeypatch.setattr(node, "gpu_name", lambda device: "H100")
    monkeypatch.setattr(pack, "ARCHIVE_LIMIT", 250_000)

    def fake(unit, folder, device, data_root, log):
        (folder / "results" / unit).mkdir(parents=True)
        for i in range(2):  # incompressible: 300 kB of results, over one archive's 250 kB
            (folder / "results" / unit / f"part{i}.csv").write_bytes(os.urandom(150_000))
        (folder / "reports").mkdir(exist_ok=True)
        (folder / "reports" / f"{unit}.html").write_text(f"<html>{unit}</html>")
        return {"status": "ok"}

    monkeypatch.setattr(node, "run_unit", fake)
    out = tmp_path / "OUT"
    tree = run.run(1, "cpu", tmp_path / "node", ["c1"], pack_to=out, **QUIET)
    files = out_within_limits(out)
    assert [f.name for f in files] == ["H100.part1-2.tar.gz", "H100.part1.tar.gz"]
    assert all(f.stat().st_size <= 250_000 and "H100/manifest.json" in _members(f) for f in files)
    assert "pack_error" not in json.loads((tree / "manifest.json").read_text())["commands"].popitem()[1]
    unpack.unpack(out, tmp_path / "home", **QUIET)  # both archives: every file home
    for rel in ("results/c1/part0.csv", "results/c1/part1.csv", "reports/c1.html"):
        assert (tmp_path / "home" / "H100" / rel).read_bytes() == (tree / rel).read_bytes()

    # no room for a second archive ($OUT's 8 files taken but one): the file that fits nowhere is named
    full = tmp_path / "OUT-full"
    full.mkdir()
    for i in range(7):
        (full / f"other{i}.txt").write_text("")
    tree2 = run.run(1, "cpu", tmp_path / "node2", ["c2"], pack_to=full, **QUIET)
    assert len(out_within_limits(full)) == 8
    cmd = json.loads((tree2 / "manifest.json").read_text())["commands"].popitem()[1]
    (kept,) = [m for m in _members(full / "H100.part1.tar.gz") if m.startswith("H100/results/")]
    assert cmd["left_out_of_archive"] == [
        ({"H100/results/c2/part0.csv", "H100/results/c2/part1.csv"} - {kept}).pop().removeprefix("H100/")
    ]
    with tarfile.open(full / "H100.part1.tar.gz") as tar:  # said in the manifest that came home
        m = json.load(tar.extractfile("H100/manifest.json"))
    assert m["commands"].popitem()[1]["left_out_of_archive"] == cmd["left_out_of_archive"]


def test_records_made_without_git_carry_the_commit_from_gpu_wheels(tmp_path, monkeypatch):
    here = envinfo.git_commit()
    assert re.fullmatch(r"[0-9a-f]{40}", here["commit"])
    path = wheels.write_provenance(tmp_path / "whl")
    assert json.loads(path.read_text())["commit"] == here["commit"]
    copy = tmp_path / "copy"  # a project home without .git, as the GPU machine gets the tree
    (copy / "hpml_lab").mkdir(parents=True)
    (copy / "pyproject.toml").write_text("")
    monkeypatch.setenv("HPML_LAB_HOME", str(copy))
    monkeypatch.delenv("HPML_PROVENANCE", raising=False)
    envinfo.git_commit.cache_clear()
    try:
        assert envinfo.git_commit() == {"commit": "unknown", "dirty": None}
        envinfo.git_commit.cache_clear()
        wheels.use_provenance(tmp_path / "whl")
        assert envinfo.git_commit() == here
        assert envinfo.environment("cpu")["commit"] == here["commit"]
        # a .whl kept from other code (review 15: one written at an earlier commit was carried): refused in
        # one line before any unit, and no record names its commit
        rec = json.loads(path.read_text())
        path.write_text(json.dumps({**rec, "tree": "0" * 64}))
        envinfo.git_commit.cache_clear()
        with pytest.raises(
            ConfigError,
            match=r"does not hold for this tree: it was written for commit "
            r".*differs",
        ):
            wheels.use_provenance(tmp_path / "whl")
        assert envinfo.git_commit() == {"commit": "unknown", "dirty": None}
        old = {k: v for k, v in json.loads(path.read_text()).items() if k != "tree"}  # an older kit's record
        path.write_text(json.dumps(old))
        envinfo.git_commit.cache_clear()
        with pytest.raises(ConfigError, match="by an older kit, which recorded no tree; run make gpu-wheels"):
            wheels.use_provenance(tmp_path / "whl")
    finally:
        envinfo.git_commit.cache_clear()


def test_a_checkout_with_changes_whose_code_the_wheels_vouch_for_names_their_commit(tmp_path, monkeypatch):
    """The GPU machine's copy of the H200's check of 2026-11-28 was an older checkout with this tree laid over
    it: every page read "b7353ea (dirty)" for code that was 9167aa4's. Where .whl/provenance.json was written
    for this very code (tree_digest), its commit is the one named; a stale one is not, and the checkout's own
    commit stays, dirty."""
    envinfo.git_commit.cache_clear()
    here = envinfo.git_commit()
    path = wheels.write_provenance(tmp_path / "whl")
    rec = json.loads(path.read_text())
    copy = tmp_path / "copy"  # a checkout of its own, one commit, then a tracked file changed
    (copy / "hpml_lab").mkdir(parents=True)
    (copy / "pyproject.toml").write_text("")
    git = ["git", "-C", str(copy), "-c", "user.email=t@t", "-c", "user.name=t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "older"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    older = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    (copy / "pyproject.toml").write_text("[project]\n")
    monkeypatch.setenv("HPML_LAB_HOME", str(copy))
    monkeypatch.delenv("HPML_PROVENANCE", raising=False)
    try:
        envinfo.git_commit.cache_clear()
        assert envinfo.git_commit() == {"commit": older, "dirty": True}  # no wheels: its own, dirty
        monkeypatch.setenv("HPML_PROVENANCE", str(path))
        envinfo.git_commit.cache_clear()
        assert (
            envinfo.git_commit()
            == {"commit": rec["commit"], "dirty": rec["dirty"]}
            != {
                "commit": older,
                "dirty": True,
            }
        )
        path.write_text(json.dumps({**rec, "tree": "0" * 64}))  # written for other code: not taken
        envinfo.git_commit.cache_clear()
        assert envinfo.git_commit() == {"commit": older, "dirty": True}
    finally:
        envinfo.git_commit.cache_clear()
    assert rec["commit"] == here["commit"] != older


def test_the_tree_digest_covers_the_code_that_runs_and_nothing_else(tmp_path):
    """What provenance.json vouches for: the package's, the notebooks' and the tests' code and pyproject.toml;
    caches and data files beside them change nothing, one changed line changes it."""
    (tmp_path / "hpml_lab" / "sub").mkdir(parents=True)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "hpml_lab" / "sub" / "x.py").write_text("A = 1\n")
    (tmp_path / "notebooks" / "n.ipynb").write_text("{}")
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    first = envinfo.tree_digest(tmp_path)
    (tmp_path / "hpml_lab" / "sub" / "__pycache__").mkdir()
    (tmp_path / "hpml_lab" / "sub" / "__pycache__" / "x.cpython-312.pyc").write_bytes(b"\0")
    (tmp_path / "hpml_lab" / "data.csv").write_text("a\n1\n")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "r.py").write_text("")
    (tmp_path / "notebooks" / ".ipynb_checkpoints").mkdir()  # ignored by git: it never reaches a GPU machine
    (tmp_path / "notebooks" / ".ipynb_checkpoints" / "n-checkpoint.ipynb").write_text("{}")
    assert envinfo.tree_digest(tmp_path) == first
    (tmp_path / "hpml_lab" / "sub" / "x.py").write_text("A = 2\n")
    assert envinfo.tree_digest(tmp_path) != first
    (tmp_path / "hpml_lab" / "sub" / "x.py").write_text("A = 1\n")
    (tmp_path / "notebooks" / "n.ipynb").rename(tmp_path / "notebooks" / "m.ipynb")  # a name is part of it
    assert envinfo.tree_digest(tmp_path) != first
    (tmp_path / "notebooks" / "m.ipynb").rename(tmp_path / "notebooks" / "n.ipynb")
    assert envinfo.tree_digest(tmp_path) == first
    (tmp_path / "tests").mkdir()  # the CUDA tests a check runs are code it ran
    (tmp_path / "tests" / "test_x.py").write_text("def test_x(): pass\n")
    assert envinfo.tree_digest(tmp_path) != first
    assert envinfo.tree_digest(envinfo.code_root()) == envinfo.tree_digest(ROOT)


def test_gpu_wheels_carries_the_course_script_beside_the_wheels_and_the_run_points_at_it(
    tmp_path, monkeypatch
):
    """copy_course: the course's lab2.py folder (here a stand-in named by $HPML_COURSE_LAB2, as a checkout
    with ../shared finds the real one) copied whole to .whl/course-lab2, replacing an older copy; use_course
    then points the speed ladder there; without the course's code, one line says the page will say so."""
    from hpml_lab.studies.speed import course

    src = tmp_path / "shared" / "course-lab2"
    src.mkdir(parents=True)
    for name in ("lab2.py", "loader.py", "model.py", "run_on_synthetic.py", "README.md"):
        (src / name).write_text(f"# {name}\n")
    (src / "__pycache__").mkdir()  # not carried
    dest = tmp_path / "whl"
    (dest / wheels.COURSE).mkdir(parents=True)
    (dest / wheels.COURSE / "stale.py").write_text("")
    monkeypatch.setenv(course.ENV, str(src))
    lines = []
    target = wheels.copy_course(dest, log=lines.append)
    assert target == (dest / wheels.COURSE).resolve() and str(src) in lines[0]
    assert sorted(f.name for f in target.iterdir()) == sorted(
        ["lab2.py", "loader.py", "model.py", "run_on_synthetic.py", "README.md"]
    )
    assert not list(dest.glob(".course-lab2-*"))  # no temporary folder left
    monkeypatch.delenv(course.ENV)
    wheels.use_course(dest)
    assert os.environ[course.ENV] == str(target) and course.find() == target
    monkeypatch.setenv(course.ENV, str(tmp_path / "nowhere"))
    monkeypatch.setenv("HPML_LAB_HOME", str(tmp_path / "bare"))  # no .whl and no ../shared there either
    lines.clear()
    assert wheels.copy_course(tmp_path / "other", log=lines.append) is None
    assert "not at hand" in lines[0] and not (tmp_path / "other" / wheels.COURSE).exists()


def test_the_machine_record_says_what_the_node_has(tmp_path):
    r = node.record_node(tmp_path, 1)
    rec = json.loads((tmp_path / "node-part1.json").read_text())
    assert r["status"] == "ok" and rec["python"] and rec["torch"] and "cuda" in rec
    assert "total_mib" in rec["dev_shm"] or "error" in rec["dev_shm"]
    assert "make" in rec and "nvidia_smi" in rec and "python_h" in rec and rec["commit"]


def test_a_failing_unit_is_recorded_and_the_next_one_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "project_root", lambda: tmp_path)  # no data there: the task fails
    monkeypatch.setattr(node, "_data", lambda root, device, sets, log: None)
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    calls = []
    real = node.run_unit

    def spy(unit, *a):
        calls.append(unit)
        if unit == "bench":
            raise RuntimeError("injected")
        return real(unit, *a)

    monkeypatch.setattr(node, "run_unit", spy)
    out = run.run(None, "cpu", tmp_path / "gpu" / "x", ["bench", "c8"], pack_to=tmp_path / "OUT", **QUIET)
    units = json.loads((out / "manifest.json").read_text())["units"]
    assert calls == ["bench", "c8"]
    assert units["bench"]["status"] == "failed" and "injected" in units["bench"]["error"]
    assert units["c8"]["status"] == "failed" and "data" in (units["c8"]["error"] or "").lower()
    assert [p.name for p in out_within_limits(tmp_path / "OUT")] == ["cpu-dry-run.partx.tar.gz"]


def test_a_command_goes_on_down_the_units_not_home_while_its_limit_allows(tmp_path, monkeypatch):
    monkeypatch.setattr(gpuplan, "parts", lambda: ([["a"], ["b"]], ["c", "d"]))
    monkeypatch.setattr(gpuplan, "units", lambda: ["a", "b", "c", "d"])  # priority order
    monkeypatch.setattr(gpuplan, "unit_estimate", lambda u: (100.0 if u == "d" else 10.0, "test"))
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    ran = []
    monkeypatch.setattr(node, "run_unit", lambda unit, *a: ran.append(unit) or {"status": "failed"})
    out = run.run(1, "cpu", tmp_path / "gpu", limit=60, **QUIET)
    # its own unit, then the other units in priority order while they fit: d (100 s) would not
    assert ran == ["a", "b", "c"]
    last = json.loads((out / "manifest.json").read_text())["commands"]
    assert list(last.values())[-1]["units"]["d"] == "deferred: would not fit this command"
    assert list(last.values())[-1]["limit_s"] == 60
    ran.clear()
    out = run.run(2, "cpu", out, limit=200, rerun=(), **QUIET)  # nothing came home ok: all again, d fits
    assert ran == ["b", "a", "c", "d"]
    ran.clear()
    monkeypatch.setattr(node, "run_unit", lambda unit, *a: ran.append(unit) or {"status": "ok"})
    run.run(2, "cpu", out, limit=200, **QUIET)
    ran.clear()
    run.run(1, "cpu", out, limit=200, rerun=["c"], **QUIET)  # all came home: only what is asked again
    assert ran == ["c"]
    with pytest.raises(ConfigError, match="--part must be 1 to 2"):
        run.run(3, "cpu", out, **QUIET)


def test_a_unit_that_came_home_from_other_code_runs_again_and_the_plan_says_so(tmp_path, monkeypatch):
    """The H100's manifest held ok for speed and the CUDA tests from code 120 commits old, and the plan's
    commands would have skipped them: the next check's pages would have mixed two commits' code. A unit
    counts as home only where the code that ran it (its record's tree digest) is this tree's code; each
    unit's record keeps the commit and tree it ran."""
    monkeypatch.setattr(gpuplan, "parts", lambda: ([["a", "b", "c"]], []))
    monkeypatch.setattr(gpuplan, "units", lambda: ["a", "b", "c"])
    monkeypatch.setattr(gpuplan, "unit_estimate", lambda u: (10.0, "test"))
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    ran, said = [], []
    monkeypatch.setattr(node, "run_unit", lambda unit, *a: ran.append(unit) or {"status": "ok"})
    gpu = tmp_path / "reports" / "gpu" / "H100"
    gpu.mkdir(parents=True)
    (gpu / "manifest.json").write_text(
        json.dumps(
            {
                "units": {
                    "a": {"status": "ok", "finished_at": 1.0, "tree": THIS_CODE},
                    "b": {"status": "ok", "finished_at": 1.0, "tree": "0" * 64},  # an earlier commit's code
                    "c": {"status": "ok", "finished_at": 1.0},  # a kit that recorded no tree
                }
            }
        )
    )
    monkeypatch.setattr("hpml_lab.config.project_root", lambda: tmp_path)
    assert gpuplan.home() == {"H100": {"this code": ["a"], "other code": ["b", "c"]}}
    assert gpuplan.home_lines() == [
        "# came home from H100, run by this code (skipped there): a",
        "# came home from H100, run by other code (another commit's: they run again there): b, c",
    ]
    run.run(1, "cpu", gpu, limit=100, log=said.append)
    assert ran == ["b", "c"]
    assert any("came home from other code" in line and "b, c; they run again" in line for line in said)
    units = json.loads((gpu / "manifest.json").read_text())["units"]
    assert units["b"]["tree"] == units["c"]["tree"] == THIS_CODE and units["b"]["commit"]
    assert gpuplan.home(tmp_path) == {"H100": {"this code": ["a", "b", "c"], "other code": []}}


def test_a_unit_that_reads_anothers_results_waits_for_it(tmp_path, monkeypatch):
    """C4 reads C3's results (else it runs C3's whole sweep itself, 176 s on the H200): going down the list, a
    command runs it only once C3 came home or finished in this command."""
    monkeypatch.setattr(gpuplan, "parts", lambda: ([["a"]], ["c3", "c4"]))
    monkeypatch.setattr(gpuplan, "units", lambda: ["a", "c3", "c4"])
    monkeypatch.setattr(gpuplan, "together", lambda: {"c4": "c3"})
    monkeypatch.setattr(gpuplan, "unit_estimate", lambda u: (100.0 if u == "c3" else 10.0, "test"))
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    ran = []
    monkeypatch.setattr(node, "run_unit", lambda unit, *a: ran.append(unit) or {"status": "ok"})
    out = run.run(1, "cpu", tmp_path / "gpu", limit=60, **QUIET)  # c3 does not fit: c4 waits for it
    assert ran == ["a"]
    last = list(json.loads((out / "manifest.json").read_text())["commands"].values())[-1]["units"]
    assert last["c4"] == "deferred: runs after c3, which has not come home"
    run.run(1, "cpu", out, limit=300, **QUIET)
    assert ran == ["a", "c3", "c4"]


def test_a_later_command_picks_up_units_of_commands_that_never_started_or_were_cut_before_them(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(gpuplan, "parts", lambda: ([["a", "a2"], ["b"], ["c"]], []))
    monkeypatch.setattr(gpuplan, "units", lambda: ["a", "a2", "b", "c"])
    monkeypatch.setattr(gpuplan, "unit_estimate", lambda u: (10.0, "test"))
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    ran = []
    monkeypatch.setattr(node, "run_unit", lambda unit, *a: ran.append(unit) or {"status": "ok"})
    # parts 1 and 2 never started (their machine did not come up): nothing of them came home
    run.run(3, "cpu", tmp_path / "bare", limit=100, **QUIET)
    assert ran == ["c", "a", "a2", "b"]
    # part 1 was cut off after `a` (its archive came home and was unpacked into the tree); part 2 never
    # started
    ran.clear()
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "manifest.json").write_text(
        json.dumps(
            {
                "units": {"a": {"status": "ok", "part": 1, "finished_at": 1.0, "tree": THIS_CODE}},
                "commands": {"part1@1.000": {"part": 1, "units": {"a": "ok"}}},
            }
        )
    )
    run.run(3, "cpu", tree, limit=100, **QUIET)
    assert ran == ["c", "a2", "b"]
    last = list(json.loads((tree / "manifest.json").read_text())["commands"].values())[-1]["units"]
    assert last == {"c": "ok", "a": "skipped: came home", "a2": "ok", "b": "ok"}


def test_rerun_goes_first_after_the_unit_it_reads_and_a_signal_between_units_is_recorded(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(gpuplan, "parts", lambda: ([["a", "b"]], ["c3", "c4"]))
    monkeypatch.setattr(gpuplan, "units", lambda: ["a", "b", "c3", "c4"])
    monkeypatch.setattr(gpuplan, "together", lambda: {"c4": "c3"})
    monkeypatch.setattr(gpuplan, "unit_estimate", lambda u: (10.0, "test"))
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    ran = []
    monkeypatch.setattr(node, "run_unit", lambda unit, *a: ran.append(unit) or {"status": "ok"})
    out = tmp_path / "gpu"
    out.mkdir()
    (out / "manifest.json").write_text(
        json.dumps(
            {"units": {u: {"status": "ok", "finished_at": 1.0, "tree": THIS_CODE} for u in ("a", "b", "c4")}}
        )
    )
    run.run(1, "cpu", out, limit=100, rerun=["c4", "a"], **QUIET)
    assert ran == ["a", "c3", "c4"]  # asked again first, c4 after c3 (not home); b came home
    # a signal between units (here while the next unit's files are listed) stops the command, recorded
    from hpml_lab.results import Interrupted

    ran.clear()
    calls = {"n": 0}
    real_stamps = run._stamps

    def stamps(folder):
        calls["n"] += 1
        if calls["n"] == 3:  # before the second unit
            raise Interrupted("signal SIGTERM")
        return real_stamps(folder)

    monkeypatch.setattr(run, "_stamps", stamps)
    with pytest.raises(Interrupted):
        run.run(1, "cpu", out, limit=100, rerun=["a", "b"], **QUIET)
    last = list(json.loads((out / "manifest.json").read_text())["commands"].values())[-1]["units"]
    assert ran == ["a"] and last["a"] == "ok"
    assert last["b"] == last["c3"] == "not started: the command was stopped"


def test_a_command_that_fails_leaves_no_watchdog_behind(tmp_path, monkeypatch):
    """Tests call run() in their own process: an exception out of it must not leave a SIGTERM armed."""
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))
    monkeypatch.setattr(node, "record_node", lambda *a: (_ for _ in ()).throw(OSError("no nvidia-smi")))
    with pytest.raises(OSError):
        run.run(None, "cpu", tmp_path / "gpu", ["c1"], limit=1, **QUIET)
    time.sleep(1.5)  # still here: the watchdog was cancelled on the way out


def test_run_refuses_a_bad_limit_or_an_unknown_rerun_in_one_line(capsys):
    for args, said in (
        (["--part", "1"], "say --part N (see the plan) or --units a,b, not both"),
        (["--limit", "0"], "--limit must be a positive number of seconds up to 604800 (a week), not 0"),
        (["--limit", "inf"], "--limit must be a positive number of seconds up to 604800 (a week), not inf"),
        (["--limit", "nan"], "--limit must be a positive number of seconds up to 604800 (a week), not nan"),
        (
            ["--limit", "1e300"],
            "--limit must be a positive number of seconds up to 604800 (a week), not 1e+300",
        ),
        (["--rerun", "c4,c99"], "--rerun: no unit c99"),
    ):
        assert kit.main(["run", "--device", "cpu", "--units", "c1", *args]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"gpu-check: error: {said}")


def test_make_gpu_check_runs_the_units_it_is_given_and_prints_the_plan_otherwise():
    # docs/gpu-node.md's dry run: `make gpu-check DEVICE=cpu UNITS=c1,bench` once printed the plan (STAGE's
    # default)
    import shutil
    import subprocess
    from pathlib import Path

    make = shutil.which("make") or pytest.skip("make is not installed")
    root = Path(__file__).resolve().parents[2]

    def planned(*args):
        return subprocess.run(
            [make, "-n", "gpu-check", *args], cwd=root, capture_output=True, text=True
        ).stdout

    assert "--units c1,bench" in planned("DEVICE=cpu", "UNITS=c1,bench")
    assert "hpml_lab.gpu plan" in planned() and "hpml_lab.gpu run" not in planned()
    assert "--part 2" in planned("STAGE=2")


def _node_wheels(folder: Path) -> Path:
    """A .whl folder as `make gpu-wheels` leaves it for a node whose Python is not this one: a wheel built for
    a CPython one minor version newer, one of the stable ABI (abi3) of that version, and a pure one (empty
    files: nothing is installed from them)."""
    other = f"cp{sys.version_info.major}{sys.version_info.minor + 1}"
    folder.mkdir()
    for name in (
        f"debugpy-1.8.22-{other}-{other}-manylinux_2_34_x86_64.whl",
        f"pyzmq-27.3.0-{other}-abi3-manylinux_2_28_x86_64.whl",
        "tornado-6.6.1-cp39-abi3-manylinux1_x86_64.whl",
        "papermill-2.7.0-py3-none-any.whl",
    ):
        (folder / name).write_bytes(b"")
    return folder


def test_the_cpu_rehearsal_runs_in_this_environment_and_leaves_the_nodes_wheels_alone(
    tmp_path, monkeypatch, capsys
):
    """Issue 46: after `make gpu-wheels` (wheels for the node's 3.12), `make gpu-check DEVICE=cpu` on 3.11
    stopped at pip ("not a supported wheel on this platform"). Where the notebook machinery imports, the CPU
    rehearsal runs in this environment and installs nothing."""
    whl = _node_wheels(tmp_path / "whl")
    ran, installed = [], []
    monkeypatch.setattr(kit, "run", lambda *a, **k: ran.append(a) or tmp_path)
    monkeypatch.setattr(kit, "install", lambda *a, **k: installed.append(a))
    argv = [
        "run",
        "--device",
        "cpu",
        "--units",
        "bench",
        "--wheels",
        str(whl),
        "--site",
        str(tmp_path / "s"),
    ]
    assert kit.main(argv) == 0
    assert ran and not installed
    assert "the carried wheels are not installed" in capsys.readouterr().out


def test_wheels_for_another_python_are_one_line_naming_it_before_pip(tmp_path, monkeypatch, capsys):
    """Where the wheels are needed (no notebook machinery here, or a GPU run) and were built for another
    Python, one line names that Python and what to do; pip never runs and nothing is installed."""
    whl = _node_wheels(tmp_path / "whl")
    other = f"{sys.version_info.major}.{sys.version_info.minor + 1}"
    monkeypatch.setattr(kit, "machinery_here", lambda: False)
    monkeypatch.setattr(kit, "run", lambda *a, **k: pytest.fail("ran without its wheels"))
    site = tmp_path / "site"
    argv = ["run", "--device", "cpu", "--units", "bench", "--wheels", str(whl), "--site", str(site)]
    assert kit.main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"gpu-check: error: the wheels in {whl} are built for CPython {other} (debugpy-")
    assert (
        "and 1 more" in line and f"--python-version {sys.version_info.major}.{sys.version_info.minor}" in line
    )
    assert not site.exists()
    names = sorted(wheels._wheel_pythons(sorted(whl.glob("*.whl"))))
    assert [n.split("-")[0] for n in names] == ["debugpy", "pyzmq"]  # abi3 of an older Python and py3 fit
