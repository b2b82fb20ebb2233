"""The GPU check kit's CPU dry run: the same stages as on a GPU, at the tiny size, so the kit cannot rot."""
import json

import pytest

from hpml_lab.report import gpucheck


def test_wheel_list_covers_the_notebook_machinery_and_skips_what_the_image_has():
    names = dict(gpucheck.wheel_list())
    assert {"papermill", "nbconvert", "nbformat", "nbclient", "ipykernel", "jupyter-client"} <= set(names)
    assert "pyzmq" in names and "tornado" in names  # dependencies, found through the metadata
    assert {"traceinsight", "plotly", "pydot"} <= set(names) and "jupyterlab" not in names  # HTA, without JupyterLab
    assert not set(names) & {"torch", "numpy", "pandas", "matplotlib", "pyyaml", "tqdm"}


@pytest.mark.slow
def test_dry_run_writes_reports_bench_and_manifest(tmp_path, cifar_root, monkeypatch):
    monkeypatch.setattr(gpucheck, "project_root", lambda: tmp_path)  # data and reports in a scratch project
    (tmp_path / "data").symlink_to(cifar_root)
    monkeypatch.setattr(gpucheck, "_data", lambda root, device, log: None)  # the CIFAR fixture is the data
    monkeypatch.setenv("HPML_OUTPUT_DIR", str(tmp_path))  # run() points it at its folder; restored afterwards
    out = gpucheck.run(("reports-1", "bench"), "cpu", tmp_path / "gpu" / "cpu-dry-run", ["c1", "questions"],
                       log=lambda *a: None)
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["stages"]) == {"reports-1", "bench"} and manifest["device"] == "cpu"
    assert manifest["stages"]["reports-1"]["result"]["tasks"]["c1"]["status"] == "ok"
    assert (out / "reports" / "c1.html").is_file() and (out / "reports" / "c1.answer.json").is_file()
    assert {p.name.split("-")[0] for p in (out / "benchmarks" / "results").glob("*.json")} == set(
        __import__("hpml_lab.studies.bench", fromlist=["NAMES"]).NAMES)
