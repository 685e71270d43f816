"""The comparison operators of the query language, and how a term is split around one.

Order matters when splitting: "qty<=5" must read as "<=" and 5, never as "<" and "=5",
so at any position the longest operator that fits wins.
"""
from __future__ import annotations

import operator
from typing import Callable, Iterable

COMPARISONS: dict[str, Callable[[int, int], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
    "=": operator.eq,
}
_LONGEST_FIRST = sorted(COMPARISONS, key=len, reverse=True)


def split_comparison(token: str, fields: Iterable[str]) -> tuple[str, str, str] | None:
    """'qty<=10' -> ('qty', '<=', '10'); None unless ``token`` compares one of ``fields``."""
    for field in fields:
        if not token.startswith(field):
            continue
        rest = token[len(field) :]
        for op in _LONGEST_FIRST:
            if rest.startswith(op):
                return field, op, rest[len(op) :]
    return None
