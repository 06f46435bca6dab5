# ResearchSite: `make run` serves the site, `make test` runs every check. Both set up .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
export PORT

.PHONY: run test test-services lint format bench lock clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Stamp files: reinstall only when the pins change.
$(VENV)/.runtime: requirements.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.dev: requirements-dev.txt $(VENV)/.runtime
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

run: $(VENV)/.runtime
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py ensure_account
	@echo "Serving on http://$(HOST):$(PORT)/"
	$(BIN)/python -m researchsite.serve --host $(HOST) --port $(PORT)

lint: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports  # the layers in pyproject.toml, [tool.importlinter]

# The tools the tests drive: $CHROMIUM (or $NGINX) when set, else the default path or the program
# on PATH. scripts/ensure-program prints that path, installing Debian's package when it can.
ENSURE_CHROMIUM := scripts/ensure-program CHROMIUM chromium /usr/bin/chromium
ENSURE_NGINX := scripts/ensure-program NGINX nginx /usr/sbin/nginx

# The browser tests need Chromium. Two pytest processes share the tests (pytest-xdist): much of a
# test's time is spent waiting on servers and the browser, which the other process fills.
TEST_PROCESSES ?= 2
test: $(VENV)/.dev lint
	CHROMIUM="$$($(ENSURE_CHROMIUM))" && export CHROMIUM && $(BIN)/pytest -n $(TEST_PROCESSES)

# The same suite on PostgreSQL and the Redis channel layer (the two-process tests run here, and
# the rolling restart behind nginx), in one process: its tests share one Redis database.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test
REDIS_TEST_URL ?= redis://127.0.0.1:6379/0
test-services: $(VENV)/.dev
	CHROMIUM="$$($(ENSURE_CHROMIUM))" && export CHROMIUM && \
	  NGINX="$$($(ENSURE_NGINX))" && export NGINX && \
	  TEST_DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(REDIS_TEST_URL) $(BIN)/pytest

format: $(VENV)/.dev
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(VENV)/.dev
	$(BIN)/python bench/citations_render.py
	$(BIN)/python bench/streaming.py
	$(BIN)/python bench/compare.py

lock:
	rm -rf /tmp/researchsite-lock && $(PYTHON) -m venv /tmp/researchsite-lock
	/tmp/researchsite-lock/bin/pip install --quiet $$($(PYTHON) -c 'import tomllib; \
	  print(" ".join(repr(d) for d in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))')
	( echo "# Runtime dependencies, fully pinned (regenerate with: make lock)."; \
	  /tmp/researchsite-lock/bin/pip freeze ) > requirements.txt

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
