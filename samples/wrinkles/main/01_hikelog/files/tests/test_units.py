import pytest

from hikelog.units import format_km, parse_distance


def test_kilometres():
    assert parse_distance("12 km") == 12000


def test_miles_without_a_space():
    assert parse_distance("7.5mi") == pytest.approx(12070.08)


def test_metres_with_spaces_around():
    assert parse_distance(" 800 m ") == 800


def test_unknown_units_are_rejected():
    with pytest.raises(ValueError, match="parsecs"):
        parse_distance("3 parsecs")


def test_format_km_rounds_to_one_decimal():
    assert format_km(12345) == "12.3 km"
