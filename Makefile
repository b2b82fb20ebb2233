# hpml-lab: two commands do everything on a fresh machine.
#   make report   # setup if needed, synthesize the default data, run every task, render HTML
#   make test     # setup if needed, run the test suite
#   make test-fast  # the developer's loop: all but slow, slurm, browser and cuda tests (under 2 min on 2 cores)
# PYTHON picks the interpreter for the virtual environment (3.11 or newer).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PROFILE ?= smoke
DATA ?= data
STAMP := $(VENV)/.hpml-installed

.PHONY: setup test test-fast report lab data bench clean-results gpu-wheels gpu-check

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

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow and not slurm and not browser and not cuda"

data: setup
	$(BIN)/hpml-lab data synth cifar10 --root $(DATA) --if-missing
	$(BIN)/hpml-lab data synth tinyimagenet --root $(DATA) --if-missing

report: data
	$(BIN)/hpml-lab report --profile $(PROFILE) -p data_root=$(DATA)

lab: setup
	$(BIN)/jupyter lab --notebook-dir=notebooks

bench: setup
	$(BIN)/hpml-lab bench all

# The GPU check kit (hpml_lab/report/gpucheck.py). Here: fetch the wheels the GPU image lacks. On the GPU machine
# (no .venv there, its python3 has torch): install them privately, then run a stage. DEVICE=cpu: the dry run here.
GPU_PY ?= python3
GPU_SITE ?= /tmp/hpml-site
STAGE ?= all
DEVICE ?= cuda

gpu-wheels: setup
	$(BIN)/python -m hpml_lab.report.gpucheck wheels --dest .whl

gpu-check:
ifeq ($(DEVICE),cpu)
	@$(MAKE) --no-print-directory setup
	$(BIN)/python -m hpml_lab.report.gpucheck run --stage $(STAGE) --device cpu $(if $(TASKS),--tasks $(TASKS))
else
	$(GPU_PY) -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $(GPU_SITE) .whl/*.whl
	PYTHONPATH=$(GPU_SITE):$(CURDIR) $(GPU_PY) -m hpml_lab.report.gpucheck run --stage $(STAGE) --device $(DEVICE) $(if $(TASKS),--tasks $(TASKS))
endif

clean-results:
	rm -rf results reports/executed reports/*.html reports/*.answer.json reports/artifacts reports/bundle.* figures/*.png
