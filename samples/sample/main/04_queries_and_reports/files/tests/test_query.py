import pytest

from stockroom.models import Item
from stockroom.query import QueryError, Term, filter_items, parse_query, tokenize

ITEMS = [
    Item("APL-1", "Red apple", qty=10, price_cents=50, tags=["fruit"]),
    Item("APL-2", "Green apple", qty=0, price_cents=45, tags=["fruit"]),
    Item("NUT-8", "Hex nut M8", qty=250, price_cents=5, tags=["hardware"]),
    Item("SAW-1", "Hand saw", qty=3, price_cents=1999, tags=["hardware", "tools"]),
]


def skus(text):
    return [item.sku for item in filter_items(ITEMS, text)]


def test_tokenize_keeps_quoted_words_together():
    assert tokenize('tag:fruit  name:"red apple" x') == ["tag:fruit", "name:red apple", "x"]
    assert tokenize('name:""') == ["name:"]


def test_tag_sku_and_name_terms():
    assert skus("tag:FRUIT") == ["APL-1", "APL-2"]
    assert skus("sku:apl") == ["APL-1", "APL-2"]
    assert skus('name:"red apple"') == ["APL-1"]
    assert skus("apple") == ["APL-1", "APL-2"]


def test_terms_are_anded():
    assert skus("tag:hardware tag:tools") == ["SAW-1"]


def test_quantity_and_price_comparisons():
    assert skus("qty<5") == ["APL-2", "SAW-1"]
    assert skus("qty>10") == ["NUT-8"]
    assert skus("qty=0") == ["APL-2"]
    assert skus("qty!=0 tag:fruit") == ["APL-1"]
    assert skus("price>$1") == ["SAW-1"]


def test_parsed_terms():
    assert parse_query("qty<5 price=0.50").terms == (Term("qty", "<", 5), Term("price", "=", 50))


def test_empty_query_matches_everything():
    assert skus("") == [item.sku for item in ITEMS]


@pytest.mark.parametrize("text", ['name:"open', "colour:red", "tag:", "qty<many", "price>cheap"])
def test_bad_queries_raise(text):
    with pytest.raises(QueryError):
        parse_query(text)
