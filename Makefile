# The two set-up commands of the README. Each sets up what it needs first (idempotent).
.PHONY: setup demo test test-quick

setup:
	@bash scripts/setup.sh

# The main job: a shipping check of the sample set, a sweep, and a results table.
demo: setup
	@bash scripts/demo.sh

# The whole test suite (Docker tests included; with CI=true a missing engine fails).
test: setup
	.venv/bin/pytest -q -ra

# The quick loop: everything not marked slow.
test-quick: setup
	.venv/bin/pytest -q -ra -m "not slow"
