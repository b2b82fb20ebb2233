"""The GPU check kit's wheel list. Its stages run on CPU in tests/test_gpucheck_image.py, on the GPU image's package
set (the dry run in the project's .venv that stood here could not catch what that Python lacks)."""

from hpml_lab.report import gpucheck


def test_wheel_list_covers_the_notebook_machinery_and_skips_what_the_image_has():
    names = dict(gpucheck.wheel_list())
    assert {"papermill", "nbconvert", "nbformat", "nbclient", "ipykernel", "jupyter-client"} <= set(names)
    assert "pyzmq" in names and "tornado" in names  # dependencies, found through the metadata
    assert {"traceinsight", "plotly", "pydot"} <= set(
        names
    ) and "jupyterlab" not in names  # HTA, without JupyterLab
    assert not set(names) & {"torch", "numpy", "pandas", "matplotlib", "pyyaml", "tqdm"}
