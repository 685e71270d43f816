"""Distances as hikers type them: "12 km", "7.5mi", "800 m"."""
from __future__ import annotations

import re

METRES = {"m": 1.0, "km": 1000.0, "mi": 1609.344}
DISTANCE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(" + "|".join(sorted(METRES, key=len, reverse=True)) + r")\s*")


def parse_distance(text: str) -> float:
    """Metres in ``text``; ValueError for a malformed distance or an unknown unit."""
    match = DISTANCE.fullmatch(text.lower())
    if match is None:
        raise ValueError(f"not a distance: {text!r}")
    return float(match.group(1)) * METRES[match.group(2)]


def format_km(metres: float) -> str:
    """``metres`` in kilometres, one decimal: 12345 -> "12.3 km"."""
    return f"{metres / 1000:.1f} km"
