# Two entry points for a fresh machine (see README):
#   make demo   - create .venv if needed, install tnbayes, ExactGP vs CPDKernelMachine vs HilbertGP on a
#                 bundled real dataset and a toy set (about a minute): table + figures in demo_output/
#   make test   - create .venv if needed, install tnbayes with test extras, run the test suite (one worker
#                 per core)
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_OUT ?= demo_output

.PHONY: demo test env docs bench-small

$(VENV)/.installed: pyproject.toml tools/bootstrap_env.sh
	tools/bootstrap_env.sh $(VENV) test
	touch $@

env: $(VENV)/.installed

demo: env
	$(PY) -m tnbayes.demo --out $(DEMO_OUT)

# one pytest-xdist worker per core (at most 4), each test module on one worker (module fixtures run once);
# tests/conftest.py gives each worker its share of the cores' threads
test: env
	$(PY) -m pytest -q -n auto --maxprocesses=4 --dist loadscope

docs: env
	$(PY) docs/gen_tutorial_pages.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

bench-small: env
	$(PY) -m benchmarks --list
