"""The one record type: a stock-keeping unit with its quantity, unit price and tags."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

_SKU = re.compile(r"^[A-Z0-9][A-Z0-9-]{0,31}$")


class ItemError(ValueError):
    """An item that breaks an invariant (bad SKU, empty name, negative quantity or price)."""


def normalize_tags(tags: Iterable[str]) -> list[str]:
    """Lower-case and strip; drop empty and repeated tags, keeping first-seen order."""
    seen: list[str] = []
    for tag in tags:
        clean = tag.strip().lower()
        if clean and clean not in seen:
            seen.append(clean)
    return seen


@dataclass
class Item:
    sku: str
    name: str
    qty: int = 0
    price_cents: int = 0
    tags: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sku = self.sku.strip().upper()
        self.name = self.name.strip()
        if not _SKU.match(self.sku):
            raise ItemError(f"bad SKU {self.sku!r}: use A-Z, 0-9 and '-', at most 32 chars")
        if not self.name:
            raise ItemError(f"{self.sku}: an item needs a name")
        if self.qty < 0 or self.price_cents < 0:
            raise ItemError(f"{self.sku}: quantity and price cannot be negative")
        self.tags = normalize_tags(self.tags)

    @property
    def value_cents(self) -> int:
        return self.qty * self.price_cents

    def has_tag(self, tag: str) -> bool:
        return tag.strip().lower() in self.tags
