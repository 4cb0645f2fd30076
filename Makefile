# The two commands of the README. Both create .venv on first use and reuse it after.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
E5 := $(shell $(PYTHON) -c "import platform; print('e5' if platform.system()=='Linux' and platform.machine()=='x86_64' else '')")
EXTRAS_RUN := $(if $(E5),[e5],)
COMMA := ,
EXTRAS_TEST := $(if $(E5),[dev$(COMMA)e5],[dev])
QUERY ?= Wie funktioniert das Chunking von Notizen?

.PHONY: run test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

run: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".$(EXTRAS_RUN)"
	$(BIN)/mindnet import examples/vault
	$(BIN)/mindnet search "$(QUERY)" --vault examples/vault --by-note --k 3
	@echo "Next: $(BIN)/mindnet serve examples/vault keeps the index open and current; open http://127.0.0.1:7341/"

test: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".$(EXTRAS_TEST)"
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

lint:
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) examples/vault/.mindnet
