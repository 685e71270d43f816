"""A tiny filter language for items.

    tag:fruit  sku:APL  name:"red apple"  qty<10  price>=2.50  apple

Terms are ANDed. ``tag:`` matches a tag exactly, ``sku:`` and ``name:`` match a
substring, all case-insensitively; a bare word is a ``name:`` term. ``qty`` and
``price`` compare with ``<``, ``<=``, ``>``, ``>=``, ``=`` or ``!=``. Double quotes
group words that contain spaces.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from stockroom.models import Item
from stockroom.money import MoneyError, parse_money
from stockroom.operators import COMPARISONS, split_comparison

TEXT_FIELDS = ("tag", "sku", "name")
NUMBER_FIELDS = ("qty", "price")


class QueryError(ValueError):
    """A query that cannot be parsed."""


@dataclass(frozen=True)
class Term:
    field: str
    op: str
    """':' for text fields, a comparison operator for qty and price."""
    value: str | int

    def matches(self, item: Item) -> bool:
        if self.field == "tag":
            return item.has_tag(str(self.value))
        if self.field in ("sku", "name"):
            return str(self.value).lower() in getattr(item, self.field).lower()
        actual = item.qty if self.field == "qty" else item.price_cents
        return COMPARISONS[self.op](actual, int(self.value))


@dataclass(frozen=True)
class Query:
    terms: tuple[Term, ...]

    def matches(self, item: Item) -> bool:
        return all(term.matches(item) for term in self.terms)


def tokenize(text: str) -> list[str]:
    """Split on whitespace outside double quotes; quotes group and are dropped."""
    tokens: list[str] = []
    current: list[str] = []
    in_quotes = started = False
    for char in text:
        if char == '"':
            in_quotes, started = not in_quotes, True
        elif char.isspace() and not in_quotes:
            if started:
                tokens.append("".join(current))
            current, started = [], False
        else:
            current.append(char)
            started = True
    if in_quotes:
        raise QueryError(f"unclosed quote in {text!r}")
    if started:
        tokens.append("".join(current))
    return tokens


def parse_term(token: str) -> Term:
    comparison = split_comparison(token, NUMBER_FIELDS)
    if comparison:
        field, op, raw = comparison
        return Term(field, op, _number(field, raw))
    field, colon, value = token.partition(":")
    if not colon:
        return Term("name", ":", token)
    if field not in TEXT_FIELDS:
        raise QueryError(f"unknown field {field!r} in {token!r}")
    if not value:
        raise QueryError(f"{field}: needs a value")
    return Term(field, ":", value)


def _number(field: str, raw: str) -> int:
    try:
        if field == "price":
            return parse_money(raw)
        if raw.strip().isdigit():
            return int(raw)
    except MoneyError as exc:
        raise QueryError(f"price: {exc}") from exc
    raise QueryError(f"qty needs a whole number, not {raw!r}")


def parse_query(text: str) -> Query:
    return Query(tuple(parse_term(token) for token in tokenize(text)))


def filter_items(items: Iterable[Item], text: str) -> list[Item]:
    query = parse_query(text)
    return [item for item in items if query.matches(item)]
