from hikelog.duration import format_duration, parse_duration


def test_format_duration_pads_minutes_and_seconds():
    assert format_duration(3725) == "1:02:05"


def test_format_duration_reads_back():
    assert parse_duration(format_duration(36309)) == 36309
