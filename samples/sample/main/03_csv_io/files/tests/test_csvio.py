import pytest

from stockroom.csvio import CsvError, dump_items, load_items
from stockroom.models import Item

SAMPLE = """sku,name,qty,price,tags
apl-1,Apple,10,$0.50,fruit;red
NUT-8,"Hex nut, M8",250,0.05,hardware
BOX-2,Box,0,"$1,200.00",
"""


def test_load_items_parses_every_column():
    items = load_items(SAMPLE)
    assert [(i.sku, i.name, i.qty, i.price_cents, i.tags) for i in items] == [
        ("APL-1", "Apple", 10, 50, ["fruit", "red"]),
        ("NUT-8", "Hex nut, M8", 250, 5, ["hardware"]),
        ("BOX-2", "Box", 0, 120000, []),
    ]


def test_price_and_tags_columns_are_optional():
    (item,) = load_items("sku,name,qty\nA1,Thing,3\n")
    assert (item.price_cents, item.tags) == (0, [])


def test_dump_then_load_round_trips():
    items = load_items(SAMPLE)
    assert load_items(dump_items(items)) == sorted(items, key=lambda i: i.sku)


def test_dump_quotes_commas_and_formats_money():
    text = dump_items([Item("NUT-8", "Hex nut, M8", qty=1, price_cents=123456, tags=["a", "b"])])
    assert text == 'sku,name,qty,price,tags\nNUT-8,"Hex nut, M8",1,"$1,234.56",a;b\n'


@pytest.mark.parametrize(
    "text, line",
    [
        ("sku,name\nA1,x\n", "line 1"),
        ("sku,name,qty\nA1,x,many\n", "line 2"),
        ("sku,name,qty\nA1,x,1\nA2,y,-1\n", "line 3"),
        ("sku,name,qty,price\nA1,x,1,cheap\n", "line 2"),
        ("sku,name,qty\nA1,x,1\na1,y,2\n", "line 3"),
    ],
)
def test_errors_name_the_line(text, line):
    with pytest.raises(CsvError, match=line):
        load_items(text)
