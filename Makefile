# The two commands of a fresh machine: `make demo` (the bundled example) and `make test` (every check).
# Each creates .venv and installs what it needs on first use; nothing else is required.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint types pytest proto bench mutation docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,adk,a2a,claude,postgres,server,http]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/adk_approval.py

test: lint types pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

types: $(STAMP)
	$(VENV)/bin/mypy

# One worker per core (`PYTEST_WORKERS=0 make pytest` runs in one process, e.g. to debug a test).
PYTEST_WORKERS ?= auto
pytest: $(STAMP)
	$(VENV)/bin/pytest -n $(PYTEST_WORKERS)

# The documentation site (docs/, mkdocs.yml) into site/; --strict: a warning (a broken link or anchor) fails it.
# Not part of `make test`, which runs the pages' code blocks itself (tests/docs). Material for MkDocs prints an
# end-of-life notice on every build (its successor, Zensical, reads the same mkdocs.yml); NO_MKDOCS_2_WARNING hides it.
DOCS_STAMP := $(VENV)/.docs-stamp
$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

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
	$(PY) bench/mcp_gateway.py

clean:
	rm -rf $(VENV) site
