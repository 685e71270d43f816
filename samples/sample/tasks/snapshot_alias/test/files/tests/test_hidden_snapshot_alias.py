import pytest

from stockroom.inventory import InsufficientStock, Inventory
from stockroom.models import Item


@pytest.fixture
def inv():
    return Inventory(
        [
            Item("APL-1", "Apple", qty=10, price_cents=50, tags=["fruit"]),
            Item("BAN-1", "Banana", qty=2, price_cents=25, tags=["fruit"]),
        ]
    )


def test_snapshot_does_not_follow_later_movements(inv):
    snap = inv.snapshot()
    inv.ship("APL-1", 4)
    inv.receive("BAN-1", 8)
    assert (snap["APL-1"].qty, snap["BAN-1"].qty) == (10, 2)


def test_snapshot_does_not_follow_tag_edits(inv):
    snap = inv.snapshot()
    inv.get("APL-1").tags.append("sale")
    assert snap["APL-1"].tags == ["fruit"]


def test_failed_transaction_rolls_back_the_lines_before_the_failure(inv):
    with pytest.raises(InsufficientStock):
        with inv.transaction():
            inv.ship("APL-1", 4)
            inv.ship("BAN-1", 5)
    assert (inv.get("APL-1").qty, inv.get("BAN-1").qty) == (10, 2)
    assert [m.reason for m in inv.movements] == ["opening stock", "opening stock"]


def test_the_same_snapshot_can_be_restored_twice(inv):
    snap = inv.snapshot()
    inv.ship("APL-1", 1)
    inv.restore(snap)
    inv.ship("APL-1", 3)
    inv.restore(snap)
    assert inv.get("APL-1").qty == 10
