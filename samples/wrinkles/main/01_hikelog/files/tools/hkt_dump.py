#!/usr/bin/env python3
"""Print the points of .hkt tracks, one "lat lon elevation" line each: hkt_dump.py FILE..."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hikelog.track import TrackError, read_track  # noqa: E402


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: hkt_dump.py FILE...", file=sys.stderr)
        return 2
    for name in argv:
        try:
            points = read_track(Path(name).read_bytes())
        except (OSError, TrackError) as exc:
            print(f"hkt_dump: {name}: {exc}", file=sys.stderr)
            return 1
        for point in points:
            print(f"{point.lat:.5f} {point.lon:.5f} {point.elevation}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
