# hpml-lab: two commands do everything on a fresh machine.
#   make report   # setup if needed, synthesize the default data, run every task, render HTML
#   make test     # setup if needed, run the test suite
#   make test-fast  # the developer's loop: all but slow, slurm, browser and cuda tests (about 1 min, 2 cores)
# PYTHON picks the interpreter for the virtual environment (3.11 or newer). JOBS: pytest-xdist's worker
# processes (auto: one per core; JOBS=0 runs the tests in one process).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PROFILE ?= smoke
DATA ?= data
STAMP := $(VENV)/.hpml-installed
# Removed after the install: rfc3987-syntax comes in only through jupyter-events' jsonschema[format-nongpl]
# and builds a Lark parser when imported (jsonschema imports it for its optional "iri" format check): 2-3 s of
# CPU in every process that imports nbformat (each notebook run, each hpml-lab command, each test worker).
# Nothing here validates IRIs; jsonschema goes on without that one check (tests/unit/test_packaging.py).
SLOW_IMPORTS := rfc3987-syntax
# The installer: uv (taken from the package index into the venv by pip) installs the same pins as pip,
# downloading and unpacking in parallel: the whole setup took 57 s for the 5 GB of torch's CUDA build and the
# rest, with cold caches on 2 cores, and pip's route (a single-threaded install, then compileall) 140 s. uv
# reads no pip.conf: where packages come only from an index that pip.conf names, run `make setup
# INSTALLER=pip` (and where uv fails, setup says so and pip installs).
# Bytecode matters: where PYTHONDONTWRITEBYTECODE is set, as in this project's shells, Python never writes it,
# and every process compiled what it imported from source again (4-5 s of CPU for torch, matplotlib and
# papermill). So after the install two processes side by side import what the lab's processes import (WARM:
# the torch side and the notebook side) with the variable cleared (WRITE_BYTECODE: an empty value counts as
# unset), writing those 3,700 modules' bytecode: 20 s on 2 cores, where compiling all 13,000 files of the
# environment (uv's --compile-bytecode) took 38 s. The tests' processes write what they import besides once
# (make test, make test-fast); a user's own runs keep the user's setting. pip's route compiles everything with
# compileall first (leaving out the packages' own tests, pip and setuptools, which nothing imports at run time);
# the imports then only check that the environment imports.
WRITE_BYTECODE := PYTHONDONTWRITEBYTECODE=
WARM_TORCH := hpml_lab.report.runner, hpml_lab.tracing, torchvision, torch._inductor.compile_fx
WARM_NOTEBOOK := ipykernel.ipkernel, debugpy, papermill, nbconvert.exporters.html, matplotlib.pyplot, \
	pygments.lexers.python, hta.trace_analysis, jupyterlab.labapp
INSTALLER ?= uv
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check
# The venv is made without pip (python's ensurepip took 6 s of the setup): the system Python's pip installs uv into
# it (pip 22.3 or newer: --python), and uv installs the project and pip, the version ensurepip would have brought
# (PIP_PIN; the newest where this Python has no ensurepip; the GPU kit's wheels and some tests use it). Where the system's pip is missing or older, and on pip's
# route, ensurepip brings pip first.
ENSUREPIP := { $(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip --default-pip >/dev/null; }
PIP_PIN = pip$(shell $(PYTHON) -c 'import ensurepip; print("==" + ensurepip.version())' 2>/dev/null)
JOBS ?= auto
# A line every TICK_S seconds while a long step of the setup runs (the install, the bytecode warm-up), so a terminal
# is never silent for long: $(call TICK,what it does) before the step's command, $(UNTICK) after it (its exit
# status is kept). The ticker ends with the step, or when the recipe's shell is gone.
TICK_S ?= 20
TICK = p=$$$$; (t=0; while sleep $(TICK_S) && kill -0 $$p 2>/dev/null; do t=$$((t+$(TICK_S))); \
	echo "setup: $(1) ($$t s so far)"; done) & tick=$$!;
UNTICK = ; rc=$$?; kill $$tick 2>/dev/null; exit $$rc

.PHONY: setup test test-fast lint report lab data bench clean-results gpu-wheels gpu-check gpu-unpack

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "hpml-lab needs Python 3.11 or newer; run: make PYTHON=python3.11 ...")'
	test -x $(BIN)/python || $(PYTHON) -m venv --without-pip $(VENV)
	@case "$(INSTALLER)" in uv|pip) ;; *) echo "setup: INSTALLER must be uv or pip, not '$(INSTALLER)'"; exit 2;; esac
	@$(call TICK,installing the packages: torch alone is 5 GB) if [ "$(INSTALLER)" = uv ] && { $(PYTHON) -m pip --python $(BIN)/python install --quiet \
		--disable-pip-version-check -c constraints.txt uv 2>/dev/null || { $(ENSUREPIP) && $(PIP) -c constraints.txt uv; }; } \
		&& $(BIN)/uv pip install --python $(BIN)/python --quiet -c constraints.txt -e '.[test]' '$(PIP_PIN)'; \
	then echo "setup: installed with uv"; else \
		[ "$(INSTALLER)" = uv ] && echo "setup: uv could not install; installing with pip"; \
		$(ENSUREPIP) && $(PIP) --no-compile -c constraints.txt -e '.[test]' && { \
		$(BIN)/python -m compileall -q -j 0 -x '/(tests?|pip|setuptools)/' $(VENV)/lib >/dev/null \
		|| echo "setup: a few files did not compile"; }; fi $(UNTICK)
	$(BIN)/python -m pip uninstall --quiet --yes $(SLOW_IMPORTS)
	@echo "setup: writing the bytecode of what the lab's processes import (about 20 s)"
	@$(call TICK,writing bytecode) $(WRITE_BYTECODE) $(BIN)/python -c 'import $(WARM_TORCH)' & w=$$!; \
		$(WRITE_BYTECODE) $(BIN)/python -c 'import $(WARM_NOTEBOOK)'; b=$$?; wait $$w; rc=$$?; \
		[ $$rc = 0 ] && rc=$$b; kill $$tick 2>/dev/null; exit $$rc
	$(BIN)/python -m compileall -q hpml_lab >/dev/null
	$(BIN)/python -m ipykernel install --sys-prefix --name hpml-lab --display-name "Python (hpml-lab)"
	@echo "removed: $(SLOW_IMPORTS)" > $@

# the conclusion code's branch coverage (pyproject's [tool.coverage]; measured in the fast tests of the files
# that reach it, TRACED_FILES in tests/conftest.py), combined from every xdist worker, is printed and must stay
# at 95% or more.
# --dist loadgroup: tests marked xdist_group run on one worker.
test: setup
	$(WRITE_BYTECODE) $(BIN)/python -m pytest -q -n $(JOBS) --dist loadgroup --cov --cov-branch --cov-report=term:skip-covered --cov-fail-under=95

lint: setup
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

test-fast: setup
	$(WRITE_BYTECODE) $(BIN)/python -m pytest -q -n $(JOBS) --dist loadgroup -m "not slow and not slurm and not browser and not cuda"

data: setup
	$(BIN)/hpml-lab data synth cifar10 --root $(DATA) --if-missing
	$(BIN)/hpml-lab data synth tinyimagenet --root $(DATA) --if-missing

report: data
	$(BIN)/hpml-lab report --profile $(PROFILE) -p data_root=$(DATA)

lab: setup
	$(BIN)/jupyter lab --notebook-dir=notebooks

bench: setup
	$(BIN)/hpml-lab bench all

# The GPU check kit (hpml_lab/gpu/, docs/gpu-node.md). Here: fetch the wheels the GPU image
# lacks (and record this tree's commit beside them: .git does not travel), print the plan, unpack what came
# home. On the GPU machine make may be missing: run the plan's own `python3 -m hpml_lab.gpu run
# --part N` lines; the targets below are the same commands. STAGE=plan (the default) prints the plan; STAGE=N
# runs part N; DEVICE=cpu UNITS=c1,bench: the dry run of some units on this CPU, in this venv (the carried wheels
# are the node's, for its Python 3.12, and are not installed there). WHEELS: the wheels' folder.
GPU_PY ?= python3
WHEELS ?= .whl
STAGE ?= plan
DEVICE ?= cuda
ARCHIVE ?= gpu-out

gpu-wheels: setup
	$(BIN)/python -m hpml_lab.gpu wheels --dest $(WHEELS)

gpu-check:
ifeq ($(STAGE)$(UNITS),plan)
	@PYTHONPATH=$(CURDIR) $(if $(wildcard $(BIN)/python),$(BIN)/python,$(GPU_PY)) -m hpml_lab.gpu plan
else ifeq ($(DEVICE),cpu)
	@$(MAKE) --no-print-directory setup
	$(BIN)/python -m hpml_lab.gpu run --device cpu --wheels $(WHEELS) $(if $(UNITS),--units $(UNITS),--part $(STAGE))
else
	$(GPU_PY) -m hpml_lab.gpu run --device $(DEVICE) --wheels $(WHEELS) $(if $(UNITS),--units $(UNITS),--part $(STAGE))
endif

gpu-unpack: setup
	$(BIN)/python -m hpml_lab.gpu unpack $(ARCHIVE)

clean-results:
	rm -rf results reports/executed reports/*.html reports/*.answer.json reports/artifacts reports/bundle.* figures/*.png
