# make site               build the course site into site/
# make serve              build it and serve it on http://localhost:8000
# make check              run every test against code/ (installs what it needs)
# make check WORK=folder  grade a learner's exercise files in folder instead
#                         (a learner checks one exercise with python3 check.py)
# make grade CLASS=folder grade every learner's folder inside folder: a table, and a
#                         report per learner (EXERCISE=file: only that exercise)
# make transcripts        re-run guide.md's transcripts and rewrite each one whose output
#                         changed (keeping its pids, close timings and ...): review the git diff
# make mutations          check every classic mistake of tools/mistakes.py as a learner would (slow)
# make soak               run every test 5 times beside 4 CPU hogs (RUNS=, HOGS=): never flaky
# make bench              print build, page-weight and queue numbers (no pass/fail)
# make clean              remove the virtualenv, node_modules and caches

PYTHON ?= python3
PORT ?= 8000
VENV := .venv
# touched once the virtualenv holds requirements.txt
INSTALLED := $(VENV)/installed
# touched once the virtualenv also holds requirements-bench.txt
BENCH_INSTALLED := $(VENV)/bench-installed
# touched once node_modules holds package-lock.json
NODE_INSTALLED := node_modules/installed

# Test processes side by side (pytest-xdist). More than the cores: most tests
# spend their time waiting for the programs they run.
TEST_WORKERS ?= 4

ifdef WORK
# grading needs neither the browser nor the site tools
# --work runs only the tests that grade the exercises (tools/harness/catalogue.py)
PYTEST_ARGS := --work="$(abspath $(WORK))"
CHECK_NEEDS := $(INSTALLED)
else
CHECK_NEEDS := $(INSTALLED) $(NODE_INSTALLED) packages
endif

.PHONY: site serve check transcripts mutations soak grade bench clean packages

site: $(INSTALLED) $(NODE_INSTALLED)
	$(VENV)/bin/python tools/build.py

serve: site
	@echo "Serving site/ on http://localhost:$(PORT)/ (Ctrl-C to stop)"
	$(VENV)/bin/python -m http.server --directory site --bind 127.0.0.1 $(PORT)

check: $(CHECK_NEEDS)
	$(VENV)/bin/python -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

# The blocks run against code/ as in make check; the process that reports
# rewrites guide.md once, at the end (tools/harness/update.py).
transcripts: $(INSTALLED) packages
	$(VENV)/bin/python -m pytest -n $(TEST_WORKERS) guide.md --update-transcripts

# The lab's audits run all 20 seeds here and in soak, 5 in check.
mutations: $(INSTALLED)
	ALL_LAB_SEEDS=1 $(VENV)/bin/python -m pytest -n $(TEST_WORKERS) -m mutations tests/test_mutations.py

RUNS ?= 5
HOGS ?= 4
soak: $(INSTALLED) $(NODE_INSTALLED) packages
	ALL_LAB_SEEDS=1 $(VENV)/bin/python tools/soak.py --runs $(RUNS) --hogs $(HOGS) --workers $(TEST_WORKERS)

# Quiet: progress on stderr, the table on stdout, nothing echoed. When a
# learner did not pass everything, grade.py exits 1 and GNU make adds its one
# line `make: *** [Makefile:LINE: grade] Error 1`: make prints it for every
# failing recipe, and the only way to silence it (`-` with -s) would also
# make the exit status 0.
grade: $(INSTALLED)
	@test -n "$(CLASS)" || { echo "usage: make grade CLASS=folder [EXERCISE=file...] (one folder per learner inside)" >&2; exit 2; }
	@$(VENV)/bin/python tools/grade.py "$(CLASS)" $(addprefix --exercise=,$(EXERCISE))

bench: $(BENCH_INSTALLED) $(NODE_INSTALLED) packages
	$(VENV)/bin/python -m tools.bench

# Everything in requirements.txt, and the course's tools as the package `tools`
# (pyproject.toml). check.py, the learner's checker, sets up the same .venv
# on its first run with only requirements-check.txt; this replaces it.
$(INSTALLED): requirements.txt requirements-check.txt requirements-lab.txt pyproject.toml
	$(PYTHON) check.py --set-up

# huey and litequeue, which make bench measures tinyq against; check needs neither
$(BENCH_INSTALLED): requirements-bench.txt $(INSTALLED)
	$(VENV)/bin/python -m pip install --quiet -r requirements-bench.txt
	touch $@

$(NODE_INSTALLED): package.json package-lock.json
	@command -v npm >/dev/null || { echo "npm is needed for the browser tests: apt-get install nodejs npm"; exit 1; }
	npm ci --no-audit --no-fund --ignore-scripts
	touch $@

# Debian's Chromium (browser tests) and PostgreSQL (tinyq_pg); install them when we can.
packages:
	@tools/need-packages

clean:
	rm -rf $(VENV) node_modules .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
