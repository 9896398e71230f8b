# Two commands do everything on a fresh machine with Python 3.11 and make:
#   make handouts   the main job
#   make test       the whole test suite
# Both create ./.venv on first use.

PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: venv test handouts report notebooks validate benchmark lab clean

venv: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (Python 3.11 is required)"; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $@

test: venv
	$(PY) -m pytest

# Regenerate every notebooks/NN_name.ipynb from its .py source and execute it (NB=03 for one).
notebooks: venv
	$(PY) -m costmodel.suite $(NB)

handouts: venv
	$(VENV)/bin/costmodel report

report: venv
	$(VENV)/bin/costmodel report $(if $(SCENARIO),--scenario $(SCENARIO))

benchmark: venv
	$(PY) benchmarks/bench_core.py

lab: venv
	$(VENV)/bin/jupyter lab notebooks/

clean:
	rm -rf $(VENV) build *.egg-info
