import pytest
from crucible_probe import isolated

# The verdict is isolated (isolated_verdict: true): stockroom runs only inside the scenarios,
# in their own interpreter, and the assertions judge the plain data they return.


@isolated
def money_text(cents):
    from stockroom.money import format_money

    return format_money(cents)


@isolated
def read_back(amounts):
    from stockroom.money import format_money, parse_money

    return [parse_money(format_money(cents)) for cents in amounts]


@isolated
def last_movement_line():
    from stockroom.inventory import Inventory
    from stockroom.models import Item
    from stockroom.report import render_movements

    inv = Inventory([Item("NUT-8", "Hex nut M8", qty=10, price_cents=5)])
    inv.ship("NUT-8", 1)
    return render_movements(inv.movements[-1:]).splitlines()[-1].split()


@pytest.mark.parametrize(
    "cents, text", [(-5, "-$0.05"), (-100, "-$1.00"), (-199, "-$1.99"), (-123456, "-$1,234.56")]
)
def test_negative_amounts_put_the_sign_first(cents, text):
    assert money_text(cents) == text


def test_negative_amounts_read_back():
    amounts = [-1, -99, -100, -250075]
    assert read_back(amounts) == amounts


def test_shipping_shows_a_negative_value_in_the_movements_report():
    assert last_movement_line() == ["NUT-8", "-1", "-$0.05", "shipped"]
