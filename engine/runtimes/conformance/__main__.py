"""``python -m engine.runtimes.conformance runtime=docker [task=...] [overrides]``: every check, as a table."""
from __future__ import annotations

import sys

from engine.runtimes.conformance import main

if __name__ == "__main__":
    sys.exit(main())
