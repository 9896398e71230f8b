# Two commands do everything on a fresh machine with Python 3.11 and make:
#   make handouts   the main job
#   make test       the whole test suite
# Both create ./.venv on first use.

PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export SCENARIO

.PHONY: venv bytecode browser lint format test handouts report notebooks numeric validate validate-deps benchmark calibrate lab clean docs

venv: $(STAMP)

# The lock names every package, so pip installs it as it is (--no-deps: no resolver), and
# `pip check` fails if one is missing or at a version another (costmodel too) does not accept.
# pip installs without compiling (it compiles one file at a time); compileall then writes the
# same bytecode on every core, and as pip does, leaves a file that does not compile under 3.11
# to the import that needs it (torch ships Python 3.12 test files): -qq and `|| true`.
$(STAMP): requirements.lock pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (Python 3.11 is required)"; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile --no-deps -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile --no-deps -e .
	$(PY) -m pip check
	$(PY) -m compileall -qq -j 0 $(VENV)/lib || true
	touch $@

# The package's own bytecode, written where it is missing or stale (a process that imports
# costmodel then reads it, as from an installed package, even where PYTHONDONTWRITEBYTECODE is
# set: the test suite starts hundreds of kernels and commands).
bytecode: venv
	@$(PY) -m compileall -q costmodel

# pytest-xdist, a worker per core; --dist loadscope keeps a test module (its module-scoped
# fixtures run once) and a notebook's nbval cells (one kernel, in order) on one worker, and
# tests/conftest.py hands out the longest modules first (--no-loadscope-reorder keeps its order).
test: bytecode
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m pytest -n auto --dist loadscope --no-loadscope-reorder

# Regenerate every notebooks/NN_name.ipynb from its .py source and execute it (NB=03 for one).
notebooks: venv
	$(PY) -m costmodel.publish.suite $(NB)

# The main job: the suite re-executed for a scenario, as offline HTML in handouts/<name>/ (the
# teacher's edition; the student's in handouts/<name>/student/), each with an A4 booklet.pdf.
# SCENARIO reaches the command through the environment, quoted: a name with spaces is one name.
handouts: bytecode browser
	$(VENV)/bin/costmodel handouts --edition both --pdf $(if $(SCENARIO),--scenario "$$SCENARIO")

# Headless Chromium and CJK fonts (Debian packages) for the booklet and the browser tests.
browser:
	@command -v chromium >/dev/null && fc-list 2>/dev/null | grep -qi "Noto Sans CJK" || { \
	  echo "installing chromium and fonts-noto-cjk (apt-get)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium fonts-noto-cjk; }

report: venv
	$(VENV)/bin/costmodel report $(if $(SCENARIO),--scenario "$$SCENARIO")

# Regenerate costmodel/derive/numeric.py, the numeric forms of the SymPy derivations that the
# commands evaluate (tests/derive/test_numeric.py fails when it is stale),
# costmodel/inputs/course_scenario.py, the course's scenario file as its YAML loader reads it
# (tests/inputs/test_course_scenario.py), and costmodel/evaluate/levers/router_table.py, the router
# simulation's results for the scenarios' experts (tests/evaluate/test_router_table.py), in that
# order (the router table resolves the scenarios on the course's values). The generators live in
# costmodel/generate/, which no runtime module imports.
numeric: venv
	$(PY) -m costmodel.generate.numeric
	$(PY) -m costmodel.generate.course
	$(PY) -m costmodel.generate.router

# The optional [validate] extra: torch (CPU build) and transformers, for the cross-check of the
# FLOP counts against torch.utils.flop_counter.FlopCounterMode.
validate-deps: $(VENV)/.validate
$(VENV)/.validate: $(STAMP) validate-requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile -r validate-requirements.txt
	$(PY) -m compileall -qq -j 0 $(VENV)/lib || true
	touch $@

# Rewrite costmodel/course/flop_counter.csv (the notebooks show it) and
# costmodel/course/saved_tensors.csv (the memory model's check); the tests fail when either is stale.
validate: validate-deps
	$(PY) -m costmodel.validate --out costmodel/course/flop_counter.csv
	$(PY) -m costmodel.validate_memory --out costmodel/course/saved_tensors.csv
	$(PY) -m pytest -q tests/validate/test_flop_counter.py tests/derive/test_activations.py

# Each script prints its figures and records its headline ones in benchmarks/results/<script>.json;
# docs/benchmarks.md is rendered from those files last (each script alone renders it too).
benchmark: venv
	$(PY) benchmarks/bench_core.py
	$(PY) benchmarks/bench_sweep.py
	$(PY) benchmarks/bench_plan.py
	$(PY) benchmarks/bench_suite.py
	$(PY) benchmarks/bench_handouts.py
	$(PY) benchmarks/megatron_flops.py
	$(PY) benchmarks/megatron_memory.py
	$(PY) benchmarks/published_runs.py
	$(PY) benchmarks/loso.py
	$(PY) benchmarks/docs_page.py

# Fit the step-time model's efficiencies on the published runs and write them into the
# generated costmodel/inputs/fitted.py, whose values replace the stated ones where a fit exists.
calibrate: venv
	$(PY) benchmarks/calibrate.py --library --write

# Read the notebooks in JupyterLab: a scratch copy in build/lab/ (the sources are never
# written), 01 first, the rendering-only code collapsed.
lab: venv
	$(PY) -m costmodel.publish.lab

# The reference pages of docs/, generated (tests/generate/test_docs.py fails when one is stale):
# the scenario keys (from the schema), the report's JSON fields, the command line's options (from
# its argparse parsers) and the GPU table with its sources (costmodel/inputs/hardware.py).
docs: venv
	$(PY) -m costmodel.generate.docs

clean:
	rm -rf $(VENV) build handouts *.egg-info

# Sort imports and format the code (make test checks both).
format: venv
	$(VENV)/bin/ruff check --select I --fix .
	$(VENV)/bin/ruff format .
