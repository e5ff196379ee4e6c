# Crew Planner: `make run` serves the app, `make test` runs every check. Both set everything up.

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: run test lint unit e2e fuzz scaleout bench bench-peer setup setup-test lock clean messages compile-messages

# Python >= 3.12 (Django 6): python3.13, python3.12, python3, or a pyenv-installed version.
define find_python
for c in python3.13 python3.12 python3; do \
  if command -v $$c >/dev/null 2>&1 && $$c -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then \
    command -v $$c; exit 0; fi; \
done; \
if command -v pyenv >/dev/null 2>&1; then \
  for v in $$(pyenv versions --bare 2>/dev/null | grep -E '^3\.(1[2-9])(\.[0-9]+)?$$' | sort -rV); do \
    p="$$(pyenv root)/versions/$$v/bin/python3"; \
    if [ -x "$$p" ]; then echo "$$p"; exit 0; fi; \
  done; \
fi; \
echo "Crew Planner needs Python 3.12 or newer (Django 6). Install python3.12 and try again." >&2; exit 1
endef

UV_VERSION := 0.13.9
UV := $(VENV)/bin/uv

# The venv and uv (a fast installer, from PyPI) in it. Each lock file below installs on top.
$(UV):
	@py="$$( $(find_python) )" || exit 1; \
	  if [ ! -x $(PY) ] || ! $(PY) -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then \
	    rm -rf $(VENV); echo "Creating $(VENV) with $$py"; "$$py" -m venv $(VENV) || exit 1; fi
	@echo "Installing uv $(UV_VERSION) (the installer)"
	@$(PY) -m pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"

# What serving needs, from the lock file (requirements/serve.txt, hashes checked); uv shows progress.
# --compile-bytecode: compiled here, on every core, so no start compiles them again, even where
# PYTHONDONTWRITEBYTECODE keeps Python from caching what it compiled (compiling was then 11 s of
# each serve start's 17 s to "serving", at load 9: bench/fresh_install.py, #15).
$(VENV)/.serve-installed: requirements/serve.txt | $(UV)
	@echo "Installing what the app needs (requirements/serve.txt)"
	$(UV) pip install --python $(PY) --require-hashes --compile-bytecode -r requirements/serve.txt
	@touch $@

# The test tools on top (requirements/test.txt holds both sets).
$(VENV)/.test-installed: requirements/test.txt $(VENV)/.serve-installed
	@echo "Installing the test tools (requirements/test.txt)"
	$(UV) pip install --python $(PY) --require-hashes -r requirements/test.txt
	@echo "Compiling litellm's bytecode (its first import would otherwise take a minute in the browser suite)"
	@$(PY) -m compileall -q -j 0 "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/litellm" >/dev/null || true
	@touch $@

setup: $(VENV)/.serve-installed

setup-test: $(VENV)/.test-installed

# One process: serve applies pending migrations and seeds (only when something changed) first.
run: setup
	$(PY) manage.py serve --host 127.0.0.1 --port $(PORT)

# Regenerate both lock files after a change of pyproject.toml's dependencies.
lock: $(UV)
	$(UV) pip compile pyproject.toml --universal --python-version 3.12 --generate-hashes -o requirements/serve.txt
	$(UV) pip compile pyproject.toml --extra dev --universal --python-version 3.12 --generate-hashes -o requirements/test.txt

lint: setup-test
	$(VENV)/bin/ruff check .

unit: setup-test
	$(PY) -m pytest -q -rs

# The browser suite runs in its own pytest invocation: Playwright's sync API keeps an event loop
# running, which clashes with pytest-asyncio tests in the same process.
e2e: setup-test
	@if [ -x /usr/bin/chromium ]; then \
	  DJANGO_ALLOW_ASYNC_UNSAFE=true $(PY) -m pytest -q -rs -p no:asyncio -W ignore::pytest.PytestConfigWarning -o addopts="-p no:cacheprovider --import-mode=importlib" tests/e2e; \
	elif [ "$${REQUIRE_E2E:-0}" = "1" ]; then \
	  echo "REQUIRE_E2E=1 but /usr/bin/chromium is missing: install it (apt-get install -y chromium)." >&2; exit 1; \
	else \
	  echo "*** Browser suite SKIPPED: /usr/bin/chromium not found (apt-get install -y chromium). ***"; \
	fi

# Needs DATABASE_URL (PostgreSQL) and REDIS_URL; .ci/run provides them.
scaleout: setup-test
	$(PY) -m pytest -q -rs -o addopts="-p no:cacheprovider --import-mode=importlib" tests/scaleout

# Schemathesis against the served API (tests/fuzz): no 500, every status and body as documented.
fuzz: setup-test
	$(PY) -m pytest -q -rs -s -o addopts="-p no:cacheprovider --import-mode=importlib" tests/fuzz

test: lint unit e2e fuzz

bench: setup-test
	$(PY) bench/startup.py

# bench/peer.py: CrewAI side by side with our engine and the full app. CrewAI gets a throwaway venv
# of its own (Python 3.12, made once; the marker file says it is complete): never a dependency of
# the app, in no lock file. BENCH_ARGS passes options on, e.g. make bench-peer BENCH_ARGS=--quick
PEER_VENV := var/bench-peer-venv
CREWAI_VERSION := 1.15.30

define find_python312
if python3.12 -c '' >/dev/null 2>&1; then command -v python3.12; exit 0; fi; \
if command -v pyenv >/dev/null 2>&1; then \
  for v in $$(pyenv versions --bare 2>/dev/null | grep -E '^3\.12(\.[0-9]+)?$$' | sort -rV); do \
    p="$$(pyenv root)/versions/$$v/bin/python3"; \
    if [ -x "$$p" ]; then echo "$$p"; exit 0; fi; \
  done; \
fi; \
echo 3.12
endef

$(PEER_VENV)/.crewai-installed: | $(UV)
	@py="$$( $(find_python312) )"; echo "Creating $(PEER_VENV) (CrewAI $(CREWAI_VERSION), Python $$py)"; \
	  rm -rf $(PEER_VENV) && $(UV) venv --quiet --python "$$py" $(PEER_VENV)
	$(UV) pip install --python $(PEER_VENV)/bin/python "crewai==$(CREWAI_VERSION)"
	@touch $@

bench-peer: setup-test $(PEER_VENV)/.crewai-installed
	$(PY) bench/peer.py $(BENCH_ARGS)

# Translations (locale/pt_BR). Only these two need gettext (apt-get install gettext): the compiled
# .mo is committed, so installing and testing never do. The engines' messages stay English.
# The Jinja2 macros' strings (-e jinja) are read by Jinja's own extractor
# (planner_site/management/commands/makemessages.py).
messages: setup
	$(PY) manage.py makemessages -l pt_BR -e html,txt,py,jinja --ignore=.venv --ignore=var --ignore=agents/engine --ignore=crews/engine --ignore=tests --ignore=bench

compile-messages: setup
	$(PY) manage.py compilemessages -l pt_BR --ignore=.venv --ignore=var

clean:
	rm -rf $(VENV) var test-results
