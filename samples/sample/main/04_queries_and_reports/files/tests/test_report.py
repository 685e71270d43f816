import pytest

from stockroom.inventory import Inventory
from stockroom.models import Item
from stockroom.report import PageError, page_count, paginate, render_items, render_movements


def test_paginate_splits_rows_into_pages():
    rows = list(range(6))
    first, second = paginate(rows, 1, 3), paginate(rows, 2, 3)
    assert (first.rows, first.pages, first.has_next, first.has_prev) == ([0, 1, 2], 2, True, False)
    assert (second.rows, second.has_next, second.has_prev) == ([3, 4, 5], False, True)


def test_empty_report_has_one_empty_page():
    assert page_count(0, 10) == 1
    assert paginate([], 1, 10).rows == []


@pytest.mark.parametrize("number", [0, 3])
def test_pages_outside_the_report_raise(number):
    with pytest.raises(PageError):
        paginate(list(range(6)), number, 3)


def test_page_size_must_be_positive():
    with pytest.raises(PageError):
        page_count(5, 0)


def test_render_items_aligns_columns():
    text = render_items(
        [Item("APL-1", "Apple", qty=10, price_cents=50), Item("SAW-1", "Hand saw", qty=3, price_cents=1999)]
    )
    assert text == (
        "SKU    Name      Qty   Price   Value\n"
        "-----  --------  ---  ------  ------\n"
        "APL-1  Apple      10   $0.50   $5.00\n"
        "SAW-1  Hand saw    3  $19.99  $59.97\n"
    )


def test_render_movements_shows_signed_changes():
    inv = Inventory([Item("APL-1", "Apple", qty=10, price_cents=50)])
    inv.receive("APL-1", 2)
    assert render_movements(inv.movements) == (
        "SKU    Change  Value  Reason\n"
        "-----  ------  -----  -------------\n"
        "APL-1     +10  $5.00  opening stock\n"
        "APL-1      +2  $1.00  received\n"
    )
