"""The projects under samples/ are task data, not crucible's tests: never collect them here.

Their own suites run inside the generated repos (see tests/flavors/coding/test_samples.py).
"""

collect_ignore_glob = ["*/main/*", "*/tasks/*"]
