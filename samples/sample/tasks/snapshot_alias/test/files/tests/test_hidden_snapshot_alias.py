from crucible_probe import isolated

# The verdict is isolated (isolated_verdict: true): stockroom runs only inside the scenarios,
# in their own interpreter, and the assertions judge the plain data they return.


def stocked():
    from stockroom.inventory import Inventory
    from stockroom.models import Item

    return Inventory(
        [
            Item("APL-1", "Apple", qty=10, price_cents=50, tags=["fruit"]),
            Item("BAN-1", "Banana", qty=2, price_cents=25, tags=["fruit"]),
        ]
    )


@isolated(uses=[stocked])
def snapshot_after_movements():
    inv = stocked()
    snap = inv.snapshot()
    inv.ship("APL-1", 4)
    inv.receive("BAN-1", 8)
    return snap["APL-1"].qty, snap["BAN-1"].qty


@isolated(uses=[stocked])
def snapshot_tags_after_an_edit():
    inv = stocked()
    snap = inv.snapshot()
    inv.get("APL-1").tags.append("sale")
    return snap["APL-1"].tags


@isolated(uses=[stocked])
def after_a_failed_transaction():
    from stockroom.inventory import InsufficientStock

    inv = stocked()
    try:
        with inv.transaction():
            inv.ship("APL-1", 4)
            inv.ship("BAN-1", 5)
    except InsufficientStock:
        raised = True
    else:
        raised = False
    return raised, (inv.get("APL-1").qty, inv.get("BAN-1").qty), [m.reason for m in inv.movements]


@isolated(uses=[stocked])
def restored_twice():
    inv = stocked()
    snap = inv.snapshot()
    inv.ship("APL-1", 1)
    inv.restore(snap)
    inv.ship("APL-1", 3)
    inv.restore(snap)
    return inv.get("APL-1").qty


def test_snapshot_does_not_follow_later_movements():
    assert snapshot_after_movements() == (10, 2)


def test_snapshot_does_not_follow_tag_edits():
    assert snapshot_tags_after_an_edit() == ["fruit"]


def test_failed_transaction_rolls_back_the_lines_before_the_failure():
    assert after_a_failed_transaction() == (True, (10, 2), ["opening stock", "opening stock"])


def test_the_same_snapshot_can_be_restored_twice():
    assert restored_twice() == 10
