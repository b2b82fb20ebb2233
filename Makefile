# hpml-lab: two commands do everything on a fresh machine.
#   make report   # setup if needed, synthesize the default data, run every task, render HTML
#   make test     # setup if needed, run the test suite
# PYTHON picks the interpreter for the virtual environment (3.11 or newer).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PROFILE ?= smoke
DATA ?= data
STAMP := $(VENV)/.hpml-installed

.PHONY: setup test report lab data bench clean-results

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "hpml-lab needs Python 3.11 or newer; run: make PYTHON=python3.11 ...")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test]'
	$(BIN)/python -m ipykernel install --sys-prefix --name hpml-lab --display-name "Python (hpml-lab)"
	@touch $@

test: setup
	$(BIN)/python -m pytest -q

data: setup
	$(BIN)/hpml-lab data synth cifar10 --root $(DATA) --if-missing
	$(BIN)/hpml-lab data synth tinyimagenet --root $(DATA) --if-missing

report: data
	$(BIN)/hpml-lab report --profile $(PROFILE) -p data_root=$(DATA)

lab: setup
	$(BIN)/jupyter lab --notebook-dir=notebooks

bench: setup
	$(BIN)/hpml-lab bench all

clean-results:
	rm -rf results reports/executed reports/*.html figures/*.png
