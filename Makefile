# The two commands of a fresh machine: `make demo` (the bundled example) and `make test` (every check).
# Each creates .venv and installs what it needs on first use; nothing else is required.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint types pytest proto bench mutation clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,adk,claude,postgres,server,http]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/adk_approval.py

test: lint types pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

types: $(STAMP)
	$(VENV)/bin/mypy

pytest: $(STAMP)
	$(VENV)/bin/pytest

proto: $(STAMP)
	$(PY) scripts/gen_proto.py

# Not part of `make test`: breaks one safety line at a time and reports which breakages no test notices.
mutation: $(STAMP)
	$(PY) scripts/mutation.py

bench: $(STAMP)
	$(PY) bench/approvals.py
	$(PY) bench/adk_overhead.py
	$(PY) bench/store.py
	$(PY) bench/policy.py
	$(PY) bench/serve.py

clean:
	rm -rf $(VENV)
