"""CSV import and export. Columns: sku,name,qty,price,tags (price and tags optional on import).

Prices are money text ('$1,234.50'), tags are separated by ';'.
"""
from __future__ import annotations

import csv
import io
from typing import Iterable

from stockroom.models import Item
from stockroom.money import format_money, parse_money

COLUMNS = ("sku", "name", "qty", "price", "tags")
REQUIRED = ("sku", "name", "qty")


class CsvError(ValueError):
    """A CSV file that cannot be read as items; the message names the line."""


def load_items(text: str) -> list[Item]:
    reader = csv.DictReader(io.StringIO(text))
    missing = [column for column in REQUIRED if column not in (reader.fieldnames or [])]
    if missing:
        raise CsvError(f"line 1: missing column(s) {', '.join(missing)}")
    items: list[Item] = []
    seen: set[str] = set()
    for row in reader:
        try:
            item = _item_from_row(row)
        except ValueError as exc:
            raise CsvError(f"line {reader.line_num}: {exc}") from exc
        if item.sku in seen:
            raise CsvError(f"line {reader.line_num}: duplicate SKU {item.sku}")
        seen.add(item.sku)
        items.append(item)
    return items


def _item_from_row(row: dict[str, str | None]) -> Item:
    qty_text = (row["qty"] or "").strip()
    if not qty_text.isdigit():
        raise ValueError(f"quantity must be a whole number, not {qty_text!r}")
    return Item(
        sku=row["sku"] or "",
        name=row["name"] or "",
        qty=int(qty_text),
        price_cents=parse_money(row.get("price") or "0"),
        tags=(row.get("tags") or "").split(";"),
    )


def dump_items(items: Iterable[Item]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for item in sorted(items, key=lambda item: item.sku):
        writer.writerow(
            [item.sku, item.name, item.qty, format_money(item.price_cents), ";".join(item.tags)]
        )
    return out.getvalue()
