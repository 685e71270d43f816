import pytest

from stockroom.inventory import Inventory
from stockroom.models import Item
from stockroom.money import format_money, parse_money
from stockroom.report import render_movements


@pytest.mark.parametrize(
    "cents, text", [(-5, "-$0.05"), (-100, "-$1.00"), (-199, "-$1.99"), (-123456, "-$1,234.56")]
)
def test_negative_amounts_put_the_sign_first(cents, text):
    assert format_money(cents) == text


def test_negative_amounts_read_back():
    for cents in (-1, -99, -100, -250075):
        assert parse_money(format_money(cents)) == cents


def test_shipping_shows_a_negative_value_in_the_movements_report():
    inv = Inventory([Item("NUT-8", "Hex nut M8", qty=10, price_cents=5)])
    inv.ship("NUT-8", 1)
    assert render_movements(inv.movements[-1:]).splitlines()[-1].split() == [
        "NUT-8", "-1", "-$0.05", "shipped",
    ]
