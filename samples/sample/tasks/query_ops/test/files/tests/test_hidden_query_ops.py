import pytest

from stockroom.models import Item
from stockroom.query import Term, filter_items, parse_query

ITEMS = [
    Item("APL-1", "Red apple", qty=10, price_cents=50, tags=["fruit"]),
    Item("APL-2", "Green apple", qty=0, price_cents=45, tags=["fruit"]),
    Item("SAW-1", "Hand saw", qty=3, price_cents=1999, tags=["tools"]),
]


@pytest.mark.parametrize(
    "text, skus",
    [
        ("qty<=3", ["APL-2", "SAW-1"]),
        ("qty>=10", ["APL-1"]),
        ("price<=0.45", ["APL-2"]),
        ("price>=$19.99", ["SAW-1"]),
        ("qty>=1 price<=$1", ["APL-1"]),
        ("qty!=0 qty<10", ["SAW-1"]),
    ],
)
def test_inclusive_comparisons_filter_items(text, skus):
    assert [item.sku for item in filter_items(ITEMS, text)] == skus


def test_inclusive_comparisons_parse_to_their_own_operator():
    assert parse_query("qty<=5 price>=1.50").terms == (
        Term("qty", "<=", 5),
        Term("price", ">=", 150),
    )
