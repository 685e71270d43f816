"""Durations as hikers type them: "2h", "45m", "1h30m", "1.5h", "1h 30m", or "1:30:00"."""
from __future__ import annotations

import re

SECONDS = {"h": 3600, "m": 60, "s": 1}
PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)([hms])")
PARTS = re.compile(r"\s*(?:[0-9]+(?:\.[0-9]+)?[hms]\s*)+")
CLOCK = re.compile(r"\s*([0-9]+):([0-5][0-9])(?::([0-5][0-9]))?\s*")


def parse_duration(text: str) -> int:
    """Whole seconds in ``text`` (rounded); ValueError if it is not a duration.

    Unit parts ("1h30m", "1.5h", "1h 30m") add up; a clock is H:MM or H:MM:SS.
    """
    text = text.lower()
    clock = CLOCK.fullmatch(text)
    if clock:
        hours, minutes, seconds = (int(group or 0) for group in clock.groups())
        return hours * 3600 + minutes * 60 + seconds
    if not PARTS.fullmatch(text):
        raise ValueError(f"not a duration: {text!r}")
    return round(sum(float(number) * SECONDS[unit] for number, unit in PART.findall(text)))


def format_duration(seconds: int) -> str:
    """H:MM:SS, the way parse_duration reads it back."""
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"
