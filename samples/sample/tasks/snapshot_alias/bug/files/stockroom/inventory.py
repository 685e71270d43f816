"""An in-memory stock ledger: items by SKU plus the movements that changed them."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterable, Iterator

from stockroom.models import Item


class InventoryError(Exception):
    """A stock operation that cannot be done."""


class UnknownSku(InventoryError, KeyError):
    pass


class InsufficientStock(InventoryError):
    pass


@dataclass(frozen=True)
class Movement:
    sku: str
    delta: int
    reason: str
    value_cents: int
    """Signed: delta times the unit price at the time of the movement."""


class Inventory:
    """Items keyed by SKU. The inventory owns the items it is given and edits them in place."""

    def __init__(self, items: Iterable[Item] = ()) -> None:
        self._items: dict[str, Item] = {}
        self.movements: list[Movement] = []
        for item in items:
            self.add(item)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, sku: object) -> bool:
        return isinstance(sku, str) and sku.strip().upper() in self._items

    def __iter__(self) -> Iterator[Item]:
        return iter(sorted(self._items.values(), key=lambda item: item.sku))

    def get(self, sku: str) -> Item:
        try:
            return self._items[sku.strip().upper()]
        except KeyError:
            raise UnknownSku(sku) from None

    def add(self, item: Item) -> None:
        if item.sku in self._items:
            raise InventoryError(f"{item.sku} is already in the inventory")
        self._items[item.sku] = item
        if item.qty:
            self._record(item, item.qty, "opening stock")

    def receive(self, sku: str, qty: int, reason: str = "received") -> Item:
        if qty <= 0:
            raise InventoryError(f"receive a positive quantity, not {qty}")
        item = self.get(sku)
        item.qty += qty
        self._record(item, qty, reason)
        return item

    def ship(self, sku: str, qty: int, reason: str = "shipped") -> Item:
        if qty <= 0:
            raise InventoryError(f"ship a positive quantity, not {qty}")
        item = self.get(sku)
        if qty > item.qty:
            raise InsufficientStock(f"{item.sku}: {item.qty} in stock, {qty} requested")
        item.qty -= qty
        self._record(item, -qty, reason)
        return item

    def count(self, sku: str, counted: int, reason: str = "stock count") -> Item:
        """Set the quantity to what a physical count found, recording the difference."""
        if counted < 0:
            raise InventoryError(f"a count cannot be negative: {counted}")
        item = self.get(sku)
        delta, item.qty = counted - item.qty, counted
        if delta:
            self._record(item, delta, reason)
        return item

    def low_stock(self, threshold: int) -> list[Item]:
        """Items at or below ``threshold``, emptiest first."""
        low = [item for item in self if item.qty <= threshold]
        return sorted(low, key=lambda item: (item.qty, item.sku))

    def total_value_cents(self) -> int:
        return sum(item.value_cents for item in self._items.values())

    def snapshot(self) -> dict[str, Item]:
        """The items as they are now."""
        # A new dict is enough: items are replaced, not edited, so they can be shared.
        return dict(self._items)

    def restore(self, snapshot: dict[str, Item]) -> None:
        self._items = dict(snapshot)

    @contextmanager
    def transaction(self) -> Iterator[Inventory]:
        """All or nothing: if the block raises, items and movements go back to how they were."""
        saved, mark = self.snapshot(), len(self.movements)
        try:
            yield self
        except BaseException:
            self.restore(saved)
            del self.movements[mark:]
            raise

    def _record(self, item: Item, delta: int, reason: str) -> None:
        self.movements.append(Movement(item.sku, delta, reason, delta * item.price_cents))
