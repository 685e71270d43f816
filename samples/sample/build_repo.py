#!/usr/bin/env python3
"""Build the `sample` task repo: the stockroom library and its four bug tasks.

    python samples/sample/build_repo.py OUT_DIR

Deterministic: the same commit SHAs on every machine and run (see samples/repogen.py).
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # samples/repogen.py, shared with the other sets
sys.dont_write_bytecode = True  # leave no __pycache__ in the source tree

from repogen import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(HERE, sys.argv[1:]))
