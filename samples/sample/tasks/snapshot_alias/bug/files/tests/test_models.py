import pytest

from stockroom.models import Item, ItemError, normalize_tags


def test_item_normalizes_sku_name_and_tags():
    item = Item(" apl-1 ", " Apple ", qty=3, price_cents=50, tags=["Fruit", "fruit ", "", "Red"])
    assert (item.sku, item.name, item.tags) == ("APL-1", "Apple", ["fruit", "red"])


def test_item_value_is_quantity_times_price():
    assert Item("APL-1", "Apple", qty=3, price_cents=50).value_cents == 150


@pytest.mark.parametrize(
    "kwargs",
    [
        {"sku": "", "name": "x"},
        {"sku": "A B", "name": "x"},
        {"sku": "A1", "name": "  "},
        {"sku": "A1", "name": "x", "qty": -1},
        {"sku": "A1", "name": "x", "price_cents": -1},
    ],
)
def test_item_rejects_broken_invariants(kwargs):
    with pytest.raises(ItemError):
        Item(**kwargs)


def test_has_tag_ignores_case_and_spaces():
    assert Item("A1", "x", tags=["fruit"]).has_tag(" FRUIT ")


def test_normalize_tags_keeps_first_seen_order():
    assert normalize_tags(["b", "A", "a", "c"]) == ["b", "a", "c"]
