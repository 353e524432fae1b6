# Two entry points (see README): `make quickstart` trains the default environment,
# `make test` runs the checks: ruff, the import contracts, mypy (pyproject.toml's [tool.mypy]), the documentation
# build (a broken link or a config field without a docstring fails it) (`make checks`), and beside them the test
# suite (`make unit`). Both create the virtual environment on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# pytest-xdist's workers: three on CI's 2 cores, so that a worker waiting on a subprocess, a signal or a socket
# leaves its core to another (with two, the cores were idle 17% of `make test`); more on a bigger machine.
TEST_WORKERS ?= 3

.PHONY: quickstart test checks unit install clean

# uv installs the packages: it fetches and unpacks them in parallel and links them from its cache (7.5 s against pip's
# 38 s here, 2026-11-28), with no bytecode written up front (Python writes it for the modules it imports). It does not
# read pip's configuration, so the indexes, wheel folders and constraints pip is configured with are handed to it, and
# like pip it takes the newest version any index offers (--index-strategy unsafe-best-match). pip installs instead
# when uv cannot.
PIP_SETTING = $(shell $(PYTHON) -m pip config list 2>/dev/null | sed -n "s/^\(global\|install\)\.$(1)='\(.*\)'$$/\2/p")
UV_FROM_PIP = $(foreach url,$(call PIP_SETTING,index-url) $(PIP_INDEX_URL),--index-url $(url)) \
	$(foreach url,$(call PIP_SETTING,extra-index-url) $(PIP_EXTRA_INDEX_URL),--extra-index-url $(url)) \
	$(foreach dir,$(sort $(call PIP_SETTING,find-links) $(PIP_FIND_LINKS)),--find-links $(dir)) \
	$(foreach file,$(call PIP_SETTING,constraint) $(PIP_CONSTRAINT),--constraint $(file))

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip uv || $(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/uv pip install -q --python $(BIN)/python --index-strategy unsafe-best-match $(UV_FROM_PIP) -e '.[dev]' \
	  || $(BIN)/python -m pip install -q --no-compile -e '.[dev]'
	@# Headless OpenGL for `rlfit play` videos: Mesa's EGL, installed only when no EGL/OSMesa is found (root, apt).
	@if ! ldconfig -p 2>/dev/null | grep -q -E 'libEGL_mesa\.so|libEGL_nvidia\.so|libOSMesa\.so'; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q libegl1 libegl-mesa0 \
	      libgl1-mesa-dri) || echo "warning: could not install Mesa EGL; rlfit play cannot render videos"; \
	  else echo "note: rlfit play needs EGL or OSMesa: apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri"; fi; \
	fi
	touch $@

install: $(BIN)/.installed

quickstart: $(BIN)/.installed
	$(BIN)/rlfit train CartpoleBalance --config examples/quickstart.yaml

# The static checks (one core at a time) run beside the test suite rather than before it, so that the second core
# is not idle meanwhile: their output goes to $(VENV)/checks.log, printed after the tests; `make test` fails if
# either fails. PYTEST_ARGS picks tests (e.g. `make test PYTEST_ARGS=tests/config`).
test: $(BIN)/.installed
	@$(MAKE) --no-print-directory -o $(BIN)/.installed checks > $(VENV)/checks.log 2>&1 & checks=$$!; \
	$(MAKE) --no-print-directory -o $(BIN)/.installed unit; unit=$$?; \
	wait $$checks; checked=$$?; \
	echo "--- static checks (ruff, lint-imports, mypy, mkdocs) ---"; cat $(VENV)/checks.log; \
	if [ $$checked -ne 0 ]; then echo "make test: the static checks failed"; fi; \
	exit $$(( unit != 0 || checked != 0 ))

checks: $(BIN)/.installed
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/lint-imports
	$(BIN)/mypy
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

unit: $(BIN)/.installed
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15 $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) runs .pytest_cache site
