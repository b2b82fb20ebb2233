"""Package discovery for setuptools (the rest of the metadata is pyproject.toml's): every package under
hpml_lab/, so a new task folder (hpml_lab/studies/<task>/) ships without being listed anywhere, plus the
notebooks at the top of the checkout, shipped as hpml_lab.notebooks so that `hpml-lab run` works after a plain
install.
"""

from setuptools import find_packages, setup

PACKAGES = [*find_packages(include=["hpml_lab", "hpml_lab.*"]), "hpml_lab.notebooks"]

if __name__ == "__main__":
    setup(
        packages=PACKAGES,
        package_dir={"hpml_lab.notebooks": "notebooks"},
        package_data={"hpml_lab.notebooks": ["*.ipynb"]},
    )
