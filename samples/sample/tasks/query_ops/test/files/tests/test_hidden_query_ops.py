import pytest
from crucible_probe import isolated

# The verdict is isolated (isolated_verdict: true): stockroom runs only inside the scenarios,
# in their own interpreter, and the assertions judge the plain data they return.


@isolated
def skus_matching(text):
    from stockroom.models import Item
    from stockroom.query import filter_items

    items = [
        Item("APL-1", "Red apple", qty=10, price_cents=50, tags=["fruit"]),
        Item("APL-2", "Green apple", qty=0, price_cents=45, tags=["fruit"]),
        Item("SAW-1", "Hand saw", qty=3, price_cents=1999, tags=["tools"]),
    ]
    return [item.sku for item in filter_items(items, text)]


@isolated
def parsed_terms(text):
    from stockroom.query import parse_query

    return [(term.field, term.op, term.value) for term in parse_query(text).terms]


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
    assert skus_matching(text) == skus


def test_inclusive_comparisons_parse_to_their_own_operator():
    assert parsed_terms("qty<=5 price>=1.50") == [("qty", "<=", 5), ("price", ">=", 150)]
