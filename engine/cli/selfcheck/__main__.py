"""``python -m engine.cli.selfcheck task=SET/NAME [overrides]``: ``crucible selfcheck``, as the
conformance suite runs by hand (``python -m engine.cli.conformance``)."""

from __future__ import annotations

import sys

from engine.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["selfcheck", *sys.argv[1:]]))
