import pytest

from stockroom.money import MoneyError, format_money, parse_money


@pytest.mark.parametrize(
    "text, cents",
    [
        ("0", 0),
        ("12", 1200),
        ("$12.5", 1250),
        ("12.05", 1205),
        ("$1,234.50", 123450),
        ("  7.99 ", 799),
        ("-3.20", -320),
        ("(3.20)", -320),
    ],
)
def test_parse_money_accepts_common_spellings(text, cents):
    assert parse_money(text) == cents


@pytest.mark.parametrize("text", ["", "abc", "1.234", "1,23", "$", "(-3)", "12.5.0"])
def test_parse_money_rejects_garbage(text):
    with pytest.raises(MoneyError):
        parse_money(text)


@pytest.mark.parametrize(
    "cents, text",
    [(0, "$0.00"), (5, "$0.05"), (1250, "$12.50"), (123450, "$1,234.50"), (100000000, "$1,000,000.00")],
)
def test_format_money(cents, text):
    assert format_money(cents) == text


def test_parse_reads_back_what_format_writes():
    for cents in (0, 1, 99, 100, 12345, 9999999):
        assert parse_money(format_money(cents)) == cents
