"""Money as integer cents: parsing what people type and formatting it for reports.

Floats never touch money here, so 0.10 + 0.20 is exactly 30 cents.
"""
from __future__ import annotations

import re

_AMOUNT = re.compile(
    r"^(?P<sign>-)?\$?(?P<dollars>\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<cents>\d{1,2}))?$"
)


class MoneyError(ValueError):
    """Text that is not an amount of money."""


def parse_money(text: str) -> int:
    """'$1,234.50' -> 123450.

    Accepts an optional leading '-', an optional '$', thousands commas and up to two
    decimals. Accounting-style parentheses mean negative: '(3.20)' -> -320.
    """
    raw = text.strip()
    negative = raw.startswith("(") and raw.endswith(")")
    if negative:
        raw = raw[1:-1].strip()
    match = _AMOUNT.match(raw)
    if match is None or (negative and match["sign"]):
        raise MoneyError(f"not an amount of money: {text!r}")
    negative = negative or bool(match["sign"])
    dollars = int(match["dollars"].replace(",", ""))
    cents = int((match["cents"] or "0").ljust(2, "0"))  # '.5' is 50 cents, not 5
    amount = dollars * 100 + cents
    return -amount if negative else amount


def format_money(cents: int) -> str:
    """123450 -> '$1,234.50'."""
    dollars, rest = divmod(cents, 100)
    return f"${dollars:,}.{rest:02d}"
