# The two set-up commands of the README. Each sets up what it needs first (idempotent).
.PHONY: setup demo lint test test-quick

setup:
	@bash scripts/setup.sh

# The main job: a shipping check of the sample set, a sweep, and a results table.
demo: setup
	@bash scripts/demo.sh

# Lint and type-check (configured in pyproject.toml).
lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy

# The whole test suite (Docker tests included; with CI=true a missing engine fails), after lint.
# Two pytest-xdist workers, a test module each at a time (its module fixtures made once): much
# of a Docker test's time is a wait, so two overlap on two cores (bench/README.md, issue 33).
test: lint
	.venv/bin/pytest -q -ra -n 2 --dist loadfile

# The quick loop: everything not marked slow.
test-quick: setup
	.venv/bin/pytest -q -ra -n 2 --dist loadfile -m "not slow"
