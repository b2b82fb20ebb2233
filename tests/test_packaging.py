"""One dependency list (pyproject.toml); environment.yml and the Makefile only point at it."""
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).parent.parent


def test_environment_yml_installs_the_project_and_lists_no_packages():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    assert "python=3.11" in deps and "pip" in deps
    pip = next(d["pip"] for d in deps if isinstance(d, dict))
    assert pip == ["-c constraints.txt", "-e .[test]"]  # no second list to drift


def test_pyproject_lists_every_dependency_and_constraints_pin_the_pair():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {d.split(";")[0].split("=")[0].split(">")[0].split("<")[0].strip().lower() for d in meta["dependencies"]}
    assert {"torch", "torchvision", "papermill", "nbconvert", "ipykernel", "jupyterlab", "matplotlib", "pandas",
            "tqdm", "kaggle", "pyyaml"} <= names
    pins = [l.strip() for l in (ROOT / "constraints.txt").read_text().splitlines() if l.strip() and l[0] != "#"]
    assert "torch==2.11.0" in pins and "torchvision==0.26.0" in pins


def test_installed_pair_matches_the_pins():
    import torch
    import torchvision

    assert torch.__version__.split("+")[0] == "2.11.0" and torchvision.__version__.split("+")[0] == "0.26.0"


def test_ci_calls_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make report" in readme
