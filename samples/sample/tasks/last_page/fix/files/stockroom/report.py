"""Plain-text reports: paging through rows and rendering aligned tables."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Iterable, Sequence, TypeVar

from stockroom.inventory import Movement
from stockroom.models import Item
from stockroom.money import format_money

T = TypeVar("T")


class PageError(ValueError):
    """A page size below 1, or a page number outside the report."""


@dataclass(frozen=True)
class Page(Generic[T]):
    rows: list[T]
    number: int
    pages: int
    total: int

    @property
    def has_next(self) -> bool:
        return self.number < self.pages

    @property
    def has_prev(self) -> bool:
        return self.number > 1


def page_count(total: int, per_page: int) -> int:
    """Pages needed for ``total`` rows; an empty report still has one (empty) page."""
    if per_page < 1:
        raise PageError(f"per_page must be at least 1, not {per_page}")
    # Round up: a partial last page is still a page.
    return max(1, -(-total // per_page))


def paginate(rows: Sequence[T], number: int, per_page: int) -> Page[T]:
    """Page ``number`` (1-based) of ``rows``."""
    pages = page_count(len(rows), per_page)
    if not 1 <= number <= pages:
        raise PageError(f"page {number} does not exist; there are {pages}")
    start = (number - 1) * per_page
    return Page(list(rows[start : start + per_page]), number, pages, len(rows))


def render_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Columns padded to their widest cell; numbers and money right-aligned."""
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    right = [all(_numeric(row[i]) for row in cells) and cells != [] for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        padded = (c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right))
        return "  ".join(padded).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in cells)]) + "\n"


def _numeric(cell: str) -> bool:
    return cell.lstrip("+-$").replace(",", "").replace(".", "").isdigit()


def render_items(items: Iterable[Item]) -> str:
    rows = [
        (i.sku, i.name, i.qty, format_money(i.price_cents), format_money(i.value_cents))
        for i in items
    ]
    return render_table(("SKU", "Name", "Qty", "Price", "Value"), rows)


def render_movements(movements: Iterable[Movement]) -> str:
    rows = [(m.sku, f"{m.delta:+d}", format_money(m.value_cents), m.reason) for m in movements]
    return render_table(("SKU", "Change", "Value", "Reason"), rows)
