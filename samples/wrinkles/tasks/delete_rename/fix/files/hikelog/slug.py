"""File names for log entries: "Mt. Rainier, Day 2" -> "mt-rainier-day-2"."""
from __future__ import annotations

import re
import unicodedata


def slugify(title: str, max_length: int = 40) -> str:
    """Lower-case ASCII words joined by dashes, at most ``max_length`` characters.

    Accented letters lose their accents ("Café" -> "cafe"); anything else that is not an
    ASCII letter or a digit separates words. A title with no words at all gives "entry".
    """
    decomposed = unicodedata.normalize("NFKD", title)
    plain = "".join(char for char in decomposed if not unicodedata.combining(char))
    slug = "-".join(re.findall(r"[a-z0-9]+", plain.lower()))
    if len(slug) > max_length:
        cut = slug[: max_length + 1]
        slug = cut.rsplit("-", 1)[0] if "-" in cut else slug[:max_length]
    return slug or "entry"
