import pytest

from stockroom.inventory import InsufficientStock, Inventory, InventoryError, UnknownSku
from stockroom.models import Item


@pytest.fixture
def inv():
    return Inventory(
        [
            Item("APL-1", "Apple", qty=10, price_cents=50, tags=["fruit"]),
            Item("BAN-1", "Banana", qty=2, price_cents=25, tags=["fruit"]),
            Item("NUT-8", "Hex nut M8", qty=0, price_cents=5, tags=["hardware"]),
        ]
    )


def test_items_iterate_in_sku_order_and_lookup_ignores_case(inv):
    assert [item.sku for item in inv] == ["APL-1", "BAN-1", "NUT-8"]
    assert inv.get(" apl-1").name == "Apple"
    assert "ban-1" in inv and "XYZ" not in inv and len(inv) == 3


def test_unknown_sku_raises(inv):
    with pytest.raises(UnknownSku):
        inv.get("NOPE")


def test_duplicate_sku_is_refused(inv):
    with pytest.raises(InventoryError):
        inv.add(Item("apl-1", "Another apple"))


def test_receive_and_ship_change_quantity_and_record_movements(inv):
    inv.receive("NUT-8", 100)
    inv.ship("APL-1", 4, reason="order 17")
    assert inv.get("NUT-8").qty == 100 and inv.get("APL-1").qty == 6
    assert [(m.sku, m.delta, m.reason, m.value_cents) for m in inv.movements[-2:]] == [
        ("NUT-8", 100, "received", 500),
        ("APL-1", -4, "order 17", -200),
    ]


def test_opening_stock_is_recorded_for_non_empty_items(inv):
    assert [(m.sku, m.delta) for m in inv.movements] == [("APL-1", 10), ("BAN-1", 2)]


def test_cannot_ship_more_than_in_stock(inv):
    with pytest.raises(InsufficientStock):
        inv.ship("BAN-1", 3)
    assert inv.get("BAN-1").qty == 2


@pytest.mark.parametrize("qty", [0, -1])
def test_quantities_must_be_positive(inv, qty):
    with pytest.raises(InventoryError):
        inv.receive("APL-1", qty)
    with pytest.raises(InventoryError):
        inv.ship("APL-1", qty)


def test_count_records_the_difference(inv):
    inv.count("APL-1", 7)
    assert inv.get("APL-1").qty == 7 and inv.movements[-1].delta == -3


def test_low_stock_lists_items_at_or_below_threshold_emptiest_first(inv):
    assert [item.sku for item in inv.low_stock(2)] == ["NUT-8", "BAN-1"]


def test_total_value(inv):
    assert inv.total_value_cents() == 10 * 50 + 2 * 25


def test_transaction_keeps_changes_when_the_block_succeeds(inv):
    with inv.transaction():
        inv.ship("APL-1", 1)
        inv.receive("NUT-8", 5)
    assert inv.get("APL-1").qty == 9 and inv.get("NUT-8").qty == 5


def test_transaction_drops_movements_when_the_block_fails(inv):
    before = list(inv.movements)
    with pytest.raises(InsufficientStock):
        with inv.transaction():
            inv.ship("BAN-1", 5)
    assert inv.movements == before and inv.get("BAN-1").qty == 2
