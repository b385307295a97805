# make check               run every test against code/
# make check WORK=folder   grade a learner's exercise files in folder instead
# make clean               remove the virtualenv and caches

PYTHON ?= python3
VENV := .venv
# touched once the virtualenv holds requirements.txt
INSTALLED := $(VENV)/installed

ifdef WORK
PYTEST_ARGS := guide.md tests/test_exercises.py --work="$(abspath $(WORK))"
endif

.PHONY: check clean

check: $(INSTALLED)
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

$(INSTALLED): requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10) and \
	  "Python 3.10 or newer is needed; $(PYTHON) is " + sys.version.split()[0])'
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet -r requirements.txt
	touch $@

clean:
	rm -rf $(VENV) .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
