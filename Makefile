# Two entry points for a fresh machine (see README):
#   make demo   - create .venv if needed, install tnbayes, ExactGP vs CPDKernelMachine vs HilbertGP on a
#                 bundled real dataset and a toy set (about a minute): table + figures in demo_output/
#   make test   - create .venv if needed, install tnbayes with test extras, run the test suite
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

test: env
	$(PY) -m pytest -q

docs: env
	$(PY) docs/gen_tutorial_pages.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

bench-small: env
	$(PY) -m benchmarks --list
