# Two entry points (see README): `make quickstart` trains the default environment,
# `make test` runs the test suite. Both create the virtual environment on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: quickstart test install clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

install: $(BIN)/.installed

quickstart: $(BIN)/.installed
	$(BIN)/rlfit train CartpoleBalance --preset quick

test: $(BIN)/.installed
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) runs .pytest_cache
