# Crew Planner: `make run` serves the app, `make test` runs every check. Both set everything up.

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: run test lint unit e2e scaleout bench setup clean messages compile-messages

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

$(VENV)/.installed: pyproject.toml
	@py="$$( $(find_python) )" || exit 1; \
	  if [ ! -x $(PY) ] || ! $(PY) -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then \
	    rm -rf $(VENV); echo "Creating $(VENV) with $$py"; "$$py" -m venv $(VENV) || exit 1; fi
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $@

setup: $(VENV)/.installed

run: setup
	$(PY) manage.py migrate --no-input
	$(PY) manage.py seed
	$(PY) manage.py serve --host 127.0.0.1 --port $(PORT)

lint: setup
	$(VENV)/bin/ruff check .

unit: setup
	$(PY) -m pytest -q -rs

# The browser suite runs in its own pytest invocation: Playwright's sync API keeps an event loop
# running, which clashes with pytest-asyncio tests in the same process.
e2e: setup
	@if [ -x /usr/bin/chromium ]; then \
	  DJANGO_ALLOW_ASYNC_UNSAFE=true $(PY) -m pytest -q -rs -p no:asyncio -W ignore::pytest.PytestConfigWarning -o addopts="-p no:cacheprovider --import-mode=importlib" tests/e2e; \
	elif [ "$${REQUIRE_E2E:-0}" = "1" ]; then \
	  echo "REQUIRE_E2E=1 but /usr/bin/chromium is missing: install it (apt-get install -y chromium)." >&2; exit 1; \
	else \
	  echo "*** Browser suite SKIPPED: /usr/bin/chromium not found (apt-get install -y chromium). ***"; \
	fi

# Needs DATABASE_URL (PostgreSQL) and REDIS_URL; .ci/run provides them.
scaleout: setup
	$(PY) -m pytest -q -rs -o addopts="-p no:cacheprovider --import-mode=importlib" tests/scaleout

test: lint unit e2e

bench: setup
	$(PY) bench/startup.py

# Translations (locale/pt_BR). Only these two need gettext (apt-get install gettext): the compiled
# .mo is committed, so installing and testing never do. The engines' messages stay English.
messages: setup
	$(PY) manage.py makemessages -l pt_BR --ignore=.venv --ignore=var --ignore=agents/engine --ignore=crews/engine --ignore=tests --ignore=bench

compile-messages: setup
	$(PY) manage.py compilemessages -l pt_BR --ignore=.venv --ignore=var

clean:
	rm -rf $(VENV) var test-results
