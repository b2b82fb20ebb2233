"""Sweeps resume: an interrupted sweep run again skips what is complete and loses nothing."""

import json

import pytest

from hpml_lab import results
from hpml_lab.config import RunConfig
from hpml_lab.io import atomic_write_csv
from hpml_lab.sweeps import run_sweep, tables


class Boom(Exception):
    pass


def _configs(tmp_path):
    return [
        RunConfig(task="sw", results_dir=str(tmp_path / "results"), model="resnet_tiny", optimizer=o)
        for o in ("sgd", "sgd_nesterov", "adagrad", "adadelta", "adam")
    ]


def _fake_run(calls, fail_at=None):
    def run_one(cfg):
        calls.append(cfg.optimizer)
        if cfg.optimizer == fail_at:
            cfg.run_dir().mkdir(parents=True)
            results.write_meta(cfg.run_dir(), {"status": "running"})  # cut off half-way
            raise Boom("interrupted")
        atomic_write_csv(cfg.run_dir() / "epochs.csv", [{"epoch": 1, "loss": len(calls)}])
        results.write_meta(cfg.run_dir(), {"status": "complete", "config": cfg.to_dict()})
        return cfg.optimizer

    return run_one


def test_interrupted_sweep_resumes_and_skips_complete(tmp_path):
    cfgs = _configs(tmp_path)
    calls = []
    with pytest.raises(Boom):
        run_sweep(cfgs, _fake_run(calls, fail_at="adagrad"), log=None)
    assert calls == ["sgd", "sgd_nesterov", "adagrad"]
    assert [results.is_complete(c.run_dir()) for c in cfgs] == [True, True, False, False, False]
    first = (cfgs[0].run_dir() / "epochs.csv").read_text()

    calls.clear()
    items = run_sweep(cfgs, _fake_run(calls), log=None)
    assert calls == ["adagrad", "adadelta", "adam"]  # the cut-off one runs again, the complete ones do not
    assert [i.status for i in items] == ["skipped", "skipped", "ran", "ran", "ran"]
    assert all(results.is_complete(c.run_dir()) for c in cfgs)
    assert (cfgs[0].run_dir() / "epochs.csv").read_text() == first  # kept, not recomputed
    df = tables(items, "epochs", with_config=("optimizer",))
    assert sorted(df["optimizer"]) == sorted(c.optimizer for c in cfgs)

    calls.clear()
    assert [i.status for i in run_sweep(cfgs, _fake_run(calls), log=None)] == ["skipped"] * 5 and calls == []


def test_record_mode_keeps_going_and_oom_is_a_result(tmp_path):
    cfgs = _configs(tmp_path)[:3]

    def run_one(cfg):
        if cfg.optimizer == "sgd":
            raise RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")
        if cfg.optimizer == "sgd_nesterov":
            raise ValueError("bad")
        return _fake_run([])(cfg)

    items = run_sweep(cfgs, run_one, on_error="record", log=None)
    assert [i.status for i in items] == ["oom", "failed", "ran"]
    meta = json.loads((cfgs[1].run_dir() / "meta.json").read_text())
    assert meta["status"] == "failed" and "ValueError: bad" in meta["error"]
    assert len(tables(items, "epochs")) == 1


def test_duplicate_run_folders_rejected(tmp_path):
    cfg = _configs(tmp_path)[0]
    with pytest.raises(ValueError, match="same folder"):
        run_sweep([cfg, cfg], lambda c: None, log=None)


def test_complete_run_on_other_data_is_not_reused(tmp_path, cifar_root):
    """Same settings, another data folder (e.g. the real CIFAR-10 after the synthetic one): run again."""
    from hpml_lab.data import cifar, dataset_info

    other = tmp_path / "other"
    cifar.synthesize(other, seed=3, n_train=50, n_test=10)
    calls = []

    def run_one(cfg):
        calls.append(cfg.data_root)
        results.write_meta(
            cfg.run_dir(), {"status": "complete", "config": cfg.to_dict(), "dataset": dataset_info(cfg)}
        )

    base = RunConfig(task="sw", results_dir=str(tmp_path / "results"), data_root=str(cifar_root))
    run_sweep([base], run_one, log=None)
    run_sweep([base], run_one, log=None)  # identical: skipped
    moved = base.replace(data_root=str(other))
    assert moved.run_dir() == base.run_dir()  # same settings, same folder...
    run_sweep([moved], run_one, log=None)  # ...but other data: computed again
    assert calls == [str(cifar_root), str(other)]


def test_a_failed_run_on_other_data_never_touches_the_complete_run(tmp_path, cifar_root):
    """Issue 22: a good c6 sweep, then the same settings on a broken dataset (other data_root, same folder):
    the failure record went into the complete run folders. Now the complete runs stay byte for byte."""
    calls = []
    cfgs = [c.replace(data_root=str(cifar_root)) for c in _configs(tmp_path)[:2]]
    run_sweep(cfgs, _fake_run(calls), log=None)
    before = {c.run_dir(): (c.run_dir() / "meta.json").read_bytes() for c in cfgs}

    def broken(cfg):
        raise KeyError("label 10 out of range")

    bad = [c.replace(data_root=str(tmp_path / "bad")) for c in cfgs]
    assert [c.run_dir() for c in bad] == list(before)  # same folder: the data is not in the run id
    items = run_sweep(bad, broken, on_error="record", log=None)
    assert [i.status for i in items] == ["failed", "failed"]
    assert {d: (d / "meta.json").read_bytes() for d in before} == before
    assert all(results.is_complete(d) for d in before)
    assert [i.status for i in run_sweep(cfgs, _fake_run(calls), log=None)] == ["skipped", "skipped"]


@pytest.mark.parametrize("cut", ["header-only", "one-row-short", "missing"])
def test_a_complete_run_whose_files_disagree_is_not_reused(tmp_path, capsys, cut):
    """epochs.csv cut to its header (or short, or gone) under a meta.json that says complete: not complete,
    one line on stderr naming the folder, and the sweep runs it again."""
    cfg = _configs(tmp_path)[0]

    def run_one(c):
        atomic_write_csv(c.run_dir() / "epochs.csv", [{"epoch": 1, "loss": 1.0}, {"epoch": 2, "loss": 0.5}])
        results.write_meta(c.run_dir(), {"status": "complete", "config": c.to_dict(), "epochs_done": 2})

    run_sweep([cfg], run_one, log=None)
    assert results.is_complete(cfg.run_dir())
    path = cfg.run_dir() / "epochs.csv"
    if cut == "missing":
        path.unlink()
    else:
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(lines[:1] if cut == "header-only" else lines[:2]))
    capsys.readouterr()
    assert not results.is_complete(cfg.run_dir())
    err = capsys.readouterr().err
    assert str(cfg.run_dir()) in err and len(err.strip().splitlines()) == 1
    assert results.load_runs("sw", cfg.results_dir) == []
    assert [i.status for i in run_sweep([cfg], run_one, log=None)] == ["ran"]
    assert results.is_complete(cfg.run_dir())


@pytest.mark.parametrize(
    "text", ["[]", "null", "3", '{"status": "complete", "config": []}', '{"status": "comp']
)
def test_a_meta_json_that_is_no_record_is_not_complete_and_breaks_no_reader(tmp_path, text):
    cfg = _configs(tmp_path)[0]
    cfg.run_dir().mkdir(parents=True)
    (cfg.run_dir() / "meta.json").write_text(text)
    assert not results.is_complete(cfg.run_dir())
    assert results.load_runs("sw", cfg.results_dir, status=None) == []
    assert [i.status for i in run_sweep([cfg], _fake_run([]), log=None)] == ["ran"]
