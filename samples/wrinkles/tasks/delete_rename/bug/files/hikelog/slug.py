"""File names for log entries: "Mt. Rainier, Day 2" -> "mt-rainier-day-2"."""
from __future__ import annotations

import re


def slugify(title: str, max_length: int = 40) -> str:
    """Lower-case ASCII words joined by dashes, at most ``max_length`` characters.

    Anything that is not an ASCII letter or a digit separates words. A title with no
    words at all gives "entry".
    """
    slug = "-".join(re.findall(r"[a-z0-9]+", title.lower()))
    if len(slug) > max_length:
        cut = slug[: max_length + 1]
        slug = cut.rsplit("-", 1)[0] if "-" in cut else slug[:max_length]
    return slug or "entry"
